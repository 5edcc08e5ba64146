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

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
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

// The manager writes the Session API's CA bundle into each namespace with
// runtime pods (session_access.go); the Session API's checkpoint store
// already may get, create and update ConfigMaps.
//
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;create;update

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
// when they are missing; the pod is a ready warm pod of a RuntimePool that
// matches the session's template when there is one (adoptWarmPod).
func (r *AgentSessionReconciler) ensureRuntime(ctx context.Context, s *agentlanev1alpha1.AgentSession, lc *lifecycle, pod *corev1.Pod) (*corev1.Pod, error) {
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
		r.madePods.CompareAndDelete(client.ObjectKeyFromObject(s), pod.Name)
		return pod, nil
	}
	if pod, err := r.recentPod(ctx, s); err != nil || pod != nil {
		return pod, err
	}
	if u := s.Spec.Runtime.UndecodablePodTemplate; u != nil {
		// Stored before templates were checked at admission; the rest of
		// the session, and every other session, still works.
		msg := u.Error("spec.runtime.podTemplate")
		s.Status.Phase = agentlanev1alpha1.SessionFailed
		lc.notReadyBecause(agentlanev1alpha1.AgentSessionPodFailedReason, msg)
		r.event(s, corev1.EventTypeWarning, agentlanev1alpha1.AgentSessionPodFailedReason, "CreatePod", "%s", msg)
		return nil, nil
	}
	if warm, err := r.adoptWarmPod(ctx, s); err != nil || warm != nil {
		if warm != nil {
			r.madePods.Store(client.ObjectKeyFromObject(s), warm.Name)
		}
		return warm, err
	}
	ca := r.sessionAPICA()
	if len(ca) > 0 {
		if err := r.ensureCAConfigMap(ctx, s.Namespace, ca); err != nil {
			return nil, err
		}
	}
	pod = r.newRuntimePod(s, ca)
	if err := controllerutil.SetControllerReference(s, pod, r.Scheme()); err != nil {
		return nil, err
	}
	if err := r.Create(ctx, pod); err != nil {
		if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
			s.Status.Phase = agentlanev1alpha1.SessionFailed
			lc.notReadyBecause(agentlanev1alpha1.AgentSessionPodFailedReason,
				fmt.Sprintf("spec.runtime.podTemplate is refused: %v", err))
			r.event(s, corev1.EventTypeWarning, agentlanev1alpha1.AgentSessionPodFailedReason, "CreatePod", "spec.runtime.podTemplate is refused: %v", err)
			return nil, nil
		}
		return nil, fmt.Errorf("create the runtime pod: %w", err)
	}
	r.madePods.Store(client.ObjectKeyFromObject(s), pod.Name)
	r.event(s, corev1.EventTypeNormal, agentlanev1alpha1.AgentSessionRuntimePodCreatedReason, "CreatePod", "created runtime pod %s%s", pod.Name, checkpointNote(s))
	return pod, nil
}

// recentPod returns the runtime pod the reconciler last created or adopted
// for the session when the cache does not show it yet, read from the API
// server: a reconcile that runs before the cache has caught up with that
// pod takes it instead of making (or adopting) a second one. It returns nil
// once that pod is gone, being deleted or finished.
func (r *AgentSessionReconciler) recentPod(ctx context.Context, s *agentlanev1alpha1.AgentSession) (*corev1.Pod, error) {
	key := client.ObjectKeyFromObject(s)
	name, ok := r.madePods.Load(key)
	if !ok {
		return nil, nil
	}
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
	pod := &corev1.Pod{}
	err := reader.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: name.(string)}, pod)
	switch {
	case apierrors.IsNotFound(err):
		pod = nil
	case err != nil:
		return nil, fmt.Errorf("read runtime pod %s: %w", name, err)
	case !pod.DeletionTimestamp.IsZero() || !metav1.IsControlledBy(pod, s) ||
		pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded:
		pod = nil
	}
	if pod == nil {
		r.madePods.CompareAndDelete(key, name)
	}
	return pod, nil
}

// newRuntimePod builds the session's pod from its template
// (buildRuntimePod), with the session's name, identity and checkpoint in
// every container, kept off the node a migration moves it from.
func (r *AgentSessionReconciler) newRuntimePod(s *agentlanev1alpha1.AgentSession, ca []byte) *corev1.Pod {
	vars := []corev1.EnvVar{{Name: EnvSession, Value: s.Name}}
	if id := s.Spec.Identity; id != nil {
		for name, v := range map[string]string{EnvTenantID: id.TenantID, EnvPrincipal: id.Principal,
			EnvAgentTemplateID: id.AgentTemplateID, EnvCorrelationID: id.CorrelationID} {
			if v != "" {
				vars = append(vars, corev1.EnvVar{Name: name, Value: v})
			}
		}
	}
	if cp := s.Status.LastCheckpoint; cp != nil {
		vars = append(vars, corev1.EnvVar{Name: EnvResumeRunID, Value: cp.RunID})
		if cp.Location != "" {
			vars = append(vars, corev1.EnvVar{Name: EnvCheckpointLocation, Value: cp.Location})
		}
	}
	pod := buildRuntimePod(s.Namespace, &s.Spec.Runtime.PodTemplate, r.apiAccess(), ca, vars)
	pod.GenerateName = s.Name + "-"
	pod.Labels[RuntimeLabel] = s.Name
	pod.Labels[agentlanev1alpha1.SessionLabel] = s.Name
	if p := s.Status.Passivation; p != nil && p.Reason == agentlanev1alpha1.PassivationMigration && s.Status.NodeName != "" {
		avoidNode(&pod.Spec, s.Status.NodeName)
	}
	return pod
}

// apiAccess is how the reconciler's runtime pods reach the Session API.
func (r *AgentSessionReconciler) apiAccess() sessionAPIAccess {
	return sessionAPIAccess{URL: r.SessionAPIURL, Audience: r.SessionAPIAudience}
}

// buildRuntimePod builds a runtime pod of namespace from tmpl, for a
// session or a RuntimePool: the template's pod with the restricted
// settings it leaves unset (RestrictPodSpec), the Session API's address and
// the means to reach it (a token for its audience, its CA bundle ca) and
// the pod's namespace, name and node in every container, with vars between
// them. A variable a container of the template sets itself is kept. The
// caller names the pod and adds its own labels.
func buildRuntimePod(namespace string, tmpl *corev1.PodTemplateSpec, api sessionAPIAccess, ca []byte, vars []corev1.EnvVar) *corev1.Pod {
	tmpl = tmpl.DeepCopy()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   namespace,
			Labels:      maps.Clone(tmpl.Labels),
			Annotations: tmpl.Annotations,
		},
		Spec: tmpl.Spec,
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	RestrictPodSpec(&pod.Spec)
	env := []corev1.EnvVar{{Name: EnvNamespace, Value: namespace}}
	if api.URL != "" {
		env = append(env, corev1.EnvVar{Name: EnvSessionAPIURL, Value: api.URL})
	}
	env = append(env, api.mount(pod, ca)...)
	env = append(env, vars...)
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
