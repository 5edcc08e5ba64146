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

package sessionserver

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// A warm runtime pod (built by a RuntimePool ahead of any session) learns
// the session that adopted it here: GET
// /v1/namespaces/{namespace}/runtime/assignment. The pod calls with its
// own projected token; the token's pod claims name the pod, which must be a
// runtime pod of the namespace (warm, or adopted) run as the token's
// service account. Until a session adopts it the call waits (wait=, at
// most sessionapi.MaxAssignmentWait), woken by the pod's changes in the
// manager's cache of runtime pods, and answers 204; once adopted it answers the
// session's name, identity and checkpoint, to a caller that may use the
// session as its runtime.

// Labels of runtime pods the assignment route reads: the pool of a warm
// pod, and the session of an adopted one (the AgentSession controller's
// RuntimeLabel, empty on a warm pod).
const (
	runtimePoolLabel    = agentlanev1alpha1.RuntimePoolLabel
	sessionRuntimeLabel = "agentlane.io/session-runtime"
)

// routeAssignment is the metrics route label of the assignment route.
const routeAssignment = "/runtime/assignment"

// assignmentPath is the assignment route.
const assignmentPath = "/" + sessionapi.Version + "/namespaces/{namespace}/runtime/assignment"

// Defaults of AssignmentBounds.
const (
	// DefaultMaxAssignmentWaits bounds the calls waiting for an assignment
	// on the server, DefaultMaxAssignmentWaitsPerNamespace those of one
	// namespace's pods. One pod has at most one call waiting.
	DefaultMaxAssignmentWaits             = 1024
	DefaultMaxAssignmentWaitsPerNamespace = 256
)

// AssignmentBounds bound the calls waiting for an assignment, on the
// server and per namespace; zero means the Default of each, negative no
// bound. One pod has at most one call waiting whatever they say. Past a
// bound a call gets 429 RateLimited with Retry-After.
type AssignmentBounds struct {
	MaxWaits             int
	MaxWaitsPerNamespace int
}

// PodCache is the cache of runtime pods the assignment route reads and
// whose changes wake its waiting calls: the manager's cache, which holds
// every pod labelled agentlane.io/session-runtime, warm pods among them
// (their label is empty until a session adopts them). A cache.Cache is one.
type PodCache interface {
	client.Reader
	GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error)
}

// assignmentWaits are the calls waiting for an assignment: one per pod,
// counted per namespace.
type assignmentWaits struct {
	mu sync.Mutex
	// watching tells that the pod caches' informers wake the waiters.
	watching bool
	// byPod wakes the call waiting for a pod (buffered, one).
	byPod       map[types.UID]chan struct{}
	byNamespace map[string]int
}

// watch has the pod informer of pods wake the waiting calls on every
// change of their pods; once.
func (a *assignmentWaits) watch(ctx context.Context, pods PodCache) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.watching {
		return nil
	}
	inf, err := pods.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return err
	}
	wake := func(obj any) {
		if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if m, ok := obj.(metav1.Object); ok {
			a.wake(m.GetUID())
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    wake,
		UpdateFunc: func(_, obj any) { wake(obj) },
		DeleteFunc: wake,
	}); err != nil {
		return err
	}
	a.watching = true
	return nil
}

// wake tells the call waiting for pod, if any, that the pod changed.
func (a *assignmentWaits) wake(pod types.UID) {
	a.mu.Lock()
	ch := a.byPod[pod]
	a.mu.Unlock()
	if ch != nil {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// acquire counts in the call waiting for pod of namespace ns, or refuses it
// 429 RateLimited: the pod has one waiting already, or ns or the server
// is at its bound. It returns the channel that wakes the call, and release.
func (a *assignmentWaits) acquire(b AssignmentBounds, ns, pod string, uid types.UID) (<-chan struct{}, func(), error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	refuse := func(format string, args ...any) (<-chan struct{}, func(), error) {
		e := apiErrorf(http.StatusTooManyRequests, sessionapi.CodeRateLimited, format, args...)
		e.RetryAfter = time.Second
		return nil, nil, e
	}
	total := len(a.byPod)
	switch {
	case a.byPod[uid] != nil:
		return refuse("pod %q already has a call waiting for its assignment; one call per pod may wait", pod)
	case b.MaxWaitsPerNamespace > 0 && a.byNamespace[ns] >= b.MaxWaitsPerNamespace:
		return refuse("namespace %q has %d calls waiting for an assignment, the most one namespace may (--session-api-max-assignment-waits-per-namespace); retry later",
			ns, b.MaxWaitsPerNamespace)
	case b.MaxWaits > 0 && total >= b.MaxWaits:
		return refuse("the Session API has %d calls waiting for an assignment, the most it holds (--session-api-max-assignment-waits); retry later", b.MaxWaits)
	}
	if a.byPod == nil {
		a.byPod, a.byNamespace = map[types.UID]chan struct{}{}, map[string]int{}
	}
	ch := make(chan struct{}, 1)
	a.byPod[uid] = ch
	a.byNamespace[ns]++
	longCalls.WithLabelValues("wait").Inc()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			a.mu.Lock()
			defer a.mu.Unlock()
			delete(a.byPod, uid)
			if a.byNamespace[ns]--; a.byNamespace[ns] <= 0 {
				delete(a.byNamespace, ns)
			}
			longCalls.WithLabelValues("wait").Dec()
		})
	}, nil
}

// waiting returns the calls waiting for an assignment in namespace ns and
// on the whole server.
func (a *assignmentWaits) waiting(ns string) (inNamespace, total int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.byNamespace[ns], len(a.byPod)
}

// assignmentBounds are Assignments with the defaults filled in.
func (s *Server) assignmentBounds() AssignmentBounds {
	return AssignmentBounds{
		MaxWaits:             orDefault(s.Assignments.MaxWaits, DefaultMaxAssignmentWaits),
		MaxWaitsPerNamespace: orDefault(s.Assignments.MaxWaitsPerNamespace, DefaultMaxAssignmentWaitsPerNamespace),
	}
}

// podCaller is the pod a pod-bound service-account token names.
type podCaller struct {
	Caller
	namespace, serviceAccount, pod string
	uid                            types.UID
}

// callingPod returns the pod caller's token is bound to, refusing 403 a
// token that is bound to no pod or is not a service account's of ns.
func callingPod(c Caller, ns string) (podCaller, error) {
	name, uid := c.Extra[extraPodName], c.Extra[extraPodUID]
	if len(name) != 1 || len(uid) != 1 || name[0] == "" || uid[0] == "" {
		return podCaller{}, apiErrorf(http.StatusForbidden, sessionapi.CodeForbidden,
			"user %q's token is bound to no pod: a runtime pod asks for its assignment with its own projected service-account token (%s)",
			c.Username, sessionapi.EnvSessionAPITokenFile)
	}
	rest, ok := strings.CutPrefix(c.Username, "system:serviceaccount:")
	saNS, sa, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 || saNS != ns {
		return podCaller{}, apiErrorf(http.StatusForbidden, sessionapi.CodeForbidden,
			"user %q is no service account of namespace %q: a runtime pod asks for its assignment in its own namespace", c.Username, ns)
	}
	return podCaller{Caller: c, namespace: ns, serviceAccount: sa, pod: name[0], uid: types.UID(uid[0])}, nil
}

// errNoRuntimePod refuses a caller whose pod is no runtime pod (or no
// longer exists).
func errNoRuntimePod(pc podCaller) error {
	return apiErrorf(http.StatusForbidden, sessionapi.CodeForbidden,
		"pod %q of namespace %q is no runtime pod (of a RuntimePool or a session): only those learn an assignment", pc.pod, pc.namespace)
}

// findPod reads the caller's pod from the runtime pod cache and checks it
// is a runtime pod, the one the token is bound to, run as the token's
// service account and not being deleted.
func (s *Server) findPod(ctx context.Context, pc podCaller) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	if err := s.RuntimePods.Get(ctx, types.NamespacedName{Namespace: pc.namespace, Name: pc.pod}, pod); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, errNoRuntimePod(pc)
		}
		return nil, err
	}
	_, warm := pod.Labels[runtimePoolLabel]
	_, adopted := pod.Labels[sessionRuntimeLabel]
	switch {
	case !warm && !adopted:
		return nil, errNoRuntimePod(pc)
	case pod.UID != pc.uid:
		return nil, apiErrorf(http.StatusForbidden, sessionapi.CodeForbidden,
			"pod %q of namespace %q is not the pod the token is bound to (another UID)", pc.pod, pc.namespace)
	case pod.Spec.ServiceAccountName != pc.serviceAccount:
		return nil, apiErrorf(http.StatusForbidden, sessionapi.CodeForbidden,
			"pod %q runs as service account %q, not %q", pc.pod, pod.Spec.ServiceAccountName, pc.serviceAccount)
	case !pod.DeletionTimestamp.IsZero():
		return nil, apiErrorf(http.StatusForbidden, sessionapi.CodeForbidden, "pod %q is being deleted", pc.pod)
	}
	return pod, nil
}

// adoptedBy returns the name of the AgentSession that adopted pod: its
// controller, which its session labels name. Empty while the pod is warm.
func adoptedBy(pod *corev1.Pod) (string, types.UID) {
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "AgentSession" {
		return "", ""
	}
	if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != agentlanev1alpha1.GroupVersion.Group {
		return "", ""
	}
	if _, warm := pod.Labels[runtimePoolLabel]; warm ||
		pod.Labels[sessionRuntimeLabel] != ref.Name || pod.Labels[agentlanev1alpha1.SessionLabel] != ref.Name {
		return "", ""
	}
	return ref.Name, ref.UID
}

// assignment answers GET /v1/namespaces/{namespace}/runtime/assignment.
func (s *Server) assignment(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		s.writeError(w, r, routeAssignment, apiErrorf(http.StatusMethodNotAllowed, sessionapi.CodeMethodNotAllowed,
			"%s takes GET, not %s", r.URL.Path, r.Method))
		return
	}
	if !s.leading() {
		s.writeError(w, r, routeAssignment, errNotLeader)
		return
	}
	a, err := s.awaitAssignment(w, r)
	switch {
	case err != nil:
		s.writeError(w, r, routeAssignment, err)
	case a == nil:
		w.WriteHeader(http.StatusNoContent)
	default:
		writeJSON(w, http.StatusOK, a)
	}
}

// awaitAssignment authenticates the calling pod and returns its assignment,
// waiting for it as the call's wait says; nil when the wait ran out first.
func (s *Server) awaitAssignment(w http.ResponseWriter, r *http.Request) (*sessionapi.Assignment, error) {
	ns := r.PathValue("namespace")
	wait, err := waitParam(r, "wait", sessionapi.MaxAssignmentWait)
	if err != nil {
		return nil, err
	}
	ctx, caller, err := s.authenticate(r.Context(), r)
	if err != nil {
		return nil, err
	}
	pc, err := callingPod(caller, ns)
	if err != nil {
		return nil, err
	}
	if s.RuntimePods == nil {
		return nil, apiError(http.StatusServiceUnavailable, sessionapi.CodeSessionNotReady,
			"this Session API reads no runtime pods: it cannot tell a warm pod its assignment")
	}
	if err := s.assignments.watch(ctx, s.RuntimePods); err != nil {
		return nil, err
	}
	pod, err := s.findPod(ctx, pc)
	if err != nil {
		return nil, err
	}
	if session, uid := adoptedBy(pod); session != "" || wait <= 0 {
		if session == "" {
			return nil, nil
		}
		return s.assignmentOf(ctx, r, pc, session, uid)
	}
	wake, release, err := s.assignments.acquire(s.assignmentBounds(), ns, pc.pod, pc.uid)
	if err != nil {
		return nil, err
	}
	defer release()
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(wait + s.ReadTimeout))
	s.holdFor(w, wait)
	timer := s.Clock.NewTimer(wait)
	defer timer.Stop()
	// The pod may have been adopted between the read above and acquire:
	// look once more before the first wake.
	for check := true; ; check = false {
		if !check {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-timer.C():
				return nil, nil
			case <-wake:
			}
		}
		pod, err := s.findPod(ctx, pc)
		if err != nil {
			return nil, err
		}
		if session, uid := adoptedBy(pod); session != "" {
			return s.assignmentOf(ctx, r, pc, session, uid)
		}
	}
}

// assignmentOf is the assignment of the pod of pc to session: the caller's
// token is reviewed again (the call may have waited past its review) and
// must still name the caller, who must be allowed to use the session as
// its runtime.
func (s *Server) assignmentOf(ctx context.Context, r *http.Request, pc podCaller, session string, uid types.UID) (*sessionapi.Assignment, error) {
	again, err := s.Auth.Authenticate(ctx, r)
	if err != nil {
		return nil, err
	}
	if again.Username != pc.Username {
		return nil, apiErrorf(http.StatusForbidden, sessionapi.CodeForbidden, "the token now names user %q, not %q", again.Username, pc.Username)
	}
	for _, verb := range []string{VerbRead, VerbRuntime} {
		if err := s.Auth.Authorize(ctx, pc.Caller, pc.namespace, session, verb); err != nil {
			return nil, err
		}
	}
	sess := &agentlanev1alpha1.AgentSession{}
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: pc.namespace, Name: session}, sess); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, apiErrorf(http.StatusNotFound, sessionapi.CodeSessionNotFound, "AgentSession %q that adopted pod %q does not exist", session, pc.pod)
		}
		return nil, err
	}
	if sess.UID != uid || !sess.DeletionTimestamp.IsZero() {
		return nil, apiErrorf(http.StatusNotFound, sessionapi.CodeSessionNotFound,
			"AgentSession %q that adopted pod %q is being deleted or was made again", session, pc.pod)
	}
	a := &sessionapi.Assignment{Namespace: pc.namespace, Session: session}
	if id := sess.Spec.Identity; id != nil {
		a.TenantID, a.Principal, a.AgentTemplateID, a.CorrelationID = id.TenantID, id.Principal, id.AgentTemplateID, id.CorrelationID
	}
	if cp := sess.Status.LastCheckpoint; cp != nil {
		a.ResumeRunID, a.CheckpointLocation = cp.RunID, cp.Location
	}
	return a, nil
}
