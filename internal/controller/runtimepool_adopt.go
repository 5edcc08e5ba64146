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
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// warmPools is what the AgentSession and RuntimePool controllers share:
// the adoptions the sessions made that the pools' status does not count
// yet, and the pools' metrics.
type warmPools struct {
	metrics *runtimePoolMetrics

	mu        sync.Mutex
	adoptions map[types.NamespacedName]*adoptions
}

// adoptions are a pool's adoptions not yet in its status.
type adoptions struct {
	count int64
	last  time.Time
	pods  []string
}

func newWarmPools() *warmPools {
	return &warmPools{metrics: newRuntimePoolMetrics(), adoptions: map[types.NamespacedName]*adoptions{}}
}

// adopted records that a session adopted pod of pool at at.
func (w *warmPools) adopted(pool types.NamespacedName, pod string, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	a := w.adoptions[pool]
	if a == nil {
		a = &adoptions{}
		w.adoptions[pool] = a
	}
	a.count++
	a.last = at
	a.pods = append(a.pods, pod)
}

// pendingAdoptions returns how many of the pool's pods were adopted since
// its status last counted them, and when the last was.
func (w *warmPools) pendingAdoptions(pool types.NamespacedName) (int64, time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if a := w.adoptions[pool]; a != nil {
		return a.count, a.last
	}
	return 0, time.Time{}
}

// adoptedPods names the pool's pods adopted since its status last counted
// them.
func (w *warmPools) adoptedPods(pool types.NamespacedName) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if a := w.adoptions[pool]; a != nil {
		return slices.Clone(a.pods)
	}
	return nil
}

// settleAdoptions forgets n adoptions the pool's status now counts.
func (w *warmPools) settleAdoptions(pool types.NamespacedName, n int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	a := w.adoptions[pool]
	if a == nil || n == 0 {
		return
	}
	a.count -= n
	a.pods = a.pods[min(int(n), len(a.pods)):]
	if a.count <= 0 {
		delete(w.adoptions, pool)
	}
}

func (w *warmPools) forget(pool types.NamespacedName) {
	w.mu.Lock()
	delete(w.adoptions, pool)
	w.mu.Unlock()
	w.metrics.forget(pool)
}

// adoptWarmPod hands the session a ready warm pod of a RuntimePool of its
// namespace whose template is the session's, and returns it; nil when no
// pool matches or none of their pods can be adopted, the session then
// gets a new pod. Only pods the pool itself made (controlled by the pool,
// with its labels, running the template's images) are taken, never one of
// another namespace or template, nor one on the node a migration moves the
// session off or on a cordoned node.
func (r *AgentSessionReconciler) adoptWarmPod(ctx context.Context, s *agentlanev1alpha1.AgentSession) (*corev1.Pod, error) {
	if r.warm == nil || s.Spec.Runtime == nil {
		return nil, nil
	}
	pools := &agentlanev1alpha1.RuntimePoolList{}
	if err := r.List(ctx, pools, client.InNamespace(s.Namespace)); err != nil {
		return nil, fmt.Errorf("list the namespace's RuntimePools: %w", err)
	}
	if len(pools.Items) == 0 {
		return nil, nil
	}
	hash := TemplateHash(&s.Spec.Runtime.PodTemplate)
	avoid := ""
	if p := s.Status.Passivation; p != nil && p.Reason == agentlanev1alpha1.PassivationMigration {
		avoid = s.Status.NodeName
	}
	var matched []string
	for i := range pools.Items {
		pool := &pools.Items[i]
		if !pool.DeletionTimestamp.IsZero() || TemplateHash(&pool.Spec.Template) != hash {
			continue
		}
		matched = append(matched, pool.Name)
		pods, err := r.warmCandidates(ctx, pool, hash, avoid)
		if err != nil {
			return nil, err
		}
		for _, pod := range pods {
			ok, err := r.adopt(ctx, s, pool, pod)
			if err != nil {
				return nil, err
			}
			if !ok {
				r.warm.metrics.adoption(adoptionConflict)
				continue
			}
			r.warm.metrics.adoption(adoptionAdopted)
			r.warm.adopted(client.ObjectKeyFromObject(pool), pod.Name, r.Clock.Now())
			r.event(s, corev1.EventTypeNormal, agentlanev1alpha1.AgentSessionRuntimePodAdoptedReason, "AdoptPod",
				"adopted warm pod %s of RuntimePool %s%s%s", pod.Name, pool.Name, podNote(pod), checkpointNote(s))
			return pod, nil
		}
	}
	if len(matched) == 0 {
		return nil, nil
	}
	r.warm.metrics.adoption(adoptionCold)
	r.event(s, corev1.EventTypeNormal, agentlanev1alpha1.AgentSessionWarmPoolEmptyReason, "AdoptPod",
		"RuntimePool %s has no ready warm pod to hand over; creating a new pod", strings.Join(matched, ", "))
	return nil, nil
}

// warmCandidates lists the pool's pods a session may adopt: made by the
// pool (controlled by it, with its labels and template hash, running the
// template's images), unassigned, not being deleted, running and ready,
// on a node that is neither avoid nor cordoned. The oldest come first.
func (r *AgentSessionReconciler) warmCandidates(ctx context.Context, pool *agentlanev1alpha1.RuntimePool, hash, avoid string) ([]*corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.InNamespace(pool.Namespace),
		client.MatchingLabels{RuntimePoolLabel: pool.Name, TemplateHashLabel: hash}); err != nil {
		return nil, fmt.Errorf("list the warm pods of RuntimePool %s: %w", pool.Name, err)
	}
	var out []*corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
		if !metav1.IsControlledBy(p, pool) || !p.DeletionTimestamp.IsZero() || p.Labels[RuntimeLabel] != "" ||
			!podReady(p) || p.Spec.NodeName == "" || p.Spec.NodeName == avoid || !sameImages(p, &pool.Spec.Template) {
			continue
		}
		node := &corev1.Node{}
		if err := r.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, node); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, err
		}
		if node.Spec.Unschedulable || !node.DeletionTimestamp.IsZero() {
			continue
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *corev1.Pod) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), strings.Compare(a.Name, b.Name))
	})
	return out, nil
}

// adopt makes pod the session's runtime pod in one update at the
// resourceVersion it was read at: the session's labels instead of the
// pool's (the template hash stays), the session as its controller instead
// of the pool, and when. It returns false when the pod changed meanwhile
// (another session adopted it, its pool deleted it): the caller looks
// further.
func (r *AgentSessionReconciler) adopt(ctx context.Context, s *agentlanev1alpha1.AgentSession, pool *agentlanev1alpha1.RuntimePool, pod *corev1.Pod) (bool, error) {
	cp := pod.DeepCopy()
	cp.Labels = maps.Clone(cp.Labels)
	delete(cp.Labels, RuntimePoolLabel)
	cp.Labels[RuntimeLabel] = s.Name
	cp.Labels[agentlanev1alpha1.SessionLabel] = s.Name
	cp.OwnerReferences = slices.DeleteFunc(slices.Clone(cp.OwnerReferences), func(o metav1.OwnerReference) bool {
		return o.Controller != nil && *o.Controller
	})
	if err := controllerutil.SetControllerReference(s, cp, r.Scheme()); err != nil {
		return false, err
	}
	if cp.Annotations == nil {
		cp.Annotations = map[string]string{}
	} else {
		cp.Annotations = maps.Clone(cp.Annotations)
	}
	cp.Annotations[AdoptedAtAnnotation] = r.Clock.Now().UTC().Format(time.RFC3339Nano)
	if err := r.Update(ctx, cp); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			logf.FromContext(ctx).V(1).Info("A warm pod changed under its adoption; looking further",
				"pod", pod.Name, "runtimePool", pool.Name, "reason", err.Error())
			return false, nil
		}
		return false, fmt.Errorf("adopt warm pod %s of RuntimePool %s: %w", pod.Name, pool.Name, err)
	}
	*pod = *cp
	return true, nil
}
