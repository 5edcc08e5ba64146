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
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/delegation"
	"github.com/agentlane/agentlane/internal/identity"
	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/scheduling"
	"github.com/agentlane/agentlane/internal/taskstate"
)

// A delegated task is a command of its Delegate lane in the lane engine,
// as an External command is: the controller admits it to its queue's
// scheduler (External, AwaitStart, Durable, its producer as session key),
// the scheduler grants its attempts within the lane's and the queue's caps
// and rate limits, in the lane's order, and the controller runs each
// granted attempt in a worker session of its own and reports when it
// started (MarkStarted: its timeout runs from then). The scheduler times
// the attempt (the delegation's timeout, bounded by the lane's), retries
// it by the lane's retry policy and dead-letters it like any other command;
// the lane's counters, status, stats and metrics count it. The controller
// writes what the scheduler decided into the task's status, and ends an
// attempt whose worker session was lost (WorkerLost) through the scheduler.

// engineRecheck is how soon a lane whose scheduler has not started, or a
// granted attempt waiting for its producer, is looked at again.
const engineRecheck = 5 * time.Second

// delegatedEnd is how the controller ends a delegated attempt.
type delegatedEnd struct {
	outcome agentlanev1alpha1.AttemptOutcome
	msg     string
	// permanent: retrying cannot help (the worker session was deleted, or
	// the manager restarted and its run is gone): the task ends Failed.
	permanent bool
}

// engineLane is the scheduler of a Delegate lane's queue, as one pass uses it.
type engineLane struct {
	q     *lanequeue.Queue
	tasks *scheduling.TaskSet
}

// admittedTasks remembers which delegated tasks the controller saw tracked
// by each lane's scheduler, so that a task deleted while it was live is
// taken out of its scheduler.
type admittedTasks struct {
	mu    sync.Mutex
	lanes map[types.NamespacedName]map[string]bool
}

// sync records the live tasks of lane seen tracked in this pass and
// returns those recorded before that the pass no longer lists.
func (a *admittedTasks) sync(lane types.NamespacedName, live map[string]bool) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var gone []string
	for name := range a.lanes[lane] {
		if !live[name] {
			gone = append(gone, name)
		}
	}
	if a.lanes == nil {
		a.lanes = map[types.NamespacedName]map[string]bool{}
	}
	if len(live) == 0 {
		delete(a.lanes, lane)
	} else {
		a.lanes[lane] = live
	}
	return gone
}

// engine returns the scheduler of the lane's queue, if it runs.
func (r *DelegationReconciler) engine(dl *delegateLane) (engineLane, bool) {
	q, ts, ok := r.Schedulers.TasksOf(types.NamespacedName{Namespace: dl.namespace, Name: dl.queue})
	return engineLane{q: q, tasks: ts}, ok
}

// admit submits the task to its lane's scheduler: a task whose worker
// session runs its current attempt is adopted as running since the attempt
// started (it takes its slots at once), any other is queued in its lane
// with the attempts it has made counted against its retries.
func (r *DelegationReconciler) admit(dl *delegateLane, e engineLane, t *agentlanev1alpha1.ExternalTask) error {
	st := &t.Status
	timeout, source := r.deadlineOf(dl, t)
	cmd := lanequeue.Command{
		ID:            t.Name,
		SessionKey:    producerOf(t),
		Type:          delegation.CommandType,
		Lane:          dl.name,
		External:      true,
		Durable:       true,
		AwaitStart:    true,
		Timeout:       timeout,
		TimeoutSource: source,
		Labels:        identity.Scheduler(t.Spec.Identity),
	}
	if t.Spec.Priority != nil {
		cmd.Priority = ptrInt(int(*t.Spec.Priority))
	}
	if t.Spec.Deadline != nil {
		cmd.Deadline = t.Spec.Deadline.Time
	}
	var tk *lanequeue.Ticket
	var err error
	if delegatedRunning(st) {
		started := r.Clock.Now()
		if st.StartedAt != nil {
			started = st.StartedAt.Time
		}
		tk, err = e.q.Adopt(cmd, int(st.Attempt), started)
	} else {
		cmd.PriorAttempts = priorAttempts(st)
		tk, err = e.q.Submit(cmd)
	}
	if err != nil {
		return err
	}
	e.tasks.Put(t.Name, tk, false)
	return nil
}

// delegatedRunning tells whether a worker session holds the task's current
// attempt.
func delegatedRunning(st *agentlanev1alpha1.ExternalTaskStatus) bool {
	return st.Phase == agentlanev1alpha1.ExternalTaskRunning && st.Attempt > 0 && !taskstate.Recorded(st, st.Attempt)
}

// converge carries a tracked task as its scheduler decided: a granted
// attempt is started in a worker session, a running one is watched (and
// ended through the scheduler when its worker is lost), an attempt the
// scheduler closed (timed out, or ended by the controller) is recorded, and
// a command the scheduler ended gets its final phase. It returns when to
// look again.
func (r *DelegationReconciler) converge(ctx context.Context, dl *delegateLane, e engineLane, s *taskstate.Scope,
	worker *agentlanev1alpha1.AgentSession, workers map[string]*agentlanev1alpha1.AgentSession) time.Duration {
	t := s.Task
	st := &t.Status
	// Ending an attempt changes the scheduler's state; look again
	// afterwards.
	for range 3 {
		tt, ok := e.tasks.Get(t.Name)
		if !ok {
			return 0
		}
		o, final := tt.Ticket.Outcome()
		n := int32(o.Attempts)
		switch {
		case final && o.State == lanequeue.StateCancelled && errors.Is(o.Err, lanequeue.ErrClosed) && r.Schedulers.Stopping():
			// The manager stops: the task goes on under the next one.
			return 0
		case final:
			r.finishEngine(ctx, dl, e, s, tt, o, workers)
			return 0
		case o.State == lanequeue.StateRunning && st.Attempt == n && delegatedRunning(st):
			end, after := r.watchRunning(ctx, s, worker)
			if end == nil {
				return after
			}
			r.closeAttempt(ctx, e, t, n, *end)
		case o.State == lanequeue.StateRunning:
			after, closed := r.startGranted(ctx, dl, e, s, n)
			if !closed {
				return after
			}
		default:
			return r.waitInLane(ctx, dl, e, s, tt, o, workers)
		}
	}
	return retrySoon
}

// closeAttempt ends attempt n of the task in its scheduler, which retries
// it by the lane's policy (or ends it Failed when end is permanent), and
// remembers how it ended for the attempt's record. A scheduler that closed
// the attempt already (its timeout won) is not an error.
func (r *DelegationReconciler) closeAttempt(ctx context.Context, e engineLane, t *agentlanev1alpha1.ExternalTask, n int32, end delegatedEnd) {
	e.tasks.MarkClosed(t.Name, n, scheduling.AttemptEnd{Outcome: end.outcome, Msg: end.msg})
	err := errors.New(end.msg)
	if end.permanent {
		err = lanequeue.Permanent(err)
	}
	if err := e.q.FailAttempt(t.Name, int(n), err); err != nil &&
		!errors.Is(err, lanequeue.ErrStaleAttempt) && !errors.Is(err, lanequeue.ErrNotFound) {
		logf.FromContext(ctx).Error(err, "End the delegated attempt in its scheduler", "externalTask", t.Name, "attempt", n)
	}
}

// startGranted starts attempt n, which the scheduler granted, in a new
// worker session, unless the producer has as many running workers as it
// may: then the attempt keeps its slot and waits, its timeout not running.
// closed tells that the attempt was ended instead (it can never run).
func (r *DelegationReconciler) startGranted(ctx context.Context, dl *delegateLane, e engineLane, s *taskstate.Scope, n int32) (after time.Duration, closed bool) {
	t := s.Task
	if dl.problem != "" {
		r.closeAttempt(ctx, e, t, n, delegatedEnd{outcome: agentlanev1alpha1.AttemptFailed, msg: dl.problem, permanent: true})
		return 0, true
	}
	if c, err := r.runningChildren(ctx, t); err != nil {
		logf.FromContext(ctx).Error(err, "Count the producer's running workers", "externalTask", t.Name)
		return retrySoon, false
	} else if c >= r.Bounds.WithDefaults().MaxChildren {
		r.markWaiting(ctx, dl, s, agentlanev1alpha1.ExternalTaskAwaitingProducerSlotReason,
			fmt.Sprintf("producer session %s has %d running workers, the most one producer may have", producerOf(t), c))
		return engineRecheck, false
	}
	started, problem := r.start(ctx, dl, s, n)
	switch {
	case problem != "":
		r.closeAttempt(ctx, e, t, n, delegatedEnd{outcome: agentlanev1alpha1.AttemptFailed, msg: problem, permanent: true})
		return 0, true
	case !started:
		return retrySoon, false
	}
	if err := e.q.MarkStarted(t.Name, int(n), t.Status.StartedAt.Time); err != nil {
		logf.FromContext(ctx).V(1).Info("Attempt not marked started", "externalTask", t.Name, "attempt", n, "reason", err.Error())
	}
	return min(time.Second, max(r.remaining(dl, t), time.Millisecond)), false
}

// remaining is how long the task's running attempt has left before its
// timeout, as the status shows it.
func (r *DelegationReconciler) remaining(dl *delegateLane, t *agentlanev1alpha1.ExternalTask) time.Duration {
	if t.Status.StartedAt == nil {
		return 0
	}
	d, _ := r.deadlineOf(dl, t)
	return d - r.Clock.Since(t.Status.StartedAt.Time)
}

// waitInLane shows that the task waits in its lane, for a slot or for the
// delay before a retry. An attempt the scheduler closed while a worker
// session held it is recorded first (its outcome as the controller ended
// it, else TimedOut), and its worker session is deleted once that is
// written.
func (r *DelegationReconciler) waitInLane(ctx context.Context, dl *delegateLane, e engineLane, s *taskstate.Scope,
	tt scheduling.TrackedTask, o lanequeue.Outcome, workers map[string]*agentlanev1alpha1.AgentSession) time.Duration {
	t := s.Task
	st := &t.Status
	n := int32(o.Attempts)
	if st.Attempt > 0 && st.Attempt == n && delegatedRunning(st) {
		rec, timedOut := r.endedAttempt(dl, t, tt)
		reason := agentlanev1alpha1.ExternalTaskRetryBackoffReason
		if rec.Outcome == agentlanev1alpha1.AttemptWorkerLost {
			reason = agentlanev1alpha1.ExternalTaskWorkerLostReason
		}
		msg := fmt.Sprintf("attempt %d ended %s; retrying", n, rec.Outcome)
		worker := workers[st.Worker]
		if err := taskstate.DelegateRetry(st, t.Generation, metav1.NewTime(r.Clock.Now()), dl.name, rec, reason, msg); err != nil {
			logf.FromContext(ctx).Error(err, "Record the delegated attempt", "externalTask", t.Name)
			return retrySoon
		}
		s.AfterWrite(func() {
			if timedOut {
				e.q.ConfirmTimeout(t.Name, int(n))
			}
			r.deleteWorker(ctx, worker, "Delete the worker session of an ended attempt")
			if r.Recorder != nil {
				r.Recorder.Eventf(t, nil, corev1.EventTypeWarning, "Retrying", "Retry", "attempt %d ended %s: %s", n, rec.Outcome, rec.Error)
			}
			logf.FromContext(ctx).Info("Delegated attempt ended; the task waits for a retry", "externalTask", t.Name,
				"attempt", n, "outcome", rec.Outcome)
		})
		return 0
	}
	if o.State == lanequeue.StateRetrying && st.Phase == agentlanev1alpha1.ExternalTaskQueued {
		return 0 // shows why it waits already
	}
	r.markWaiting(ctx, dl, s, agentlanev1alpha1.ExternalTaskAwaitingWorkerSlotReason,
		fmt.Sprintf("waiting for one of the %d worker slots of lane %s", laneCap(dl), dl.name))
	return 0
}

// laneCap is the lane's maxConcurrency, 0 when the lane is gone.
func laneCap(dl *delegateLane) int32 {
	if dl.spec == nil {
		return 0
	}
	return dl.spec.MaxConcurrency
}

// endedAttempt is the record of the task's current attempt, which the
// scheduler closed: as the controller ended it, else timed out (the only
// way the scheduler closes a running External attempt by itself besides
// cancellation). timedOut tells that the scheduler's timeout closed it.
func (r *DelegationReconciler) endedAttempt(dl *delegateLane, t *agentlanev1alpha1.ExternalTask, tt scheduling.TrackedTask) (rec agentlanev1alpha1.TaskAttempt, timedOut bool) {
	st := &t.Status
	if tt.Closed == st.Attempt {
		return agentlanev1alpha1.TaskAttempt{Outcome: tt.ClosedAs.Outcome, Error: tt.ClosedAs.Msg}, false
	}
	d, _ := r.deadlineOf(dl, t)
	return agentlanev1alpha1.TaskAttempt{Outcome: agentlanev1alpha1.AttemptTimedOut,
		Error: fmt.Sprintf("timed out: worker session %s did not finish within %s", st.Worker, d)}, true
}

// finishEngine writes the final phase the scheduler decided (Failed,
// TimedOut, DeadLettered or Cancelled; Succeeded comes from the worker's
// finished run, which the task's status records first), recording the
// attempt a worker session held; once that is written the task is
// forgotten and its worker session deleted. The producer gets the result
// as any other (settle).
func (r *DelegationReconciler) finishEngine(ctx context.Context, dl *delegateLane, e engineLane, s *taskstate.Scope,
	tt scheduling.TrackedTask, o lanequeue.Outcome, workers map[string]*agentlanev1alpha1.AgentSession) {
	t := s.Task
	st := &t.Status
	n := int32(o.Attempts)
	phase := taskstate.FinalPhase(o.State)
	if phase == agentlanev1alpha1.ExternalTaskSucceeded {
		// Only a worker's finished run succeeds a delegation, and it is
		// written before the scheduler hears of it.
		e.tasks.Forget(t.Name)
		return
	}
	msg := ""
	if o.Err != nil {
		msg = o.Err.Error()
	}
	outcome, timedOut := agentlanev1alpha1.AttemptFailed, false
	if st.Attempt == n && delegatedRunning(st) {
		var rec agentlanev1alpha1.TaskAttempt
		if o.State == lanequeue.StateCancelled && tt.Closed != n {
			rec = agentlanev1alpha1.TaskAttempt{Outcome: agentlanev1alpha1.AttemptCancelled, Error: msg}
		} else {
			rec, timedOut = r.endedAttempt(dl, t, tt)
		}
		outcome = rec.Outcome
		if rec.Error != "" {
			msg = rec.Error
		}
	} else if tt.Closed == n && tt.ClosedAs.Msg != "" {
		msg = tt.ClosedAs.Msg
	}
	if msg == "" {
		msg = fmt.Sprintf("the task ended %s after %d attempts", phase, n)
	}
	worker := workers[st.Worker]
	if err := taskstate.DelegateEndAs(st, t.Generation, metav1.NewTime(r.Clock.Now()), phase, msg, outcome); err != nil {
		logf.FromContext(ctx).Error(err, "End the delegated task", "externalTask", t.Name)
		return
	}
	s.AfterWrite(func() {
		if timedOut {
			e.q.ConfirmTimeout(t.Name, int(n))
		}
		e.tasks.Forget(t.Name)
		r.deleteWorker(ctx, worker, "Delete the worker session of an ended task")
		logf.FromContext(ctx).Info("Delegated task ended", "externalTask", t.Name, "phase", phase, "attempts", n, "reason", msg)
		if r.Recorder != nil {
			r.Recorder.Eventf(t, nil, corev1.EventTypeWarning, "DelegationFailed", "Delegate", "%s", msg)
		}
	})
}

// settleEngine tells the task's scheduler that the task finished outside
// it (the worker's finished run, or the controller before the task was
// admitted): the command ends as the task's result says, counted once, and
// is forgotten.
func (r *DelegationReconciler) settleEngine(ctx context.Context, e engineLane, t *agentlanev1alpha1.ExternalTask) {
	tt, ok := e.tasks.Get(t.Name)
	if !ok {
		return
	}
	if _, final := tt.Ticket.Outcome(); !final {
		res := lanequeue.Result{Success: t.Status.Phase == agentlanev1alpha1.ExternalTaskSucceeded}
		if t.Status.Result != nil {
			res = schedulerResult(t.Status.Result)
			res.Success = res.Success && t.Status.Phase == agentlanev1alpha1.ExternalTaskSucceeded
		}
		if !res.Success && res.Error == "" {
			res.Error = string(t.Status.Phase)
		}
		if err := e.q.Settle(t.Name, res); err != nil && !errors.Is(err, lanequeue.ErrNotFound) {
			logf.FromContext(ctx).Error(err, "Settle the delegated command", "externalTask", t.Name)
			return
		}
	}
	e.tasks.Forget(t.Name)
}

// release takes a task that is being deleted, or is gone, out of its
// scheduler.
func (r *DelegationReconciler) release(e engineLane, name string) {
	if _, ok := e.tasks.Get(name); !ok {
		return
	}
	_ = e.q.Cancel(name)
	e.tasks.Forget(name)
}

// deleteWorker deletes a worker session whose attempt ended, so that its
// runtime stops; nil does nothing.
func (r *DelegationReconciler) deleteWorker(ctx context.Context, w *agentlanev1alpha1.AgentSession, what string) {
	if w == nil || !w.DeletionTimestamp.IsZero() {
		return
	}
	if err := r.Delete(ctx, w, client.Preconditions{UID: &w.UID}); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
		logf.FromContext(ctx).Error(err, what, "agentSession", w.Name)
	}
}

// deadlineOf is how long one attempt of the task may take, and the setting
// it comes from: the task's spec.timeout (set by POST /delegations),
// bounded by its lane's timeout, else its queue's defaultTimeout; else the
// lane's or the queue's; else Bounds.Timeout.
func (r *DelegationReconciler) deadlineOf(dl *delegateLane, t *agentlanev1alpha1.ExternalTask) (time.Duration, string) {
	var lane time.Duration
	source := ""
	switch {
	case dl.spec != nil && dl.spec.Timeout != nil && dl.spec.Timeout.Duration > 0:
		lane, source = dl.spec.Timeout.Duration, "lane "+dl.name
	case dl.lq != nil && dl.lq.Spec.DefaultTimeout != nil && dl.lq.Spec.DefaultTimeout.Duration > 0:
		lane, source = dl.lq.Spec.DefaultTimeout.Duration, "LaneQueue defaultTimeout"
	}
	if t.Spec.Timeout != nil && t.Spec.Timeout.Duration > 0 && (lane == 0 || t.Spec.Timeout.Duration < lane) {
		return t.Spec.Timeout.Duration, "delegation"
	}
	if lane > 0 {
		return lane, source
	}
	return r.Bounds.WithDefaults().Timeout, "delegation default"
}

// carry takes one live task of a lane whose scheduler runs through its
// pass: a task the scheduler does not track yet is checked (a new one that
// cannot be delegated fails at once) and admitted, then converged with
// what the scheduler decided. A lane that no longer delegates fails the
// tasks that wait in it.
func (r *DelegationReconciler) carry(ctx context.Context, dl *delegateLane, e engineLane, s *taskstate.Scope,
	workers map[string]*agentlanev1alpha1.AgentSession) time.Duration {
	t := s.Task
	if dl.problem != "" && !delegatedRunning(&t.Status) {
		r.fail(ctx, s, dl.problem)
		r.settleEngine(ctx, e, t)
		return retrySoon
	}
	if _, ok := e.tasks.Get(t.Name); !ok {
		if t.Status.Phase == "" {
			problem, err := r.precheck(ctx, dl, t)
			if err != nil {
				logf.FromContext(ctx).Error(err, "Check the new delegated task", "externalTask", t.Name)
				return retrySoon
			}
			if problem != "" {
				r.fail(ctx, s, problem)
				return retrySoon
			}
		}
		if err := r.admit(dl, e, t); err != nil {
			// The scheduler is closing, or does not have the lane yet (its
			// queue's spec changed a moment ago).
			logf.FromContext(ctx).V(1).Info("Delegated task not admitted yet", "externalTask", t.Name, "reason", err.Error())
			return engineRecheck
		}
	}
	return r.converge(ctx, dl, e, s, workers[t.Status.Worker], workers)
}
