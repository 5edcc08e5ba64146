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
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/delegation"
	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/taskstate"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// BudgetExhaustedPrefix starts the error of a delegation refused because
// its producer's budget is exhausted.
const BudgetExhaustedPrefix = "BudgetExhausted: "

// settle posts a finished task's result to its producer's inbox, once, and
// deletes the task after the queue's ttlAfterFinished. It returns when to
// look again.
func (r *DelegationReconciler) settle(ctx context.Context, dl *delegateLane, s *taskstate.Scope) time.Duration {
	t := s.Task
	if meta.FindStatusCondition(t.Status.Conditions, agentlanev1alpha1.ExternalTaskDeliveredCondition) == nil {
		if err := r.deliverResult(ctx, dl, s); err != nil {
			logf.FromContext(ctx).Error(err, "Deliver a delegated task's result", "externalTask", t.Name)
			return time.Second
		}
	}
	if t.Status.FinishedAt == nil {
		return 0
	}
	left := t.Status.FinishedAt.Add(retentionOf(dl.lq).ttl).Sub(r.Clock.Now())
	if left > 0 {
		return left
	}
	if err := r.Delete(ctx, t, client.Preconditions{UID: &t.UID}); client.IgnoreNotFound(err) != nil {
		logf.FromContext(ctx).Error(err, "Delete a finished delegated task", "externalTask", t.Name)
		return time.Second
	}
	s.Deleted = true
	return 0
}

// deliverResult posts the result to the producer's inbox (unless it asked
// for no callback) and records that it did, for the pass's write.
func (r *DelegationReconciler) deliverResult(ctx context.Context, dl *delegateLane, s *taskstate.Scope) error {
	t := s.Task
	status, reason, msg := metav1.ConditionTrue, agentlanev1alpha1.ExternalTaskInboxReason, ""
	producer := types.NamespacedName{Namespace: t.Namespace, Name: producerOf(t)}
	switch t.Annotations[agentlanev1alpha1.DelegationCallbackAnnotation] {
	case "false":
		status, reason, msg = metav1.ConditionFalse, agentlanev1alpha1.ExternalTaskCallbackOffReason, "the producer asked for no callback"
	default:
		err := r.Inboxes.Deliver(ctx, producer, "result-"+t.Name, resultMessage(dl.name, t))
		switch {
		case apierrors.IsNotFound(err):
			status, reason, msg = metav1.ConditionFalse, agentlanev1alpha1.ExternalTaskProducerGoneReason,
				fmt.Sprintf("producer session %s no longer exists", producer.Name)
		case err != nil && dl.lq == nil:
			// Without its queue the producer has no inbox to post to.
			status, reason, msg = metav1.ConditionFalse, agentlanev1alpha1.ExternalTaskQueueGoneReason, dl.problem
		case err != nil:
			return err
		default:
			msg = fmt.Sprintf("the result is in the inbox of session %s", producer.Name)
		}
	}
	if err := taskstate.Deliver(&t.Status, t.Generation, metav1.NewTime(r.Clock.Now()), status, reason, msg); err != nil {
		return err
	}
	s.AfterWrite(func() {
		logf.FromContext(ctx).Info("Delegated task settled", "externalTask", t.Name, "phase", t.Status.Phase, "delivered", reason)
	})
	return nil
}

// watchRunning checks the attempt a worker session runs: the session must
// exist and run (its runtime pod, when it has one, the pod that took the
// attempt), have its first turn, and (after a manager restart) still have
// its run. It returns how the attempt ends when it cannot go on, else when
// to look again. The attempt's timeout is its scheduler's; the worker's
// runtime completes the task through the Session API.
//
// A worker session that fails, or whose runtime pod stops running (gone,
// failed, or replaced by another), has lost the attempt: it ends
// WorkerLost and the lane's retry policy decides what follows, as for a
// pool worker whose Lease lapses. It is not TimedOut: the loss is seen
// when it happens, not when the attempt's time runs out, and it is counted
// as a failure of the attempt. A worker session deleted before it
// finished, or whose run a manager restart lost, ends the task Failed,
// "interrupted", without retries.
func (r *DelegationReconciler) watchRunning(ctx context.Context, s *taskstate.Scope, worker *agentlanev1alpha1.AgentSession) (*delegatedEnd, time.Duration) {
	t := s.Task
	st := &t.Status
	// A task started before status recorded its holder gets it recorded.
	taskstate.RecordHolder(t)
	key := client.ObjectKeyFromObject(t)
	switch {
	case worker == nil || !worker.DeletionTimestamp.IsZero():
		return &delegatedEnd{outcome: agentlanev1alpha1.AttemptFailed, permanent: true,
			msg: fmt.Sprintf("interrupted: worker session %s was deleted before it finished", st.Worker)}, 0
	case worker.Status.Phase == agentlanev1alpha1.SessionFailed:
		return &delegatedEnd{outcome: agentlanev1alpha1.AttemptWorkerLost,
			msg: fmt.Sprintf("worker session %s failed: its runtime cannot run", worker.Name)}, 0
	}
	if lost := r.runtimeLost(ctx, st, worker); lost != "" {
		return &delegatedEnd{outcome: agentlanev1alpha1.AttemptWorkerLost, msg: lost}, 0
	}
	if !meta.IsStatusConditionTrue(st.Conditions, agentlanev1alpha1.ExternalTaskClaimedCondition) {
		if problem := r.postFirstTurn(ctx, s, worker); problem != "" {
			return &delegatedEnd{outcome: agentlanev1alpha1.AttemptFailed, msg: problem, permanent: true}, 0
		}
		return nil, time.Second
	}
	if st.StartedAt != nil && st.StartedAt.Time.Before(r.startedAt) {
		if _, seen := r.checked.Load(key); !seen {
			busy, err := r.Inboxes.Busy(ctx, client.ObjectKeyFromObject(worker))
			if err != nil {
				return nil, time.Second
			}
			if !busy {
				return &delegatedEnd{outcome: agentlanev1alpha1.AttemptFailed, permanent: true,
					msg: fmt.Sprintf("interrupted: the manager restarted and worker session %s has no run in progress", worker.Name)}, 0
			}
			r.checked.Store(key, struct{}{})
		}
	}
	return nil, delegationRecheck
}

// runtimeLost says why the runtime pod of a worker session that has one no
// longer runs the attempt: the session shows no pod, or a pod other than
// the one recorded when the attempt ran (status.workerIncarnation, the
// pod's UID without its dashes), or that pod is gone or ended. The first
// pod the session shows is recorded; a session that passivates and
// resumes elsewhere keeps the attempt, and its new pod is recorded.
func (r *DelegationReconciler) runtimeLost(ctx context.Context, st *agentlanev1alpha1.ExternalTaskStatus, worker *agentlanev1alpha1.AgentSession) string {
	if worker.Spec.Runtime == nil {
		return ""
	}
	switch worker.Status.Phase {
	case agentlanev1alpha1.SessionPassivating, agentlanev1alpha1.SessionPassivated, agentlanev1alpha1.SessionResuming:
		// The session moves to another pod (its node is drained) and keeps
		// its run: the pod it resumes in takes the attempt over.
		if st.WorkerIncarnation != "" {
			if err := taskstate.DelegateRuntime(st, worker.Name, ""); err != nil {
				logf.FromContext(ctx).Error(err, "Forget the worker's runtime pod", "agentSession", worker.Name)
			}
		}
		return ""
	}
	name := worker.Status.PodName
	if name == "" {
		if st.WorkerIncarnation != "" {
			return fmt.Sprintf("worker session %s lost the runtime pod that ran the attempt and shows none", worker.Name)
		}
		return ""
	}
	// Runtime pods are in the manager's cache: a pass reads none from the
	// API server. A pod too new for the cache is recorded by a later pass.
	p := &corev1.Pod{}
	err := r.Get(ctx, types.NamespacedName{Namespace: worker.Namespace, Name: name}, p)
	switch {
	case apierrors.IsNotFound(err) && st.WorkerIncarnation != "":
		return fmt.Sprintf("the runtime pod %s of worker session %s is gone", name, worker.Name)
	case err != nil:
		logf.FromContext(ctx).V(1).Info("Runtime pod not read", "pod", name, "reason", err.Error())
		return ""
	}
	uid := podIncarnation(p)
	if st.WorkerIncarnation == "" {
		if err := taskstate.DelegateRuntime(st, worker.Name, uid); err != nil {
			logf.FromContext(ctx).Error(err, "Record the worker's runtime pod", "agentSession", worker.Name)
		}
		return ""
	}
	switch {
	case uid != st.WorkerIncarnation:
		return fmt.Sprintf("the runtime pod that ran the attempt in worker session %s is gone (the session now shows pod %s)", worker.Name, name)
	case !p.DeletionTimestamp.IsZero():
		return fmt.Sprintf("the runtime pod %s of worker session %s is being deleted", name, worker.Name)
	case p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded:
		return fmt.Sprintf("the runtime pod %s of worker session %s stopped (%s)", name, worker.Name, p.Status.Phase)
	}
	return ""
}

// podIncarnation is how status.workerIncarnation names a runtime pod: its
// UID without the dashes.
func podIncarnation(p *corev1.Pod) string {
	return strings.ReplaceAll(string(p.UID), "-", "")
}

// fail ends a task Failed with reason, for the next pass to deliver.
func (r *DelegationReconciler) fail(ctx context.Context, s *taskstate.Scope, reason string) time.Duration {
	return r.end(ctx, s, agentlanev1alpha1.ExternalTaskFailed, reason)
}

// end ends a task in phase (Failed or TimedOut) with reason, for the next
// pass to deliver once the pass's write recorded it.
func (r *DelegationReconciler) end(ctx context.Context, s *taskstate.Scope, phase agentlanev1alpha1.ExternalTaskPhase, reason string) time.Duration {
	t := s.Task
	if err := taskstate.DelegateEnd(&t.Status, t.Generation, metav1.NewTime(r.Clock.Now()), phase, reason); err != nil {
		logf.FromContext(ctx).Error(err, "End the delegated task", "externalTask", t.Name)
		return retrySoon
	}
	s.AfterWrite(func() {
		logf.FromContext(ctx).Info("Delegated task failed", "externalTask", t.Name, "reason", reason)
		if r.Recorder != nil {
			r.Recorder.Eventf(t, nil, corev1.EventTypeWarning, "DelegationFailed", "Delegate", "%s", reason)
		}
	})
	return retrySoon
}

// precheck says why a new task (no phase yet) cannot be delegated at all:
// its first turn no session can take, or its producer cannot delegate
// here. Such a task fails at once, before it takes a place in its lane.
// err is an error reading what decides it.
func (r *DelegationReconciler) precheck(ctx context.Context, dl *delegateLane, t *agentlanev1alpha1.ExternalTask) (string, error) {
	if err := r.withPayload(ctx, t); err != nil {
		return "", err
	}
	if problem := firstTurnProblem(t); problem != "" {
		return problem, nil
	}
	producer, problem, err := r.producer(ctx, dl, t)
	if err != nil || problem != "" {
		return problem, err
	}
	_, problem = r.workerBudget(dl, producer)
	return problem, nil
}

// markWaiting shows that a task waits, for a worker slot of its lane
// (ExternalTaskAwaitingWorkerSlotReason) or of its producer
// (ExternalTaskAwaitingProducerSlotReason).
func (r *DelegationReconciler) markWaiting(ctx context.Context, dl *delegateLane, s *taskstate.Scope, reason, msg string) {
	t := s.Task
	if err := taskstate.DelegateWait(&t.Status, t.Generation, metav1.NewTime(r.Clock.Now()), dl.name, reason, msg); err != nil {
		logf.FromContext(ctx).Error(err, "Mark the delegated task waiting", "externalTask", t.Name)
	}
}

// start creates the worker session of attempt n of the task, posts its
// first turn and records both, for the pass's write. It reports whether
// the attempt now runs in a worker session, or why it never can (the
// attempt then fails for good).
func (r *DelegationReconciler) start(ctx context.Context, dl *delegateLane, s *taskstate.Scope, n int32) (bool, string) {
	t := s.Task
	producer, problem, err := r.producer(ctx, dl, t)
	if err != nil {
		logf.FromContext(ctx).Error(err, "Read the producer session", "externalTask", t.Name)
		return false, ""
	}
	if problem != "" {
		return false, problem
	}
	if err := r.withPayload(ctx, t); err != nil {
		logf.FromContext(ctx).Error(err, "Read the delegated task's payload", "externalTask", t.Name)
		return false, ""
	}
	if problem := firstTurnProblem(t); problem != "" {
		return false, problem
	}
	b, problem := r.workerBudget(dl, producer)
	if problem != "" {
		return false, problem
	}
	worker, err := workerSession(t, producer, dl, b, r.Scheme(), n)
	created, adopted := false, false
	if err == nil {
		err = r.Create(ctx, worker)
		created = err == nil
		if apierrors.IsAlreadyExists(err) {
			err = r.adoptWorker(ctx, t, worker)
			adopted = err == nil
		}
	}
	if created && r.Budgets != nil {
		// The producer pays for its worker's whole budget now: what a tree
		// of delegations spends stays within its root's budget.
		if tokens, cost := delegation.Hold(b, producer); tokens > 0 || !cost.IsZero() {
			if _, err := r.Budgets.Record(producer, tokens, cost); err != nil {
				logf.FromContext(ctx).Error(err, "Charge the worker's budget to its producer", "externalTask", t.Name)
			}
		}
	}
	if err != nil {
		if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err) || apierrors.IsAlreadyExists(err) {
			// The template (or the cluster's policy) refuses it: retrying
			// cannot help.
			return false, fmt.Sprintf("cannot create the worker session: %v", err)
		}
		logf.FromContext(ctx).Error(err, "Create the worker session", "externalTask", t.Name)
		return false, ""
	}
	if err := taskstate.DelegateStartAttempt(&t.Status, t.Generation, metav1.NewTime(r.Clock.Now()), dl.name, worker.Name, n); err != nil {
		logf.FromContext(ctx).Error(err, "Record the started task", "externalTask", t.Name)
		return false, ""
	}
	s.AfterWrite(func() {
		logf.FromContext(ctx).Info("Delegated task started", "externalTask", t.Name, "workerSession", worker.Name, "attempt", n)
	})
	if adopted {
		// A pass that created the worker and posted its first turn could
		// not record them: a worker with work has its first turn.
		if busy, err := r.Inboxes.Busy(ctx, client.ObjectKeyFromObject(worker)); err == nil && busy {
			if err := taskstate.FirstTurnPosted(&t.Status, t.Generation, metav1.NewTime(r.Clock.Now()), worker.Name); err != nil {
				logf.FromContext(ctx).Error(err, "Record the posted first turn", "externalTask", t.Name)
			}
			return true, ""
		}
	}
	if problem := r.postFirstTurn(ctx, s, worker); problem != "" {
		return false, problem
	}
	return true, ""
}

// workerBudget is the budget of a new worker of the producer: the lane's
// template carved from what the producer has left. problem says why the
// producer cannot have a worker (its budget is exhausted).
func (r *DelegationReconciler) workerBudget(dl *delegateLane, producer *agentlanev1alpha1.AgentSession) (*agentlanev1alpha1.Budget, string) {
	used := producer.Status.Budget
	if r.Budgets != nil {
		d := r.Budgets.State(producer)
		if d.Denied() {
			return nil, fmt.Sprintf("%sproducer session %s cannot delegate: its budget denies it (%s)", BudgetExhaustedPrefix, producer.Name, d.Message)
		}
		used = d.Consumed
	}
	b, err := delegation.CarveBudget(dl.spec.ExternalTarget.Delegate.SessionTemplate.Spec.Budget.Budget(), producer, used)
	if err != nil {
		return nil, BudgetExhaustedPrefix + err.Error()
	}
	return b, ""
}

// runningChildren counts the producer's worker sessions whose task has not
// finished, across all lanes, reading the workers around the cache.
func (r *DelegationReconciler) runningChildren(ctx context.Context, t *agentlanev1alpha1.ExternalTask) (int, error) {
	producer := &agentlanev1alpha1.AgentSession{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: t.Namespace, Name: producerOf(t)}, producer); err != nil {
		return 0, client.IgnoreNotFound(err)
	}
	workers := &agentlanev1alpha1.AgentSessionList{}
	if err := r.APIReader.List(ctx, workers, client.InNamespace(t.Namespace),
		client.MatchingLabels{delegation.ProducerLabel: string(producer.UID)}); err != nil {
		return 0, err
	}
	n := 0
	for i := range workers.Items {
		w := &workers.Items[i]
		if !w.DeletionTimestamp.IsZero() {
			continue
		}
		task := &agentlanev1alpha1.ExternalTask{}
		err := r.Get(ctx, types.NamespacedName{Namespace: w.Namespace, Name: w.Labels[agentlanev1alpha1.DelegationTaskLabel]}, task)
		if err == nil && task.Status.Phase.IsTerminal() {
			continue
		}
		n++ // running, or too new for the cache to show it
	}
	return n, nil
}

// firstTurnProblem says why no session can take the task's payload as its
// first turn: a /queue directive is applied to the inbox, never run, so a
// worker given one would hold its slot until its deadline.
func firstTurnProblem(t *agentlanev1alpha1.ExternalTask) string {
	text := firstTurn(t)
	if _, ok, err := lanequeue.ParseQueueDirective(text); ok {
		if err != nil {
			return fmt.Sprintf("the first turn cannot be given to a worker session: %v", err)
		}
		return "the first turn cannot be given to a worker session: it is a /queue directive, which a session applies to its inbox instead of running; delegate the work itself"
	}
	if strings.TrimSpace(text) == "" {
		return "the first turn cannot be given to a worker session: it is empty"
	}
	return ""
}

// adoptWorker accepts an existing session named for the task only when it
// is the task's worker (a pass that created it and failed to record it).
func (r *DelegationReconciler) adoptWorker(ctx context.Context, t *agentlanev1alpha1.ExternalTask, want *agentlanev1alpha1.AgentSession) error {
	got := &agentlanev1alpha1.AgentSession{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(want), got); err != nil {
		return err
	}
	if got.Labels[agentlanev1alpha1.DelegationTaskLabel] != t.Name || !controlledBySame(got, want) {
		return apierrors.NewAlreadyExists(agentlanev1alpha1.GroupVersion.WithResource("agentsessions").GroupResource(), want.Name)
	}
	*want = *got
	return nil
}

// postFirstTurn posts the task's payload to the worker's inbox and records
// it (Claimed=True). It returns why the task must fail when the worker's
// inbox refuses the turn for good; other errors are tried again until the
// task's deadline.
func (r *DelegationReconciler) postFirstTurn(ctx context.Context, s *taskstate.Scope, worker *agentlanev1alpha1.AgentSession) string {
	t := s.Task
	if err := r.withPayload(ctx, t); err != nil {
		logf.FromContext(ctx).V(1).Info("First turn not read yet", "externalTask", t.Name, "reason", err.Error())
		return ""
	}
	if err := r.Inboxes.Deliver(ctx, client.ObjectKeyFromObject(worker), "turn-"+t.Name, firstTurn(t)); err != nil {
		if refusedForGood(err) {
			return fmt.Sprintf("worker session %s refused the first turn: %v", worker.Name, err)
		}
		logf.FromContext(ctx).V(1).Info("First turn not posted yet", "externalTask", t.Name, "reason", err.Error())
		return ""
	}
	if err := taskstate.FirstTurnPosted(&t.Status, t.Generation, metav1.NewTime(r.Clock.Now()), worker.Name); err != nil {
		logf.FromContext(ctx).Error(err, "Record the posted first turn", "externalTask", t.Name)
	}
	return ""
}

// refusedForGood reports whether an inbox's refusal of a message cannot
// change by trying again: an invalid directive or message, or a Session
// API error in the 4xx range other than 409 and 429.
func refusedForGood(err error) bool {
	if errors.Is(err, lanequeue.ErrInvalidDirective) || errors.Is(err, lanequeue.ErrInvalidCommand) {
		return true
	}
	var e *sessionapi.Error
	return errors.As(err, &e) && e.Status >= 400 && e.Status < 500 &&
		e.Status != http.StatusConflict && e.Status != http.StatusTooManyRequests
}

// producer reads the task's producer session and says why it cannot
// delegate on this lane, if it cannot.
func (r *DelegationReconciler) producer(ctx context.Context, dl *delegateLane, t *agentlanev1alpha1.ExternalTask) (*agentlanev1alpha1.AgentSession, string, error) {
	name := producerOf(t)
	if name == "" {
		return nil, "a delegated task needs spec.sessionRef: the session that delegates", nil
	}
	s := &agentlanev1alpha1.AgentSession{}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: t.Namespace, Name: name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Sprintf("producer session %s does not exist", name), nil
		}
		return nil, "", err
	}
	depth, err := delegation.Depth(s)
	maxDepth := r.Bounds.WithDefaults().MaxDepth
	switch {
	case s.Spec.QueueRef.Name != dl.queue:
		return nil, fmt.Sprintf("LaneQueue %s is not the queue of producer session %s", dl.queue, name), nil
	case err != nil:
		return nil, fmt.Sprintf("producer session %s cannot delegate: %v", name, err), nil
	case depth >= maxDepth:
		return nil, fmt.Sprintf("producer session %s is %d delegations deep; at most %d are allowed", name, depth, maxDepth), nil
	}
	return s, "", nil
}

func producerOf(t *agentlanev1alpha1.ExternalTask) string {
	if t.Spec.SessionRef == nil {
		return ""
	}
	return t.Spec.SessionRef.Name
}
