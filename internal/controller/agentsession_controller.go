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
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/budget"
	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/scheduling"
)

// SessionCleanupFinalizer keeps an AgentSession until the operator has
// cancelled its queued work and released its scheduler state.
const SessionCleanupFinalizer = "agentlane.io/session-cleanup"

// sessionRefreshInterval bounds how often the queue counts of a busy
// session are refreshed: its command and inbox events are coalesced into
// one reconcile per interval.
const sessionRefreshInterval = time.Second

// AgentSessionReconciler binds each AgentSession to its LaneQueue's
// scheduler: it applies the session's lane handler overrides, reports its
// phase, queue counts and Ready condition, and on deletion cancels the
// session's queued work.
type AgentSessionReconciler struct {
	client.Client
	// Schedulers are the manager's lane schedulers, shared with the
	// Session API.
	Schedulers *scheduling.Schedulers
	// Budgets is the manager's budget ledger, shared with the Session API:
	// the reconciler writes each session's consumption into its status.
	Budgets *budget.Ledger
	// Passivations orders checkpoints saved through the Session API
	// against passivation requests; the reconciler makes its own when nil.
	Passivations *PassivationClock
	// Recorder receives the session's Kubernetes Events (passivation,
	// eviction, resume).
	Recorder events.EventRecorder
	// SessionAPIURL is the Session API's address as runtime pods reach it;
	// it is set in their environment when not empty.
	SessionAPIURL string
	// SessionAPIAudience, when set, is the audience of the service-account
	// token projected into runtime pods for the Session API.
	SessionAPIAudience string
	// SessionAPICA, when set, returns the CA bundle runtime pods verify the
	// Session API with; it is kept in each namespace's
	// SessionAPICAConfigMap and mounted into the pods.
	SessionAPICA func() []byte
	// APIReader reads the CA ConfigMaps around the cache; Client when nil.
	APIReader client.Reader
	// Clock is the manager's clock; the real clock when nil.
	Clock clock.PassiveClock

	// activity remembers when each session last did something, for the
	// idle reaper; the schedulers report it (SessionActivity, bound as
	// their OnSessionActivity hook).
	activity activity
	// refresh turns that activity into coalesced reconciles.
	refresh *sessionRefresh
	// written skips the watch events of the reconciler's own status writes.
	written ownWrites
	// warm, when set, lets sessions adopt the warm pods of RuntimePools
	// (runtimepool_adopt.go); it is shared with the RuntimePool controller.
	warm *warmPools
	// madePods names, per session, the runtime pod the reconciler last
	// created or adopted, until the cache shows it (recentPod).
	madePods sync.Map // types.NamespacedName -> string
}

var _ reconcile.Reconciler = &AgentSessionReconciler{}

// SessionActivity is the schedulers' OnSessionActivity hook
// (scheduling.Hooks): it records that the session did something at at, for
// the idle reaper, and asks for a coalesced reconcile of the session. It
// must be bound after SetupWithManager.
func (r *AgentSessionReconciler) SessionActivity(key types.NamespacedName, at time.Time) {
	r.activity.touch(key, at)
	r.refresh.mark(key)
}

// SetupWithManager registers the reconciler; it also reacts to its
// LaneQueue appearing, changing or going away.
func (r *AgentSessionReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil || r.Schedulers == nil || r.Budgets == nil {
		return errors.New("AgentSessionReconciler needs a Client, Schedulers and Budgets")
	}
	r.refresh = newSessionRefresh(sessionRefreshInterval)
	if err := mgr.Add(r.refresh); err != nil {
		return fmt.Errorf("add the session refresh: %w", err)
	}
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.Passivations == nil {
		r.Passivations = &PassivationClock{}
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&agentlanev1alpha1.AgentSession{}, builder.WithPredicates(skipOwnWrites(&r.written))).
		Owns(&corev1.Pod{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Watches(&agentlanev1alpha1.LaneQueue{}, handler.EnqueueRequestsFromMapFunc(r.queueSessions),
			builder.WithPredicates(queueChangedForSessions())).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.nodeSessions),
			builder.WithPredicates(nodeCordonChanged())).
		WatchesRawSource(source.Channel(r.Budgets.Changes(), &handler.EnqueueRequestForObject{})).
		WatchesRawSource(source.Channel(r.refresh.events, &handler.EnqueueRequestForObject{})).
		Named("agentsession").
		Complete(retryUnanswered(r))
}

// queueSessions maps a LaneQueue to the sessions that use it.
func (r *AgentSessionReconciler) queueSessions(ctx context.Context, o client.Object) []reconcile.Request {
	return r.sessionRequests(ctx, o, client.InNamespace(o.GetNamespace()), client.MatchingFields{QueueRefNameField: o.GetName()})
}

// nodeSessions maps a Node to the sessions whose runtime pod runs on it.
func (r *AgentSessionReconciler) nodeSessions(ctx context.Context, o client.Object) []reconcile.Request {
	return r.sessionRequests(ctx, o, client.MatchingFields{NodeNameField: o.GetName()})
}

// sessionRequests lists the sessions that match opts, as reconcile
// requests; o, which they depend on, is named if listing fails.
func (r *AgentSessionReconciler) sessionRequests(ctx context.Context, o client.Object, opts ...client.ListOption) []reconcile.Request {
	list := &agentlanev1alpha1.AgentSessionList{}
	if err := r.List(ctx, list, opts...); err != nil {
		logf.FromContext(ctx).Error(err, "list the sessions that depend on an object", "object", klog.KObj(o))
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, s := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&s)})
	}
	return reqs
}

// Reconcile binds the session to its queue's scheduler and writes its status
// when it changed.
func (r *AgentSessionReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	s := &agentlanev1alpha1.AgentSession{}
	if err := r.Get(ctx, req.NamespacedName, s); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	log := logf.FromContext(ctx).WithValues("agentSession", klog.KObj(s))
	ctx = logf.IntoContext(ctx, log)

	if !s.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.reconcileDelete(ctx, s)
	}
	if controllerutil.AddFinalizer(s, SessionCleanupFinalizer) {
		if err := r.Update(ctx, s); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}

	old := s.Status.DeepCopy()
	result, ready, reconcileErr := r.reconcile(ctx, s)
	if ready != nil {
		ready.Type, ready.ObservedGeneration = agentlanev1alpha1.AgentSessionReadyCondition, s.Generation
		meta.SetStatusCondition(&s.Status.Conditions, *ready)
	}
	r.Budgets.ApplyStatus(s)
	if reconcileErr == nil {
		s.Status.ObservedGeneration = s.Generation
	}
	if !equality.Semantic.DeepEqual(old, &s.Status) {
		if err := r.Status().Update(ctx, s); err != nil {
			if apierrors.IsConflict(err) && reconcileErr == nil {
				// Another writer got there first; look again from its state.
				log.V(1).Info("Status changed under the write; reconciling again", "reason", err.Error())
				return ctrl.Result{RequeueAfter: retrySoon}, nil
			}
			return ctrl.Result{}, errors.Join(reconcileErr, fmt.Errorf("update status: %w", err))
		}
		r.written.wrote(s)
	}
	return result, reconcileErr
}

// reconcile binds the session to its queue and runs its life cycle. It
// returns the session's Ready condition, decided here and only here: the
// first reason the life cycle found for the session not to be ready, else
// its binding to the queue; nil leaves the condition as it is.
func (r *AgentSessionReconciler) reconcile(ctx context.Context, s *agentlanev1alpha1.AgentSession) (ctrl.Result, *metav1.Condition, error) {
	r.Schedulers.SetRetention(client.ObjectKeyFromObject(s), scheduling.RetentionLimitsOf(s.Spec.Retention))
	queueKey := types.NamespacedName{Namespace: s.Namespace, Name: s.Spec.QueueRef.Name}
	lq := &agentlanev1alpha1.LaneQueue{}
	if err := r.Get(ctx, queueKey, lq); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil, err
		}
		return ctrl.Result{}, unbound(s, fmt.Sprintf("LaneQueue %q does not exist in namespace %q", queueKey.Name, queueKey.Namespace)), nil
	}
	q, inbox, ok := r.Schedulers.Session(queueKey)
	if !ok {
		// The LaneQueue controller has not started its scheduler yet (or
		// refuses its spec); the LaneQueue watch brings the session back.
		return ctrl.Result{RequeueAfter: sessionRefreshInterval}, unbound(s, fmt.Sprintf("LaneQueue %q has no running scheduler yet", queueKey.Name)), nil
	}

	st := q.SessionStats(s.Name)
	unknown, refused, behind := applyLaneOverrides(q, lq, s, st.LaneModes)
	if s.Status.Phase == "" || s.Status.Phase == agentlanev1alpha1.SessionPending {
		s.Status.Phase = agentlanev1alpha1.SessionActive
	}
	bound := &metav1.Condition{
		Status:  metav1.ConditionTrue,
		Reason:  agentlanev1alpha1.AgentSessionActiveReason,
		Message: fmt.Sprintf("bound to LaneQueue %q", queueKey.Name),
	}
	switch {
	case len(refused) > 0:
		bound.Status = metav1.ConditionFalse
		bound.Reason = agentlanev1alpha1.AgentSessionLaneOverrideRefusedReason
		bound.Message = fmt.Sprintf("LaneQueue %q does not let a session switch these lanes to these modes (spec.lanes[].sessionOverrides.allowedModes): %s; those lanes keep their own mode, the other overrides apply",
			queueKey.Name, strings.Join(refused, ", "))
		if prev := meta.FindStatusCondition(s.Status.Conditions, agentlanev1alpha1.AgentSessionReadyCondition); prev == nil || prev.Message != bound.Message {
			r.Recorder.Eventf(s, lq, corev1.EventTypeWarning, agentlanev1alpha1.AgentSessionLaneOverrideRefusedReason, "OverrideLane", "%s", bound.Message)
		}
	case len(unknown) > 0:
		bound.Status = metav1.ConditionFalse
		bound.Reason = agentlanev1alpha1.AgentSessionInvalidLaneOverrideReason
		bound.Message = fmt.Sprintf("laneOverrides name lanes LaneQueue %q does not have: %s; the other overrides apply",
			queueKey.Name, strings.Join(unknown, ", "))
	}

	s.Status.Queue.Pending = int32(st.Pending)
	s.Status.Queue.Active = int32(st.Active)
	s.Status.Queue.Completed = int64(st.Completed)
	s.Status.Queue.Failed = int64(st.Failed)
	s.Status.Queue.DeadLettered = int64(st.DeadLettered)
	s.Status.Queue.QueuedMessages = int32(inbox.Queued(s.Name))

	lc := &lifecycle{key: client.ObjectKeyFromObject(s), queue: q, inbox: inbox, stats: st, now: r.Clock.Now()}
	after, err := r.reconcileLifecycle(ctx, s, lc)
	if err != nil {
		return ctrl.Result{}, nil, err
	}
	ready := lc.notReady
	if ready == nil && s.Status.Phase == agentlanev1alpha1.SessionActive {
		ready = bound
	}
	if behind && (after <= 0 || after > sessionRefreshInterval) {
		// The running scheduler has not taken the LaneQueue's new spec yet:
		// apply the override again once it has.
		after = sessionRefreshInterval
	}
	// Counts move while work is in flight; the session's command events
	// (sessionRefresh) bring it back, at a bounded rate.
	return ctrl.Result{RequeueAfter: after}, ready, nil
}

// unbound records that the session has no scheduler to run in, and returns
// why it is not ready.
func unbound(s *agentlanev1alpha1.AgentSession, msg string) *metav1.Condition {
	if s.Status.Phase == "" || s.Status.Phase == agentlanev1alpha1.SessionActive {
		s.Status.Phase = agentlanev1alpha1.SessionPending
	}
	return notReady(agentlanev1alpha1.AgentSessionQueueNotFoundReason, msg)
}

// applyLaneOverrides makes the scheduler's per-session handler modes, now
// current, match the session's laneOverrides, for new commands only. It
// returns the overridden lanes it could not apply because the queue does not
// have them, and the overrides ("lane: Mode") it refused because the lane's
// sessionOverrides do not allow the mode: those lanes keep their own mode.
// A switch the LaneQueue does not allow is never applied, so a session cannot
// send an Internal lane's commands, of any type the lane accepts, to the
// shared workers; the scheduler refuses it as well (LaneConfig.SessionModes).
// behind tells that the scheduler refused a switch the LaneQueue's spec
// allows: it runs an older spec, and the override is to be applied again.
func applyLaneOverrides(q *lanequeue.Queue, lq *agentlanev1alpha1.LaneQueue, s *agentlanev1alpha1.AgentSession, current map[string]lanequeue.HandlerMode) (unknown, refused []string, behind bool) {
	want := make(map[string]lanequeue.HandlerMode, len(s.Spec.LaneOverrides))
	for _, o := range s.Spec.LaneOverrides {
		want[string(o.Lane)] = lanequeue.HandlerMode(o.HandlerMode)
	}
	lanes := map[string]bool{}
	for _, l := range q.Config().Lanes {
		lanes[l.Name] = true
	}
	for lane, mode := range want {
		if !lanes[lane] {
			unknown = append(unknown, lane)
			delete(want, lane)
			continue
		}
		i := slices.IndexFunc(lq.Spec.Lanes, func(l agentlanev1alpha1.Lane) bool { return string(l.Name) == lane })
		if i < 0 || !lq.Spec.Lanes[i].SessionModeAllowed(agentlanev1alpha1.HandlerMode(mode)) {
			refused = append(refused, fmt.Sprintf("%s: %s", lane, mode))
			delete(want, lane)
			continue
		}
		if err := q.SetSessionLaneMode(s.Name, lane, mode); err != nil {
			if errors.Is(err, lanequeue.ErrModeOverrideRefused) {
				refused = append(refused, fmt.Sprintf("%s: %s", lane, mode))
				behind = true
			} else {
				unknown = append(unknown, lane)
			}
			delete(want, lane)
		}
	}
	for lane := range current {
		if _, keep := want[lane]; !keep {
			q.ClearSessionLaneMode(s.Name, lane)
		}
	}
	slices.Sort(unknown)
	slices.Sort(refused)
	return unknown, refused, behind
}

// reconcileDelete cancels the session's queued work, deletes its
// ExternalTasks (which cancels those that run), forgets its scheduler state
// and lets the session go.
func (r *AgentSessionReconciler) reconcileDelete(ctx context.Context, s *agentlanev1alpha1.AgentSession) error {
	if !controllerutil.ContainsFinalizer(s, SessionCleanupFinalizer) {
		return nil
	}
	// Garbage collection would remove the tasks through their owner
	// reference, but only once the session is gone, and not at all for tasks
	// without one.
	if err := r.DeleteAllOf(ctx, &agentlanev1alpha1.ExternalTask{}, client.InNamespace(s.Namespace),
		client.MatchingLabels{agentlanev1alpha1.SessionLabel: s.Name}); err != nil {
		return fmt.Errorf("delete the session's tasks: %w", err)
	}
	n, err := r.Schedulers.ReleaseSession(types.NamespacedName{Namespace: s.Namespace, Name: s.Spec.QueueRef.Name}, s.Name)
	if err != nil {
		// A command still running (a task being cancelled as it is
		// deleted); try again shortly.
		return fmt.Errorf("release the session's scheduler state: %w", err)
	}
	key := client.ObjectKeyFromObject(s)
	r.Budgets.Forget(key)
	r.activity.forget(key)
	r.written.forget(key)
	r.Passivations.forget(key)
	r.madePods.Delete(key)
	logf.FromContext(ctx).Info("session deleted; its work was cancelled", "cancelled", n)
	controllerutil.RemoveFinalizer(s, SessionCleanupFinalizer)
	if err := r.Update(ctx, s); err != nil {
		return fmt.Errorf("remove finalizer: %w", err)
	}
	return nil
}
