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
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/scheduling"
	"github.com/agentlane/agentlane/internal/taskstate"
)

// held tells whether a worker, Job or handler holds the task's current
// attempt.
func held(st *agentlanev1alpha1.ExternalTaskStatus) bool {
	return st.Attempt > 0 && !taskstate.Recorded(st, st.Attempt) &&
		(st.Phase == agentlanev1alpha1.ExternalTaskDispatched || st.Phase == agentlanev1alpha1.ExternalTaskRunning)
}

// reachedRunner tells whether the task's current attempt was ever handed to
// a worker or a Job. One that was not never started: unless the manager
// closed it itself (its Job could not be created), it is no attempt and
// gets no record (a task cancelled while it waited for a worker).
func reachedRunner(st *agentlanev1alpha1.ExternalTaskStatus) bool {
	return st.DispatchedAt != nil || st.Worker != "" || st.JobName != ""
}

// priorAttempts is how many attempts of a task that is not held have been
// made: status.attempt once that attempt has its record; one less when it
// has none, because then it was handed back or never reached a worker.
func priorAttempts(st *agentlanev1alpha1.ExternalTaskStatus) int {
	if st.Attempt <= 0 {
		return 0
	}
	if taskstate.Recorded(st, st.Attempt) {
		return int(st.Attempt)
	}
	return int(st.Attempt) - 1
}

// converge writes what the scheduler decided about the task: a granted
// attempt is dispatched, a result is fed to the scheduler, an ended attempt
// is recorded, a finished command gets its final phase.
func (r *ExternalTaskReconciler) converge(ctx context.Context, b binding, s *taskScope) (ctrl.Result, error) {
	task := s.Task
	s.AfterWrite(func() { confirmRecordedTimeout(b, s) })
	// Feeding a result or a loss to the scheduler changes its state; look
	// again afterwards. Two reports are the most one pass can make.
	for range 3 {
		tt, ok := b.tasks.Get(task.Name)
		if !ok {
			return ctrl.Result{}, nil
		}
		o, final := tt.Ticket.Outcome()
		n := int32(o.Attempts)
		st := &task.Status
		switch {
		case final && o.State == lanequeue.StateCancelled && errors.Is(o.Err, lanequeue.ErrClosed) && r.Schedulers.Stopping():
			// The manager stops (SIGTERM, a lost Lease) and closed its
			// schedulers: the task goes on under the next leader.
			return ctrl.Result{}, nil

		case final:
			return ctrl.Result{}, r.finish(ctx, b, s, tt, o)

		case o.State == lanequeue.StateRunning && st.Attempt == n && held(st):
			// Attempt n is out with a worker or a Job.
			r.noteHeartbeat(ctx, b, task, n)
			end, requeue, err := r.checkHeld(ctx, task)
			if err != nil || end == nil {
				return ctrl.Result{RequeueAfter: requeue}, err
			}
			if end.Outcome == agentlanev1alpha1.AttemptWorkerLost {
				// The tasks that wait for a worker, unwritten while the
				// workers were busy, find out whether any is left.
				r.wakeAwaiting(task.Namespace, -1)
			}
			tp, taken := traceTask(task), time.Time{}
			if tp != "" {
				taken = r.Clock.Now()
			}
			if err := closeAttempt(b, task, n, *end, st.Result); err != nil {
				return ctrl.Result{}, err
			}
			if tp != "" {
				traceResult(tp, task, n, end.Outcome, taken, r.Clock.Now())
			}

		case o.State == lanequeue.StateRunning:
			// Attempt n is granted and nobody has it: dispatch it.
			return r.dispatch(ctx, b, s, tt, o)

		default:
			// Waiting in the lane, or for a retry.
			return ctrl.Result{}, r.setQueued(task, tt, o)
		}
	}
	return ctrl.Result{RequeueAfter: retrySoon}, nil
}

// schedulerResult converts a task result for the scheduler.
func schedulerResult(res *agentlanev1alpha1.TaskResult) lanequeue.Result {
	if res == nil {
		return lanequeue.Result{}
	}
	out := lanequeue.Result{Success: res.Success, Error: res.Error}
	if res.Result != nil {
		out.Output = res.Result.Raw
	}
	if res.ExitCode != nil {
		out.ExitCode = int(*res.ExitCode)
	}
	return out
}

// lostBeforeStart tells whether the task's current attempt, whose worker
// was lost, had not been reported started: the worker never wrote Running
// nor a result (a short run writes both at once when it ends), so the
// command may never have run.
func lostBeforeStart(st *agentlanev1alpha1.ExternalTaskStatus, end scheduling.AttemptEnd) bool {
	return end.Outcome == agentlanev1alpha1.AttemptWorkerLost && st.Phase == agentlanev1alpha1.ExternalTaskDispatched &&
		st.StartedAt == nil && st.Result == nil
}

// notStartedRecords is how many recorded attempts of the task were lost
// before they started and did not count against its retries (the first
// lanequeue.MaxUncountedNotStarted of them), never more than prior, the
// attempts made: what a restarted scheduler must not count again.
func notStartedRecords(st *agentlanev1alpha1.ExternalTaskStatus, prior int) int {
	n := 0
	for _, a := range st.Attempts {
		if a.NotStarted && int(a.Attempt) <= prior {
			n++
		}
	}
	return min(n, lanequeue.MaxUncountedNotStarted, prior)
}

// closeAttempt reports to the scheduler that attempt n of the task ended:
// with the worker's result res when there is one, else as a failure, one
// that does not count against the retries (up to a bound) when the worker
// was lost before it started the attempt. It remembers how, for the
// attempt's record. A scheduler that has already closed the attempt (its
// timeout won) is not an error.
func closeAttempt(b binding, task *agentlanev1alpha1.ExternalTask, n int32, end scheduling.AttemptEnd, res *agentlanev1alpha1.TaskResult) error {
	if res == nil && lostBeforeStart(&task.Status, end) {
		end.NotStarted = true
	}
	b.tasks.MarkClosed(task.Name, n, end)
	var err error
	switch {
	case res != nil:
		err = b.queue.CompleteAttempt(task.Name, int(n), schedulerResult(res))
	case end.NotStarted:
		err = b.queue.FailAttempt(task.Name, int(n), fmt.Errorf("%s: %w", end.Msg, lanequeue.ErrNotStarted))
	default:
		err = b.queue.FailAttempt(task.Name, int(n), errors.New(end.Msg))
	}
	if err != nil && !errors.Is(err, lanequeue.ErrStaleAttempt) && !errors.Is(err, lanequeue.ErrNotFound) {
		return fmt.Errorf("report attempt %d to the scheduler: %w", n, err)
	}
	return nil
}

// setQueued writes that the task waits in its lane, recording the attempt
// that just ended if the status still shows it.
func (r *ExternalTaskReconciler) setQueued(task *agentlanev1alpha1.ExternalTask, tt scheduling.TrackedTask, o lanequeue.Outcome) error {
	st := &task.Status
	now := metav1.NewTime(r.Clock.Now())
	n := int32(o.Attempts)
	r.awaiting.remove(client.ObjectKeyFromObject(task))
	reason, msg := agentlanev1alpha1.ExternalTaskAwaitingWorkerReason, fmt.Sprintf("waiting for a slot in lane %s", tt.Ticket.Lane())
	switch {
	case st.Attempt > 0 && st.Attempt == n && !taskstate.Recorded(st, n):
		rec, err := r.recordEnded(st, tt, o, now)
		if err != nil {
			return err
		}
		taskstate.ClearAttempt(st)
		reason = agentlanev1alpha1.ExternalTaskRetryBackoffReason
		msg = fmt.Sprintf("attempt %d ended %s; retrying", n, rec.Outcome)
		if rec.Outcome == agentlanev1alpha1.AttemptWorkerLost {
			reason = agentlanev1alpha1.ExternalTaskWorkerLostReason
		}
		// A failed attempt is a Warning even though the task goes on: an
		// operator filtering on Warnings sees flaky workers and commands
		// before their retries run out.
		if r.Recorder != nil {
			r.Recorder.Eventf(task, nil, corev1.EventTypeWarning, "Retrying", "Retry",
				"attempt %d ended %s: %s", n, rec.Outcome, rec.Error)
		}
	case st.Phase == agentlanev1alpha1.ExternalTaskQueued:
		// Already shows it, or shows why it waits.
		return nil
	}
	return taskstate.Queue(st, task.Generation, now, tt.Ticket.Lane(), reason, msg)
}

// finish sets the final phase the scheduler decided, recording the last
// attempt if the status still shows it; once that is written the task is
// forgotten.
func (r *ExternalTaskReconciler) finish(ctx context.Context, b binding, s *taskScope, tt scheduling.TrackedTask, o lanequeue.Outcome) error {
	task := s.Task
	st := &task.Status
	now := metav1.NewTime(r.Clock.Now())
	n := int32(o.Attempts)
	phase := taskstate.FinalPhase(o.State)
	msg := ""
	if o.Err != nil {
		msg = o.Err.Error()
	}
	if phase != agentlanev1alpha1.ExternalTaskSucceeded && st.Attempt > 0 && st.Attempt == n && !taskstate.Recorded(st, n) && (reachedRunner(st) || tt.Closed == n) {
		rec, err := r.recordEnded(st, tt, o, now)
		if err != nil {
			return err
		}
		if msg == "" {
			msg = rec.Error
		}
	}
	if phase == agentlanev1alpha1.ExternalTaskSucceeded && msg == "" {
		msg = fmt.Sprintf("attempt %d succeeded", n)
	}
	if err := taskstate.Close(st, task.Generation, now, phase, msg); err != nil {
		return err
	}
	s.AfterWrite(func() {
		b.tasks.Forget(task.Name)
		if r.workers.release(client.ObjectKeyFromObject(task)) {
			r.wakeAwaiting(task.Namespace, 1)
		}
		if phase != agentlanev1alpha1.ExternalTaskSucceeded && phase != agentlanev1alpha1.ExternalTaskCancelled && r.Recorder != nil {
			r.Recorder.Eventf(task, nil, corev1.EventTypeWarning, string(phase), "Finish", "task ended %s after %d attempts: %s", phase, n, msg)
		}
		logf.FromContext(ctx).V(1).Info("Task finished", "phase", phase, "attempts", n)
	})
	return nil
}

// finishUnscheduled ends a task the scheduler never took.
func (r *ExternalTaskReconciler) finishUnscheduled(s *taskScope, phase agentlanev1alpha1.ExternalTaskPhase, msg string) error {
	task := s.Task
	if err := taskstate.Close(&task.Status, task.Generation, metav1.NewTime(r.Clock.Now()), phase, msg); err != nil {
		return err
	}
	if r.Recorder != nil {
		r.Recorder.Eventf(task, nil, corev1.EventTypeWarning, string(phase), "Schedule", "%s", msg)
	}
	return nil
}

// recordEnded appends the record of the task's current attempt, which the
// scheduler has closed. The outcome is the one the manager reported, else
// the result the worker wrote, else cancellation or the scheduler's timeout.
func (r *ExternalTaskReconciler) recordEnded(st *agentlanev1alpha1.ExternalTaskStatus, tt scheduling.TrackedTask, o lanequeue.Outcome, now metav1.Time) (agentlanev1alpha1.TaskAttempt, error) {
	var rec agentlanev1alpha1.TaskAttempt
	switch {
	case tt.Closed == st.Attempt:
		rec.Outcome, rec.Error = tt.ClosedAs.Outcome, tt.ClosedAs.Msg
		rec.NotStarted = tt.ClosedAs.NotStarted
	case st.Result != nil && st.Result.Success:
		rec.Outcome = agentlanev1alpha1.AttemptSucceeded
	case st.Result != nil:
		rec.Outcome, rec.Error = agentlanev1alpha1.AttemptFailed, st.Result.Error
	case o.State == lanequeue.StateCancelled:
		rec.Outcome = agentlanev1alpha1.AttemptCancelled
		if o.Err != nil {
			rec.Error = o.Err.Error()
		}
	default:
		rec.Outcome = agentlanev1alpha1.AttemptTimedOut
		rec.Error = fmt.Sprintf("attempt %d did not finish within its timeout", st.Attempt)
		if err := tt.Ticket.TimeoutError(int(st.Attempt)); errors.Is(err, lanequeue.ErrHeartbeatTimeout) {
			rec.Error = fmt.Sprintf("attempt %d %s", st.Attempt, heartbeatDetail(err))
		}
	}
	return taskstate.EndAttempt(st, now, rec)
}

// setWaiting shows why a task cannot be scheduled yet.
func (r *ExternalTaskReconciler) setWaiting(task *agentlanev1alpha1.ExternalTask, why string) error {
	return taskstate.Wait(&task.Status, task.Generation, metav1.NewTime(r.Clock.Now()), why)
}
