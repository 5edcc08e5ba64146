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

package testenv

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// envtest runs an API server and etcd, but no scheduler and no kubelets. The
// functions below play their part for suites that need pods on nodes.

// NewNode creates a schedulable Node named after prefix.
func NewNode(ctx context.Context, c client.Client, prefix string) (*corev1.Node, error) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := c.Create(ctx, n); err != nil {
		return nil, fmt.Errorf("create node: %w", err)
	}
	return n, nil
}

// Cordon marks the node unschedulable, as kubectl cordon and drain do.
func Cordon(ctx context.Context, c client.Client, n *corev1.Node) error {
	orig := n.DeepCopy()
	n.Spec.Unschedulable = true
	return c.Patch(ctx, n, client.MergeFrom(orig))
}

// BindAndRun binds the pod to the node, as the scheduler does, and marks it
// Running and Ready, as its kubelet does.
func BindAndRun(ctx context.Context, c client.Client, pod *corev1.Pod, node string) error {
	if err := c.SubResource("binding").Create(ctx, pod, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}); err != nil {
		return fmt.Errorf("bind pod %s to %s: %w", pod.Name, node, err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
		return err
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	return c.Status().Update(ctx, pod)
}

// FinishDeletion completes the deletion of a pod being deleted (or
// evicted), as its kubelet does once the containers stopped.
func FinishDeletion(ctx context.Context, c client.Client, pod *corev1.Pod) error {
	return client.IgnoreNotFound(c.Delete(ctx, pod, client.GracePeriodSeconds(0)))
}

// LivePod returns a pod of the namespace with the labels that is not being
// deleted and is not named except, or nil when there is none.
func LivePod(ctx context.Context, c client.Client, namespace string, labels map[string]string, except string) (*corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(namespace), client.MatchingLabels(labels)); err != nil {
		return nil, err
	}
	for i := range pods.Items {
		if p := &pods.Items[i]; p.Name != except && p.DeletionTimestamp.IsZero() {
			return p, nil
		}
	}
	return nil, nil
}
