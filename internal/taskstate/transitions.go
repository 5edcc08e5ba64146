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
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/truncate"
)

// Status is the status of an ExternalTask, the state the transitions change.
type Status = agentlanev1alpha1.ExternalTaskStatus

// Bounds of what the status keeps.
const (
	// MaxAttemptRecords is how many attempts status.attempts keeps (the
	// CRD's maxItems).
	MaxAttemptRecords = 16
	// MaxAttemptError is the longest error kept in an attempt record.
	MaxAttemptError = 4096
	// MaxConditionMessage is the longest message a condition may carry.
	MaxConditionMessage = 32768
)

// ErrIllegal is wrapped by every refused transition, together with one of
// the errors below that says why.
var ErrIllegal = errors.New("illegal transition")

// Why a transition is refused.
var (
	// ErrFinished: the task has reached a terminal phase, which never
	// changes.
	ErrFinished = errors.New("the task has finished")
	// ErrStaleAttempt: the transition names an attempt that is not the
	// task's current one.
	ErrStaleAttempt = errors.New("not the task's current attempt")
	// ErrHasResult: the attempt already has a result.
	ErrHasResult = errors.New("the attempt already has a result")
	// ErrNotHolder: the actor does not hold the attempt (another worker,
	// Job, kind of holder or worker process does).
	ErrNotHolder = errors.New("the attempt is held by someone else")
	// ErrPhase: the task is not in a phase the transition starts from, or
	// the transition cannot lead to the phase asked for.
	ErrPhase = errors.New("the transition does not apply to the task's phase")
)

// TransitionError is a refused transition.
type TransitionError struct {
	// Transition is the name of the refused transition, such as Claim.
	Transition string
	// From is the phase the task was in.
	From agentlanev1alpha1.ExternalTaskPhase
	// Err is why: ErrFinished, ErrStaleAttempt, ErrHasResult, ErrNotHolder
	// or ErrPhase, possibly wrapped with details.
	Err error
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("%s refused in phase %s: %v", e.Transition, cmp.Or(string(e.From), `""`), e.Err)
}

// Unwrap lets errors.Is find both ErrIllegal and the reason.
func (e *TransitionError) Unwrap() []error { return []error{ErrIllegal, e.Err} }

func refuse(transition string, st *Status, why error, details ...any) error {
	if len(details) > 0 {
		why = fmt.Errorf("%w: %s", why, fmt.Sprint(details...))
	}
	return &TransitionError{Transition: transition, From: st.Phase, Err: why}
}

// notFinished refuses a transition of a finished task.
func notFinished(transition string, st *Status) error {
	if st.Phase.IsTerminal() {
		return refuse(transition, st, ErrFinished)
	}
	return nil
}

// Recorded tells whether attempt n already has its record.
func Recorded(st *Status, n int32) bool {
	return len(st.Attempts) > 0 && st.Attempts[len(st.Attempts)-1].Attempt >= n
}

// SetCondition sets a condition of the task, its message shortened to what
// the API accepts; LastTransitionTime moves only when the status changes.
func SetCondition(st *Status, generation int64, now metav1.Time, typ string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: truncate.Runes(msg, MaxConditionMessage, ""),
		ObservedGeneration: generation, LastTransitionTime: now,
	})
}

// setInProgress makes sure the task shows Claimed and Finished=False, in
// that order, so that a worker can update them in place (docs/workers.md).
func setInProgress(st *Status, generation int64, now metav1.Time) {
	if meta.FindStatusCondition(st.Conditions, agentlanev1alpha1.ExternalTaskClaimedCondition) == nil {
		SetCondition(st, generation, now, agentlanev1alpha1.ExternalTaskClaimedCondition, metav1.ConditionFalse,
			agentlanev1alpha1.ExternalTaskAwaitingWorkerReason, "waiting for a slot")
	}
	SetCondition(st, generation, now, agentlanev1alpha1.ExternalTaskFinishedCondition, metav1.ConditionFalse,
		agentlanev1alpha1.ExternalTaskInProgressReason, "the task has not finished")
}

// ClearAttempt removes what belonged to the previous attempt, its holder
// included.
func ClearAttempt(st *Status) {
	st.Holder = ""
	st.Worker, st.WorkerIncarnation, st.NodeName, st.JobName = "", "", "", ""
	st.StartedAt, st.FinishedAt, st.DispatchedAt, st.Result = nil, nil, nil, nil
	clearAttemptTiming(st)
}

// Wait (ExternalTask controller) shows why a task cannot be scheduled yet:
// its queue or session is missing, or its queue's scheduler has not
// started. A task without a phase becomes Queued.
func Wait(st *Status, generation int64, now metav1.Time, why string) error {
	if err := notFinished("Wait", st); err != nil {
		return err
	}
	if st.Phase == "" {
		st.Phase = agentlanev1alpha1.ExternalTaskQueued
	}
	setInProgress(st, generation, now)
	SetCondition(st, generation, now, agentlanev1alpha1.ExternalTaskClaimedCondition, metav1.ConditionFalse,
		agentlanev1alpha1.ExternalTaskAwaitingWorkerReason, why)
	return nil
}

// Grant (ExternalTask controller) makes attempt n, which the scheduler
// granted a slot in lane, the task's current attempt: what belonged to an
// earlier attempt (or to the same attempt's Job) is cleared. Dispatch or
// AwaitWorker follows.
func Grant(st *Status, generation int64, now metav1.Time, lane string, n int32) error {
	if err := notFinished("Grant", st); err != nil {
		return err
	}
	if n < st.Attempt || n < 1 {
		return refuse("Grant", st, ErrStaleAttempt, fmt.Sprintf("attempt %d after attempt %d", n, st.Attempt))
	}
	if st.Attempt != n || st.JobName != "" {
		ClearAttempt(st)
	}
	st.Lane = agentlanev1alpha1.LaneName(lane)
	st.Attempt = n
	if st.QueuedAt == nil {
		st.QueuedAt = &now
	}
	setInProgress(st, generation, now)
	return nil
}

// AwaitWorker (ExternalTask controller) shows that granted attempt n waits
// for a worker: none that serves the task is live, or all are busy (why).
func AwaitWorker(st *Status, generation int64, now metav1.Time, n int32, why string) error {
	if err := notFinished("AwaitWorker", st); err != nil {
		return err
	}
	if st.Attempt != n {
		return refuse("AwaitWorker", st, ErrStaleAttempt, fmt.Sprintf("attempt %d, current %d", n, st.Attempt))
	}
	st.Phase = agentlanev1alpha1.ExternalTaskQueued
	st.Holder = ""
	st.Worker, st.WorkerIncarnation, st.NodeName = "", "", ""
	SetCondition(st, generation, now, agentlanev1alpha1.ExternalTaskClaimedCondition, metav1.ConditionFalse,
		agentlanev1alpha1.ExternalTaskAwaitingWorkerReason,
		fmt.Sprintf("attempt %d has a slot in lane %s; %s", n, st.Lane, why))
	return nil
}

// Dispatched describes whom an attempt is dispatched to.
type Dispatched struct {
	// Attempt is the attempt dispatched: the current one (Grant).
	Attempt int32
	// Holder is Workers, Job or Handler; Delegate tasks are started by
	// DelegateStart.
	Holder agentlanev1alpha1.HolderKind
	// Worker, Incarnation and Node name the pool worker (Holder Workers).
	Worker, Incarnation, Node string
	// Job names the attempt's batch Job (Holder Job).
	Job string
	// HeartbeatTimeout is the lane's heartbeatTimeout (0: none), which
	// the attempt's runner paces its heartbeats by.
	HeartbeatTimeout time.Duration
}

// Dispatch (ExternalTask controller) hands the current attempt to its
// holder and records which kind of holder it is.
func Dispatch(st *Status, generation int64, now metav1.Time, d Dispatched) error {
	if err := notFinished("Dispatch", st); err != nil {
		return err
	}
	if d.Attempt != st.Attempt || d.Attempt < 1 {
		return refuse("Dispatch", st, ErrStaleAttempt, fmt.Sprintf("attempt %d, current %d", d.Attempt, st.Attempt))
	}
	var reason, msg string
	switch d.Holder {
	case agentlanev1alpha1.HolderWorkers:
		if d.Worker == "" || d.Job != "" {
			return refuse("Dispatch", st, ErrNotHolder, "a dispatch to the worker pool names one worker and no Job")
		}
		reason = agentlanev1alpha1.ExternalTaskAwaitingWorkerReason
		msg = fmt.Sprintf("attempt %d dispatched to worker %s on node %s", d.Attempt, d.Worker, d.Node)
	case agentlanev1alpha1.HolderJob:
		if d.Job == "" || d.Worker != "" {
			return refuse("Dispatch", st, ErrNotHolder, "a dispatch to a Job names the Job and no worker")
		}
		reason, msg = agentlanev1alpha1.ExternalTaskJobPendingReason, fmt.Sprintf("Job %s runs attempt %d", d.Job, d.Attempt)
	case agentlanev1alpha1.HolderHandler:
		if d.Worker != "" || d.Job != "" {
			return refuse("Dispatch", st, ErrNotHolder, "a dispatch to handlers names no worker and no Job")
		}
		reason = agentlanev1alpha1.ExternalTaskAwaitingHandlerReason
		msg = fmt.Sprintf("attempt %d waits for a handler to complete it through the Session API", d.Attempt)
	default:
		return refuse("Dispatch", st, ErrNotHolder, fmt.Sprintf("holder kind %q is not dispatched by the ExternalTask controller", d.Holder))
	}
	st.Phase = agentlanev1alpha1.ExternalTaskDispatched
	st.Holder = d.Holder
	st.Worker, st.WorkerIncarnation, st.NodeName, st.JobName = d.Worker, d.Incarnation, d.Node, d.Job
	st.DispatchedAt = &now
	// A dispatch starts the attempt's time again: no heartbeat yet, and
	// the scheduler's deadline is the lane's timeout from now.
	clearHeartbeat(st)
	st.HeartbeatTimeout, st.Deadline = nil, nil
	if d.HeartbeatTimeout > 0 {
		st.HeartbeatTimeout = &metav1.Duration{Duration: d.HeartbeatTimeout}
	}
	SetCondition(st, generation, now, agentlanev1alpha1.ExternalTaskClaimedCondition, metav1.ConditionFalse, reason, msg)
	return nil
}

// EndAttempt (ExternalTask controller) appends the record of the current
// attempt, which ended as rec says (its outcome, error and notStarted; the
// rest is taken from the status). At most MaxAttemptRecords are kept.
func EndAttempt(st *Status, now metav1.Time, rec agentlanev1alpha1.TaskAttempt) (agentlanev1alpha1.TaskAttempt, error) {
	if err := notFinished("EndAttempt", st); err != nil {
		return rec, err
	}
	if st.Attempt < 1 || Recorded(st, st.Attempt) {
		return rec, refuse("EndAttempt", st, ErrStaleAttempt, fmt.Sprintf("attempt %d has no attempt to record", st.Attempt))
	}
	rec.Attempt, rec.Worker, rec.NodeName = st.Attempt, st.Worker, st.NodeName
	rec.StartedAt, rec.FinishedAt = st.StartedAt, st.FinishedAt
	if rec.FinishedAt == nil {
		rec.FinishedAt = &now
	}
	if rec.Worker == "" && st.JobName != "" {
		rec.Worker = st.JobName
	}
	rec.Error = truncate.Runes(rec.Error, MaxAttemptError, "")
	st.Attempts = append(st.Attempts, rec)
	if extra := len(st.Attempts) - MaxAttemptRecords; extra > 0 {
		st.Attempts = slices.Delete(st.Attempts, 0, extra)
	}
	return rec, nil
}

// Queue (ExternalTask controller) shows that the task waits in lane, for a
// slot or for the delay before a retry (reason and msg say which).
func Queue(st *Status, generation int64, now metav1.Time, lane, reason, msg string) error {
	if err := notFinished("Queue", st); err != nil {
		return err
	}
	st.Phase = agentlanev1alpha1.ExternalTaskQueued
	st.Lane = agentlanev1alpha1.LaneName(lane)
	if st.QueuedAt == nil {
		st.QueuedAt = &now
	}
	setInProgress(st, generation, now)
	SetCondition(st, generation, now, agentlanev1alpha1.ExternalTaskClaimedCondition, metav1.ConditionFalse, reason, msg)
	return nil
}

// Close (ExternalTask controller) sets the final phase the scheduler
// decided (or the controller, for a task no scheduler takes).
func Close(st *Status, generation int64, now metav1.Time, phase agentlanev1alpha1.ExternalTaskPhase, msg string) error {
	if err := notFinished("Close", st); err != nil {
		return err
	}
	if !phase.IsTerminal() {
		return refuse("Close", st, ErrPhase, fmt.Sprintf("%s is not a final phase", phase))
	}
	st.Phase = phase
	if st.FinishedAt == nil {
		st.FinishedAt = &now
	}
	if phase != agentlanev1alpha1.ExternalTaskSucceeded {
		SetCondition(st, generation, now, agentlanev1alpha1.ExternalTaskClaimedCondition, metav1.ConditionFalse, string(phase), msg)
	}
	SetCondition(st, generation, now, agentlanev1alpha1.ExternalTaskFinishedCondition, metav1.ConditionTrue, string(phase), msg)
	return nil
}

// MarkFinished (ExternalTask controller) completes the record of a task a
// worker finished without a Finished condition to update: Finished=True,
// and finishedAt.
func MarkFinished(st *Status, generation int64, now metav1.Time) error {
	if !st.Phase.IsTerminal() {
		return refuse("MarkFinished", st, ErrPhase, "the task has not finished")
	}
	if meta.IsStatusConditionTrue(st.Conditions, agentlanev1alpha1.ExternalTaskFinishedCondition) {
		return nil
	}
	msg := fmt.Sprintf("attempt %d %s", st.Attempt, st.Phase)
	SetCondition(st, generation, now, agentlanev1alpha1.ExternalTaskFinishedCondition, metav1.ConditionTrue, string(st.Phase), msg)
	if st.FinishedAt == nil {
		st.FinishedAt = &now
	}
	return nil
}

// PhaseAfterRun is the phase a reported run leaves its attempt in: only a
// success moves it (to Succeeded); a failed run stays Running with its
// result, so that the manager applies the lane's retry policy.
func PhaseAfterRun(success bool) agentlanev1alpha1.ExternalTaskPhase {
	if success {
		return agentlanev1alpha1.ExternalTaskSucceeded
	}
	return agentlanev1alpha1.ExternalTaskRunning
}

// HandlerComplete (Session API, for a handler) records a handler's result
// for attempt n, which must be the current attempt, offered to handlers
// (holder Handler, phase Dispatched) and without a result. Like a worker's
// short run it records the start and the end at once.
func HandlerComplete(st *Status, now metav1.Time, n int32, res agentlanev1alpha1.TaskResult) error {
	const t = "HandlerComplete"
	switch {
	case st.Phase.IsTerminal():
		return refuse(t, st, ErrFinished)
	case st.Attempt != n:
		return refuse(t, st, ErrStaleAttempt, fmt.Sprintf("attempt %d, current %d", n, st.Attempt))
	case st.Result != nil:
		return refuse(t, st, ErrHasResult)
	case heldBy(st) != "" && heldBy(st) != agentlanev1alpha1.HolderHandler:
		return refuse(t, st, ErrNotHolder)
	case st.Phase != agentlanev1alpha1.ExternalTaskDispatched:
		return refuse(t, st, ErrPhase)
	}
	st.Result = &res
	if st.StartedAt == nil {
		st.StartedAt = st.DispatchedAt
	}
	st.FinishedAt = &now
	st.Phase = PhaseAfterRun(res.Success)
	return nil
}

// FinalPhase is the task phase of a scheduler's final state.
func FinalPhase(s lanequeue.State) agentlanev1alpha1.ExternalTaskPhase {
	switch s {
	case lanequeue.StateSucceeded:
		return agentlanev1alpha1.ExternalTaskSucceeded
	case lanequeue.StateTimedOut:
		return agentlanev1alpha1.ExternalTaskTimedOut
	case lanequeue.StateDeadLettered:
		return agentlanev1alpha1.ExternalTaskDeadLettered
	case lanequeue.StateCancelled:
		return agentlanev1alpha1.ExternalTaskCancelled
	default:
		return agentlanev1alpha1.ExternalTaskFailed
	}
}
