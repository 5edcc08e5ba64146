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
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// RuntimeLabel marks a session's runtime pod and its PodDisruptionBudget;
// its value is the session's name.
const RuntimeLabel = "agentlane.io/session-runtime"

// Environment variables the operator sets in every container of a runtime
// pod; sessionapi documents them.
const (
	EnvSessionAPIURL      = sessionapi.EnvSessionAPIURL
	EnvNamespace          = sessionapi.EnvNamespace
	EnvSession            = sessionapi.EnvSession
	EnvTenantID           = sessionapi.EnvTenantID
	EnvPrincipal          = sessionapi.EnvPrincipal
	EnvAgentTemplateID    = sessionapi.EnvAgentTemplateID
	EnvCorrelationID      = sessionapi.EnvCorrelationID
	EnvResumeRunID        = sessionapi.EnvResumeRunID
	EnvCheckpointLocation = sessionapi.EnvCheckpointLocation
	EnvPodName            = sessionapi.EnvPodName
	EnvNodeName           = sessionapi.EnvNodeName
)

const (
	// defaultPassivationDeadline is how long a session has to checkpoint
	// when spec.runtime.passivationDeadline is not set.
	defaultPassivationDeadline = 2 * time.Minute
	// idleWakeInterval is how often a session passivated for being idle
	// looks for new work.
	idleWakeInterval = time.Second
)

// activity remembers when each session last did something (a command or
// inbox event), for the idle reaper.
type activity struct {
	mu   sync.Mutex
	last map[types.NamespacedName]time.Time
}

func (a *activity) touch(key types.NamespacedName, t time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.last == nil {
		a.last = make(map[types.NamespacedName]time.Time)
	}
	if t.After(a.last[key]) {
		a.last[key] = t
	}
}

// since returns when the session last did something, remembering now for a
// session never seen.
func (a *activity) since(key types.NamespacedName, now time.Time) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.last == nil {
		a.last = make(map[types.NamespacedName]time.Time)
	}
	t, ok := a.last[key]
	if !ok {
		a.last[key] = now
		return now
	}
	return t
}

func (a *activity) forget(key types.NamespacedName) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.last, key)
}

// PassivationClock remembers at full precision when each session's
// passivation was requested and when it last saved a checkpoint through the
// Session API. Status keeps whole seconds, which cannot tell a checkpoint
// saved just before a request from one saved just after it in the same
// second. After a manager restart it knows nothing, and the status times
// serve.
type PassivationClock struct {
	mu        sync.Mutex
	requested map[types.NamespacedName]time.Time
	saved     map[types.NamespacedName]time.Time
}

func (c *PassivationClock) request(key types.NamespacedName, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.requested == nil {
		c.requested = make(map[types.NamespacedName]time.Time)
	}
	c.requested[key] = t
}

// CheckpointSaved tells the AgentSession controller that the session saved
// a checkpoint at t; the Session API calls it once the checkpoint is stored
// and before status.lastCheckpoint shows it, so that a passivation waiting
// for a checkpoint orders the two at full precision.
func (c *PassivationClock) CheckpointSaved(key types.NamespacedName, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.saved == nil {
		c.saved = make(map[types.NamespacedName]time.Time)
	}
	if t.After(c.saved[key]) {
		c.saved[key] = t
	}
}

// checkpointed tells whether the session saved a checkpoint at or after the
// passivation p was requested. cp is status.lastCheckpoint.
func (c *PassivationClock) checkpointed(key types.NamespacedName, p *agentlanev1alpha1.PassivationStatus, cp *agentlanev1alpha1.Checkpoint) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	requested := p.RequestedAt.Time
	// The request remembered is this one when status shows its second.
	if t, ok := c.requested[key]; ok && t.Truncate(time.Second).Equal(requested.Truncate(time.Second)) {
		requested = t
	}
	saved := c.saved[key]
	if cp != nil && cp.Time.After(saved) {
		saved = cp.Time.Time // written by another way than the Session API
	}
	return !saved.IsZero() && !saved.Before(requested)
}

func (c *PassivationClock) forget(key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.requested, key)
	delete(c.saved, key)
}

// lifecycle is what the session's life cycle needs from one reconcile: its
// scheduler and inbox and its counts there.
type lifecycle struct {
	key   types.NamespacedName
	queue *lanequeue.Queue
	inbox *lanequeue.Inbox
	stats lanequeue.SessionStats
	now   time.Time
	// readySet is set when the life cycle decided the Ready condition.
	readySet bool
}

// busy tells whether the session has commands or messages in flight.
func (lc *lifecycle) busy() bool {
	_, running := lc.inbox.ActiveRun(lc.key.Name)
	return lc.stats.Pending+lc.stats.Active > 0 || running || lc.inbox.Queued(lc.key.Name) > 0
}

// reconcileLifecycle runs the session's pod and its passivation: it
// requests passivation when the pod's node is cordoned, when the session is
// set to Passivated or when it has been idle too long; it evicts the pod
// once the session has checkpointed (or its deadline passed); it resumes the
// session in a new pod when it should run again. It returns when to look
// again.
func (r *AgentSessionReconciler) reconcileLifecycle(ctx context.Context, s *agentlanev1alpha1.AgentSession, lc *lifecycle) (time.Duration, error) {
	pod, err := r.runtimePod(ctx, s)
	if err != nil {
		return 0, err
	}
	switch s.Status.Phase {
	case agentlanev1alpha1.SessionPassivating:
		return r.continuePassivation(ctx, s, lc, pod)
	case agentlanev1alpha1.SessionPassivated:
		// The pause is in memory: apply it again after a restart.
		lc.queue.PauseSession(s.Name)
		if !r.shouldResume(s, lc) {
			if s.Status.Passivation != nil && s.Status.Passivation.Reason == agentlanev1alpha1.PassivationIdleReaper {
				return idleWakeInterval, nil
			}
			return 0, nil
		}
		s.Status.Phase = agentlanev1alpha1.SessionResuming
		r.event(s, corev1.EventTypeNormal, "Resuming", "Resume", "resuming the session from its last checkpoint%s", checkpointNote(s))
		fallthrough
	case agentlanev1alpha1.SessionResuming:
		if s.Spec.DesiredState == agentlanev1alpha1.DesiredStatePassivated {
			return r.requestPassivation(ctx, s, lc, agentlanev1alpha1.PassivationManual, pod)
		}
		if s.Spec.Runtime != nil {
			if pod, err = r.ensureRuntime(ctx, s, pod); err != nil {
				return 0, err
			}
			r.showPod(s, pod)
			if pod == nil || pod.Status.Phase != corev1.PodRunning {
				setReady(s, metav1.ConditionFalse, agentlanev1alpha1.AgentSessionResumingReason,
					"waiting for the new runtime pod to run")
				return 0, nil // the pod's watch event brings the session back
			}
		}
		lc.queue.ResumeSession(s.Name)
		r.activity.touch(lc.key, lc.now)
		s.Status.Phase = agentlanev1alpha1.SessionActive
		s.Status.Passivation = nil
		r.Passivations.forget(lc.key)
		r.event(s, corev1.EventTypeNormal, "Resumed", "Resume", "the session runs again%s", podNote(pod))
		return 0, nil
	}

	// Active.
	if reason, why := r.passivationTrigger(ctx, s, lc, pod); reason != "" {
		logf.FromContext(ctx).Info("Passivating the session", "reason", reason, "why", why)
		return r.requestPassivation(ctx, s, lc, reason, pod)
	}
	if s.Spec.Runtime == nil {
		return r.idleCheck(s, lc), nil
	}
	if pod, err = r.ensureRuntime(ctx, s, pod); err != nil {
		return 0, err
	}
	r.showPod(s, pod)
	if pod == nil || pod.Status.Phase != corev1.PodRunning {
		lc.readySet = true
		setReady(s, metav1.ConditionFalse, agentlanev1alpha1.AgentSessionPodPendingReason,
			fmt.Sprintf("runtime pod %s is %s", podName(pod), podPhase(pod)))
	}
	return r.idleCheck(s, lc), nil
}

// passivationTrigger says why an active session must be passivated now, if
// it must.
func (r *AgentSessionReconciler) passivationTrigger(ctx context.Context, s *agentlanev1alpha1.AgentSession, lc *lifecycle, pod *corev1.Pod) (agentlanev1alpha1.PassivationReason, string) {
	if s.Spec.DesiredState == agentlanev1alpha1.DesiredStatePassivated {
		return agentlanev1alpha1.PassivationManual, "desiredState is Passivated"
	}
	if pod != nil && pod.Spec.NodeName != "" {
		node := &corev1.Node{}
		if err := r.Get(ctx, types.NamespacedName{Name: pod.Spec.NodeName}, node); err == nil && node.Spec.Unschedulable {
			return agentlanev1alpha1.PassivationNodeDrain, fmt.Sprintf("node %s is cordoned", node.Name)
		}
	}
	if rt := s.Spec.Runtime; rt != nil && rt.IdleTimeout != nil && !lc.busy() {
		if idle := lc.now.Sub(r.activity.since(lc.key, lc.now)); idle >= rt.IdleTimeout.Duration {
			return agentlanev1alpha1.PassivationIdleReaper, fmt.Sprintf("no run for %s", idle.Round(time.Second))
		}
	}
	return "", ""
}

// idleCheck returns when an idle-timed session should be looked at again.
func (r *AgentSessionReconciler) idleCheck(s *agentlanev1alpha1.AgentSession, lc *lifecycle) time.Duration {
	rt := s.Spec.Runtime
	if rt == nil || rt.IdleTimeout == nil {
		return 0
	}
	if lc.busy() {
		r.activity.touch(lc.key, lc.now)
		return rt.IdleTimeout.Duration
	}
	return max(r.activity.since(lc.key, lc.now).Add(rt.IdleTimeout.Duration).Sub(lc.now), 10*time.Millisecond)
}

// requestPassivation starts passivating the session: no new commands start,
// and the runtime is told on its event stream to checkpoint before the
// deadline.
func (r *AgentSessionReconciler) requestPassivation(ctx context.Context, s *agentlanev1alpha1.AgentSession, lc *lifecycle, reason agentlanev1alpha1.PassivationReason, pod *corev1.Pod) (time.Duration, error) {
	deadline := defaultPassivationDeadline
	if rt := s.Spec.Runtime; rt != nil && rt.PassivationDeadline != nil {
		deadline = rt.PassivationDeadline.Duration
	}
	now := metav1.NewTime(lc.now)
	at := metav1.NewTime(lc.now.Add(deadline))
	s.Status.Phase = agentlanev1alpha1.SessionPassivating
	s.Status.Passivation = &agentlanev1alpha1.PassivationStatus{Reason: reason, RequestedAt: now, Deadline: &at}
	// Paused before the runtime hears of it: a command the runtime then
	// sees queued stays queued until the session resumes.
	lc.queue.PauseSession(s.Name)
	r.Passivations.request(lc.key, lc.now)
	setReady(s, metav1.ConditionFalse, agentlanev1alpha1.AgentSessionPassivatingReason,
		fmt.Sprintf("passivation requested (%s); waiting for a checkpoint until %s", reason, at.UTC().Format(time.RFC3339)))
	r.event(s, corev1.EventTypeNormal, sessionapi.EventPassivationRequested, "Passivate",
		"reason %s; checkpoint before %s%s", reason, at.UTC().Format(time.RFC3339), podNote(pod))
	req := &sessionapi.PassivationRequest{Reason: string(reason), Deadline: at.Time}
	if pod != nil {
		req.Pod = pod.Name
	}
	r.Schedulers.Publish(lc.key, sessionapi.Event{Type: sessionapi.EventPassivationRequested, Time: lc.now, Passivation: req})
	return r.continuePassivation(ctx, s, lc, pod)
}

// continuePassivation evicts the session's pod once its commands in flight
// have finished and it has checkpointed since the request, or once the
// deadline has passed.
func (r *AgentSessionReconciler) continuePassivation(ctx context.Context, s *agentlanev1alpha1.AgentSession, lc *lifecycle, pod *corev1.Pod) (time.Duration, error) {
	lc.queue.PauseSession(s.Name)
	p := s.Status.Passivation
	if p == nil || p.Deadline == nil {
		// Status from an older manager: start over.
		return r.requestPassivation(ctx, s, lc, agentlanev1alpha1.PassivationManual, pod)
	}
	checkpointed := r.Passivations.checkpointed(lc.key, p, s.Status.LastCheckpoint)
	safe := checkpointed && lc.stats.Active == 0
	left := p.Deadline.Sub(lc.now)
	if !safe && left > 0 {
		return min(left, time.Second), nil
	}
	if !safe {
		r.event(s, corev1.EventTypeWarning, "PassivationDeadlineExceeded", "Passivate",
			"passivating at the deadline with %d commands running; the last checkpoint%s is older than the request", lc.stats.Active, checkpointNote(s))
	}
	if pod != nil && s.Spec.Runtime != nil {
		if err := r.evict(ctx, s, pod); err != nil {
			return 0, err
		}
		r.event(s, corev1.EventTypeNormal, "Evicted", "Passivate", "runtime pod %s evicted%s", pod.Name, podNote(pod))
	}
	s.Status.Phase = agentlanev1alpha1.SessionPassivated
	s.Status.PodName = ""
	msg := fmt.Sprintf("passivated (%s)%s", p.Reason, checkpointNote(s))
	if !safe {
		msg += "; the deadline passed before a newer checkpoint"
	}
	setReady(s, metav1.ConditionFalse, agentlanev1alpha1.AgentSessionPassivatedReason, msg)
	return r.reconcileLifecycleAgain(s, lc)
}

// reconcileLifecycleAgain decides at once whether a session that just
// passivated resumes elsewhere.
func (r *AgentSessionReconciler) reconcileLifecycleAgain(s *agentlanev1alpha1.AgentSession, lc *lifecycle) (time.Duration, error) {
	if r.shouldResume(s, lc) {
		return 10 * time.Millisecond, nil
	}
	if s.Status.Passivation != nil && s.Status.Passivation.Reason == agentlanev1alpha1.PassivationIdleReaper {
		return idleWakeInterval, nil
	}
	return 0, nil
}

// shouldResume tells whether a passivated session should run again: after
// a drain or migration at once, after a manual passivation once desiredState
// is Active again, after the idle reaper once work arrives.
func (r *AgentSessionReconciler) shouldResume(s *agentlanev1alpha1.AgentSession, lc *lifecycle) bool {
	if s.Spec.DesiredState == agentlanev1alpha1.DesiredStatePassivated {
		return false
	}
	if s.Status.Passivation == nil {
		return true
	}
	switch s.Status.Passivation.Reason {
	case agentlanev1alpha1.PassivationIdleReaper:
		return lc.busy()
	default:
		return true
	}
}

// evict removes the pod's disruption budget, then evicts the pod through
// the Eviction API.
func (r *AgentSessionReconciler) evict(ctx context.Context, s *agentlanev1alpha1.AgentSession, pod *corev1.Pod) error {
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: runtimeBudgetName(s)}}
	if err := r.Delete(ctx, pdb); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete the runtime pod's disruption budget: %w", err)
	}
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}
	if err := r.SubResource("eviction").Create(ctx, pod, ev); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("evict runtime pod %s: %w", pod.Name, err)
	}
	return nil
}

// runtimePod returns the session's runtime pod that is not being deleted,
// if any.
func (r *AgentSessionReconciler) runtimePod(ctx context.Context, s *agentlanev1alpha1.AgentSession) (*corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.InNamespace(s.Namespace), client.MatchingLabels{RuntimeLabel: s.Name}); err != nil {
		return nil, fmt.Errorf("list runtime pods: %w", err)
	}
	var found *corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
		if !p.DeletionTimestamp.IsZero() || !metav1.IsControlledBy(p, s) {
			continue
		}
		if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
			continue
		}
		if found == nil || p.CreationTimestamp.After(found.CreationTimestamp.Time) {
			found = p
		}
	}
	return found, nil
}

// ensureRuntime creates the session's runtime pod and its disruption budget
// when they are missing.
func (r *AgentSessionReconciler) ensureRuntime(ctx context.Context, s *agentlanev1alpha1.AgentSession, pod *corev1.Pod) (*corev1.Pod, error) {
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: runtimeBudgetName(s)}}
	if err := r.Get(ctx, client.ObjectKeyFromObject(pdb), pdb); apierrors.IsNotFound(err) {
		pdb.Labels = map[string]string{RuntimeLabel: s.Name}
		zero := intstr.FromInt32(0)
		pdb.Spec = policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: &zero,
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{RuntimeLabel: s.Name}},
		}
		if err := controllerutil.SetControllerReference(s, pdb, r.Scheme()); err != nil {
			return nil, err
		}
		if err := r.Create(ctx, pdb); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create the runtime pod's disruption budget: %w", err)
		}
	} else if err != nil {
		return nil, err
	}
	if pod != nil {
		return pod, nil
	}
	pod = r.newRuntimePod(s)
	if err := controllerutil.SetControllerReference(s, pod, r.Scheme()); err != nil {
		return nil, err
	}
	if err := r.Create(ctx, pod); err != nil {
		if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
			s.Status.Phase = agentlanev1alpha1.SessionFailed
			setReady(s, metav1.ConditionFalse, agentlanev1alpha1.AgentSessionPodFailedReason,
				fmt.Sprintf("spec.runtime.podTemplate is refused: %v", err))
			r.event(s, corev1.EventTypeWarning, agentlanev1alpha1.AgentSessionPodFailedReason, "CreatePod", "spec.runtime.podTemplate is refused: %v", err)
			return nil, nil
		}
		return nil, fmt.Errorf("create the runtime pod: %w", err)
	}
	r.event(s, corev1.EventTypeNormal, "RuntimePodCreated", "CreatePod", "created runtime pod %s%s", pod.Name, checkpointNote(s))
	return pod, nil
}

// newRuntimePod builds the session's pod from its template, with the
// session's identity and the Session API's address in every container.
func (r *AgentSessionReconciler) newRuntimePod(s *agentlanev1alpha1.AgentSession) *corev1.Pod {
	tmpl := s.Spec.Runtime.PodTemplate.DeepCopy()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:    s.Namespace,
			GenerateName: s.Name + "-",
			Labels:       maps.Clone(tmpl.Labels),
			Annotations:  tmpl.Annotations,
		},
		Spec: tmpl.Spec,
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[RuntimeLabel] = s.Name
	pod.Labels[agentlanev1alpha1.SessionLabel] = s.Name
	env := []corev1.EnvVar{
		{Name: EnvNamespace, Value: s.Namespace},
		{Name: EnvSession, Value: s.Name},
	}
	if r.SessionAPIURL != "" {
		env = append(env, corev1.EnvVar{Name: EnvSessionAPIURL, Value: r.SessionAPIURL})
	}
	if id := s.Spec.Identity; id != nil {
		for name, v := range map[string]string{EnvTenantID: id.TenantID, EnvPrincipal: id.Principal,
			EnvAgentTemplateID: id.AgentTemplateID, EnvCorrelationID: id.CorrelationID} {
			if v != "" {
				env = append(env, corev1.EnvVar{Name: name, Value: v})
			}
		}
	}
	if cp := s.Status.LastCheckpoint; cp != nil {
		env = append(env, corev1.EnvVar{Name: EnvResumeRunID, Value: cp.RunID})
		if cp.Location != "" {
			env = append(env, corev1.EnvVar{Name: EnvCheckpointLocation, Value: cp.Location})
		}
	}
	env = append(env,
		corev1.EnvVar{Name: EnvPodName, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		corev1.EnvVar{Name: EnvNodeName, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
	)
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		for _, e := range env {
			if !slices.ContainsFunc(c.Env, func(have corev1.EnvVar) bool { return have.Name == e.Name }) {
				c.Env = append(c.Env, e)
			}
		}
	}
	return pod
}

// runtimeBudgetName names the disruption budget of a session's pod.
func runtimeBudgetName(s *agentlanev1alpha1.AgentSession) string {
	return "agentlane-runtime-" + s.Name
}

// showPod records the runtime pod in the session's status.
func (r *AgentSessionReconciler) showPod(s *agentlanev1alpha1.AgentSession, pod *corev1.Pod) {
	if pod == nil {
		s.Status.PodName = ""
		return
	}
	s.Status.PodName = pod.Name
	if pod.Spec.NodeName != "" {
		s.Status.NodeName = pod.Spec.NodeName
	}
}

func (r *AgentSessionReconciler) event(s *agentlanev1alpha1.AgentSession, typ, reason, action, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(s, nil, typ, reason, action, format, args...)
	}
}

func setReady(s *agentlanev1alpha1.AgentSession, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&s.Status.Conditions, metav1.Condition{
		Type: agentlanev1alpha1.AgentSessionReadyCondition, Status: status, Reason: reason, Message: msg,
		ObservedGeneration: s.Generation,
	})
}

func checkpointNote(s *agentlanev1alpha1.AgentSession) string {
	cp := s.Status.LastCheckpoint
	if cp == nil {
		return " (no checkpoint yet)"
	}
	return fmt.Sprintf(" (checkpoint of run %s, turn %d, %s)", cp.RunID, cp.Turn, cp.Time.UTC().Format(time.RFC3339))
}

func podNote(pod *corev1.Pod) string {
	if pod == nil || pod.Spec.NodeName == "" {
		return ""
	}
	return " on node " + pod.Spec.NodeName
}

func podName(pod *corev1.Pod) string {
	if pod == nil {
		return "(none)"
	}
	return pod.Name
}

func podPhase(pod *corev1.Pod) string {
	if pod == nil || pod.Status.Phase == "" {
		return "not created"
	}
	return string(pod.Status.Phase)
}
