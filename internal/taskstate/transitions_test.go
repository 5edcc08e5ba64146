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
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/workerproto"
)

const (
	queued       = agentlanev1alpha1.ExternalTaskQueued
	dispatched   = agentlanev1alpha1.ExternalTaskDispatched
	running      = agentlanev1alpha1.ExternalTaskRunning
	succeeded    = agentlanev1alpha1.ExternalTaskSucceeded
	failed       = agentlanev1alpha1.ExternalTaskFailed
	timedOut     = agentlanev1alpha1.ExternalTaskTimedOut
	deadLettered = agentlanev1alpha1.ExternalTaskDeadLettered
	cancelled    = agentlanev1alpha1.ExternalTaskCancelled
)

var (
	t0 = metav1.NewTime(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	t1 = metav1.NewTime(t0.Add(time.Second))
	t2 = metav1.NewTime(t0.Add(2 * time.Second))
)

// status builds a task status: phase, attempt, then changes.
func status(phase agentlanev1alpha1.ExternalTaskPhase, attempt int32, opts ...func(*Status)) *Status {
	st := &Status{Phase: phase, Attempt: attempt}
	for _, o := range opts {
		o(st)
	}
	return st
}

func heldByWorker(name string) func(*Status) {
	return func(st *Status) {
		st.Holder, st.Worker, st.NodeName, st.DispatchedAt = agentlanev1alpha1.HolderWorkers, name, "node-a", &t0
	}
}

func heldByJob(job string) func(*Status) {
	return func(st *Status) { st.Holder, st.JobName, st.DispatchedAt = agentlanev1alpha1.HolderJob, job, &t0 }
}

func heldByHandlers(st *Status) { st.Holder, st.DispatchedAt = agentlanev1alpha1.HolderHandler, &t0 }

func heldBySession(name string) func(*Status) {
	return func(st *Status) {
		st.Holder, st.Worker, st.DispatchedAt, st.StartedAt = agentlanev1alpha1.HolderDelegate, name, &t0, &t0
	}
}

func startedAt(at metav1.Time) func(*Status) { return func(st *Status) { st.StartedAt = &at } }

func withResult(success bool) func(*Status) {
	return func(st *Status) { st.Result = &agentlanev1alpha1.TaskResult{Success: success} }
}

func inProgress(claimedReason string) func(*Status) {
	return func(st *Status) {
		st.Conditions = []metav1.Condition{
			{Type: agentlanev1alpha1.ExternalTaskClaimedCondition, Status: metav1.ConditionFalse, Reason: claimedReason, Message: "m", LastTransitionTime: t0},
			{Type: agentlanev1alpha1.ExternalTaskFinishedCondition, Status: metav1.ConditionFalse, Reason: agentlanev1alpha1.ExternalTaskInProgressReason, Message: "the task has not finished", LastTransitionTime: t0},
		}
	}
}

// transitionCase is one row of a transition table: the actor that makes
// the transition, the status it starts from, and the phase and holder it
// leads to or the reason it is refused for.
type transitionCase struct {
	actor     string
	from      *Status
	apply     func(st *Status) error
	wantPhase agentlanev1alpha1.ExternalTaskPhase
	// wantHolder is the recorded holder kind after the transition.
	wantHolder agentlanev1alpha1.HolderKind
	// check looks at the rest of the status.
	check func(t *testing.T, st *Status)
	// wantErr is why the transition is refused; the status must not change.
	wantErr error
}

func runTransitions(t *testing.T, cases map[string]transitionCase) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			st := tc.from.DeepCopy()
			err := tc.apply(st)
			if tc.wantErr != nil {
				if !errors.Is(err, ErrIllegal) || !errors.Is(err, tc.wantErr) {
					t.Fatalf("%s: got error %v, want one wrapping ErrIllegal and %v", tc.actor, err, tc.wantErr)
				}
				if diff := cmp.Diff(tc.from, st); diff != "" {
					t.Errorf("a refused transition changed the status (-want,+got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: unexpected error: %v", tc.actor, err)
			}
			if st.Phase != tc.wantPhase || st.Holder != tc.wantHolder {
				t.Errorf("%s: phase %q holder %q, want %q %q", tc.actor, st.Phase, st.Holder, tc.wantPhase, tc.wantHolder)
			}
			if tc.check != nil {
				tc.check(t, st)
			}
		})
	}
}

func cond(st *Status, typ string) metav1.Condition {
	for _, c := range st.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return metav1.Condition{}
}

func wantCondition(t *testing.T, st *Status, typ string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	if c := cond(st, typ); c.Status != status || c.Reason != reason {
		t.Errorf("condition %s is %s/%s, want %s/%s", typ, c.Status, c.Reason, status, reason)
	}
}

func TestManagerTransitions(t *testing.T) {
	const mgr = "ExternalTask controller"
	runTransitions(t, map[string]transitionCase{
		"Wait: a new task becomes Queued and says why": {
			actor: mgr, from: status("", 0),
			apply:     func(st *Status) error { return Wait(st, 1, t1, "LaneQueue \"q\" does not exist") },
			wantPhase: queued,
			check: func(t *testing.T, st *Status) {
				wantCondition(t, st, agentlanev1alpha1.ExternalTaskClaimedCondition, metav1.ConditionFalse, agentlanev1alpha1.ExternalTaskAwaitingWorkerReason)
				wantCondition(t, st, agentlanev1alpha1.ExternalTaskFinishedCondition, metav1.ConditionFalse, agentlanev1alpha1.ExternalTaskInProgressReason)
				if got := st.Conditions[0].Type; got != agentlanev1alpha1.ExternalTaskClaimedCondition {
					t.Errorf("first condition %s, want Claimed first so that workers update it in place", got)
				}
			},
		},
		"Wait: a dispatched task keeps its phase": {
			actor: mgr, from: status(dispatched, 1, heldByWorker("w1")),
			apply:      func(st *Status) error { return Wait(st, 1, t1, "no scheduler") },
			wantPhase:  dispatched,
			wantHolder: agentlanev1alpha1.HolderWorkers,
		},
		"Wait: refused on a finished task": {
			actor: mgr, from: status(succeeded, 1),
			apply:   func(st *Status) error { return Wait(st, 1, t1, "x") },
			wantErr: ErrFinished,
		},
		"Grant: a new attempt clears the previous one's holder and run": {
			actor: mgr, from: status(running, 1, heldByWorker("w1"), startedAt(t0), withResult(false)),
			apply:     func(st *Status) error { return Grant(st, 1, t1, "execute", 2) },
			wantPhase: running,
			check: func(t *testing.T, st *Status) {
				if st.Attempt != 2 || st.Worker != "" || st.StartedAt != nil || st.Result != nil || st.DispatchedAt != nil || st.Lane != "execute" || st.QueuedAt == nil {
					t.Errorf("granted status %+v, want attempt 2 in lane execute, queuedAt set, nothing of attempt 1", st)
				}
			},
		},
		"Grant: the same attempt keeps its worker": {
			actor: mgr, from: status(queued, 1, func(st *Status) { st.Worker = "w1" }),
			apply:     func(st *Status) error { return Grant(st, 1, t1, "execute", 1) },
			wantPhase: queued,
			check: func(t *testing.T, st *Status) {
				if st.Worker != "w1" {
					t.Errorf("worker %q, want w1 kept", st.Worker)
				}
			},
		},
		"Grant: an attempt never goes back": {
			actor: mgr, from: status(queued, 3),
			apply:   func(st *Status) error { return Grant(st, 1, t1, "execute", 2) },
			wantErr: ErrStaleAttempt,
		},
		"AwaitWorker: no worker for the granted attempt": {
			actor: mgr, from: status(queued, 1, func(st *Status) { st.Lane = "execute"; st.Holder = agentlanev1alpha1.HolderWorkers }),
			apply:     func(st *Status) error { return AwaitWorker(st, 1, t1, 1, "no live worker serves it") },
			wantPhase: queued,
			check: func(t *testing.T, st *Status) {
				if c := cond(st, agentlanev1alpha1.ExternalTaskClaimedCondition); c.Message != "attempt 1 has a slot in lane execute; no live worker serves it" {
					t.Errorf("Claimed message %q", c.Message)
				}
			},
		},
		"AwaitWorker: refused for another attempt": {
			actor: mgr, from: status(queued, 2),
			apply:   func(st *Status) error { return AwaitWorker(st, 1, t1, 1, "x") },
			wantErr: ErrStaleAttempt,
		},
		"Dispatch: to a pool worker records the holder Workers": {
			actor: mgr, from: status(queued, 1),
			apply: func(st *Status) error {
				return Dispatch(st, 1, t1, Dispatched{Attempt: 1, Holder: agentlanev1alpha1.HolderWorkers, Worker: "w1", Incarnation: "P1", Node: "n1"})
			},
			wantPhase: dispatched, wantHolder: agentlanev1alpha1.HolderWorkers,
			check: func(t *testing.T, st *Status) {
				if st.Worker != "w1" || st.WorkerIncarnation != "P1" || st.NodeName != "n1" || st.DispatchedAt == nil || !st.DispatchedAt.Equal(&t1) {
					t.Errorf("dispatched status %+v", st)
				}
				wantCondition(t, st, agentlanev1alpha1.ExternalTaskClaimedCondition, metav1.ConditionFalse, agentlanev1alpha1.ExternalTaskAwaitingWorkerReason)
			},
		},
		"Dispatch: to a Job records the holder Job": {
			actor: mgr, from: status(queued, 1),
			apply: func(st *Status) error {
				return Dispatch(st, 1, t1, Dispatched{Attempt: 1, Holder: agentlanev1alpha1.HolderJob, Job: "t-1"})
			},
			wantPhase: dispatched, wantHolder: agentlanev1alpha1.HolderJob,
			check: func(t *testing.T, st *Status) {
				wantCondition(t, st, agentlanev1alpha1.ExternalTaskClaimedCondition, metav1.ConditionFalse, agentlanev1alpha1.ExternalTaskJobPendingReason)
			},
		},
		"Dispatch: to handlers records the holder Handler": {
			actor: mgr, from: status(queued, 1, func(st *Status) { st.Worker = "stale" }),
			apply: func(st *Status) error {
				return Dispatch(st, 1, t1, Dispatched{Attempt: 1, Holder: agentlanev1alpha1.HolderHandler})
			},
			wantPhase: dispatched, wantHolder: agentlanev1alpha1.HolderHandler,
			check: func(t *testing.T, st *Status) {
				if st.Worker != "" {
					t.Errorf("worker %q, want none for handlers", st.Worker)
				}
				wantCondition(t, st, agentlanev1alpha1.ExternalTaskClaimedCondition, metav1.ConditionFalse, agentlanev1alpha1.ExternalTaskAwaitingHandlerReason)
			},
		},
		"Dispatch: refused for an attempt that is not the granted one": {
			actor: mgr, from: status(queued, 2),
			apply: func(st *Status) error {
				return Dispatch(st, 1, t1, Dispatched{Attempt: 1, Holder: agentlanev1alpha1.HolderWorkers, Worker: "w1"})
			},
			wantErr: ErrStaleAttempt,
		},
		"Dispatch: refused to a Delegate": {
			actor: mgr, from: status(queued, 1),
			apply: func(st *Status) error {
				return Dispatch(st, 1, t1, Dispatched{Attempt: 1, Holder: agentlanev1alpha1.HolderDelegate, Worker: "s"})
			},
			wantErr: ErrNotHolder,
		},
		"Dispatch: refused to the pool without a worker": {
			actor: mgr, from: status(queued, 1),
			apply: func(st *Status) error {
				return Dispatch(st, 1, t1, Dispatched{Attempt: 1, Holder: agentlanev1alpha1.HolderWorkers})
			},
			wantErr: ErrNotHolder,
		},
		"Dispatch: refused on a finished task": {
			actor: mgr, from: status(cancelled, 1),
			apply: func(st *Status) error {
				return Dispatch(st, 1, t1, Dispatched{Attempt: 1, Holder: agentlanev1alpha1.HolderHandler})
			},
			wantErr: ErrFinished,
		},
		"EndAttempt: records a lost worker's attempt, named by its Job when it has no worker": {
			actor: mgr, from: status(dispatched, 1, heldByJob("t-1")),
			apply: func(st *Status) error {
				_, err := EndAttempt(st, t1, agentlanev1alpha1.TaskAttempt{Outcome: agentlanev1alpha1.AttemptWorkerLost, Error: strings.Repeat("e", MaxAttemptError+10), NotStarted: true})
				return err
			},
			wantPhase: dispatched, wantHolder: agentlanev1alpha1.HolderJob,
			check: func(t *testing.T, st *Status) {
				want := []agentlanev1alpha1.TaskAttempt{{Attempt: 1, Worker: "t-1", FinishedAt: &t1, Outcome: agentlanev1alpha1.AttemptWorkerLost,
					Error: strings.Repeat("e", MaxAttemptError), NotStarted: true}}
				if diff := cmp.Diff(want, st.Attempts); diff != "" {
					t.Errorf("attempts (-want,+got):\n%s", diff)
				}
			},
		},
		"EndAttempt: keeps the most recent records": {
			actor: mgr, from: status(running, MaxAttemptRecords+1, func(st *Status) {
				for i := range MaxAttemptRecords {
					st.Attempts = append(st.Attempts, agentlanev1alpha1.TaskAttempt{Attempt: int32(i + 1), Outcome: agentlanev1alpha1.AttemptFailed})
				}
			}),
			apply: func(st *Status) error {
				_, err := EndAttempt(st, t1, agentlanev1alpha1.TaskAttempt{Outcome: agentlanev1alpha1.AttemptTimedOut})
				return err
			},
			wantPhase: running,
			check: func(t *testing.T, st *Status) {
				if n := len(st.Attempts); n != MaxAttemptRecords || st.Attempts[0].Attempt != 2 || st.Attempts[n-1].Attempt != MaxAttemptRecords+1 {
					t.Errorf("%d records from %d, want %d from 2", n, st.Attempts[0].Attempt, MaxAttemptRecords)
				}
			},
		},
		"EndAttempt: refused for an attempt already recorded": {
			actor: mgr, from: status(queued, 1, func(st *Status) {
				st.Attempts = []agentlanev1alpha1.TaskAttempt{{Attempt: 1, Outcome: agentlanev1alpha1.AttemptFailed}}
			}),
			apply: func(st *Status) error {
				_, err := EndAttempt(st, t1, agentlanev1alpha1.TaskAttempt{Outcome: agentlanev1alpha1.AttemptFailed})
				return err
			},
			wantErr: ErrStaleAttempt,
		},
		"Queue: waiting for a retry": {
			actor: mgr, from: status(running, 1, heldByWorker("w1")),
			apply: func(st *Status) error {
				return Queue(st, 1, t1, "execute", agentlanev1alpha1.ExternalTaskRetryBackoffReason, "attempt 1 ended Failed; retrying")
			},
			wantPhase: queued, wantHolder: agentlanev1alpha1.HolderWorkers,
			check: func(t *testing.T, st *Status) {
				wantCondition(t, st, agentlanev1alpha1.ExternalTaskClaimedCondition, metav1.ConditionFalse, agentlanev1alpha1.ExternalTaskRetryBackoffReason)
			},
		},
		"Queue: refused on a finished task": {
			actor: mgr, from: status(deadLettered, 4),
			apply:   func(st *Status) error { return Queue(st, 1, t1, "execute", "r", "m") },
			wantErr: ErrFinished,
		},
		"Close: a failure ends Claimed and Finished with the phase": {
			actor: mgr, from: status(running, 2, heldByWorker("w1"), inProgress(agentlanev1alpha1.ExternalTaskWorkerClaimedReason)),
			apply:     func(st *Status) error { return Close(st, 1, t1, timedOut, "attempt 2 did not finish") },
			wantPhase: timedOut, wantHolder: agentlanev1alpha1.HolderWorkers,
			check: func(t *testing.T, st *Status) {
				wantCondition(t, st, agentlanev1alpha1.ExternalTaskClaimedCondition, metav1.ConditionFalse, string(timedOut))
				wantCondition(t, st, agentlanev1alpha1.ExternalTaskFinishedCondition, metav1.ConditionTrue, string(timedOut))
				if st.FinishedAt == nil || !st.FinishedAt.Equal(&t1) {
					t.Errorf("finishedAt %v, want %v", st.FinishedAt, t1)
				}
			},
		},
		"Close: a success leaves Claimed as the worker wrote it": {
			actor: mgr, from: status(running, 1, heldByWorker("w1"), inProgress(agentlanev1alpha1.ExternalTaskWorkerClaimedReason)),
			apply:     func(st *Status) error { return Close(st, 1, t1, succeeded, "attempt 1 succeeded") },
			wantPhase: succeeded, wantHolder: agentlanev1alpha1.HolderWorkers,
			check: func(t *testing.T, st *Status) {
				wantCondition(t, st, agentlanev1alpha1.ExternalTaskClaimedCondition, metav1.ConditionFalse, agentlanev1alpha1.ExternalTaskWorkerClaimedReason)
			},
		},
		"Close: refused to a phase that is not final": {
			actor: mgr, from: status(running, 1),
			apply:   func(st *Status) error { return Close(st, 1, t1, queued, "x") },
			wantErr: ErrPhase,
		},
		"Close: refused on a finished task": {
			actor: mgr, from: status(succeeded, 1),
			apply:   func(st *Status) error { return Close(st, 1, t1, cancelled, "x") },
			wantErr: ErrFinished,
		},
		"MarkFinished: a worker's success without the condition": {
			actor: mgr, from: status(succeeded, 1, withResult(true)),
			apply:     func(st *Status) error { return MarkFinished(st, 1, t1) },
			wantPhase: succeeded,
			check: func(t *testing.T, st *Status) {
				wantCondition(t, st, agentlanev1alpha1.ExternalTaskFinishedCondition, metav1.ConditionTrue, string(succeeded))
				if st.FinishedAt == nil {
					t.Error("finishedAt not set")
				}
			},
		},
		"MarkFinished: refused on a task that has not finished": {
			actor: mgr, from: status(running, 1),
			apply:   func(st *Status) error { return MarkFinished(st, 1, t1) },
			wantErr: ErrPhase,
		},
	})
}

func TestHandlerComplete(t *testing.T) {
	const api = "Session API (handler)"
	ok := agentlanev1alpha1.TaskResult{Success: true}
	bad := agentlanev1alpha1.TaskResult{Error: "boom"}
	runTransitions(t, map[string]transitionCase{
		"a success ends the attempt Succeeded, started at its dispatch": {
			actor: api, from: status(dispatched, 1, heldByHandlers),
			apply:     func(st *Status) error { return HandlerComplete(st, t1, 1, ok) },
			wantPhase: succeeded, wantHolder: agentlanev1alpha1.HolderHandler,
			check: func(t *testing.T, st *Status) {
				if st.StartedAt == nil || !st.StartedAt.Equal(&t0) || !st.FinishedAt.Equal(&t1) || st.Result == nil || !st.Result.Success {
					t.Errorf("completed status %+v", st)
				}
			},
		},
		"a failure leaves the attempt Running for the retry policy": {
			actor: api, from: status(dispatched, 1, heldByHandlers),
			apply:     func(st *Status) error { return HandlerComplete(st, t1, 1, bad) },
			wantPhase: running, wantHolder: agentlanev1alpha1.HolderHandler,
		},
		"a task dispatched before holders were recorded is inferred a handler's": {
			actor: api, from: status(dispatched, 1, func(st *Status) { st.DispatchedAt = &t0 }),
			apply:     func(st *Status) error { return HandlerComplete(st, t1, 1, ok) },
			wantPhase: succeeded,
		},
		"refused on a finished task": {
			actor: api, from: status(succeeded, 1, heldByHandlers),
			apply:   func(st *Status) error { return HandlerComplete(st, t1, 1, ok) },
			wantErr: ErrFinished,
		},
		"refused for an earlier attempt": {
			actor: api, from: status(dispatched, 2, heldByHandlers),
			apply:   func(st *Status) error { return HandlerComplete(st, t1, 1, ok) },
			wantErr: ErrStaleAttempt,
		},
		"refused for an attempt that has a result": {
			actor: api, from: status(running, 1, heldByHandlers, withResult(false)),
			apply:   func(st *Status) error { return HandlerComplete(st, t1, 1, ok) },
			wantErr: ErrHasResult,
		},
		"refused for a worker's attempt": {
			actor: api, from: status(dispatched, 1, heldByWorker("w1")),
			apply:   func(st *Status) error { return HandlerComplete(st, t1, 1, ok) },
			wantErr: ErrNotHolder,
		},
		"refused for a Job's attempt dispatched before holders were recorded": {
			actor: api, from: status(dispatched, 1, func(st *Status) { st.JobName = "t-1" }),
			apply:   func(st *Status) error { return HandlerComplete(st, t1, 1, ok) },
			wantErr: ErrNotHolder,
		},
		"refused for a queued attempt": {
			actor: api, from: status(queued, 1),
			apply:   func(st *Status) error { return HandlerComplete(st, t1, 1, ok) },
			wantErr: ErrPhase,
		},
	})
}

func TestDelegationTransitions(t *testing.T) {
	const ctl, api = "delegation controller", "Session API (worker session)"
	answer := agentlanev1alpha1.TaskResult{Success: true}
	runTransitions(t, map[string]transitionCase{
		"DelegateWait: a new task waits for a lane slot": {
			actor: ctl, from: status("", 0),
			apply: func(st *Status) error {
				return DelegateWait(st, 1, t1, "review", agentlanev1alpha1.ExternalTaskAwaitingWorkerSlotReason, "waiting")
			},
			wantPhase: queued,
			check: func(t *testing.T, st *Status) {
				wantCondition(t, st, agentlanev1alpha1.ExternalTaskClaimedCondition, metav1.ConditionFalse, agentlanev1alpha1.ExternalTaskAwaitingWorkerSlotReason)
				if st.Lane != "review" || st.QueuedAt == nil {
					t.Errorf("lane %q queuedAt %v", st.Lane, st.QueuedAt)
				}
			},
		},
		"DelegateWait: the same reason again changes nothing": {
			actor: ctl, from: status(queued, 0, inProgress(agentlanev1alpha1.ExternalTaskAwaitingProducerSlotReason)),
			apply: func(st *Status) error {
				return DelegateWait(st, 1, t1, "review", agentlanev1alpha1.ExternalTaskAwaitingProducerSlotReason, "another message")
			},
			wantPhase: queued,
			check: func(t *testing.T, st *Status) {
				if c := cond(st, agentlanev1alpha1.ExternalTaskClaimedCondition); c.Message != "m" {
					t.Errorf("message %q, want it unchanged", c.Message)
				}
			},
		},
		"DelegateWait: refused for a running task": {
			actor: ctl, from: status(running, 1, heldBySession("s")),
			apply:   func(st *Status) error { return DelegateWait(st, 1, t1, "review", "r", "m") },
			wantErr: ErrPhase,
		},
		"DelegateStart: the worker session holds attempt 1": {
			actor: ctl, from: status(queued, 0),
			apply:     func(st *Status) error { return DelegateStart(st, 1, t1, "review", "review-t") },
			wantPhase: running, wantHolder: agentlanev1alpha1.HolderDelegate,
			check: func(t *testing.T, st *Status) {
				if st.Attempt != 1 || st.Worker != "review-t" || st.StartedAt == nil || st.DispatchedAt == nil {
					t.Errorf("started status %+v", st)
				}
				wantCondition(t, st, agentlanev1alpha1.ExternalTaskClaimedCondition, metav1.ConditionFalse, agentlanev1alpha1.ExternalTaskFirstTurnPendingReason)
			},
		},
		"DelegateStart: refused for a running task": {
			actor: ctl, from: status(running, 1, heldBySession("s")),
			apply:   func(st *Status) error { return DelegateStart(st, 1, t1, "review", "s") },
			wantErr: ErrPhase,
		},
		"FirstTurnPosted: Claimed=True": {
			actor: ctl, from: status(running, 1, heldBySession("s")),
			apply:     func(st *Status) error { return FirstTurnPosted(st, 1, t1, "s") },
			wantPhase: running, wantHolder: agentlanev1alpha1.HolderDelegate,
			check: func(t *testing.T, st *Status) {
				wantCondition(t, st, agentlanev1alpha1.ExternalTaskClaimedCondition, metav1.ConditionTrue, agentlanev1alpha1.ExternalTaskWorkerSessionReason)
			},
		},
		"FirstTurnPosted: refused for another session": {
			actor: ctl, from: status(running, 1, heldBySession("s")),
			apply:   func(st *Status) error { return FirstTurnPosted(st, 1, t1, "other") },
			wantErr: ErrNotHolder,
		},
		"DelegateEnd: TimedOut records the session's attempt": {
			actor: ctl, from: status(running, 1, heldBySession("s")),
			apply:     func(st *Status) error { return DelegateEnd(st, 1, t1, timedOut, "timed out") },
			wantPhase: timedOut, wantHolder: agentlanev1alpha1.HolderDelegate,
			check: func(t *testing.T, st *Status) {
				if len(st.Attempts) != 1 || st.Attempts[0].Worker != "s" || st.Result == nil || st.Result.Error != "timed out" {
					t.Errorf("ended status %+v", st)
				}
				wantCondition(t, st, agentlanev1alpha1.ExternalTaskFinishedCondition, metav1.ConditionTrue, string(timedOut))
			},
		},
		"DelegateEnd: a queued task fails without an attempt record": {
			actor: ctl, from: status("", 0),
			apply:     func(st *Status) error { return DelegateEnd(st, 1, t1, failed, "producer session p does not exist") },
			wantPhase: failed,
			check: func(t *testing.T, st *Status) {
				if len(st.Attempts) != 0 {
					t.Errorf("attempts %v, want none", st.Attempts)
				}
			},
		},
		"DelegateEnd: refused to another phase": {
			actor: ctl, from: status(running, 1, heldBySession("s")),
			apply:   func(st *Status) error { return DelegateEnd(st, 1, t1, cancelled, "x") },
			wantErr: ErrPhase,
		},
		"DelegateEnd: refused on a finished task": {
			actor: ctl, from: status(succeeded, 1, heldBySession("s")),
			apply:   func(st *Status) error { return DelegateEnd(st, 1, t1, failed, "x") },
			wantErr: ErrFinished,
		},
		"SessionFinish: the session's answer succeeds the task": {
			actor: api, from: status(running, 1, heldBySession("s")),
			apply:     func(st *Status) error { return SessionFinish(st, 1, t1, "s", answer) },
			wantPhase: succeeded, wantHolder: agentlanev1alpha1.HolderDelegate,
			check: func(t *testing.T, st *Status) {
				if len(st.Attempts) != 1 || st.Attempts[0].Outcome != agentlanev1alpha1.AttemptSucceeded {
					t.Errorf("attempts %+v", st.Attempts)
				}
				wantCondition(t, st, agentlanev1alpha1.ExternalTaskFinishedCondition, metav1.ConditionTrue, string(succeeded))
			},
		},
		"SessionFinish: an error fails the task": {
			actor: api, from: status(running, 1, heldBySession("s")),
			apply: func(st *Status) error {
				return SessionFinish(st, 1, t1, "s", agentlanev1alpha1.TaskResult{Error: "no"})
			},
			wantPhase: failed, wantHolder: agentlanev1alpha1.HolderDelegate,
		},
		"SessionFinish: refused for another session": {
			actor: api, from: status(running, 1, heldBySession("s")),
			apply:   func(st *Status) error { return SessionFinish(st, 1, t1, "other", answer) },
			wantErr: ErrNotHolder,
		},
		"SessionFinish: a later run changes nothing": {
			actor: api, from: status(succeeded, 1, heldBySession("s")),
			apply:   func(st *Status) error { return SessionFinish(st, 1, t1, "s", answer) },
			wantErr: ErrFinished,
		},
		"Deliver: records where the result went": {
			actor: ctl, from: status(failed, 1),
			apply: func(st *Status) error {
				return Deliver(st, 1, t1, metav1.ConditionFalse, agentlanev1alpha1.ExternalTaskQueueGoneReason, "gone")
			},
			wantPhase: failed,
			check: func(t *testing.T, st *Status) {
				wantCondition(t, st, agentlanev1alpha1.ExternalTaskDeliveredCondition, metav1.ConditionFalse, agentlanev1alpha1.ExternalTaskQueueGoneReason)
			},
		},
		"Deliver: refused before the task finished": {
			actor: ctl, from: status(running, 1),
			apply:   func(st *Status) error { return Deliver(st, 1, t1, metav1.ConditionTrue, "Inbox", "x") },
			wantErr: ErrPhase,
		},
	})
}

func TestWorkerTransitions(t *testing.T) {
	const worker, jobPod = "pool worker", "Job's pod"
	wf := workerproto.WorkerFence("w1", 1)
	jf := workerproto.JobFence("t-1", 1)
	ok := agentlanev1alpha1.TaskResult{Success: true}
	runTransitions(t, map[string]transitionCase{
		"Claim: Dispatched to Running": {
			actor: worker, from: status(dispatched, 1, heldByWorker("w1"), inProgress(agentlanev1alpha1.ExternalTaskAwaitingWorkerReason)),
			apply:     func(st *Status) error { return Claim(st, 1, wf, t1, nil) },
			wantPhase: running, wantHolder: agentlanev1alpha1.HolderWorkers,
			check: func(t *testing.T, st *Status) {
				wantCondition(t, st, agentlanev1alpha1.ExternalTaskClaimedCondition, metav1.ConditionTrue, agentlanev1alpha1.ExternalTaskWorkerClaimedReason)
			},
		},
		"Claim: a Job's pod names itself": {
			actor: jobPod, from: status(dispatched, 1, heldByJob("t-1")),
			apply:     func(st *Status) error { return Claim(st, 1, jf, t1, &JobPod{Name: "t-1-abcde", Node: "n2"}) },
			wantPhase: running, wantHolder: agentlanev1alpha1.HolderJob,
			check: func(t *testing.T, st *Status) {
				if st.Worker != "t-1-abcde" || st.NodeName != "n2" {
					t.Errorf("worker %q node %q", st.Worker, st.NodeName)
				}
			},
		},
		"Claim: refused to another worker": {
			actor: worker, from: status(dispatched, 1, heldByWorker("w2")),
			apply:   func(st *Status) error { return Claim(st, 1, wf, t1, nil) },
			wantErr: ErrNotHolder,
		},
		"Claim: refused to another process of the worker": {
			actor: worker, from: status(dispatched, 1, heldByWorker("w1"), func(st *Status) { st.WorkerIncarnation = "P2" }),
			apply:   func(st *Status) error { return Claim(st, 1, wf.WithIncarnation("P1"), t1, nil) },
			wantErr: ErrNotHolder,
		},
		"Claim: refused for an earlier attempt": {
			actor: worker, from: status(dispatched, 2, heldByWorker("w1")),
			apply:   func(st *Status) error { return Claim(st, 1, wf, t1, nil) },
			wantErr: ErrStaleAttempt,
		},
		"Claim: refused twice": {
			actor: worker, from: status(running, 1, heldByWorker("w1")),
			apply:   func(st *Status) error { return Claim(st, 1, wf, t1, nil) },
			wantErr: ErrPhase,
		},
		"Complete: a success is Succeeded": {
			actor: worker, from: status(running, 1, heldByWorker("w1"), startedAt(t0)),
			apply:     func(st *Status) error { return Complete(st, 1, wf, ok, t1) },
			wantPhase: succeeded, wantHolder: agentlanev1alpha1.HolderWorkers,
		},
		"Complete: a failure stays Running with its result": {
			actor: worker, from: status(running, 1, heldByWorker("w1"), startedAt(t0)),
			apply:     func(st *Status) error { return Complete(st, 1, wf, agentlanev1alpha1.TaskResult{Error: "exit 1"}, t1) },
			wantPhase: running, wantHolder: agentlanev1alpha1.HolderWorkers,
			check: func(t *testing.T, st *Status) {
				if st.Result == nil || st.Result.Error != "exit 1" || st.FinishedAt == nil {
					t.Errorf("result %+v finishedAt %v", st.Result, st.FinishedAt)
				}
			},
		},
		"Complete: refused on a task the manager finished": {
			actor: worker, from: status(timedOut, 1, heldByWorker("w1")),
			apply:   func(st *Status) error { return Complete(st, 1, wf, ok, t1) },
			wantErr: ErrFinished,
		},
		"Complete: refused before the claim": {
			actor: worker, from: status(dispatched, 1, heldByWorker("w1")),
			apply:   func(st *Status) error { return Complete(st, 1, wf, ok, t1) },
			wantErr: ErrPhase,
		},
		"StartAndComplete: a short run's success": {
			actor: worker, from: status(dispatched, 1, heldByWorker("w1")),
			apply:     func(st *Status) error { return StartAndComplete(st, 1, wf, ok, t1, t2) },
			wantPhase: succeeded, wantHolder: agentlanev1alpha1.HolderWorkers,
		},
		"StartAndComplete: refused after a claim": {
			actor: worker, from: status(running, 1, heldByWorker("w1")),
			apply:   func(st *Status) error { return StartAndComplete(st, 1, wf, ok, t1, t2) },
			wantErr: ErrPhase,
		},
		"HandBack: a claimed attempt loses its worker and start": {
			actor: worker, from: status(running, 1, heldByWorker("w1"), startedAt(t0)),
			apply:     func(st *Status) error { return HandBack(st, wf, running) },
			wantPhase: queued, wantHolder: agentlanev1alpha1.HolderWorkers,
			check: func(t *testing.T, st *Status) {
				if st.Worker != "" || st.StartedAt != nil {
					t.Errorf("worker %q startedAt %v, want neither", st.Worker, st.StartedAt)
				}
			},
		},
		"HandBack: refused from another phase than the one named": {
			actor: worker, from: status(running, 1, heldByWorker("w1")),
			apply:   func(st *Status) error { return HandBack(st, wf, dispatched) },
			wantErr: ErrPhase,
		},
		"HandBack: refused from Queued": {
			actor: worker, from: status(queued, 1, heldByWorker("w1")),
			apply:   func(st *Status) error { return HandBack(st, wf, queued) },
			wantErr: ErrPhase,
		},
	})
}

func TestHolderOf(t *testing.T) {
	delegated := func(task *agentlanev1alpha1.ExternalTask) {
		task.Spec.CommandType = "delegate"
		task.Labels = map[string]string{agentlanev1alpha1.DelegatedLabel: "true"}
	}
	cases := map[string]struct {
		task       func(*agentlanev1alpha1.ExternalTask)
		want       agentlanev1alpha1.HolderKind
		wantRecord bool
	}{
		"recorded": {task: func(tk *agentlanev1alpha1.ExternalTask) { tk.Status = *status(dispatched, 1, heldByJob("j")) }, want: agentlanev1alpha1.HolderJob},
		"inferred: a Job": {task: func(tk *agentlanev1alpha1.ExternalTask) {
			tk.Status = *status(running, 1, func(st *Status) { st.JobName, st.Worker = "j", "j-abcde" })
		}, want: agentlanev1alpha1.HolderJob, wantRecord: true},
		"inferred: a pool worker": {task: func(tk *agentlanev1alpha1.ExternalTask) {
			tk.Status = *status(dispatched, 1, func(st *Status) { st.Worker = "w" })
		}, want: agentlanev1alpha1.HolderWorkers, wantRecord: true},
		"inferred: handlers":    {task: func(tk *agentlanev1alpha1.ExternalTask) { tk.Status = *status(dispatched, 1) }, want: agentlanev1alpha1.HolderHandler, wantRecord: true},
		"a delegated task, new": {task: delegated, want: agentlanev1alpha1.HolderDelegate},
		"a delegated task, running": {task: func(tk *agentlanev1alpha1.ExternalTask) {
			delegated(tk)
			tk.Status = *status(running, 1, func(st *Status) { st.Worker = "s" })
		}, want: agentlanev1alpha1.HolderDelegate, wantRecord: true},
		"a label alone delegates not": {task: func(tk *agentlanev1alpha1.ExternalTask) {
			tk.Labels = map[string]string{agentlanev1alpha1.DelegatedLabel: "true"}
		}, want: ""},
		"a queued task has none": {task: func(tk *agentlanev1alpha1.ExternalTask) { tk.Status = *status(queued, 1, heldByWorker("w")) }, want: ""},
		"a finished task keeps what it recorded": {task: func(tk *agentlanev1alpha1.ExternalTask) {
			tk.Status = *status(succeeded, 1, func(st *Status) { st.Worker = "w" })
		}, want: ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			task := &agentlanev1alpha1.ExternalTask{Spec: agentlanev1alpha1.ExternalTaskSpec{CommandType: "bash"}}
			tc.task(task)
			if got := HolderOf(task); got != tc.want {
				t.Errorf("HolderOf = %q, want %q", got, tc.want)
			}
			before := task.Status.Holder
			if got := RecordHolder(task); got != tc.wantRecord {
				t.Errorf("RecordHolder = %v, want %v", got, tc.wantRecord)
			}
			if tc.wantRecord && task.Status.Holder != tc.want {
				t.Errorf("recorded %q, want %q", task.Status.Holder, tc.want)
			}
			if !tc.wantRecord && task.Status.Holder != before {
				t.Errorf("holder changed from %q to %q", before, task.Status.Holder)
			}
		})
	}
}
