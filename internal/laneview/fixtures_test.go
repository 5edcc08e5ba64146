/*
Copyright 2026 The agentlane Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package laneview

import (
	"fmt"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"strings"
	"time"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// a3sSnapshot is one queue shaped like the a3s sample, one session, two
// tasks running, one waiting and two finished (one after a lost worker).
func a3sSnapshot() *Snapshot {
	id := agentlanev1alpha1.Identity{TenantID: "acme-corp", Principal: "user:42", AgentTemplateID: "reviewer-v3", CorrelationID: "req-9f2c"}
	return New("default",
		[]agentlanev1alpha1.LaneQueue{queue("a3s").maxConcurrent(64).
			lane("control", 0, "", 0, 2, 0, 0, 3).
			lane("query", 1, "", 0, 4, 0, 1, 9).
			lane("execute", 2, agentlanev1alpha1.HandlerModeExternal, 16, 2, 1, 2, 2, 1, 1).
			lane("generate", 3, "", 8, 1).ready(1).obj()},
		[]agentlanev1alpha1.ExternalTask{
			task("build-1", "reviewer-42", "execute", "bash").queue("a3s").payload(`{"command":"make test"}`).
				created(-40*time.Second).running("worker-b", "node-b", -30*time.Second).obj(),
			task("build-2", "reviewer-42", "execute", "bash").queue("a3s").payload(`{"command": "make build", "workingDir": "/src"}`).
				identity(id, "01jdq8m2r5t6y7p8q9s0t1v2w3").created(-15*time.Second).running("worker-a", "node-a", -10*time.Second).obj(),
			task("lint-1", "reviewer-42", "execute", "bash").queue("a3s").payload(`{"command":"golangci-lint run"}`).
				created(-5 * time.Second).obj(),
			task("test-1", "reviewer-42", "execute", "bash").queue("a3s").payload(`{"command":"go test ./..."}`).
				created(-3*time.Minute).running("worker-a", "node-a", -150*time.Second).
				finished(agentlanev1alpha1.ExternalTaskSucceeded, -60*time.Second, `{"stdout":"ok  \tpkg\t1.2s\nPASS\n","stderr":"","truncated":false}`, "", 0).obj(),
			task("test-2", "reviewer-42", "execute", "bash").queue("a3s").payload(`{"command":"go vet ./..."}`).
				created(-3*time.Minute).attempt(2).failedAttempt(1, "worker-c", "node-c", -120*time.Second, agentlanev1alpha1.AttemptWorkerLost, "heartbeat expired").
				running("worker-a", "node-a", -110*time.Second).
				finished(agentlanev1alpha1.ExternalTaskFailed, -100*time.Second, `{"stdout":"","stderr":"vet: x.go:3: unreachable code\n"}`, "exit status 1", 1).obj(),
		},
		[]agentlanev1alpha1.AgentSession{session("reviewer-42", "a3s", agentlanev1alpha1.SessionActive, "node-a", 1, 3, 14, 2, 1)},
	)
}

// manySnapshot has two queues in two namespaces, seven tasks in flight and a
// payload and result carrying control characters.
func manySnapshot() *Snapshot {
	ext := agentlanev1alpha1.HandlerModeExternal
	var tasks []agentlanev1alpha1.ExternalTask
	for i := range 7 {
		ns := "team-a"
		if i%2 == 1 {
			ns = "team-b"
		}
		tasks = append(tasks, task(fmt.Sprintf("t%d", i), "", "execute", "bash").namespace(ns).queue("q-"+ns).
			payload(`{"command":"sleep `+fmt.Sprint(i)+`"}`).
			created(-time.Hour).running("w", "", -time.Duration(i)*time.Minute).obj())
	}
	tasks = append(tasks,
		task("evil", "", "execute", "bash").namespace("team-a").queue("q-team-a").payload(`{"command":"printf '\u001b[2J'\nrm -rf /tmp/x"}`).created(-90*time.Minute).obj(),
		task("job-task", "", "execute", "bash").namespace("team-a").queue("q-team-a").created(-26*time.Hour).
			dispatched("", "", -25*time.Hour).obj(),
	)
	tasks[len(tasks)-1].Status.JobName = "job-7"
	return New("", []agentlanev1alpha1.LaneQueue{
		queue("q-team-a").namespace("team-a").lane("execute", 0, ext, 4, 0, 1, 5).pressure(agentlanev1alpha1.LaneQueueWarningDepthReason).obj(),
		queue("q-team-b").namespace("team-b").lane("execute", 0, ext, 4, 0, 0, 3).obj(),
	}, tasks, nil)
}

// outputSnapshot has finished tasks only: one with long output, one with a
// result of another shape, one cancelled while it waited, one dead letter
// without a result.
func outputSnapshot() *Snapshot {
	var out strings.Builder
	for i := 1; i <= 12; i++ {
		fmt.Fprintf(&out, "line %d\\n", i)
	}
	ext := agentlanev1alpha1.HandlerModeExternal
	cancelled := task("cancelled", "", "execute", "bash").queue("a3s").created(-10 * time.Minute).obj()
	cancelled.Status.Phase = agentlanev1alpha1.ExternalTaskCancelled
	cancelled.Status.Conditions = []metav1.Condition{{Type: agentlanev1alpha1.ExternalTaskFinishedCondition, Status: metav1.ConditionTrue, LastTransitionTime: *at(-9 * time.Minute)}}
	dead := task("dead", "", "execute", "bash").queue("a3s").created(-20*time.Minute).attempt(2).
		failedAttempt(1, "w1", "n1", -19*time.Minute, agentlanev1alpha1.AttemptTimedOut, "").
		failedAttempt(2, "w2", "n2", -18*time.Minute, agentlanev1alpha1.AttemptWorkerLost, "heartbeat expired\nsecond line").obj()
	dead.Status.Phase = agentlanev1alpha1.ExternalTaskDeadLettered
	return New("default", []agentlanev1alpha1.LaneQueue{queue("a3s").lane("execute", 0, ext, 1, 0, 0, 0, 2, 0, 1).obj()},
		[]agentlanev1alpha1.ExternalTask{
			task("long", "", "execute", "bash").queue("a3s").created(-3*time.Minute).running("w1", "n1", -2*time.Minute).
				finished(agentlanev1alpha1.ExternalTaskSucceeded, -1*time.Minute, `{"stdout":"`+out.String()+`","stderr":"warning: slow\n","truncated":true}`, "", 0).obj(),
			task("shaped", "", "execute", "fetch").queue("a3s").created(-3*time.Minute).running("w1", "n1", -2*time.Minute).
				finished(agentlanev1alpha1.ExternalTaskSucceeded, -90*time.Second, `{"status": 200, "bytes": 512}`, "", 0).obj(),
			cancelled, dead,
		}, nil)
}
