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

package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// finishedTask is a task of session (none when "") in phase, finished at
// second s after t0; a phase that has not finished has no finish time.
func finishedTask(name, session string, phase agentlanev1alpha1.ExternalTaskPhase, s int) agentlanev1alpha1.ExternalTask {
	t := agentlanev1alpha1.ExternalTask{ObjectMeta: metav1.ObjectMeta{Name: name}}
	t.Status.Phase = phase
	if session != "" {
		t.Spec.SessionRef = &agentlanev1alpha1.AgentSessionReference{Name: session}
	}
	if phase.IsTerminal() {
		at := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, s, 0, time.UTC))
		t.Status.Conditions = []metav1.Condition{{Type: agentlanev1alpha1.ExternalTaskFinishedCondition,
			Status: metav1.ConditionTrue, LastTransitionTime: at}}
	}
	return t
}

func TestBeyondRetention(t *testing.T) {
	const (
		ok   = agentlanev1alpha1.ExternalTaskSucceeded
		fail = agentlanev1alpha1.ExternalTaskFailed
		dead = agentlanev1alpha1.ExternalTaskDeadLettered
		run  = agentlanev1alpha1.ExternalTaskRunning
		wait = agentlanev1alpha1.ExternalTaskQueued
	)
	queue := retention{maxFinished: 1000, deadLetters: 1000}
	cases := map[string]struct {
		tasks    []agentlanev1alpha1.ExternalTask
		queue    retention
		sessions map[string]int
		want     []string
	}{
		"a session's oldest finished tasks beyond its cap go, by finish time, not by name": {
			tasks: []agentlanev1alpha1.ExternalTask{
				finishedTask("a", "s1", ok, 5), finishedTask("b", "s1", fail, 4), finishedTask("c", "s1", ok, 3),
				finishedTask("d", "s1", ok, 2), finishedTask("e", "s1", ok, 1), finishedTask("running", "s1", run, 0),
				finishedTask("queued", "s1", wait, 0),
			},
			queue:    queue,
			sessions: map[string]int{"s1": 2},
			want:     []string{"e", "d", "c"},
		},
		"each session is capped on its own": {
			tasks: []agentlanev1alpha1.ExternalTask{
				finishedTask("a1", "s1", ok, 1), finishedTask("b1", "s2", ok, 2), finishedTask("a2", "s1", ok, 3),
				finishedTask("b2", "s2", ok, 4),
			},
			queue:    queue,
			sessions: map[string]int{"s1": 1, "s2": 2},
			want:     []string{"a1"},
		},
		"maxFinishedTasks 0 keeps none": {
			tasks:    []agentlanev1alpha1.ExternalTask{finishedTask("a", "s1", ok, 1), finishedTask("r", "s1", run, 0)},
			queue:    queue,
			sessions: map[string]int{"s1": 0},
			want:     []string{"a"},
		},
		"dead letters are bounded by the queue's dead-letter size only": {
			tasks: []agentlanev1alpha1.ExternalTask{
				finishedTask("dead-1", "s1", dead, 1), finishedTask("dead-2", "s1", dead, 2), finishedTask("dead-3", "s1", dead, 3),
				finishedTask("a", "s1", ok, 4),
			},
			queue:    retention{maxFinished: 1000, deadLetters: 2},
			sessions: map[string]int{"s1": 1},
			want:     []string{"dead-1"},
		},
		"tasks of no session, or of a session not using the queue, follow the queue's cap only": {
			tasks: []agentlanev1alpha1.ExternalTask{
				finishedTask("loose", "", ok, 1), finishedTask("other", "elsewhere", ok, 2), finishedTask("a", "s1", ok, 3),
			},
			queue:    queue,
			sessions: map[string]int{"s1": 0},
			want:     []string{"a"},
		},
		"the queue's maxFinished counts what the sessions keep": {
			tasks: []agentlanev1alpha1.ExternalTask{
				finishedTask("a1", "s1", ok, 1), finishedTask("loose", "", ok, 2), finishedTask("a2", "s1", ok, 3),
				finishedTask("a3", "s1", ok, 4),
			},
			queue:    retention{maxFinished: 1, deadLetters: 1000},
			sessions: map[string]int{"s1": 2},
			want:     []string{"a1", "loose", "a2"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, task := range beyondRetention(tc.tasks, tc.queue, tc.sessions) {
				got = append(got, task.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("deleted (-want,+got):\n%s", diff)
			}
		})
	}
}

var _ = Describe("Session retention", func() {
	It("deletes a session's oldest finished tasks beyond maxFinishedTasks, never one in flight nor a dead letter", func() {
		ns := taskNamespace()
		taskQueue(ns, func(s *agentlanev1alpha1.LaneQueueSpec) {
			s.Lanes = append(s.Lanes, agentlanev1alpha1.Lane{Name: "doomed", HandlerMode: agentlanev1alpha1.HandlerModeExternal,
				Timeout:     &metav1.Duration{Duration: 300 * time.Millisecond},
				RetryPolicy: &agentlanev1alpha1.RetryPolicy{Strategy: agentlanev1alpha1.RetryNone}})
		})
		Expect(k8sClient.Create(ctx, &agentlanev1alpha1.AgentSession{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s1"},
			Spec: agentlanev1alpha1.AgentSessionSpec{QueueRef: agentlanev1alpha1.LaneQueueReference{Name: "q1"},
				Retention: &agentlanev1alpha1.SessionRetention{MaxFinishedTasks: ptr.To[int32](2)}},
		})).To(Succeed())
		fakeWorker(ns, "w", 10)
		sessionTask := func(name string, lane agentlanev1alpha1.LaneName) *agentlanev1alpha1.ExternalTask {
			t := queueTask(ns, name)
			t.Spec.QueueRef, t.Spec.SessionRef, t.Spec.Lane = nil, &agentlanev1alpha1.AgentSessionReference{Name: "s1"}, lane
			Expect(k8sClient.Create(ctx, t)).To(Succeed())
			return t
		}
		taskNames := func(g Gomega) []string {
			list := &agentlanev1alpha1.ExternalTaskList{}
			g.Expect(k8sClient.List(ctx, list, client.InNamespace(ns))).To(Succeed())
			var names []string
			for _, t := range list.Items {
				names = append(names, t.Name)
			}
			return names
		}

		By("a dead letter, finished first")
		dead := sessionTask("dead", "doomed")
		Eventually(taskPhase(dead), 10*time.Second).Should(Equal(agentlanev1alpha1.ExternalTaskDeadLettered))

		By("a task that keeps running")
		running := sessionTask("running", "execute")
		Eventually(taskPhase(running)).Should(Equal(agentlanev1alpha1.ExternalTaskDispatched))
		claim(running, "w", 1)

		By("five tasks finishing one after another, in the reverse order of their names")
		names := []string{"done-e", "done-d", "done-c", "done-b", "done-a"}
		for i, name := range names {
			t := sessionTask(name, "execute")
			runToSuccess(t, "w")
			Eventually(func(g Gomega) *metav1.Condition {
				return cond(getTask(t)(g), agentlanev1alpha1.ExternalTaskFinishedCondition)
			}).Should(HaveField("Status", metav1.ConditionTrue))
			if i < len(names)-1 {
				time.Sleep(1100 * time.Millisecond) // finish times are in whole seconds
			}
		}

		kept := ConsistOf("dead", "running", "done-b", "done-a")
		Eventually(taskNames).Should(kept, "the 3 tasks that finished first are deleted")
		Consistently(taskNames, time.Second).Should(kept)
		Expect(taskPhase(running)(Default)).To(Equal(agentlanev1alpha1.ExternalTaskRunning))
	})
})
