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
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/scheduling"
)

// LaneQueueReconciler runs one lane scheduler per LaneQueue, built from its
// spec and reconfigured in place when the spec changes, and publishes the
// scheduler's per-lane counts and conditions in the LaneQueue's status.
type LaneQueueReconciler struct {
	client.Client
	Schedulers *scheduling.Schedulers
}

var _ reconcile.Reconciler = &LaneQueueReconciler{}

// SetupWithManager registers the reconciler. The field indexes
// (SetupIndexes) and the Schedulers runnable are registered by Setup.
func (r *LaneQueueReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil || r.Schedulers == nil {
		return errors.New("LaneQueueReconciler needs a Client and Schedulers")
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&agentlanev1alpha1.LaneQueue{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A session changes its queue's session count and retention when it
		// appears, goes or changes its spec; its status writes do not.
		Watches(&agentlanev1alpha1.AgentSession{}, handler.EnqueueRequestsFromMapFunc(sessionQueue),
			builder.WithPredicates(specOrLifeChanged())).
		WatchesRawSource(source.Channel(r.Schedulers.Changes(), &handler.EnqueueRequestForObject{})).
		Named("lanequeue").
		Complete(retryUnanswered(r))
}

// sessionQueue maps an AgentSession to the LaneQueue it uses, whose session
// count it changes.
func sessionQueue(_ context.Context, o client.Object) []reconcile.Request {
	s, ok := o.(*agentlanev1alpha1.AgentSession)
	if !ok || s.Spec.QueueRef.Name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: s.Namespace, Name: s.Spec.QueueRef.Name}}}
}

// Reconcile brings the LaneQueue's scheduler in line with its spec and
// writes its status when it changed.
func (r *LaneQueueReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	lq := &agentlanev1alpha1.LaneQueue{}
	if err := r.Get(ctx, req.NamespacedName, lq); err != nil {
		if apierrors.IsNotFound(err) {
			// The queue is gone: stop its scheduler, cancelling what waits.
			r.Schedulers.Remove(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	log := logf.FromContext(ctx).WithValues("laneQueue", klog.KObj(lq))
	ctx = logf.IntoContext(ctx, log)

	if !lq.DeletionTimestamp.IsZero() {
		r.Schedulers.Remove(req.NamespacedName)
		return ctrl.Result{}, nil
	}

	old := lq.Status.DeepCopy()
	reconcileErr := r.reconcile(ctx, lq)
	if reconcileErr == nil {
		lq.Status.ObservedGeneration = lq.Generation
	}
	if !equality.Semantic.DeepEqual(old, &lq.Status) {
		if err := r.Status().Update(ctx, lq); err != nil {
			if apierrors.IsConflict(err) && reconcileErr == nil {
				// Another writer got there first; look again from its state.
				logf.FromContext(ctx).V(1).Info("Status changed under the write; reconciling again", "reason", err.Error())
				return ctrl.Result{RequeueAfter: retrySoon}, nil
			}
			return ctrl.Result{}, errors.Join(reconcileErr, fmt.Errorf("update status: %w", err))
		}
	}
	return ctrl.Result{}, reconcileErr
}

func (r *LaneQueueReconciler) reconcile(ctx context.Context, lq *agentlanev1alpha1.LaneQueue) error {
	log := logf.FromContext(ctx)
	key := types.NamespacedName{Namespace: lq.Namespace, Name: lq.Name}

	cfg, err := QueueConfig(&lq.Spec)
	if err != nil {
		// Admission accepted a spec the scheduler refuses. The previous
		// scheduler, if any, keeps running; the condition says why.
		meta.SetStatusCondition(&lq.Status.Conditions, metav1.Condition{
			Type: agentlanev1alpha1.LaneQueueReadyCondition, Status: metav1.ConditionFalse,
			Reason: agentlanev1alpha1.LaneQueueInvalidSpecReason, Message: err.Error(),
			ObservedGeneration: lq.Generation,
		})
		log.Info("spec refused by the scheduler", "reason", err.Error())
		// Not a transient error: retrying cannot help until the spec changes.
		return nil
	}
	started, err := r.Schedulers.Ensure(lq, cfg)
	if err != nil {
		meta.SetStatusCondition(&lq.Status.Conditions, metav1.Condition{
			Type: agentlanev1alpha1.LaneQueueReadyCondition, Status: metav1.ConditionUnknown,
			Reason: agentlanev1alpha1.InternalErrorReason, Message: err.Error(),
			ObservedGeneration: lq.Generation,
		})
		return err
	}
	if started {
		log.Info("scheduler started", "lanes", len(cfg.Lanes))
	}
	meta.SetStatusCondition(&lq.Status.Conditions, metav1.Condition{
		Type: agentlanev1alpha1.LaneQueueReadyCondition, Status: metav1.ConditionTrue,
		Reason:             agentlanev1alpha1.LaneQueueSchedulingReason,
		Message:            fmt.Sprintf("scheduling %d lanes", len(cfg.Lanes)),
		ObservedGeneration: lq.Generation,
	})

	q, _ := r.Schedulers.Get(key)
	sessions := &agentlanev1alpha1.AgentSessionList{}
	// Read only (counted, and their retention read): not copied out of
	// the cache.
	if err := r.List(ctx, sessions, client.InNamespace(lq.Namespace),
		client.MatchingFields{QueueRefNameField: lq.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("list the queue's sessions: %w", err)
	}
	setQueueStatus(&lq.Status, lq.Generation, cfg, q.Stats(), len(sessions.Items))
	if _, err := sweepFinished(ctx, r.Client, lq, sessions.Items); err != nil {
		return err
	}
	return nil
}

// setQueueStatus fills the counts and the UnderPressure condition from a
// scheduler snapshot.
func setQueueStatus(st *agentlanev1alpha1.LaneQueueStatus, generation int64, cfg lanequeue.Config, stats lanequeue.Stats, sessions int) {
	byPriority := slices.Clone(cfg.Lanes)
	slices.SortStableFunc(byPriority, func(a, b lanequeue.LaneConfig) int { return cmp.Compare(a.Priority, b.Priority) })
	names := make([]string, len(byPriority))
	for i, l := range byPriority {
		names[i] = l.Name
	}
	st.LaneNames = strings.Join(names, ",")
	st.Pending, st.Active, st.Sessions = int32(stats.Pending), int32(stats.Active), int32(sessions)

	st.Lanes = st.Lanes[:0]
	var pressured []string
	deepest := 0
	for _, l := range stats.Lanes {
		st.Lanes = append(st.Lanes, agentlanev1alpha1.LaneStatus{
			Name:         agentlanev1alpha1.LaneName(l.Name),
			Pending:      int32(l.Pending),
			Active:       int32(l.Active),
			Completed:    int64(l.Completed),
			Failed:       int64(l.Failed),
			DeadLettered: int64(l.DeadLettered),
			Cancelled:    int64(l.Cancelled),
			Paused:       l.Paused,
		})
		if cfg.PressureThreshold > 0 && l.Pending >= cfg.PressureThreshold {
			pressured = append(pressured, fmt.Sprintf("%s (%d pending)", l.Name, l.Pending))
			deepest = max(deepest, l.Pending)
		}
	}
	if len(st.Lanes) == 0 {
		st.Lanes = nil
	}

	cond := metav1.Condition{
		Type: agentlanev1alpha1.LaneQueueUnderPressureCondition, Status: metav1.ConditionFalse,
		Reason: agentlanev1alpha1.LaneQueueIdleReason, Message: "no lane is at its pressure threshold",
		ObservedGeneration: generation,
	}
	if len(pressured) > 0 {
		cond.Status = metav1.ConditionTrue
		cond.Reason = agentlanev1alpha1.LaneQueuePressureReason
		if a := cfg.Alerts; !a.Disabled {
			switch {
			case a.Critical > 0 && deepest >= a.Critical:
				cond.Reason = agentlanev1alpha1.LaneQueueCriticalDepthReason
			case a.Warning > 0 && deepest >= a.Warning:
				cond.Reason = agentlanev1alpha1.LaneQueueWarningDepthReason
			}
		}
		cond.Message = "under pressure: " + strings.Join(pressured, ", ")
	}
	meta.SetStatusCondition(&st.Conditions, cond)
	meta.SetStatusCondition(&st.Conditions, drainCondition(generation, stats.Drain))
}

// drainCondition is the Draining condition of a scheduler's drain state.
func drainCondition(generation int64, d *lanequeue.DrainStats) metav1.Condition {
	cond := metav1.Condition{
		Type: agentlanev1alpha1.LaneQueueDrainingCondition, Status: metav1.ConditionFalse,
		Reason: agentlanev1alpha1.LaneQueueNotDrainingReason, Message: "the queue takes commands",
		ObservedGeneration: generation,
	}
	if d == nil {
		return cond
	}
	cond.Status = metav1.ConditionTrue
	deadline := "no deadline"
	if !d.Deadline.IsZero() {
		deadline = "deadline " + d.Deadline.UTC().Format(time.RFC3339)
		if d.Expired {
			deadline += " passed: commands that had not started were cancelled"
		}
	}
	if d.Drained {
		cond.Reason = agentlanev1alpha1.LaneQueueDrainedReason
		cond.Message = "drained: no command is left; new commands are refused (" + deadline + ")"
		return cond
	}
	cond.Reason = agentlanev1alpha1.LaneQueueDrainingReason
	cond.Message = fmt.Sprintf("draining: %d commands left; new commands are refused (%s)", d.Live, deadline)
	return cond
}
