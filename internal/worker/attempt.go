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

package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/executor"
	"github.com/agentlane/agentlane/internal/taskstate"
	"github.com/agentlane/agentlane/internal/truncate"
	"github.com/agentlane/agentlane/internal/workerproto"
)

var (
	// errAttemptLost: the manager took the attempt away (timeout, heartbeat
	// expiry, cancellation, a new attempt), or the task is gone. The worker
	// drops whatever it was about to write.
	errAttemptLost = errors.New("the attempt is no longer held by this worker")
	// errShuttingDown: the worker stopped a run because its grace period
	// ran out.
	errShuttingDown = errors.New("the worker is shutting down")
	// errNotStarted marks a run whose command was never started because
	// the run had already been stopped.
	errNotStarted = errors.New("the command was not started")
	// errEarlierTryUncertain marks a rejected write whose earlier try failed
	// in a way that may have applied it (no answer, or a 5xx): the
	// rejection may be of the write itself, already in place.
	errEarlierTryUncertain = errors.New("an earlier try of the write may have been applied")
)

// Outcomes of an attempt: the values of the outcome label of
// agentlane_worker_tasks_finished_total.
const (
	outcomeSucceeded  = "succeeded"
	outcomeFailed     = "failed"
	outcomeLost       = "lost"
	outcomeHandedBack = "handed_back"
)

// Writes a worker makes: the values of the write label of
// agentlane_worker_fenced_writes_rejected_total.
const (
	writeClaim    = "claim"
	writeComplete = "complete"
	writeHandBack = "hand_back"
)

// maxResultError is the longest result.error the API accepts.
const maxResultError = 32768

// writeTimeout bounds one status write, retries of transient failures
// included: a worker keeps trying to report a result through an API server
// outage this long, by its clock, before it drops the result. Writes do not
// stop at SIGTERM: reporting and handing back happen during shutdown.
const writeTimeout = 30 * time.Second

// writeBackoff spaces the retries of a status write that failed for a
// transient reason (the API server unreachable, overloaded or timing out):
// 200ms doubling up to 5s, then every 5s until writeTimeout has passed.
// Only its Step is used: wait.ExponentialBackoff stops when Cap is reached
// (it sets Steps to 0), which would end the retries after about 6s.
var writeBackoff = wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: math.MaxInt32, Cap: 5 * time.Second}

// DefaultRunningAfter is how long a pool worker's run lasts before the
// worker marks its attempt Running. A shorter run is reported in one write,
// its start with its result.
const DefaultRunningAfter = 2 * time.Second

// attempts claims, runs and reports attempts of ExternalTasks with fenced
// status patches. The pool worker and one-shot mode share it.
type attempts struct {
	client   client.Client
	registry *executor.Registry
	// clock stamps status times and paces write retries.
	clock clock.WithTicker
	log   logr.Logger
	// bounds holds the runBound of each running attempt bounded by its
	// spec.timeout, by task.
	bounds sync.Map
}

// claimState is what a run knows of its claim write when it ends.
type claimState int

const (
	// unclaimed: no claim was sent; the attempt is still Dispatched.
	unclaimed claimState = iota
	// claimed: the claim was written; the attempt is Running.
	claimed
	// claimUncertain: the claim write failed without an answer; the
	// attempt may be either.
	claimUncertain
	// claimLost: the claim was rejected; the attempt is someone else's.
	claimLost
)

// runReport is how a run's report is written: from which phase, and when
// the run started (for a report that also records the start).
type runReport struct {
	claim     claimState
	startedAt metav1.Time
}

// lazyClaim is the claim of a pool worker's run, written only once the run
// has lasted its delay: a task that someone could look at while it runs
// shows Running, and a short one costs no write for it.
type lazyClaim struct {
	mu      sync.Mutex
	sending bool // the delay passed: the claim is (being) written
	stopped chan struct{}
	// done is closed once the claim write, when it was sent, has returned.
	done chan struct{}
	err  error
}

// claimAfter sends the claim of the run after delay unless stop comes
// first, for a run not claimed yet (nil otherwise). onLost is called when
// the claim is rejected: the run must stop.
func (a *attempts) claimAfter(ctx context.Context, task *agentlanev1alpha1.ExternalTask, f workerproto.Fence, delay time.Duration, rep runReport, onLost func()) *lazyClaim {
	state := rep.claim
	if state != unclaimed {
		return nil
	}
	c := &lazyClaim{stopped: make(chan struct{}), done: make(chan struct{})}
	t := a.clock.NewTimer(delay)
	go func() {
		defer t.Stop()
		select {
		case <-c.stopped:
			return
		case <-t.C():
		}
		c.mu.Lock()
		select {
		case <-c.stopped:
			c.mu.Unlock()
			return
		default:
		}
		c.sending = true
		c.mu.Unlock()
		defer close(c.done)
		c.err = a.claimStarted(context.WithoutCancel(ctx), task, f, rep.startedAt)
		if errors.Is(c.err, errAttemptLost) {
			onLost()
		}
	}()
	return c
}

// claimFirst claims the attempt before its run (RunningAfter < 0) and
// tells whether the run may go on. The claim is sent even if the run was
// stopped meanwhile: the fence settles it, and a half-sent claim must not
// look like a failure.
func (w *Worker) claimFirst(ctx context.Context, key types.NamespacedName, task *agentlanev1alpha1.ExternalTask, f workerproto.Fence, r *run, rep *runReport) bool {
	if err := w.attempts.claim(context.WithoutCancel(ctx), task, f); err != nil {
		if !errors.Is(err, errAttemptLost) {
			// The task is still Dispatched to this worker: try again.
			w.log.Error(err, "Claim failed", "externalTask", key, "attempt", r.attempt)
			w.retryLater(key, r.attempt)
		}
		return false
	}
	rep.claim = claimed
	return true
}

// stop cancels the claim if it was not sent, or waits for its write, and
// says where the attempt stands; state when there was no lazy claim.
func (c *lazyClaim) stop(state claimState) claimState {
	if c == nil {
		return state
	}
	c.mu.Lock()
	if !c.sending {
		close(c.stopped)
		c.mu.Unlock()
		return unclaimed
	}
	c.mu.Unlock()
	<-c.done
	switch {
	case c.err == nil:
		return claimed
	case errors.Is(c.err, errAttemptLost):
		return claimLost
	default:
		return claimUncertain
	}
}

// claim moves the task's Dispatched attempt to Running. It returns an error
// wrapping errAttemptLost when the attempt is no longer f's to claim.
func (a *attempts) claim(ctx context.Context, task *agentlanev1alpha1.ExternalTask, f workerproto.Fence, extra ...workerproto.PatchOp) error {
	return a.claimStarted(ctx, task, f, a.now(), extra...)
}

// claimStarted is claim for a run that started at startedAt: a lazy claim,
// sent once the run has lasted RunningAfter, records when the command
// really started, not when the claim was sent.
func (a *attempts) claimStarted(ctx context.Context, task *agentlanev1alpha1.ExternalTask, f workerproto.Fence, startedAt metav1.Time, extra ...workerproto.PatchOp) error {
	extra = append(extra, a.claimedOps(task, f, startedAt)...)
	body, err := workerproto.ClaimPatch(f, startedAt, extra...)
	if err != nil {
		return err
	}
	err = a.patchStatus(ctx, task, writeClaim, body)
	if errors.Is(err, errEarlierTryUncertain) && a.claimLanded(ctx, task, f, startedAt) {
		a.log.Info("A claim whose answer was lost had been applied; running the attempt", "externalTask", klog.KObj(task), "attempt", f.Attempt)
		return nil
	}
	return err
}

// claimLanded tells whether the task, read from the API server, shows this
// very claim applied: the attempt Running under this worker, started at the
// claim's time, with no result yet. A claim retried after its answer was
// lost (the API server died after committing it) is rejected by its own
// test of phase Dispatched; without this check the worker would drop an
// attempt that status says it runs, and the attempt would time out unrun.
func (a *attempts) claimLanded(ctx context.Context, task *agentlanev1alpha1.ExternalTask, f workerproto.Fence, startedAt metav1.Time) bool {
	got := &agentlanev1alpha1.ExternalTask{}
	if err := a.client.Get(ctx, client.ObjectKeyFromObject(task), got); err != nil {
		return false
	}
	st := got.Status
	return st.Phase == agentlanev1alpha1.ExternalTaskRunning && st.Worker == f.Holder && st.Attempt == f.Attempt &&
		st.Result == nil && st.StartedAt != nil && st.StartedAt.Unix() == startedAt.Unix()
}

// complete records the result of the task's Running attempt.
func (a *attempts) complete(ctx context.Context, task *agentlanev1alpha1.ExternalTask, f workerproto.Fence, result agentlanev1alpha1.TaskResult) error {
	now := a.now()
	body, err := workerproto.CompletePatch(f, result, now, a.finishedOps(task, f, result, now)...)
	if err != nil {
		return err
	}
	return a.patchStatus(ctx, task, writeComplete, body)
}

// startAndComplete records the start and the result of the task's
// Dispatched attempt, which ran without a claim, in one write.
func (a *attempts) startAndComplete(ctx context.Context, task *agentlanev1alpha1.ExternalTask, f workerproto.Fence, startedAt metav1.Time, result agentlanev1alpha1.TaskResult) error {
	now := a.now()
	extra := append(a.claimedOps(task, f, startedAt), a.finishedOps(task, f, result, now)...)
	body, err := workerproto.StartAndCompletePatch(f, result, startedAt, now, extra...)
	if err != nil {
		return err
	}
	return a.patchStatus(ctx, task, writeComplete, body)
}

// report writes the result of a run as where its claim stands requires. A
// claim whose write failed without an answer may or may not have been
// applied: the report from Dispatched is tried first, and if the fence
// rejects it, the report from Running.
func (a *attempts) report(ctx context.Context, task *agentlanev1alpha1.ExternalTask, f workerproto.Fence, rep runReport, result agentlanev1alpha1.TaskResult) error {
	switch rep.claim {
	case claimed:
		return a.complete(ctx, task, f, result)
	case claimLost:
		return errAttemptLost
	}
	err := a.startAndComplete(ctx, task, f, rep.startedAt, result)
	if rep.claim == claimUncertain && errors.Is(err, errAttemptLost) {
		return a.complete(ctx, task, f, result)
	}
	return err
}

// claimedOps update the Claimed condition the manager wrote at dispatch,
// as the claim's transition (taskstate.Claim) says.
func (a *attempts) claimedOps(task *agentlanev1alpha1.ExternalTask, f workerproto.Fence, at metav1.Time) []workerproto.PatchOp {
	return workerproto.ConditionOps(task, taskstate.ClaimedCondition(task.Generation, f, at))
}

// finishedOps update the Finished condition the manager wrote at dispatch,
// for a successful run (the manager records failures), as the completion's
// transition (taskstate.Complete) says.
func (a *attempts) finishedOps(task *agentlanev1alpha1.ExternalTask, f workerproto.Fence, result agentlanev1alpha1.TaskResult, at metav1.Time) []workerproto.PatchOp {
	if !result.Success {
		return nil
	}
	return workerproto.ConditionOps(task, taskstate.SucceededCondition(task.Generation, f, at))
}

// handBack returns the task's attempt, in phase from, to its lane.
func (a *attempts) handBack(ctx context.Context, task *agentlanev1alpha1.ExternalTask, f workerproto.Fence, from agentlanev1alpha1.ExternalTaskPhase) error {
	body, err := workerproto.HandBackPatch(f, from)
	if err != nil {
		return err
	}
	return a.patchStatus(ctx, task, writeHandBack, body)
}

// finish runs a claimed attempt and reports it; see run and settle.
func (a *attempts) finish(ctx context.Context, task *agentlanev1alpha1.ExternalTask, f workerproto.Fence, handBackOnShutdown bool) (string, error) {
	out, runErr := a.run(a.withHeartbeat(ctx, task, f, nil, nil), task)
	return a.settle(ctx, task, f, runReport{claim: claimed}, out, runErr, handBackOnShutdown)
}

// run runs a claimed attempt under ctx, unless ctx was already stopped
// (the attempt was taken away, or the grace period ran out): then the
// command is not started and the error wraps errNotStarted, as it does
// when the executor reports that the stop came before the command started.
func (a *attempts) run(ctx context.Context, task *agentlanev1alpha1.ExternalTask) (executor.Output, error) {
	if err := context.Cause(ctx); errors.Is(err, errAttemptLost) || errors.Is(err, errShuttingDown) {
		return executor.Output{}, fmt.Errorf("%w: %w", errNotStarted, err)
	}
	out, err := a.execute(ctx, task)
	if errors.Is(err, executor.ErrNotStarted) {
		// The stop came while the task's init was starting.
		err = fmt.Errorf("%w: %w", errNotStarted, err)
	}
	return out, err
}

// settle writes what came of a run. ctx is the run's context: when it was
// stopped with errAttemptLost the result is dropped. When it was stopped
// with errShuttingDown, an attempt whose command never started is handed
// back if handBackOnShutdown is set; one whose command ran and was stopped
// is reported as failed (interrupted), so that status records the run and
// the retry policy decides what follows. A run that ended by itself before
// the grace period ran out is reported as usual. settle returns the
// outcome, and an error when the report could not be written.
func (a *attempts) settle(ctx context.Context, task *agentlanev1alpha1.ExternalTask, f workerproto.Fence, rep runReport, out executor.Output, runErr error, handBackOnShutdown bool) (string, error) {
	writeCtx := context.WithoutCancel(ctx)
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, errAttemptLost) || rep.claim == claimLost:
		return outcomeLost, nil
	case errors.Is(runErr, errNotStarted) && errors.Is(cause, errShuttingDown) && handBackOnShutdown:
		if err := a.handBackRun(writeCtx, task, f, rep.claim); err != nil {
			return lostOr(err, outcomeHandedBack)
		}
		return outcomeHandedBack, nil
	case runErr != nil && errors.Is(cause, errShuttingDown) && !errors.Is(runErr, errNotStarted):
		runErr = interruptedAtShutdown(f.Holder, runErr)
	}
	result := taskResult(out, runErr)
	outcome := outcomeFailed
	if result.Success {
		outcome = outcomeSucceeded
	}
	if err := a.report(writeCtx, task, f, rep, result); err != nil {
		return lostOr(err, outcome)
	}
	return outcome, nil
}

// interruptedAtShutdown is the error of a run that worker stopped at its
// own shutdown (the grace period ran out), on either path: the run started,
// so its attempt is reported failed, not handed back.
func interruptedAtShutdown(worker string, err error) error {
	return fmt.Errorf("interrupted: %s stopped the command at shutdown: %w", worker, err)
}

// handBackRun hands back a stopped run's attempt from the phase its claim
// left it in (both, in turn, when that is uncertain).
func (a *attempts) handBackRun(ctx context.Context, task *agentlanev1alpha1.ExternalTask, f workerproto.Fence, c claimState) error {
	if c == claimed {
		return a.handBack(ctx, task, f, agentlanev1alpha1.ExternalTaskRunning)
	}
	err := a.handBack(ctx, task, f, agentlanev1alpha1.ExternalTaskDispatched)
	if c == claimUncertain && errors.Is(err, errAttemptLost) {
		return a.handBack(ctx, task, f, agentlanev1alpha1.ExternalTaskRunning)
	}
	return err
}

// lostOr turns a rejected write into the lost outcome, and any other write
// error into a failure to report.
func lostOr(err error, outcome string) (string, error) {
	if errors.Is(err, errAttemptLost) {
		return outcomeLost, nil
	}
	return outcome, err
}

// execute runs the task's command under ctx, bounded by spec.timeout, or
// by the later deadline an extension of the attempt records (see
// moveDeadline).
func (a *attempts) execute(ctx context.Context, task *agentlanev1alpha1.ExternalTask) (executor.Output, error) {
	var payload json.RawMessage
	if task.Spec.Payload != nil {
		payload = task.Spec.Payload.Raw
	}
	tp, span := startRun(task.Annotations[workerproto.TraceparentAnnotation], task.Status.Worker, taskRunCommand(task))
	t := task.Spec.Timeout
	if t != nil && t.Duration > 0 {
		var stop func()
		ctx, stop = a.bound(ctx, task, t.Duration)
		defer stop()
	}
	out, err := runCommand(ctx, a.registry, executor.Task{CommandType: string(task.Spec.CommandType), Payload: payload, Traceparent: tp}, 0)
	endRun(span, out, err)
	return out, err
}

// runCommand runs one command through registry under ctx, bounded by
// timeout when it is positive. An executor that panics fails the run
// instead of the worker. Attempts of ExternalTasks and of the Direct stream
// both run through it, so that taskResult makes the same result of the
// same run on either path.
func runCommand(ctx context.Context, registry *executor.Registry, task executor.Task, timeout time.Duration) (out executor.Output, err error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, timeout, fmt.Errorf("attempt timed out after %s", timeout))
		defer cancel()
	}
	defer func() {
		if r := recover(); r != nil {
			out, err = executor.Output{}, fmt.Errorf("executor for %q panicked: %v", task.CommandType, r)
		}
	}()
	return registry.Run(ctx, task)
}

// taskResult turns what an executor returned into the result reported on the
// task. exitCode and the output JSON are set only when a process ran, which
// is not the case for an unknown command type or an invalid payload.
func taskResult(out executor.Output, err error) agentlanev1alpha1.TaskResult {
	r := agentlanev1alpha1.TaskResult{Success: err == nil && out.Success}
	switch {
	case err != nil:
		r.Error = err.Error()
	case !out.Success && out.Error != "":
		r.Error = out.Error
	case !out.Success:
		r.Error = "the command failed without an error message"
	}
	r.Error = truncate.Runes(r.Error, maxResultError, "")
	if err == nil || out.ExitCode != 0 || out.Stdout != "" || out.Stderr != "" {
		code := int32(out.ExitCode)
		r.ExitCode = &code
		raw, _ := json.Marshal(out) // Output holds only strings, ints and bools.
		r.Result = &runtime.RawExtension{Raw: raw}
	}
	return r
}

func (a *attempts) now() metav1.Time { return metav1.NewTime(a.clock.Now()) }

// patchStatus sends a fenced JSON Patch to the task's status. A rejection
// (422 from a failed test or the CRD's terminal-phase rule, 409, or the task
// gone) returns an error wrapping errAttemptLost and is never retried: the
// attempt belongs to someone else now. Transient failures are retried with
// writeBackoff until writeTimeout has passed on the worker's clock.
func (a *attempts) patchStatus(ctx context.Context, task *agentlanev1alpha1.ExternalTask, write string, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	log := a.log.WithValues("externalTask", klog.KObj(task), "write", write)
	key := types.NamespacedName{Namespace: task.Namespace, Name: task.Name}
	giveUp := a.clock.Now().Add(writeTimeout)
	backoff := writeBackoff
	uncertain := false
	for {
		err := taskstate.SendWorkerPatch(ctx, a.client, key, body)
		switch {
		case err == nil:
			return nil
		case apierrors.IsInvalid(err) || apierrors.IsConflict(err):
			fencedWritesRejected.WithLabelValues(write).Inc()
			log.V(1).Info("Fenced write rejected: the attempt was taken away; dropping it", "reason", err.Error())
			if uncertain {
				return fmt.Errorf("%w (%w): %w", errAttemptLost, errEarlierTryUncertain, err)
			}
			return fmt.Errorf("%w: %w", errAttemptLost, err)
		case apierrors.IsNotFound(err):
			log.V(1).Info("Task is gone; dropping the write")
			return fmt.Errorf("%w: %w", errAttemptLost, err)
		case !transient(err) && !apierrors.IsForbidden(err):
			// A write is also retried on 403, which a restarted API server
			// answers until its authorizer's caches are filled. Otherwise a
			// worker gets 403 only when misconfigured (its identity does not
			// match status.worker for the admission policy); such a write is
			// then dropped after writeTimeout instead of at once.
			return fmt.Errorf("%s write: %w", write, err)
		}
		left := giveUp.Sub(a.clock.Now())
		if left <= 0 {
			return fmt.Errorf("%s write: gave up after %s: %w", write, writeTimeout, err)
		}
		uncertain = true
		log.V(1).Info("Status write failed; retrying", "error", err.Error())
		if werr := a.sleep(ctx, min(backoff.Step(), left)); werr != nil {
			return fmt.Errorf("%s write: %w (last error: %w)", write, werr, err)
		}
	}
}

// sleep waits d on the worker's clock, or until ctx ends.
func (a *attempts) sleep(ctx context.Context, d time.Duration) error {
	t := a.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// transient tells which write failures may go away by themselves.
func transient(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true // no answer from the API server
	}
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) || apierrors.IsUnexpectedServerError(err)
}
