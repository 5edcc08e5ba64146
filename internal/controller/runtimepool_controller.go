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
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// A RuntimePool keeps ready runtime pods of one template (warm pods) that
// the sessions of its namespace with that template adopt instead of
// waiting for a new pod (runtimepool_adopt.go). A warm pod is built as a
// session's runtime pod (buildRuntimePod) without a session: its
// agentlane.io/session-runtime label is empty, which also keeps it in the
// manager's cache of runtime pods (CacheOptions), and its containers get
// EnvWarmPool instead of the session's name, identity and checkpoint; the
// runtime waits until the Session API tells it its session.
//
// The pool and the adopting session never hand one pod to two owners:
// adoption is one update of the pod at the resourceVersion the session
// read, and the pool deletes a pod only at the resourceVersion it read, so
// whichever writes second fails and looks again.

// +kubebuilder:rbac:groups=agentlane.io,resources=runtimepools,verbs=get;list;watch
// +kubebuilder:rbac:groups=agentlane.io,resources=runtimepools/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete;update

// Labels and annotation of warm and adopted pods (api/v1alpha1).
const (
	RuntimePoolLabel    = agentlanev1alpha1.RuntimePoolLabel
	TemplateHashLabel   = agentlanev1alpha1.TemplateHashLabel
	AdoptedAtAnnotation = agentlanev1alpha1.AdoptedAtAnnotation
	// EnvWarmPool names, in a warm pod's containers, its RuntimePool.
	EnvWarmPool = sessionapi.EnvWarmPool
)

// Defaults of RuntimePoolOptions.
const (
	DefaultRuntimePoolMaxPods       = 200
	DefaultRuntimePoolsPerNamespace = 16
	// warmCreateExpiry is how long a pod the pool created counts before the
	// cache shows it; past it the pool trusts the cache again.
	warmCreateExpiry = time.Minute
)

// RuntimePoolOptions are the manager's settings for every RuntimePool.
type RuntimePoolOptions struct {
	// MaxPodsPerNamespace bounds the warm pods the pools of one namespace
	// keep together: the oldest pools get theirs first.
	MaxPodsPerNamespace int32
	// PerNamespace bounds the pools a namespace runs: the oldest run, the
	// others keep no pod, with the reason TooManyPools.
	PerNamespace int
}

func (o *RuntimePoolOptions) defaults() {
	if o.MaxPodsPerNamespace <= 0 {
		o.MaxPodsPerNamespace = DefaultRuntimePoolMaxPods
	}
	if o.PerNamespace <= 0 {
		o.PerNamespace = DefaultRuntimePoolsPerNamespace
	}
}

// TemplateHash identifies a runtime pod template: the first 16 hex digits
// of the SHA-256 of its JSON encoding, as the API server stored it. A
// session's spec.runtime.podTemplate matches a RuntimePool's spec.template
// when their hashes are equal.
func TemplateHash(tmpl *corev1.PodTemplateSpec) string {
	b, err := json.Marshal(tmpl)
	if err != nil {
		// A decoded PodTemplateSpec always encodes.
		panic(fmt.Sprintf("encode a pod template: %v", err))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// RuntimePoolReconciler keeps each RuntimePool's warm pods: it creates the
// missing ones, deletes the extra ones, the finished ones and those of
// another template, and reports them in the pool's status.
type RuntimePoolReconciler struct {
	// Client reads through the manager's cache.
	client.Client
	// APIReader reads the CA ConfigMaps around the cache; Client when nil.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock
	Options   RuntimePoolOptions
	// SessionAPIURL, SessionAPIAudience and SessionAPICA are the
	// AgentSession controller's: warm pods reach the Session API as
	// sessions' pods do.
	SessionAPIURL      string
	SessionAPIAudience string
	SessionAPICA       func() []byte

	// warm is shared with the AgentSession controller, which records its
	// adoptions there.
	warm *warmPools

	mu sync.Mutex
	// created holds, per pool, the pods it created that the cache does not
	// show yet, with when, so that a stale cache makes no extra pod.
	created map[types.NamespacedName]map[string]time.Time
}

// SetupWithManager registers the controller: it reconciles RuntimePools,
// woken by their pods and by the other pools of their namespace, which
// share its bounds.
func (r *RuntimePoolReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil || r.Recorder == nil {
		return errors.New("RuntimePoolReconciler needs a Client and a Recorder")
	}
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.APIReader == nil {
		r.APIReader = r.Client
	}
	if r.warm == nil {
		r.warm = newWarmPools()
	}
	r.Options.defaults()
	r.created = map[types.NamespacedName]map[string]time.Time{}
	return ctrl.NewControllerManagedBy(mgr).
		For(&agentlanev1alpha1.RuntimePool{}).
		Owns(&corev1.Pod{}).
		Watches(&agentlanev1alpha1.RuntimePool{}, handler.EnqueueRequestsFromMapFunc(r.poolsOfNamespace),
			builder.WithPredicates(specOrLifeChanged())).
		Named("runtimepool").
		Complete(r)
}

// poolsOfNamespace maps a pool to every pool of its namespace: a pool that
// comes, grows or goes changes what the others may keep.
func (r *RuntimePoolReconciler) poolsOfNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	pools := &agentlanev1alpha1.RuntimePoolList{}
	if err := r.List(ctx, pools, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(pools.Items))
	for i := range pools.Items {
		if pools.Items[i].Name != o.GetName() {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&pools.Items[i])})
		}
	}
	return reqs
}

// Reconcile brings the pool's warm pods and status in line with its spec.
func (r *RuntimePoolReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pool := &agentlanev1alpha1.RuntimePool{}
	if err := r.Get(ctx, req.NamespacedName, pool); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	log := logf.FromContext(ctx).WithValues("runtimePool", klog.KObj(pool))
	ctx = logf.IntoContext(ctx, log)
	if !pool.DeletionTimestamp.IsZero() {
		// The pods go with the pool (owner reference).
		r.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	old := pool.Status.DeepCopy()
	st := &pool.Status
	hash := TemplateHash(&pool.Spec.Template)
	want := ptr.Deref(pool.Spec.Replicas, 1)

	desired, blockReason, blockMsg, err := r.allowance(ctx, pool)
	if err != nil {
		return ctrl.Result{}, err
	}
	if blockReason == "" {
		if problems := warmTemplateProblems(&pool.Spec.Template); len(problems) > 0 {
			desired, blockReason = 0, agentlanev1alpha1.RuntimePoolInvalidTemplateReason
			blockMsg = "spec.template may not set " + strings.Join(problems, "; ")
		} else if c := meta.FindStatusCondition(st.Conditions, agentlanev1alpha1.RuntimePoolReadyCondition); c != nil &&
			c.Reason == agentlanev1alpha1.RuntimePoolInvalidTemplateReason && c.ObservedGeneration == pool.Generation &&
			st.TemplateHash == hash {
			// The API server refused a pod of this very template: try
			// again when the template changes, not in a loop.
			desired, blockReason, blockMsg = 0, c.Reason, c.Message
		}
	}
	st.TemplateHash = hash

	live, err := r.tidy(ctx, pool, hash, desired)
	if err != nil {
		return ctrl.Result{}, err
	}
	if missing := int(desired) - len(live) - r.inFlight(req.NamespacedName, live); missing > 0 && blockReason == "" {
		refused, err := r.create(ctx, pool, hash, missing)
		if err != nil {
			return ctrl.Result{}, err
		}
		if refused != "" {
			desired, blockReason, blockMsg = 0, agentlanev1alpha1.RuntimePoolInvalidTemplateReason, refused
			r.Recorder.Eventf(pool, nil, corev1.EventTypeWarning, agentlanev1alpha1.RuntimePoolInvalidTemplateReason, "CreatePod", "%s", refused)
		}
	}

	st.Replicas = int32(len(live))
	st.ReadyReplicas = 0
	for _, p := range live {
		if podReady(p) {
			st.ReadyReplicas++
		}
	}
	st.DesiredReplicas = desired
	n, last := r.warm.pendingAdoptions(req.NamespacedName)
	st.Adopted += n
	if !last.IsZero() && (st.LastAdoptionTime == nil || last.After(st.LastAdoptionTime.Time)) {
		st.LastAdoptionTime = &metav1.Time{Time: last}
	}
	setRuntimePoolReady(pool, want, blockReason, blockMsg)
	r.warm.metrics.observe(pool)

	if !equality.Semantic.DeepEqual(*old, *st) {
		st.ObservedGeneration = pool.Generation
		if err := r.Status().Update(ctx, pool); err != nil {
			if apierrors.IsConflict(err) {
				return ctrl.Result{RequeueAfter: retrySoon}, nil
			}
			return ctrl.Result{}, err
		}
	}
	r.warm.settleAdoptions(req.NamespacedName, n)
	return ctrl.Result{}, nil
}

// allowance is how many warm pods the pool may keep: its replicas, none
// when its namespace has too many pools and it is among the newest, and
// what the older pools of the namespace leave of the namespace's bound.
func (r *RuntimePoolReconciler) allowance(ctx context.Context, pool *agentlanev1alpha1.RuntimePool) (int32, string, string, error) {
	pools := &agentlanev1alpha1.RuntimePoolList{}
	if err := r.List(ctx, pools, client.InNamespace(pool.Namespace)); err != nil {
		return 0, "", "", err
	}
	slices.SortFunc(pools.Items, func(a, b agentlanev1alpha1.RuntimePool) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	want := ptr.Deref(pool.Spec.Replicas, 1)
	left := r.Options.MaxPodsPerNamespace
	for i := range pools.Items {
		p := &pools.Items[i]
		if p.Name == pool.Name {
			if i >= r.Options.PerNamespace {
				return 0, agentlanev1alpha1.RuntimePoolTooManyReason,
					fmt.Sprintf("the namespace has %d RuntimePools; the manager runs the %d oldest", len(pools.Items), r.Options.PerNamespace), nil
			}
			if want > left {
				return max(left, 0), agentlanev1alpha1.RuntimePoolNamespaceBoundReason,
					fmt.Sprintf("keeps %d of %d warm pods: the RuntimePools of a namespace keep at most %d together, the oldest first",
						max(left, 0), want, r.Options.MaxPodsPerNamespace), nil
			}
			return want, "", "", nil
		}
		if i < r.Options.PerNamespace && p.DeletionTimestamp.IsZero() {
			left -= ptr.Deref(p.Spec.Replicas, 1)
		}
	}
	// Read but not listed: look again rather than guess the bounds.
	return 0, "", "", fmt.Errorf("RuntimePool %s is not among its namespace's pools yet", pool.Name)
}

// warmTemplateProblems lists what a pool's template sets that the manager
// sets itself on a warm pod: the variables naming a session, its identity
// and its checkpoint (a warm pod has none yet) or its pool.
func warmTemplateProblems(tmpl *corev1.PodTemplateSpec) []string {
	reserved := []string{EnvSession, EnvTenantID, EnvPrincipal, EnvAgentTemplateID, EnvCorrelationID,
		EnvResumeRunID, EnvCheckpointLocation, EnvWarmPool}
	var problems []string
	for _, c := range tmpl.Spec.Containers {
		for _, e := range c.Env {
			if slices.Contains(reserved, e.Name) {
				problems = append(problems, fmt.Sprintf("%s in container %q (a warm pod learns its session when one adopts it)", e.Name, c.Name))
			}
		}
	}
	for _, l := range []string{RuntimeLabel, agentlanev1alpha1.SessionLabel, RuntimePoolLabel, TemplateHashLabel} {
		if _, ok := tmpl.Labels[l]; ok {
			problems = append(problems, "label "+l)
		}
	}
	return problems
}

// tidy lists the pool's warm pods and deletes those it no longer keeps:
// finished ones, those on a lost node, those of another template or
// another image, and those past desired (unready first, then the newest).
// It returns the pods it keeps.
func (r *RuntimePoolReconciler) tidy(ctx context.Context, pool *agentlanev1alpha1.RuntimePool, hash string, desired int32) ([]*corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.InNamespace(pool.Namespace), client.MatchingLabels{RuntimePoolLabel: pool.Name}); err != nil {
		return nil, fmt.Errorf("list the pool's pods: %w", err)
	}
	var live, drop []*corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
		if !metav1.IsControlledBy(p, pool) || !p.DeletionTimestamp.IsZero() || p.Labels[RuntimeLabel] != "" {
			continue
		}
		r.seen(client.ObjectKeyFromObject(pool), p.Name)
		lost, err := r.onLostNode(ctx, p)
		if err != nil {
			return nil, err
		}
		if lost || p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded ||
			p.Labels[TemplateHashLabel] != hash || !sameImages(p, &pool.Spec.Template) {
			drop = append(drop, p)
			continue
		}
		live = append(live, p)
	}
	if extra := len(live) - int(desired); extra > 0 {
		slices.SortFunc(live, func(a, b *corev1.Pod) int {
			if ra, rb := podReady(a), podReady(b); ra != rb {
				if ra {
					return -1
				}
				return 1
			}
			return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), strings.Compare(a.Name, b.Name))
		})
		drop = append(drop, live[len(live)-extra:]...)
		live = live[:len(live)-extra]
	}
	for _, p := range drop {
		// At the version read: a pod a session adopted meanwhile is
		// the session's, and stays.
		err := r.Delete(ctx, p, client.Preconditions{UID: &p.UID, ResourceVersion: &p.ResourceVersion})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return nil, fmt.Errorf("delete warm pod %s: %w", p.Name, err)
		}
	}
	return live, nil
}

// onLostNode tells whether the pod was placed on a node whose kubelet
// stopped answering (the node controller taints it; the manager caches
// nodes without their status): such a pod never becomes ready, or is
// ready no more, and the pool makes another in its place.
func (r *RuntimePoolReconciler) onLostNode(ctx context.Context, p *corev1.Pod) (bool, error) {
	if p.Spec.NodeName == "" {
		return false, nil
	}
	node := &corev1.Node{}
	if err := r.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, node); err != nil {
		// A node the cache does not show yet is not lost; one deleted
		// takes its pods with it (the pod garbage collector).
		return false, client.IgnoreNotFound(err)
	}
	// A new node is tainted not-ready (NoSchedule) until its kubelet first
	// reports: not lost. One whose kubelet stops answering is tainted
	// unreachable, one that reports not ready for long not-ready NoExecute.
	return slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == corev1.TaintNodeUnreachable || (t.Key == corev1.TaintNodeNotReady && t.Effect == corev1.TaintEffectNoExecute)
	}), nil
}

// create makes n warm pods. It returns why the API server refused the
// template's pod, if it did.
func (r *RuntimePoolReconciler) create(ctx context.Context, pool *agentlanev1alpha1.RuntimePool, hash string, n int) (string, error) {
	var ca []byte
	if r.SessionAPICA != nil {
		ca = r.SessionAPICA()
	}
	if len(ca) > 0 {
		if err := ensureCAConfigMap(ctx, r.APIReader, r.Client, pool.Namespace, ca); err != nil {
			return "", err
		}
	}
	for range n {
		pod := r.newWarmPod(pool, hash, ca)
		if err := controllerutil.SetControllerReference(pool, pod, r.Scheme()); err != nil {
			return "", err
		}
		if err := r.Create(ctx, pod); err != nil {
			if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
				return fmt.Sprintf("spec.template is refused: %v", err), nil
			}
			return "", fmt.Errorf("create a warm pod: %w", err)
		}
		r.made(client.ObjectKeyFromObject(pool), pod.Name)
	}
	return "", nil
}

// newWarmPod builds a warm pod of the pool: a runtime pod of its template
// (buildRuntimePod) that names its pool instead of a session.
func (r *RuntimePoolReconciler) newWarmPod(pool *agentlanev1alpha1.RuntimePool, hash string, ca []byte) *corev1.Pod {
	api := sessionAPIAccess{URL: r.SessionAPIURL, Audience: r.SessionAPIAudience}
	pod := buildRuntimePod(pool.Namespace, &pool.Spec.Template, api, ca, []corev1.EnvVar{{Name: EnvWarmPool, Value: pool.Name}})
	pod.GenerateName = pool.Name + "-warm-"
	// Empty: a runtime pod of no session yet (and so in the manager's
	// cache of runtime pods).
	pod.Labels[RuntimeLabel] = ""
	pod.Labels[RuntimePoolLabel] = pool.Name
	pod.Labels[TemplateHashLabel] = hash
	return pod
}

// setRuntimePoolReady sets the pool's Ready condition.
func setRuntimePoolReady(pool *agentlanev1alpha1.RuntimePool, want int32, blockReason, blockMsg string) {
	st := &pool.Status
	ready := metav1.Condition{Type: agentlanev1alpha1.RuntimePoolReadyCondition, ObservedGeneration: pool.Generation}
	counts := fmt.Sprintf("%d of %d warm pods ready", st.ReadyReplicas, st.DesiredReplicas)
	switch {
	case blockReason == agentlanev1alpha1.RuntimePoolNamespaceBoundReason:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, blockReason, truncateReason(counts+"; "+blockMsg)
	case blockReason != "":
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, blockReason, truncateReason(blockMsg)
	case st.ReadyReplicas >= want:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionTrue, agentlanev1alpha1.RuntimePoolAvailableReason, counts
	default:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, agentlanev1alpha1.RuntimePoolProgressingReason, counts
	}
	meta.SetStatusCondition(&st.Conditions, ready)
}

// podReady tells whether the pod runs and its Ready condition is True.
func podReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// sameImages tells whether the pod's containers run the images of tmpl:
// the one part of a pod's spec that can change after it was created from
// the template.
func sameImages(p *corev1.Pod, tmpl *corev1.PodTemplateSpec) bool {
	images := func(cs []corev1.Container) []string {
		out := make([]string, len(cs))
		for i, c := range cs {
			out[i] = c.Name + "=" + c.Image
		}
		return out
	}
	return slices.Equal(images(p.Spec.Containers), images(tmpl.Spec.Containers)) &&
		slices.Equal(images(p.Spec.InitContainers), images(tmpl.Spec.InitContainers))
}

// made records a pod the pool created.
func (r *RuntimePoolReconciler) made(key types.NamespacedName, pod string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.created[key] == nil {
		r.created[key] = map[string]time.Time{}
	}
	r.created[key][pod] = r.Clock.Now()
}

// seen forgets a created pod the cache now shows.
func (r *RuntimePoolReconciler) seen(key types.NamespacedName, pod string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.created[key], pod)
}

// inFlight counts the pods the pool created that the cache does not show
// yet, nor a session adopted, and not for longer than warmCreateExpiry.
func (r *RuntimePoolReconciler) inFlight(key types.NamespacedName, live []*corev1.Pod) int {
	adopted := r.warm.adoptedPods(key)
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.Clock.Now()
	for name, at := range r.created[key] {
		if now.Sub(at) > warmCreateExpiry || slices.Contains(adopted, name) ||
			slices.ContainsFunc(live, func(p *corev1.Pod) bool { return p.Name == name }) {
			delete(r.created[key], name)
		}
	}
	return len(r.created[key])
}

// forget drops what the controller holds of a deleted pool.
func (r *RuntimePoolReconciler) forget(key types.NamespacedName) {
	r.mu.Lock()
	delete(r.created, key)
	r.mu.Unlock()
	r.warm.forget(key)
}
