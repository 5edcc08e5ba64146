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

package taskstate

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/workerproto"
)

// applyPatch applies a worker's JSON Patch to the task as the API server
// does, and returns the status it leaves, or false when a test operation
// (the fence) rejects it.
func applyPatch(t *testing.T, task *agentlanev1alpha1.ExternalTask, body []byte) (*Status, bool) {
	t.Helper()
	doc, err := json.Marshal(task)
	if err != nil {
		t.Fatal(err)
	}
	p, err := jsonpatch.DecodePatch(body)
	if err != nil {
		t.Fatalf("decode patch %s: %v", body, err)
	}
	out, err := p.Apply(doc)
	if err != nil {
		return nil, false
	}
	got := &agentlanev1alpha1.ExternalTask{}
	if err := json.Unmarshal(out, got); err != nil {
		t.Fatal(err)
	}
	return &got.Status, true
}

// TestWorkerPatchesMakeTheirTransitions checks that each JSON Patch a
// worker sends (built by workerproto as internal/worker builds it) changes
// the status exactly as its transition says, and is rejected by its fence
// exactly where the transition is refused.
func TestWorkerPatchesMakeTheirTransitions(t *testing.T) {
	wf := workerproto.WorkerFence("w1", 1)
	jf := workerproto.JobFence("t-1", 1)
	ok := agentlanev1alpha1.TaskResult{Success: true}
	bad := agentlanev1alpha1.TaskResult{Error: "exit 1"}
	const gen = 3
	dispatchedTo := func(opts ...func(*Status)) *Status {
		return status(dispatched, 1, append([]func(*Status){heldByWorker("w1"), inProgress(agentlanev1alpha1.ExternalTaskAwaitingWorkerReason)}, opts...)...)
	}
	runningIn := status(running, 1, heldByWorker("w1"), startedAt(t0), inProgress(agentlanev1alpha1.ExternalTaskWorkerClaimedReason))
	claimOps := func(task *agentlanev1alpha1.ExternalTask, f workerproto.Fence) []workerproto.PatchOp {
		return workerproto.ConditionOps(task, ClaimedCondition(gen, f, t1))
	}
	succeededOps := func(task *agentlanev1alpha1.ExternalTask, f workerproto.Fence, res agentlanev1alpha1.TaskResult) []workerproto.PatchOp {
		if !res.Success {
			return nil
		}
		return workerproto.ConditionOps(task, SucceededCondition(gen, f, t2))
	}
	cases := map[string]struct {
		from       *Status
		patch      func(task *agentlanev1alpha1.ExternalTask) ([]byte, error)
		transition func(st *Status) error
	}{
		"claim": {
			from: dispatchedTo(),
			patch: func(task *agentlanev1alpha1.ExternalTask) ([]byte, error) {
				return workerproto.ClaimPatch(wf, t1, claimOps(task, wf)...)
			},
			transition: func(st *Status) error { return Claim(st, gen, wf, t1, nil) },
		},
		"claim of another worker's attempt": {
			from: status(dispatched, 1, heldByWorker("w2")),
			patch: func(task *agentlanev1alpha1.ExternalTask) ([]byte, error) {
				return workerproto.ClaimPatch(wf, t1, claimOps(task, wf)...)
			},
			transition: func(st *Status) error { return Claim(st, gen, wf, t1, nil) },
		},
		"claim by another process of the worker": {
			from: dispatchedTo(func(st *Status) { st.WorkerIncarnation = "P2" }),
			patch: func(task *agentlanev1alpha1.ExternalTask) ([]byte, error) {
				return workerproto.ClaimPatch(wf.WithIncarnation("P1"), t1)
			},
			transition: func(st *Status) error { return Claim(st, gen, wf.WithIncarnation("P1"), t1, nil) },
		},
		"claim by a Job's pod": {
			from: status(dispatched, 1, heldByJob("t-1"), inProgress(agentlanev1alpha1.ExternalTaskJobPendingReason)),
			patch: func(task *agentlanev1alpha1.ExternalTask) ([]byte, error) {
				return workerproto.ClaimPatch(jf, t1, append([]workerproto.PatchOp{
					workerproto.AddOp(workerproto.PathWorker, "t-1-abcde"), workerproto.AddOp(workerproto.PathNodeName, "n2")},
					claimOps(task, jf)...)...)
			},
			transition: func(st *Status) error { return Claim(st, gen, jf, t1, &JobPod{Name: "t-1-abcde", Node: "n2"}) },
		},
		"completion of a success": {
			from: runningIn,
			patch: func(task *agentlanev1alpha1.ExternalTask) ([]byte, error) {
				return workerproto.CompletePatch(wf, ok, t2, succeededOps(task, wf, ok)...)
			},
			transition: func(st *Status) error { return Complete(st, gen, wf, ok, t2) },
		},
		"completion of a failure": {
			from: runningIn,
			patch: func(task *agentlanev1alpha1.ExternalTask) ([]byte, error) {
				return workerproto.CompletePatch(wf, bad, t2, succeededOps(task, wf, bad)...)
			},
			transition: func(st *Status) error { return Complete(st, gen, wf, bad, t2) },
		},
		"completion of a task the manager timed out": {
			from: status(timedOut, 1, heldByWorker("w1")),
			patch: func(task *agentlanev1alpha1.ExternalTask) ([]byte, error) {
				return workerproto.CompletePatch(wf, ok, t2)
			},
			transition: func(st *Status) error { return Complete(st, gen, wf, ok, t2) },
		},
		"completion of a later attempt": {
			from: status(running, 2, heldByWorker("w1")),
			patch: func(task *agentlanev1alpha1.ExternalTask) ([]byte, error) {
				return workerproto.CompletePatch(wf, ok, t2)
			},
			transition: func(st *Status) error { return Complete(st, gen, wf, ok, t2) },
		},
		"short run's success": {
			from: dispatchedTo(),
			patch: func(task *agentlanev1alpha1.ExternalTask) ([]byte, error) {
				return workerproto.StartAndCompletePatch(wf, ok, t1, t2, append(claimOps(task, wf), succeededOps(task, wf, ok)...)...)
			},
			transition: func(st *Status) error { return StartAndComplete(st, gen, wf, ok, t1, t2) },
		},
		"short run's failure": {
			from: dispatchedTo(),
			patch: func(task *agentlanev1alpha1.ExternalTask) ([]byte, error) {
				return workerproto.StartAndCompletePatch(wf, bad, t1, t2, append(claimOps(task, wf), succeededOps(task, wf, bad)...)...)
			},
			transition: func(st *Status) error { return StartAndComplete(st, gen, wf, bad, t1, t2) },
		},
		"hand-back of a dispatched attempt": {
			from: dispatchedTo(),
			patch: func(task *agentlanev1alpha1.ExternalTask) ([]byte, error) {
				return workerproto.HandBackPatch(wf, dispatched)
			},
			transition: func(st *Status) error { return HandBack(st, wf, dispatched) },
		},
		"hand-back of a claimed attempt": {
			from: runningIn,
			patch: func(task *agentlanev1alpha1.ExternalTask) ([]byte, error) {
				return workerproto.HandBackPatch(wf, running)
			},
			transition: func(st *Status) error { return HandBack(st, wf, running) },
		},
		"heartbeat": {
			from: runningIn,
			patch: func(task *agentlanev1alpha1.ExternalTask) ([]byte, error) {
				return workerproto.HeartbeatPatch(wf, t1, "3/10")
			},
			transition: func(st *Status) error { return WorkerHeartbeat(st, wf, t1, "3/10") },
		},
		"heartbeat without a progress note keeps the last one": {
			from: status(running, 1, heldByWorker("w1"), func(st *Status) {
				beat := metav1.NewMicroTime(t0.Time)
				st.Progress, st.LastHeartbeatAt = "2/10", &beat
			}),
			patch: func(task *agentlanev1alpha1.ExternalTask) ([]byte, error) {
				return workerproto.HeartbeatPatch(wf, t1, "")
			},
			transition: func(st *Status) error { return WorkerHeartbeat(st, wf, t1, "") },
		},
		"heartbeat of an unclaimed attempt": {
			from: dispatchedTo(),
			patch: func(task *agentlanev1alpha1.ExternalTask) ([]byte, error) {
				return workerproto.HeartbeatPatch(wf, t1, "")
			},
			transition: func(st *Status) error { return WorkerHeartbeat(st, wf, t1, "") },
		},
		"heartbeat of a later attempt": {
			from: status(running, 2, heldByWorker("w1")),
			patch: func(task *agentlanev1alpha1.ExternalTask) ([]byte, error) {
				return workerproto.HeartbeatPatch(wf, t1, "")
			},
			transition: func(st *Status) error { return WorkerHeartbeat(st, wf, t1, "") },
		},
		"heartbeat of another worker's attempt": {
			from: status(running, 1, heldByWorker("w2")),
			patch: func(task *agentlanev1alpha1.ExternalTask) ([]byte, error) {
				return workerproto.HeartbeatPatch(wf, t1, "")
			},
			transition: func(st *Status) error { return WorkerHeartbeat(st, wf, t1, "") },
		},
		"heartbeat of a finished task": {
			from: status(timedOut, 1, heldByWorker("w1")),
			patch: func(task *agentlanev1alpha1.ExternalTask) ([]byte, error) {
				return workerproto.HeartbeatPatch(wf, t1, "")
			},
			transition: func(st *Status) error { return WorkerHeartbeat(st, wf, t1, "") },
		},
		"hand-back from the wrong phase": {
			from: runningIn,
			patch: func(task *agentlanev1alpha1.ExternalTask) ([]byte, error) {
				return workerproto.HandBackPatch(wf, dispatched)
			},
			transition: func(st *Status) error { return HandBack(st, wf, dispatched) },
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			task := &agentlanev1alpha1.ExternalTask{}
			task.Name, task.Namespace, task.Generation = "t", "ns", gen
			task.Status = *tc.from.DeepCopy()
			body, err := tc.patch(task)
			if err != nil {
				t.Fatal(err)
			}
			patched, applied := applyPatch(t, task, body)
			want := tc.from.DeepCopy()
			terr := tc.transition(want)
			if applied != (terr == nil) {
				t.Fatalf("the patch applied: %v; the transition's error: %v", applied, terr)
			}
			if !applied {
				return
			}
			if diff := cmp.Diff(want, patched); diff != "" {
				t.Errorf("the patch and the transition disagree (-transition,+patch):\n%s", diff)
			}
		})
	}
}
