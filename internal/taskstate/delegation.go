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
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/truncate"
)

// The transitions of a delegated task (a Delegate lane's): the delegation
// controller queues and starts it and ends it when its worker session goes
// wrong; the Session API completes it when the worker session's first run
// finishes. A delegated task has one attempt.

// DelegateWait (delegation controller) shows that a task waits for a
// worker slot of its lane or of its producer (reason and msg say which).
// A task that already shows it waiting for that reason is left as it is.
func DelegateWait(st *Status, generation int64, now metav1.Time, lane, reason, msg string) error {
	if err := notFinished("DelegateWait", st); err != nil {
		return err
	}
	if st.Phase == agentlanev1alpha1.ExternalTaskRunning {
		return refuse("DelegateWait", st, ErrPhase, "the task's worker session runs it")
	}
	if c := meta.FindStatusCondition(st.Conditions, agentlanev1alpha1.ExternalTaskClaimedCondition); st.Phase == agentlanev1alpha1.ExternalTaskQueued &&
		c != nil && c.Status == metav1.ConditionFalse && c.Reason == reason {
		return nil
	}
	st.Phase, st.Lane = agentlanev1alpha1.ExternalTaskQueued, agentlanev1alpha1.LaneName(lane)
	if st.QueuedAt == nil {
		st.QueuedAt = &now
	}
	SetCondition(st, generation, now, agentlanev1alpha1.ExternalTaskClaimedCondition, metav1.ConditionFalse, reason, msg)
	SetCondition(st, generation, now, agentlanev1alpha1.ExternalTaskFinishedCondition, metav1.ConditionFalse,
		agentlanev1alpha1.ExternalTaskInProgressReason, "the task has not finished")
	return nil
}

// DelegateStart (delegation controller) records that worker session runs
// the task: Running, attempt 1, held by a Delegate; its first turn is not
// posted yet.
func DelegateStart(st *Status, generation int64, now metav1.Time, lane, session string) error {
	return DelegateStartAttempt(st, generation, now, lane, session, 1)
}

// DelegateStartAttempt (delegation controller) records that worker session
// runs attempt n of the task, which its lane's scheduler granted: Running,
// held by a Delegate; its first turn is not posted yet. What belonged to an
// earlier attempt is cleared; an attempt older than the task's current one
// is refused.
func DelegateStartAttempt(st *Status, generation int64, now metav1.Time, lane, session string, n int32) error {
	if err := notFinished("DelegateStart", st); err != nil {
		return err
	}
	switch {
	case st.Phase == agentlanev1alpha1.ExternalTaskRunning:
		return refuse("DelegateStart", st, ErrPhase, "the task already runs")
	case n < 1 || n < st.Attempt:
		return refuse("DelegateStart", st, ErrStaleAttempt, fmt.Sprintf("attempt %d, the task is at attempt %d", n, st.Attempt))
	}
	if st.Attempt > 0 && st.Attempt != n && !Recorded(st, st.Attempt) {
		return refuse("DelegateStart", st, ErrStaleAttempt, fmt.Sprintf("attempt %d has not been recorded", st.Attempt))
	}
	ClearAttempt(st)
	st.Phase, st.Lane, st.Attempt = agentlanev1alpha1.ExternalTaskRunning, agentlanev1alpha1.LaneName(lane), n
	st.Holder, st.Worker = agentlanev1alpha1.HolderDelegate, session
	if st.QueuedAt == nil {
		st.QueuedAt = &now
	}
	st.DispatchedAt, st.StartedAt = &now, &now
	SetCondition(st, generation, now, agentlanev1alpha1.ExternalTaskClaimedCondition, metav1.ConditionFalse,
		agentlanev1alpha1.ExternalTaskFirstTurnPendingReason,
		fmt.Sprintf("worker session %s created; its first turn is not posted yet", session))
	SetCondition(st, generation, now, agentlanev1alpha1.ExternalTaskFinishedCondition, metav1.ConditionFalse,
		agentlanev1alpha1.ExternalTaskInProgressReason, "the task has not finished")
	return nil
}

// DelegateRuntime (delegation controller) records the runtime pod of the
// worker session that runs the task's current attempt
// (status.workerIncarnation): the attempt is lost if that pod stops
// running. An empty pod forgets it while the session moves to another pod
// (passivation), whose pod is recorded next.
func DelegateRuntime(st *Status, session, pod string) error {
	if err := runningIn("DelegateRuntime", st, session); err != nil {
		return err
	}
	st.WorkerIncarnation = pod
	return nil
}

// DelegateRetry (delegation controller) records the end of the task's
// current attempt, rec (its outcome and error), which the lane's scheduler
// closed and will retry, and shows the task waiting in lane again: Queued,
// Claimed=False with reason and msg. The attempt's worker session no
// longer holds the task, so its finished run cannot complete it.
func DelegateRetry(st *Status, generation int64, now metav1.Time, lane string, rec agentlanev1alpha1.TaskAttempt, reason, msg string) error {
	if _, err := EndAttempt(st, now, rec); err != nil {
		return err
	}
	ClearAttempt(st)
	st.Phase, st.Lane = agentlanev1alpha1.ExternalTaskQueued, agentlanev1alpha1.LaneName(lane)
	SetCondition(st, generation, now, agentlanev1alpha1.ExternalTaskClaimedCondition, metav1.ConditionFalse, reason, msg)
	SetCondition(st, generation, now, agentlanev1alpha1.ExternalTaskFinishedCondition, metav1.ConditionFalse,
		agentlanev1alpha1.ExternalTaskInProgressReason, "the task has not finished")
	return nil
}

// runningIn refuses a transition unless the task runs in worker session
// session.
func runningIn(transition string, st *Status, session string) error {
	switch {
	case st.Phase.IsTerminal():
		return refuse(transition, st, ErrFinished)
	case st.Phase != agentlanev1alpha1.ExternalTaskRunning:
		return refuse(transition, st, ErrPhase)
	case st.Worker != session:
		return refuse(transition, st, ErrNotHolder, fmt.Sprintf("worker session %s, not %s", st.Worker, session))
	}
	return nil
}

// FirstTurnPosted (delegation controller) records that the worker session
// has the task's payload as its first turn (Claimed=True).
func FirstTurnPosted(st *Status, generation int64, now metav1.Time, session string) error {
	if err := runningIn("FirstTurnPosted", st, session); err != nil {
		return err
	}
	SetCondition(st, generation, now, agentlanev1alpha1.ExternalTaskClaimedCondition, metav1.ConditionTrue,
		agentlanev1alpha1.ExternalTaskWorkerSessionReason, fmt.Sprintf("worker session %s has the task as its first turn", session))
	return nil
}

// DelegateEnd (delegation controller) ends a task Failed or TimedOut with
// reason, recording the attempt of the worker session that held it.
func DelegateEnd(st *Status, generation int64, now metav1.Time, phase agentlanev1alpha1.ExternalTaskPhase, reason string) error {
	if phase != agentlanev1alpha1.ExternalTaskFailed && phase != agentlanev1alpha1.ExternalTaskTimedOut {
		return refuse("DelegateEnd", st, ErrPhase, fmt.Sprintf("a delegated task is ended Failed or TimedOut, not %s", phase))
	}
	return DelegateEndAs(st, generation, now, phase, reason, agentlanev1alpha1.AttemptFailed)
}

// DelegateEndAs (delegation controller) ends a task in phase (any final
// phase but Succeeded, which only the worker's finished run gives) with
// reason, as its lane's scheduler ended it. The current attempt, when a
// worker session held it and it has no record yet, is recorded with
// outcome.
func DelegateEndAs(st *Status, generation int64, now metav1.Time, phase agentlanev1alpha1.ExternalTaskPhase, reason string, outcome agentlanev1alpha1.AttemptOutcome) error {
	if err := notFinished("DelegateEnd", st); err != nil {
		return err
	}
	if !phase.IsTerminal() || phase == agentlanev1alpha1.ExternalTaskSucceeded {
		return refuse("DelegateEnd", st, ErrPhase, fmt.Sprintf("a delegated task is ended Failed, TimedOut, DeadLettered or Cancelled, not %s", phase))
	}
	st.Phase, st.FinishedAt = phase, &now
	st.Result = &agentlanev1alpha1.TaskResult{Error: reason}
	if st.Worker != "" && !Recorded(st, max(st.Attempt, 1)) {
		st.Attempts = append(st.Attempts, agentlanev1alpha1.TaskAttempt{Attempt: max(st.Attempt, 1), Worker: st.Worker,
			StartedAt: st.StartedAt, FinishedAt: &now, Outcome: outcome, Error: truncate.Runes(reason, MaxAttemptError, "")})
		if extra := len(st.Attempts) - MaxAttemptRecords; extra > 0 {
			st.Attempts = slices.Delete(st.Attempts, 0, extra)
		}
	}
	SetCondition(st, generation, now, agentlanev1alpha1.ExternalTaskClaimedCondition, metav1.ConditionFalse, string(phase), reason)
	SetCondition(st, generation, now, agentlanev1alpha1.ExternalTaskFinishedCondition, metav1.ConditionTrue, string(phase), reason)
	return nil
}

// SessionFinish (Session API) makes the outcome of worker session's
// finished run, res, the task's final result: Succeeded or Failed. Only a
// task that runs in that session takes it.
func SessionFinish(st *Status, generation int64, now metav1.Time, session string, res agentlanev1alpha1.TaskResult) error {
	if err := runningIn("SessionFinish", st, session); err != nil {
		return err
	}
	phase, outcome := agentlanev1alpha1.ExternalTaskSucceeded, agentlanev1alpha1.AttemptSucceeded
	if !res.Success {
		phase, outcome = agentlanev1alpha1.ExternalTaskFailed, agentlanev1alpha1.AttemptFailed
	}
	st.Phase, st.Result, st.FinishedAt = phase, &res, &now
	st.Attempts = append(st.Attempts, agentlanev1alpha1.TaskAttempt{Attempt: max(st.Attempt, 1), Worker: st.Worker,
		StartedAt: st.StartedAt, FinishedAt: &now, Outcome: outcome, Error: res.Error})
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: agentlanev1alpha1.ExternalTaskFinishedCondition,
		Status: metav1.ConditionTrue, Reason: string(phase), ObservedGeneration: generation, LastTransitionTime: now,
		Message: fmt.Sprintf("worker session %s finished the task", st.Worker)})
	return nil
}

// Deliver (delegation controller) records what became of a finished
// delegated task's result (the Delivered condition): posted to the
// producer's inbox, or why not.
func Deliver(st *Status, generation int64, now metav1.Time, status metav1.ConditionStatus, reason, msg string) error {
	if !st.Phase.IsTerminal() {
		return refuse("Deliver", st, ErrPhase, "the task has not finished")
	}
	SetCondition(st, generation, now, agentlanev1alpha1.ExternalTaskDeliveredCondition, status, reason, msg)
	return nil
}
