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
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// TestDelegationAttempts: the transitions by which a delegated task's
// attempts, which its lane's scheduler grants and retries, run each in a
// worker session of its own, and by which a worker session whose attempt
// ended loses its hold on the task.
func TestDelegationAttempts(t *testing.T) {
	const ctl, api = "delegation controller", "Session API (worker session)"
	lost := agentlanev1alpha1.TaskAttempt{Outcome: agentlanev1alpha1.AttemptWorkerLost, Error: "the runtime pod stopped"}
	retried := func(st *Status) {
		st.Attempts = []agentlanev1alpha1.TaskAttempt{{Attempt: 1, Worker: "s", Outcome: agentlanev1alpha1.AttemptWorkerLost}}
	}
	runTransitions(t, map[string]transitionCase{
		"DelegateRetry: records the lost attempt and waits in the lane, held by nobody": {
			actor: ctl, from: status(running, 1, heldBySession("s")),
			apply: func(st *Status) error {
				return DelegateRetry(st, 1, t1, "review", lost, agentlanev1alpha1.ExternalTaskWorkerLostReason, "attempt 1 ended WorkerLost; retrying")
			},
			wantPhase: queued,
			check: func(t *testing.T, st *Status) {
				if len(st.Attempts) != 1 || st.Attempts[0].Worker != "s" || st.Attempts[0].Outcome != agentlanev1alpha1.AttemptWorkerLost {
					t.Errorf("attempts %+v", st.Attempts)
				}
				if st.Worker != "" || st.StartedAt != nil || st.Attempt != 1 {
					t.Errorf("worker %q startedAt %v attempt %d after the retry", st.Worker, st.StartedAt, st.Attempt)
				}
				wantCondition(t, st, agentlanev1alpha1.ExternalTaskClaimedCondition, metav1.ConditionFalse, agentlanev1alpha1.ExternalTaskWorkerLostReason)
			},
		},
		"DelegateRetry: refused for an attempt already recorded": {
			actor: ctl, from: status(queued, 1, retried),
			apply: func(st *Status) error {
				return DelegateRetry(st, 1, t1, "review", lost, agentlanev1alpha1.ExternalTaskWorkerLostReason, "again")
			},
			wantErr: ErrStaleAttempt,
		},
		"SessionFinish: the lost attempt's worker session cannot complete the task": {
			actor: api, from: status(queued, 1, retried),
			apply: func(st *Status) error {
				return SessionFinish(st, 1, t1, "s", agentlanev1alpha1.TaskResult{Success: true})
			},
			wantErr: ErrPhase,
		},
		"DelegateStartAttempt: attempt 2 runs in a new worker session": {
			actor: ctl, from: status(queued, 1, retried),
			apply:     func(st *Status) error { return DelegateStartAttempt(st, 1, t1, "review", "s-a2", 2) },
			wantPhase: running, wantHolder: agentlanev1alpha1.HolderDelegate,
			check: func(t *testing.T, st *Status) {
				if st.Attempt != 2 || st.Worker != "s-a2" || len(st.Attempts) != 1 {
					t.Errorf("started status %+v", st)
				}
			},
		},
		"DelegateStartAttempt: refused for an attempt older than the task's": {
			actor: ctl, from: status(queued, 2, retried),
			apply:   func(st *Status) error { return DelegateStartAttempt(st, 1, t1, "review", "s", 1) },
			wantErr: ErrStaleAttempt,
		},
		"DelegateStartAttempt: refused while the current attempt has no record": {
			actor: ctl, from: status(queued, 1),
			apply:   func(st *Status) error { return DelegateStartAttempt(st, 1, t1, "review", "s-a2", 2) },
			wantErr: ErrStaleAttempt,
		},
		"SessionFinish: attempt 1's worker session cannot complete attempt 2": {
			actor: api, from: status(running, 2, heldBySession("s-a2"), retried),
			apply: func(st *Status) error {
				return SessionFinish(st, 1, t1, "s", agentlanev1alpha1.TaskResult{Success: true})
			},
			wantErr: ErrNotHolder,
		},
		"DelegateRuntime: records the runtime pod": {
			actor: ctl, from: status(running, 1, heldBySession("s")),
			apply:     func(st *Status) error { return DelegateRuntime(st, "s", "pod1") },
			wantPhase: running, wantHolder: agentlanev1alpha1.HolderDelegate,
			check: func(t *testing.T, st *Status) {
				if st.WorkerIncarnation != "pod1" {
					t.Errorf("workerIncarnation %q, want pod1", st.WorkerIncarnation)
				}
			},
		},
		"DelegateRuntime: forgets it while the session moves": {
			actor: ctl, from: status(running, 1, heldBySession("s"), func(st *Status) { st.WorkerIncarnation = "pod1" }),
			apply:     func(st *Status) error { return DelegateRuntime(st, "s", "") },
			wantPhase: running, wantHolder: agentlanev1alpha1.HolderDelegate,
			check: func(t *testing.T, st *Status) {
				if st.WorkerIncarnation != "" {
					t.Errorf("workerIncarnation %q, want none", st.WorkerIncarnation)
				}
			},
		},
		"DelegateRuntime: refused for another session": {
			actor: ctl, from: status(running, 1, heldBySession("s")),
			apply:   func(st *Status) error { return DelegateRuntime(st, "other", "pod") },
			wantErr: ErrNotHolder,
		},
		"DelegateEndAs: dead-lettered after a timeout, the attempt recorded TimedOut": {
			actor: ctl, from: status(running, 2, heldBySession("s-a2"), retried),
			apply: func(st *Status) error {
				return DelegateEndAs(st, 1, t1, agentlanev1alpha1.ExternalTaskDeadLettered, "timed out", agentlanev1alpha1.AttemptTimedOut)
			},
			wantPhase: agentlanev1alpha1.ExternalTaskDeadLettered, wantHolder: agentlanev1alpha1.HolderDelegate,
			check: func(t *testing.T, st *Status) {
				if len(st.Attempts) != 2 || st.Attempts[1].Attempt != 2 || st.Attempts[1].Outcome != agentlanev1alpha1.AttemptTimedOut {
					t.Errorf("attempts %+v", st.Attempts)
				}
			},
		},
		"DelegateEndAs: refused to Succeeded, which only the worker's run gives": {
			actor: ctl, from: status(running, 1, heldBySession("s")),
			apply: func(st *Status) error {
				return DelegateEndAs(st, 1, t1, succeeded, "x", agentlanev1alpha1.AttemptSucceeded)
			},
			wantErr: ErrPhase,
		},
	})
}
