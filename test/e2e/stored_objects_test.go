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

package e2e

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

var crdKind = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// loosenSchema replaces the schema of the field at path (under the CRD's
// openAPIV3Schema) with an object that keeps anything, as a schema without
// typed templates did, until the returned function restores the CRD.
func loosenSchema(crd string, path ...string) (restore func()) {
	GinkgoHelper()
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(crdKind)
	Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Name: crd}, obj)).To(Succeed())
	versions, _, err := unstructured.NestedSlice(obj.Object, "spec", "versions")
	Expect(err).NotTo(HaveOccurred())
	original := runtimeDeepCopy(versions)
	v := versions[0].(map[string]any)
	field := append([]string{"schema", "openAPIV3Schema"}, path...)
	Expect(unstructured.SetNestedField(v, map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}, field...)).To(Succeed())
	Expect(unstructured.SetNestedSlice(obj.Object, versions, "spec", "versions")).To(Succeed())
	Expect(k8sClient.Update(suiteCtx, obj)).To(Succeed())
	return func() {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Name: crd}, obj)).To(Succeed())
			g.Expect(unstructured.SetNestedSlice(obj.Object, runtimeDeepCopy(original), "spec", "versions")).To(Succeed())
			g.Expect(k8sClient.Update(suiteCtx, obj)).To(Succeed())
		}).Should(Succeed())
	}
}

func runtimeDeepCopy(s []any) []any {
	return (&unstructured.Unstructured{Object: map[string]any{"s": s}}).DeepCopy().Object["s"].([]any)
}

// field returns the value at path in obj, nil when there is none.
func field(obj map[string]any, path ...string) any {
	v, _, _ := unstructured.NestedFieldCopy(obj, path...)
	return v
}

// object builds an agentlane object from a map, as kubectl would send it.
func object(kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(agentlanev1alpha1.GroupVersion.WithKind(kind))
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

var _ = Describe("Objects stored before templates were checked", func() {
	It("keeps the manager working for everyone, and reports the bad templates without losing them", func() {
		ns := newNamespace()
		showManagerLogOnFailure()
		createQueue(ns, agentlanev1alpha1.LaneQueueSpec{Lanes: []agentlanev1alpha1.Lane{{Name: "execute", Priority: 0}}})

		By("storing a session and a queue whose templates do not decode, under a schema that does not type them")
		badSession := object("AgentSession", ns, "legacy", map[string]any{
			"queueRef": map[string]any{"name": "q1"},
			"runtime":  map[string]any{"podTemplate": map[string]any{"spec": map[string]any{"containers": int64(7)}}},
		})
		badQueue := object("LaneQueue", ns, "legacy-jobs", map[string]any{
			"lanes": []any{
				map[string]any{"name": "execute", "priority": int64(0)},
				map[string]any{"name": "build", "priority": int64(1), "handlerMode": "External",
					"retryPolicy": map[string]any{"strategy": "None"},
					"externalTarget": map[string]any{"type": "Job",
						"jobTemplate": map[string]any{"spec": map[string]any{"backoffLimit": "x"}}}},
			},
		})
		restoreSessions := loosenSchema("agentsessions.agentlane.io", "properties", "spec", "properties", "runtime", "properties", "podTemplate")
		restoreQueues := loosenSchema("lanequeues.agentlane.io", "properties", "spec", "properties", "lanes", "items", "properties", "externalTarget", "properties", "jobTemplate")
		Eventually(func() error { return k8sClient.Create(suiteCtx, badSession.DeepCopy()) }).Should(Succeed())
		Eventually(func() error { return k8sClient.Create(suiteCtx, badQueue.DeepCopy()) }).Should(Succeed())
		restoreSessions()
		restoreQueues()
		Eventually(func() error {
			return k8sClient.Create(suiteCtx, object("AgentSession", ns, "refused", badSession.Object["spec"].(map[string]any)), client.DryRunAll)
		}).Should(MatchError(ContainSubstring("spec.runtime.podTemplate.spec.containers")), "the typed schema is back")

		By("expecting a session created afterwards to become Active: the manager still reads AgentSessions")
		after := &agentlanev1alpha1.AgentSession{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "after"},
			Spec:       agentlanev1alpha1.AgentSessionSpec{QueueRef: agentlanev1alpha1.LaneQueueReference{Name: "q1"}},
		}
		Expect(k8sClient.Create(suiteCtx, after)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(after), after)).To(Succeed())
			g.Expect(after.Status.Phase).To(Equal(agentlanev1alpha1.SessionActive))
		}).Should(Succeed())

		By("expecting the bad session Failed, saying which template does not decode")
		legacy := &agentlanev1alpha1.AgentSession{}
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: "legacy"}, legacy)).To(Succeed())
			g.Expect(legacy.Status.Phase).To(Equal(agentlanev1alpha1.SessionFailed))
			ready := meta.FindStatusCondition(legacy.Status.Conditions, agentlanev1alpha1.AgentSessionReadyCondition)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Message).To(ContainSubstring("spec.runtime.podTemplate does not decode"))
		}).Should(Succeed())

		By("expecting a task of the bad queue's Job lane to fail with the reason, and the queue's other lane to work")
		s := &agentlanev1alpha1.AgentSession{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "builder"},
			Spec:       agentlanev1alpha1.AgentSessionSpec{QueueRef: agentlanev1alpha1.LaneQueueReference{Name: "legacy-jobs"}},
		}
		Expect(k8sClient.Create(suiteCtx, s)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(s), s)).To(Succeed())
			g.Expect(s.Status.Phase).To(Equal(agentlanev1alpha1.SessionActive))
		}).Should(Succeed())
		task := bashTask(s, "build-1", "build", "make")
		create(task)
		Eventually(phaseOf(task)).Should(Equal(agentlanev1alpha1.ExternalTaskDeadLettered), "no retries, then the dead-letter queue")
		Expect(task.Status.Attempts).NotTo(BeEmpty())
		Expect(task.Status.Attempts[0].Error).To(ContainSubstring("spec.lanes[build].externalTarget.jobTemplate does not decode"))

		By("expecting the stored templates unchanged by the manager's writes")
		stored := badSession.DeepCopy()
		Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(badSession), stored)).To(Succeed())
		Expect(stored.GetFinalizers()).NotTo(BeEmpty(), "the manager wrote the session")
		Expect(field(stored.Object, "spec", "runtime", "podTemplate")).To(
			Equal(map[string]any{"spec": map[string]any{"containers": int64(7)}}))
		stored = badQueue.DeepCopy()
		Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(badQueue), stored)).To(Succeed())
		lanes, _, _ := unstructured.NestedSlice(stored.Object, "spec", "lanes")
		Expect(lanes).To(HaveLen(2))
		Expect(field(lanes[1].(map[string]any), "externalTarget", "jobTemplate")).To(
			Equal(map[string]any{"spec": map[string]any{"backoffLimit": "x"}}))
		Expect(manager.exited()).To(BeFalse(), "the manager is still running")
	})
})
