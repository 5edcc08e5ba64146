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

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/capacity"
	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/scheduling"
)

// +kubebuilder:rbac:groups=agentlane.io,resources=workerpools,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=agentlane.io,resources=workerpools/status,verbs=get;update;patch

// Defaults of WorkerPoolOptions.
const (
	DefaultWorkerPoolMaxReplicas   = 100
	DefaultWorkerPoolsPerNamespace = 16
	// workerPoolStatusInterval bounds how often a busy pool's status is
	// rewritten for its backlog and busy workers alone; a change of size
	// or condition is written at once.
	workerPoolStatusInterval = time.Second
)

// WorkerPoolOptions are the manager's settings for every WorkerPool.
type WorkerPoolOptions struct {
	// Image is the workers' image when a pool names none.
	Image string
	// WorkerRole is the ClusterRole bound to the pools' service account in
	// each namespace that has a pool.
	WorkerRole string
	// MaxReplicas bounds every pool's replicas, whatever its maxReplicas.
	MaxReplicas int32
	// PerNamespace bounds the pools a namespace runs: the oldest run, the
	// others are held at zero with the reason TooManyPools.
	PerNamespace int
	// Env is set in every pool worker's worker container, after the
	// manager's own variables: the manager passes on where its traces go
	// (TraceExportEnv), so that a pool's workers trace as it does.
	Env []corev1.EnvVar
}

// TraceExportEnv returns the variables of environ (as os.Environ gives
// them) that say where OpenTelemetry traces go and how they are sampled,
// for the workers of WorkerPools. It leaves out the exporter's headers,
// certificates and keys: a pool's Deployment lives in the tenant's
// namespace, where its readers see every variable of its pods.
func TraceExportEnv(environ []string) []corev1.EnvVar {
	passed := []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
		"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
		"OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG",
		"OTEL_TRACES_EXPORTER", "OTEL_SDK_DISABLED",
	}
	var env []corev1.EnvVar
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if ok && slices.Contains(passed, name) {
			env = append(env, corev1.EnvVar{Name: name, Value: value})
		}
	}
	slices.SortFunc(env, func(a, b corev1.EnvVar) int { return strings.Compare(a.Name, b.Name) })
	return env
}

func (o *WorkerPoolOptions) defaults() {
	if o.WorkerRole == "" {
		o.WorkerRole = DefaultWorkerRole
	}
	if o.MaxReplicas <= 0 {
		o.MaxReplicas = DefaultWorkerPoolMaxReplicas
	}
	if o.PerNamespace <= 0 {
		o.PerNamespace = DefaultWorkerPoolsPerNamespace
	}
}

// WorkerPoolReconciler sizes each WorkerPool from the backlog of the lanes
// it serves and keeps its Deployment of workers, the workers' service
// account and its RoleBinding in the pool's namespace.
//
// The backlog is read from the schedulers, which know every lane's queued
// and running commands exactly. The controller watches the ExternalTasks
// and LaneQueues of a pool's namespace, so a task that arrives sizes its
// pool at once, not at the next poll.
type WorkerPoolReconciler struct {
	// Client reads through the manager's cache; the service accounts and
	// RoleBindings, which it does not cache, are only created: again every
	// rbacRecheckInterval, so that one deleted comes back.
	client.Client
	Schedulers *scheduling.Schedulers
	Recorder   events.EventRecorder
	Clock      clock.PassiveClock
	Options    WorkerPoolOptions

	mu sync.Mutex
	// sizers remember each pool's recommendations (its stabilization
	// windows); lastStatus when its status was last written.
	sizers     map[types.NamespacedName]*capacity.Sizer
	lastStatus map[types.NamespacedName]time.Time
	// rbacDone is when the service account and RoleBinding of each
	// namespace were last seen in place.
	rbacDone map[string]time.Time
	metrics  *workerPoolMetrics
}

// SetupWithManager registers the controller: it reconciles WorkerPools, and
// is woken by their Deployments and by every change of a task or queue of a
// namespace with pools.
func (r *WorkerPoolReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil || r.Schedulers == nil || r.Recorder == nil {
		return errors.New("WorkerPoolReconciler needs a Client, the Schedulers and a Recorder")
	}
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	r.Options.defaults()
	r.sizers = map[types.NamespacedName]*capacity.Sizer{}
	r.lastStatus = map[types.NamespacedName]time.Time{}
	r.rbacDone = map[string]time.Time{}
	if r.metrics == nil {
		r.metrics = newWorkerPoolMetrics()
	}
	// A task's arrival, start and end, not its heartbeats.
	taskMoved := predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return true },
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*agentlanev1alpha1.ExternalTask)
			n, ok2 := e.ObjectNew.(*agentlanev1alpha1.ExternalTask)
			return !ok1 || !ok2 || o.Status.Phase != n.Status.Phase || o.Status.Worker != n.Status.Worker
		},
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&agentlanev1alpha1.WorkerPool{}).
		Owns(&appsv1.Deployment{}).
		Watches(&agentlanev1alpha1.ExternalTask{}, handler.EnqueueRequestsFromMapFunc(r.poolsOfNamespace),
			builder.WithPredicates(taskMoved)).
		Watches(&agentlanev1alpha1.LaneQueue{}, handler.EnqueueRequestsFromMapFunc(r.poolsOfNamespace)).
		Named("workerpool").
		Complete(r)
}

// poolsOfNamespace maps an object to the pools of its namespace that serve
// its queue: a pool never hears of another namespace's tasks.
func (r *WorkerPoolReconciler) poolsOfNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	queue := ""
	switch t := o.(type) {
	case *agentlanev1alpha1.ExternalTask:
		queue = t.Labels[agentlanev1alpha1.QueueLabel]
		if queue == "" && t.Spec.QueueRef != nil {
			queue = t.Spec.QueueRef.Name
		}
	case *agentlanev1alpha1.LaneQueue:
		queue = t.Name
	}
	pools := &agentlanev1alpha1.WorkerPoolList{}
	if err := r.List(ctx, pools, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, p := range pools.Items {
		if queue == "" || slices.Contains(p.Spec.Queues, queue) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&p)})
		}
	}
	return reqs
}

// Reconcile sizes the pool and brings its Deployment and status in line.
func (r *WorkerPoolReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pool := &agentlanev1alpha1.WorkerPool{}
	if err := r.Get(ctx, req.NamespacedName, pool); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	log := logf.FromContext(ctx).WithValues("workerPool", klog.KObj(pool))
	ctx = logf.IntoContext(ctx, log)
	if !pool.DeletionTimestamp.IsZero() {
		// The Deployment goes with the pool (owner reference).
		r.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	old := pool.Status.DeepCopy()
	st := &pool.Status
	st.Selector = labels.SelectorFromSet(workerPoolSelector(pool)).String()

	deploy := &appsv1.Deployment{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: pool.Namespace, Name: workerPoolDeploymentName(pool)}, deploy); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		deploy = nil
	}
	current := int32(0)
	if deploy != nil {
		current = ptr.Deref(deploy.Spec.Replicas, 0)
	}

	work, err := r.backlog(ctx, pool)
	if err != nil {
		return ctrl.Result{}, err
	}
	st.Backlog = int32(min(work, 1<<30))
	st.BusyReplicas, err = r.busy(ctx, pool)
	if err != nil {
		return ctrl.Result{}, err
	}

	blocked, blockReason, blockMsg, err := r.blocked(ctx, pool)
	if err != nil {
		return ctrl.Result{}, err
	}
	var d capacity.Decision
	bounds := capacity.Bounds{Min: ptr.Deref(pool.Spec.MinReplicas, 0), Max: pool.Spec.MaxReplicas, Manager: r.Options.MaxReplicas}
	external := pool.Spec.Autoscaling == agentlanev1alpha1.WorkerPoolAutoscalingExternal
	switch {
	case blocked:
		d = capacity.Decision{Replicas: 0, Reason: blockMsg}
	case external:
		d = capacity.External(ptr.Deref(pool.Spec.Replicas, current), bounds)
	default:
		w := capacity.Windows{Up: capacity.DefaultScaleUpWindow, Down: capacity.DefaultScaleDownWindow}
		if b := pool.Spec.Behavior; b != nil {
			if b.ScaleUp != nil && b.ScaleUp.StabilizationWindowSeconds != nil {
				w.Up = time.Duration(*b.ScaleUp.StabilizationWindowSeconds) * time.Second
			}
			if b.ScaleDown != nil && b.ScaleDown.StabilizationWindowSeconds != nil {
				w.Down = time.Duration(*b.ScaleDown.StabilizationWindowSeconds) * time.Second
			}
		}
		d = r.sizer(req.NamespacedName).Recommend(work, pool.Spec.Capacity, current, bounds, w)
	}

	// In Manager mode spec.replicas shows the size, for the scale
	// subresource's readers; in External mode it is the autoscaler's.
	if !external && !blocked && ptr.Deref(pool.Spec.Replicas, -1) != d.Replicas {
		// On a copy: the patch's answer carries the stored status.
		written := pool.DeepCopy()
		written.Spec.Replicas = ptr.To(d.Replicas)
		if err := r.Patch(ctx, written, client.MergeFrom(pool)); err != nil {
			return ctrl.Result{}, fmt.Errorf("record the pool's replicas: %w", err)
		}
		pool.Spec.Replicas, pool.ResourceVersion, pool.Generation = written.Spec.Replicas, written.ResourceVersion, written.Generation
	}

	if err := r.ensureRBAC(ctx, pool.Namespace); err != nil {
		return ctrl.Result{}, err
	}
	want := workerPoolDeployment(pool, d.Replicas, r.Options.Image, r.Options.Env)
	if deploy == nil {
		if err := controllerutil.SetControllerReference(pool, want, r.Scheme()); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.Create(ctx, want); err != nil {
			return ctrl.Result{}, fmt.Errorf("create the pool's Deployment: %w", err)
		}
		deploy = want
	} else if ptr.Deref(deploy.Spec.Replicas, 0) != d.Replicas ||
		deploy.Annotations[workerPoolTemplateHash] != want.Annotations[workerPoolTemplateHash] {
		deploy.Spec.Replicas = want.Spec.Replicas
		deploy.Spec.Template = want.Spec.Template
		if deploy.Annotations == nil {
			deploy.Annotations = map[string]string{}
		}
		deploy.Annotations[workerPoolTemplateHash] = want.Annotations[workerPoolTemplateHash]
		if err := r.Update(ctx, deploy); err != nil {
			return ctrl.Result{}, fmt.Errorf("update the pool's Deployment: %w", err)
		}
	}

	now := r.Clock.Now()
	if d.Replicas != current {
		st.LastScaleTime = &metav1.Time{Time: now}
		st.LastScaleReason = truncateReason(fmt.Sprintf("%d to %d: %s", current, d.Replicas, d.Reason))
		r.Recorder.Eventf(pool, deploy, corev1.EventTypeNormal, agentlanev1alpha1.WorkerPoolScaledReason, "Scale",
			"from %d to %d workers: %s", current, d.Replicas, d.Reason)
		r.metrics.scaled(pool, current, d.Replicas)
		log.V(1).Info("Scaled", "from", current, "to", d.Replicas, "reason", d.Reason)
	}
	st.DesiredReplicas = d.Replicas
	st.Replicas = deploy.Status.Replicas
	st.ReadyReplicas = deploy.Status.ReadyReplicas
	r.setConditions(pool, d, blocked, blockReason, blockMsg)
	r.metrics.observe(pool)

	// Back at least every rbacRecheckInterval: a quiet pool's workers keep
	// their RoleBinding too.
	result := ctrl.Result{RequeueAfter: rbacRecheckInterval}
	if d.RecheckAfter > 0 {
		result.RequeueAfter = min(d.RecheckAfter, rbacRecheckInterval)
	}
	if !equality.Semantic.DeepEqual(*old, *st) {
		if onlyCounts(old, st) && now.Sub(r.lastWrite(req.NamespacedName)) < workerPoolStatusInterval {
			// Counts alone: at most one write per interval.
			next := workerPoolStatusInterval - now.Sub(r.lastWrite(req.NamespacedName))
			if result.RequeueAfter == 0 || next < result.RequeueAfter {
				result.RequeueAfter = next
			}
			return result, nil
		}
		st.ObservedGeneration = pool.Generation
		if err := r.Status().Update(ctx, pool); err != nil {
			return ctrl.Result{}, err
		}
		r.wrote(req.NamespacedName, now)
	}
	return result, nil
}

// backlog counts the queued and running commands of the Workers-target
// External lanes pool serves, each lane cut to its maxConcurrency and each
// queue to its maxConcurrent: the work its workers can be given now. Only
// the schedulers of the pool's own namespace are read.
func (r *WorkerPoolReconciler) backlog(ctx context.Context, pool *agentlanev1alpha1.WorkerPool) (int64, error) {
	var total int64
	for _, name := range pool.Spec.Queues {
		key := types.NamespacedName{Namespace: pool.Namespace, Name: name}
		lq := &agentlanev1alpha1.LaneQueue{}
		if err := r.Get(ctx, key, lq); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return 0, err
		}
		q, ok := r.Schedulers.Get(key)
		if !ok {
			continue
		}
		var queueWork int64
		for _, ls := range q.Stats().Lanes {
			if ls.Mode != lanequeue.External {
				continue
			}
			if len(pool.Spec.Lanes) > 0 && !slices.Contains(pool.Spec.Lanes, ls.Name) {
				continue
			}
			spec := laneSpec(lq, ls.Name)
			if spec == nil || !workersTarget(spec) {
				continue
			}
			queueWork += capacity.LaneWork(ls.Pending, ls.Active, spec.MaxConcurrency)
		}
		if lq.Spec.MaxConcurrent > 0 {
			queueWork = min(queueWork, int64(lq.Spec.MaxConcurrent))
		}
		total += queueWork
	}
	return total, nil
}

// laneSpec returns the lane name of lq, nil when it has none.
func laneSpec(lq *agentlanev1alpha1.LaneQueue, name string) *agentlanev1alpha1.Lane {
	for i := range lq.Spec.Lanes {
		if string(lq.Spec.Lanes[i].Name) == name {
			return &lq.Spec.Lanes[i]
		}
	}
	return nil
}

// workersTarget tells whether the lane's tasks go to a pool's workers:
// its target is Workers and it selects no worker by label (a pool's
// workers advertise none, so they never claim such a lane's tasks).
func workersTarget(l *agentlanev1alpha1.Lane) bool {
	t := l.ExternalTarget
	if t == nil {
		return true
	}
	if t.Type != "" && t.Type != agentlanev1alpha1.ExternalTargetWorkers {
		return false
	}
	return t.WorkerSelector == nil || (len(t.WorkerSelector.MatchLabels) == 0 && len(t.WorkerSelector.MatchExpressions) == 0)
}

// busy counts the pool's workers that hold a task: the distinct workers,
// among the pods of the pool's Deployment, named by a dispatched or running
// task of its namespace.
func (r *WorkerPoolReconciler) busy(ctx context.Context, pool *agentlanev1alpha1.WorkerPool) (int32, error) {
	tasks := &agentlanev1alpha1.ExternalTaskList{}
	if err := r.List(ctx, tasks, client.InNamespace(pool.Namespace)); err != nil {
		return 0, err
	}
	prefix := workerPoolDeploymentName(pool) + "-"
	workers := map[string]bool{}
	for i := range tasks.Items {
		t := &tasks.Items[i]
		switch t.Status.Phase {
		case agentlanev1alpha1.ExternalTaskDispatched, agentlanev1alpha1.ExternalTaskRunning:
		default:
			continue
		}
		// A Deployment's pod is <deployment>-<template hash>-<suffix>.
		if rest, ok := strings.CutPrefix(t.Status.Worker, prefix); ok && strings.Count(rest, "-") == 1 {
			workers[t.Status.Worker] = true
		}
	}
	return int32(len(workers)), nil
}

// blocked tells whether the pool may run no worker at all: its template
// is refused, or its namespace has too many pools.
func (r *WorkerPoolReconciler) blocked(ctx context.Context, pool *agentlanev1alpha1.WorkerPool) (bool, string, string, error) {
	if problems := workerPoolTemplateProblems(pool.Spec.PodTemplate); len(problems) > 0 {
		return true, agentlanev1alpha1.WorkerPoolInvalidTemplateReason,
			"spec.podTemplate may not set " + strings.Join(problems, "; "), nil
	}
	pools := &agentlanev1alpha1.WorkerPoolList{}
	if err := r.List(ctx, pools, client.InNamespace(pool.Namespace)); err != nil {
		return false, "", "", err
	}
	if len(pools.Items) <= r.Options.PerNamespace {
		return false, "", "", nil
	}
	slices.SortFunc(pools.Items, func(a, b agentlanev1alpha1.WorkerPool) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	i := slices.IndexFunc(pools.Items, func(p agentlanev1alpha1.WorkerPool) bool { return p.Name == pool.Name })
	if i >= r.Options.PerNamespace {
		return true, agentlanev1alpha1.WorkerPoolTooManyReason,
			fmt.Sprintf("the namespace has %d WorkerPools; the manager runs the %d oldest", len(pools.Items), r.Options.PerNamespace), nil
	}
	return false, "", "", nil
}

// rbacRecheckInterval is how often a namespace's pool service account and
// RoleBinding are made again if missing: two create calls per namespace
// with pools, which the API server answers AlreadyExists.
const rbacRecheckInterval = 5 * time.Minute

// ensureRBAC makes the pools' service account of namespace and binds the
// workers' role to it there, if missing: at most once per
// rbacRecheckInterval and namespace, so that a deleted one is back within
// it (the manager does not cache either kind).
func (r *WorkerPoolReconciler) ensureRBAC(ctx context.Context, namespace string) error {
	now := r.Clock.Now()
	r.mu.Lock()
	done, ok := r.rbacDone[namespace]
	r.mu.Unlock()
	if ok && now.Sub(done) < rbacRecheckInterval {
		return nil
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: WorkerPoolServiceAccount, Namespace: namespace,
		Labels: map[string]string{"app.kubernetes.io/name": "agentlane", "app.kubernetes.io/component": "worker"}},
		AutomountServiceAccountToken: ptr.To(false)}
	if err := r.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the pool workers' service account: %w", err)
	}
	rb := workerPoolRoleBinding(namespace, r.Options.WorkerRole)
	if err := r.Create(ctx, rb); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("bind the workers' role to the pool workers' service account: %w", err)
		}
	}
	r.mu.Lock()
	r.rbacDone[namespace] = now
	r.mu.Unlock()
	return nil
}

// setConditions sets Ready and ScalingLimited.
func (r *WorkerPoolReconciler) setConditions(pool *agentlanev1alpha1.WorkerPool, d capacity.Decision, blocked bool, blockReason, blockMsg string) {
	st := &pool.Status
	ready := metav1.Condition{Type: agentlanev1alpha1.WorkerPoolReadyCondition, ObservedGeneration: pool.Generation}
	switch {
	case blocked:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, blockReason, truncateReason(blockMsg)
	case st.ReadyReplicas >= d.Replicas:
		ready.Status, ready.Reason = metav1.ConditionTrue, agentlanev1alpha1.WorkerPoolAvailableReason
		ready.Message = fmt.Sprintf("%d of %d workers ready", st.ReadyReplicas, d.Replicas)
	default:
		ready.Status, ready.Reason = metav1.ConditionFalse, agentlanev1alpha1.WorkerPoolProgressingReason
		ready.Message = fmt.Sprintf("%d of %d workers ready", st.ReadyReplicas, d.Replicas)
	}
	meta.SetStatusCondition(&st.Conditions, ready)
	limited := metav1.Condition{Type: agentlanev1alpha1.WorkerPoolScalingLimitedCondition, ObservedGeneration: pool.Generation,
		Status: metav1.ConditionFalse, Reason: agentlanev1alpha1.WorkerPoolWithinBoundsReason, Message: "the size is within its bounds"}
	if d.Limit != capacity.LimitNone {
		limited.Status, limited.Reason = metav1.ConditionTrue, string(d.Limit)
		limited.Message = fmt.Sprintf("%d workers asked for, %d allowed", d.Raw, d.Replicas)
	}
	meta.SetStatusCondition(&st.Conditions, limited)
}

// onlyCounts tells whether the two statuses differ only in the counts a
// busy pool changes all the time.
func onlyCounts(a, b *agentlanev1alpha1.WorkerPoolStatus) bool {
	x, y := a.DeepCopy(), b.DeepCopy()
	x.Backlog, y.Backlog = 0, 0
	x.BusyReplicas, y.BusyReplicas = 0, 0
	x.ObservedGeneration, y.ObservedGeneration = 0, 0
	return equality.Semantic.DeepEqual(x, y)
}

// truncateReason keeps a status message within the API's bound.
func truncateReason(s string) string {
	if len(s) > 256 {
		return s[:253] + "..."
	}
	return s
}

func (r *WorkerPoolReconciler) sizer(key types.NamespacedName) *capacity.Sizer {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.sizers[key]
	if !ok {
		s = capacity.NewSizer(r.Clock)
		r.sizers[key] = s
	}
	return s
}

func (r *WorkerPoolReconciler) lastWrite(key types.NamespacedName) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastStatus[key]
}

func (r *WorkerPoolReconciler) wrote(key types.NamespacedName, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastStatus[key] = at
}

// forget drops what the controller holds of a deleted pool.
func (r *WorkerPoolReconciler) forget(key types.NamespacedName) {
	r.mu.Lock()
	delete(r.sizers, key)
	delete(r.lastStatus, key)
	r.mu.Unlock()
	r.metrics.forget(key)
}
