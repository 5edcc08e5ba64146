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
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// Condition reasons of delegated tasks, beyond the ExternalTask ones.
const (
	// delegationWaitingReason (Claimed=False): the task waits for one of
	// its lane's worker slots.
	delegationWaitingReason = "AwaitingWorkerSlot"
	// delegationTurnPendingReason (Claimed=False): the worker session
	// exists; its first turn is not posted yet.
	delegationTurnPendingReason = "FirstTurnPending"
	// delegationQueueGoneReason (Delivered=False): the queue is gone, and
	// with it the producer's inbox.
	delegationQueueGoneReason = "QueueGone"
)

// settle posts a finished task's result to its producer's inbox, once, and
// deletes the task after the queue's ttlAfterFinished. It returns when to
// look again.
func (r *DelegationReconciler) settle(ctx context.Context, dl *delegateLane, t *agentlanev1alpha1.ExternalTask) time.Duration {
	if meta.FindStatusCondition(t.Status.Conditions, agentlanev1alpha1.ExternalTaskDeliveredCondition) == nil {
		if err := r.deliverResult(ctx, dl, t); err != nil {
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
	return 0
}

// deliverResult posts the result to the producer's inbox (unless it asked
// for no callback) and records that it did.
func (r *DelegationReconciler) deliverResult(ctx context.Context, dl *delegateLane, t *agentlanev1alpha1.ExternalTask) error {
	status, reason, msg := metav1.ConditionTrue, agentlanev1alpha1.ExternalTaskInboxReason, ""
	producer := types.NamespacedName{Namespace: t.Namespace, Name: producerOf(t)}
	switch {
	case t.Annotations[agentlanev1alpha1.DelegationCallbackAnnotation] == "false":
		status, reason, msg = metav1.ConditionFalse, agentlanev1alpha1.ExternalTaskCallbackOffReason, "the producer asked for no callback"
	default:
		err := r.Inboxes.Deliver(ctx, producer, "result-"+t.Name, resultMessage(dl.name, t))
		switch {
		case apierrors.IsNotFound(err):
			status, reason, msg = metav1.ConditionFalse, agentlanev1alpha1.ExternalTaskProducerGoneReason,
				fmt.Sprintf("producer session %s no longer exists", producer.Name)
		case err != nil && dl.lq == nil:
			// Without its queue the producer has no inbox to post to.
			status, reason, msg = metav1.ConditionFalse, delegationQueueGoneReason, dl.problem
		case err != nil:
			return err
		default:
			msg = fmt.Sprintf("the result is in the inbox of session %s", producer.Name)
		}
	}
	setCondition(&t.Status, t.Generation, metav1.NewTime(r.Clock.Now()), agentlanev1alpha1.ExternalTaskDeliveredCondition, status, reason, msg)
	if err := r.Status().Update(ctx, t); err != nil {
		return err
	}
	logf.FromContext(ctx).Info("Delegated task settled", "externalTask", t.Name, "phase", t.Status.Phase, "delivered", reason)
	return nil
}

// watchRunning checks a task whose worker session runs: the session must
// exist, have its first turn, and (after a manager restart) still have its
// run; otherwise the task fails as interrupted. The worker's runtime
// completes the task through the Session API.
func (r *DelegationReconciler) watchRunning(ctx context.Context, dl *delegateLane, t *agentlanev1alpha1.ExternalTask, worker *agentlanev1alpha1.AgentSession) time.Duration {
	st := &t.Status
	key := client.ObjectKeyFromObject(t)
	switch {
	case worker == nil || !worker.DeletionTimestamp.IsZero():
		return r.fail(ctx, t, fmt.Sprintf("interrupted: worker session %s was deleted before it finished", st.Worker))
	case worker.Status.Phase == agentlanev1alpha1.SessionFailed:
		return r.fail(ctx, t, fmt.Sprintf("interrupted: worker session %s failed", worker.Name))
	case t.Spec.Timeout != nil && st.StartedAt != nil && r.Clock.Since(st.StartedAt.Time) > t.Spec.Timeout.Duration:
		return r.fail(ctx, t, fmt.Sprintf("worker session %s did not finish within %s", worker.Name, t.Spec.Timeout.Duration))
	}
	if !meta.IsStatusConditionTrue(st.Conditions, agentlanev1alpha1.ExternalTaskClaimedCondition) {
		r.postFirstTurn(ctx, t, worker)
		return time.Second
	}
	if st.StartedAt != nil && st.StartedAt.Time.Before(r.startedAt) {
		if _, seen := r.checked.Load(key); !seen {
			busy, err := r.Inboxes.Busy(ctx, client.ObjectKeyFromObject(worker))
			if err != nil {
				return time.Second
			}
			if !busy {
				return r.fail(ctx, t, fmt.Sprintf("interrupted: the manager restarted and worker session %s has no run in progress", worker.Name))
			}
			r.checked.Store(key, struct{}{})
		}
	}
	return delegationRecheck
}

// fail ends a task Failed with reason, for the next pass to deliver.
func (r *DelegationReconciler) fail(ctx context.Context, t *agentlanev1alpha1.ExternalTask, reason string) time.Duration {
	now := metav1.NewTime(r.Clock.Now())
	st := &t.Status
	st.Phase, st.FinishedAt = agentlanev1alpha1.ExternalTaskFailed, &now
	st.Result = &agentlanev1alpha1.TaskResult{Error: reason}
	if st.Worker != "" {
		st.Attempts = append(st.Attempts, agentlanev1alpha1.TaskAttempt{Attempt: max(st.Attempt, 1), Worker: st.Worker,
			StartedAt: st.StartedAt, FinishedAt: &now, Outcome: agentlanev1alpha1.AttemptFailed, Error: reason})
	}
	setCondition(st, t.Generation, now, agentlanev1alpha1.ExternalTaskClaimedCondition, metav1.ConditionFalse,
		string(agentlanev1alpha1.ExternalTaskFailed), reason)
	setCondition(st, t.Generation, now, agentlanev1alpha1.ExternalTaskFinishedCondition, metav1.ConditionTrue,
		string(agentlanev1alpha1.ExternalTaskFailed), reason)
	if err := r.Status().Update(ctx, t); err != nil {
		logf.FromContext(ctx).V(1).Info("Could not fail the delegated task; trying again", "externalTask", t.Name, "reason", err.Error())
		return retrySoon
	}
	logf.FromContext(ctx).Info("Delegated task failed", "externalTask", t.Name, "reason", reason)
	if r.Recorder != nil {
		r.Recorder.Eventf(t, nil, corev1.EventTypeWarning, "DelegationFailed", "Delegate", "%s", reason)
	}
	return retrySoon
}

// startQueued starts the lane's queued tasks, oldest first, while the lane
// and each producer have free worker slots.
func (r *DelegationReconciler) startQueued(ctx context.Context, dl *delegateLane, p *pass) time.Duration {
	if len(p.queued) == 0 {
		return 0
	}
	if dl.problem != "" {
		for _, t := range p.queued {
			r.fail(ctx, t, dl.problem)
		}
		return retrySoon
	}
	free := int(dl.spec.MaxConcurrency) - len(p.running)
	perSession := int(dl.spec.MaxConcurrencyPerSession)
	bySession := map[string]int{}
	for _, t := range p.running {
		bySession[producerOf(t)]++
	}
	for _, t := range p.queued {
		if t.Status.Phase == "" {
			// A new task whose producer cannot delegate here fails at once,
			// rather than after waiting for a slot.
			if _, problem, err := r.producer(ctx, dl, t); err == nil && problem != "" {
				r.fail(ctx, t, problem)
				continue
			}
		}
		if free <= 0 || (perSession > 0 && bySession[producerOf(t)] >= perSession) {
			r.markWaiting(ctx, dl, t)
			continue
		}
		if r.start(ctx, dl, t) {
			free--
			bySession[producerOf(t)]++
		}
	}
	return 0
}

// markWaiting shows that a task waits for a worker slot.
func (r *DelegationReconciler) markWaiting(ctx context.Context, dl *delegateLane, t *agentlanev1alpha1.ExternalTask) {
	st := &t.Status
	if st.Phase == agentlanev1alpha1.ExternalTaskQueued && meta.IsStatusConditionPresentAndEqual(st.Conditions,
		agentlanev1alpha1.ExternalTaskClaimedCondition, metav1.ConditionFalse) {
		return
	}
	now := metav1.NewTime(r.Clock.Now())
	st.Phase, st.Lane, st.QueuedAt = agentlanev1alpha1.ExternalTaskQueued, agentlanev1alpha1.LaneName(dl.name), &now
	setCondition(st, t.Generation, now, agentlanev1alpha1.ExternalTaskClaimedCondition, metav1.ConditionFalse, delegationWaitingReason,
		fmt.Sprintf("waiting for one of the %d worker slots of lane %s", dl.spec.MaxConcurrency, dl.name))
	setCondition(st, t.Generation, now, agentlanev1alpha1.ExternalTaskFinishedCondition, metav1.ConditionFalse,
		agentlanev1alpha1.ExternalTaskInProgressReason, "the task has not finished")
	if err := r.Status().Update(ctx, t); err != nil {
		logf.FromContext(ctx).V(1).Info("Could not mark the task waiting", "externalTask", t.Name, "reason", err.Error())
	}
}

// start creates the task's worker session and posts its first turn. It
// reports whether the task now takes a worker slot.
func (r *DelegationReconciler) start(ctx context.Context, dl *delegateLane, t *agentlanev1alpha1.ExternalTask) bool {
	producer, problem, err := r.producer(ctx, dl, t)
	if err != nil {
		logf.FromContext(ctx).Error(err, "Read the producer session", "externalTask", t.Name)
		return false
	}
	if problem != "" {
		r.fail(ctx, t, problem)
		return false
	}
	worker, err := workerSession(t, producer, dl, r.Scheme())
	if err == nil {
		err = r.Create(ctx, worker)
		if apierrors.IsAlreadyExists(err) {
			err = r.adoptWorker(ctx, t, worker)
		}
	}
	if err != nil {
		if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err) || apierrors.IsAlreadyExists(err) {
			// The template (or the cluster's policy) refuses it: retrying
			// cannot help.
			r.fail(ctx, t, fmt.Sprintf("cannot create the worker session: %v", err))
			return false
		}
		logf.FromContext(ctx).Error(err, "Create the worker session", "externalTask", t.Name)
		return false
	}
	now := metav1.NewTime(r.Clock.Now())
	st := &t.Status
	st.Phase, st.Lane, st.Attempt, st.Worker = agentlanev1alpha1.ExternalTaskRunning, agentlanev1alpha1.LaneName(dl.name), 1, worker.Name
	if st.QueuedAt == nil {
		st.QueuedAt = &now
	}
	st.DispatchedAt, st.StartedAt = &now, &now
	setCondition(st, t.Generation, now, agentlanev1alpha1.ExternalTaskClaimedCondition, metav1.ConditionFalse, delegationTurnPendingReason,
		fmt.Sprintf("worker session %s created; its first turn is not posted yet", worker.Name))
	setCondition(st, t.Generation, now, agentlanev1alpha1.ExternalTaskFinishedCondition, metav1.ConditionFalse,
		agentlanev1alpha1.ExternalTaskInProgressReason, "the task has not finished")
	if err := r.Status().Update(ctx, t); err != nil {
		logf.FromContext(ctx).V(1).Info("Could not record the started task", "externalTask", t.Name, "reason", err.Error())
		return true
	}
	logf.FromContext(ctx).Info("Delegated task started", "externalTask", t.Name, "workerSession", worker.Name)
	r.postFirstTurn(ctx, t, worker)
	return true
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
// it (Claimed=True).
func (r *DelegationReconciler) postFirstTurn(ctx context.Context, t *agentlanev1alpha1.ExternalTask, worker *agentlanev1alpha1.AgentSession) {
	if err := r.Inboxes.Deliver(ctx, client.ObjectKeyFromObject(worker), "turn-"+t.Name, firstTurn(t)); err != nil {
		logf.FromContext(ctx).V(1).Info("First turn not posted yet", "externalTask", t.Name, "reason", err.Error())
		return
	}
	now := metav1.NewTime(r.Clock.Now())
	setCondition(&t.Status, t.Generation, now, agentlanev1alpha1.ExternalTaskClaimedCondition, metav1.ConditionTrue,
		agentlanev1alpha1.ExternalTaskWorkerSessionReason, fmt.Sprintf("worker session %s has the task as its first turn", worker.Name))
	if err := r.Status().Update(ctx, t); err != nil {
		logf.FromContext(ctx).V(1).Info("Could not record the posted turn", "externalTask", t.Name, "reason", err.Error())
	}
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
	switch {
	case s.Spec.QueueRef.Name != dl.queue:
		return nil, fmt.Sprintf("LaneQueue %s is not the queue of producer session %s", dl.queue, name), nil
	case delegationDepthOf(s) >= agentlanev1alpha1.MaxDelegationDepth:
		return nil, fmt.Sprintf("producer session %s is %d delegations deep; at most %d are allowed", name, delegationDepthOf(s), agentlanev1alpha1.MaxDelegationDepth), nil
	}
	return s, "", nil
}

func producerOf(t *agentlanev1alpha1.ExternalTask) string {
	if t.Spec.SessionRef == nil {
		return ""
	}
	return t.Spec.SessionRef.Name
}
