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
	"unsafe"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// sameString tells whether a and b share their bytes.
func sameString(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

var _ = Describe("The manager's cache", func() {
	It("keeps Nodes without their status, and still sees a cordon", func() {
		node := newNode("lean")
		node.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}
		node.Status.Images = []corev1.ContainerImage{{Names: []string{"registry.example/agent:v1"}, SizeBytes: 1 << 30}}
		Expect(k8sClient.Status().Update(ctx, node)).To(Succeed())
		cached := &corev1.Node{}
		Eventually(func(g Gomega) {
			g.Expect(managerCache.Get(ctx, client.ObjectKeyFromObject(node), cached)).To(Succeed())
			g.Expect(cached.ResourceVersion).To(Equal(node.ResourceVersion))
		}).Should(Succeed())
		Expect(cached.Status).To(Equal(corev1.NodeStatus{}), "the node's status is cached")
		Expect(cached.ManagedFields).To(BeEmpty())

		cordon(node)
		Eventually(func(g Gomega) bool {
			g.Expect(managerCache.Get(ctx, client.ObjectKeyFromObject(node), cached)).To(Succeed())
			return cached.Spec.Unschedulable
		}).Should(BeTrue())
	})

	It("keeps tasks without their payload, sharing the strings that tasks repeat", func() {
		ns := taskNamespace()
		taskQueue(ns, nil)
		var tasks []*agentlanev1alpha1.ExternalTask
		for _, name := range []string{"same-a", "same-b"} {
			t := queueTask(ns, name)
			t.Labels = map[string]string{"team": "search"}
			t.Spec.Payload = &runtime.RawExtension{Raw: []byte(`{"command":"true"}`)}
			Expect(k8sClient.Create(ctx, t)).To(Succeed())
			tasks = append(tasks, t)
		}
		cached := make([]*agentlanev1alpha1.ExternalTask, len(tasks))
		for i, t := range tasks {
			cached[i] = &agentlanev1alpha1.ExternalTask{}
			Eventually(func(g Gomega) {
				g.Expect(managerCache.Get(ctx, client.ObjectKeyFromObject(t), cached[i])).To(Succeed())
				g.Expect(cached[i].Status.Lane).NotTo(BeEmpty())
			}).Should(Succeed())
			Expect(cached[i].Spec.Payload).To(BeNil())
		}
		// A Get returns a deep copy; what the cache holds is read without one.
		list := &agentlanev1alpha1.ExternalTaskList{}
		Expect(managerCache.List(ctx, list, client.InNamespace(ns), client.UnsafeDisableDeepCopy)).To(Succeed())
		Expect(list.Items).To(HaveLen(2))
		a, b := list.Items[0], list.Items[1]
		Expect(sameString(a.Namespace, b.Namespace)).To(BeTrue(), "namespace")
		Expect(sameString(a.Labels["team"], b.Labels["team"])).To(BeTrue(), "label value")
		Expect(sameString(a.Spec.QueueRef.Name, b.Spec.QueueRef.Name)).To(BeTrue(), "queue")
		Expect(sameString(string(a.Status.Lane), string(b.Status.Lane))).To(BeTrue(), "lane")
		Expect(sameString(string(a.Spec.CommandType), string(b.Spec.CommandType))).To(BeTrue(), "command type")
	})
})
