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
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

var _ = Describe("Session migration", func() {
	It("moves a session to another node on request: passivation with reason migration, then a new pod off the old node", func() {
		nodeA, nodeB := newNode("node-mig-a"), newNode("node-mig-b")
		s, _ := runtimeSession("migrated", agentlanev1alpha1.SessionRuntime{PassivationDeadline: &metav1.Duration{Duration: time.Minute}})
		first := runtimePodOf(s, "")
		run(first, nodeA)
		Eventually(phaseOf(s)).Should(Equal(agentlanev1alpha1.SessionActive))

		By("annotating the session")
		Eventually(func(g Gomega) {
			cur := getSession(client.ObjectKeyFromObject(s))(g)
			if cur.Annotations == nil {
				cur.Annotations = map[string]string{}
			}
			cur.Annotations[agentlanev1alpha1.MigrateAnnotation] = "rebalance"
			g.Expect(k8sClient.Update(ctx, cur)).To(Succeed())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			cur := getSession(client.ObjectKeyFromObject(s))(g)
			g.Expect(cur.Status.Phase).To(Equal(agentlanev1alpha1.SessionPassivating))
			g.Expect(cur.Status.Passivation).NotTo(BeNil())
			g.Expect(cur.Status.Passivation.Reason).To(Equal(agentlanev1alpha1.PassivationMigration))
			g.Expect(cur.Annotations).NotTo(HaveKey(agentlanev1alpha1.MigrateAnnotation), "the request is taken")
		}).Should(Succeed())
		Eventually(sessionEvent(s, "PassivationRequested")).Should(HaveField("Note", ContainSubstring("reason migration")))
		Consistently(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(first), first)).To(Succeed())
			g.Expect(first.DeletionTimestamp).To(BeNil())
		}, "300ms").Should(Succeed(), "no eviction before the checkpoint")

		By("checkpointing, which lets the pod go")
		checkpoint(s, "run-mig")
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(first), first)).To(Succeed())
			g.Expect(first.DeletionTimestamp).NotTo(BeNil(), "evicted")
		}).Should(Succeed())
		Eventually(sessionEvent(s, "Passivated")).Should(HaveField("Note", ContainSubstring("passivated (migration)")))
		finishDeletion(first)

		By("resuming in a new pod that may not run on the old node")
		second := runtimePodOf(s, first.Name)
		Expect(second.Spec.Containers[0].Env).To(ContainElement(corev1.EnvVar{Name: EnvResumeRunID, Value: "run-mig"}))
		Expect(second.Spec.Affinity).NotTo(BeNil())
		Expect(second.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms).To(ConsistOf(
			HaveField("MatchFields", ContainElement(corev1.NodeSelectorRequirement{Key: "metadata.name",
				Operator: corev1.NodeSelectorOpNotIn, Values: []string{nodeA.Name}}))))
		run(second, nodeB)
		Eventually(func(g Gomega) {
			cur := getSession(client.ObjectKeyFromObject(s))(g)
			g.Expect(cur.Status.Phase).To(Equal(agentlanev1alpha1.SessionActive))
			g.Expect(cur.Status.NodeName).To(Equal(nodeB.Name))
			g.Expect(cur.Status.Passivation).To(BeNil())
		}).Should(Succeed())
		Consistently(phaseOf(s), "500ms").Should(Equal(agentlanev1alpha1.SessionActive), "one request moves the session once")
	})
})
