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
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/lanequeue"
)

func testSession(name, queue string, overrides ...agentlanev1alpha1.LaneOverride) *agentlanev1alpha1.AgentSession {
	return &agentlanev1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: agentlanev1alpha1.AgentSessionSpec{
			QueueRef:      agentlanev1alpha1.LaneQueueReference{Name: queue},
			LaneOverrides: overrides,
		},
	}
}

func getSession(key types.NamespacedName) func(Gomega) *agentlanev1alpha1.AgentSession {
	return func(g Gomega) *agentlanev1alpha1.AgentSession {
		s := &agentlanev1alpha1.AgentSession{}
		g.Expect(k8sClient.Get(ctx, key, s)).To(Succeed())
		return s
	}
}

func expectReady(g Gomega, s *agentlanev1alpha1.AgentSession, status metav1.ConditionStatus, reason string) *metav1.Condition {
	c := meta.FindStatusCondition(s.Status.Conditions, agentlanev1alpha1.AgentSessionReadyCondition)
	g.Expect(c).NotTo(BeNil())
	g.Expect(c.Status).To(Equal(status))
	g.Expect(c.Reason).To(Equal(reason))
	return c
}

var _ = Describe("AgentSession controller", func() {
	It("waits for a missing queue, then binds to it once it runs", func() {
		s := testSession("early", "late-queue")
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		key := client.ObjectKeyFromObject(s)
		Eventually(func(g Gomega) {
			got := getSession(key)(g)
			g.Expect(got.Status.Phase).To(Equal(agentlanev1alpha1.SessionPending))
			c := expectReady(g, got, metav1.ConditionFalse, agentlanev1alpha1.AgentSessionQueueNotFoundReason)
			g.Expect(c.Message).To(ContainSubstring(`"late-queue" does not exist`))
			g.Expect(got.Finalizers).To(ContainElement(SessionCleanupFinalizer))
		}).Should(Succeed())

		Expect(k8sClient.Create(ctx, testQueue("late-queue"))).To(Succeed())
		Eventually(func(g Gomega) {
			got := getSession(key)(g)
			g.Expect(got.Status.Phase).To(Equal(agentlanev1alpha1.SessionActive))
			expectReady(g, got, metav1.ConditionTrue, agentlanev1alpha1.AgentSessionActiveReason)
			g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		}).Should(Succeed())
	})

	It("applies lane handler overrides live and reports the ones the queue lacks", func() {
		lq := testQueue("overrides")
		lq.Spec.Lanes[0].SessionOverrides = &agentlanev1alpha1.LaneSessionOverrides{
			AllowedModes: []agentlanev1alpha1.HandlerMode{agentlanev1alpha1.HandlerModeExternal}}
		Expect(k8sClient.Create(ctx, lq)).To(Succeed())
		q := runningScheduler(client.ObjectKeyFromObject(lq))
		s := testSession("switcher", lq.Name,
			agentlanev1alpha1.LaneOverride{Lane: "execute", HandlerMode: agentlanev1alpha1.HandlerModeExternal},
			agentlanev1alpha1.LaneOverride{Lane: "nope", HandlerMode: agentlanev1alpha1.HandlerModeHybrid},
		)
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		key := client.ObjectKeyFromObject(s)

		Eventually(func(g Gomega) {
			got := getSession(key)(g)
			c := expectReady(g, got, metav1.ConditionFalse, agentlanev1alpha1.AgentSessionInvalidLaneOverrideReason)
			g.Expect(c.Message).To(ContainSubstring("nope"))
		}).Should(Succeed())
		Eventually(func() map[string]lanequeue.HandlerMode {
			return q.SessionStats(s.Name).LaneModes
		}).Should(Equal(map[string]lanequeue.HandlerMode{"execute": lanequeue.External}))

		By("switching the execute lane back by removing the overrides")
		Eventually(func(g Gomega) {
			got := getSession(key)(g)
			got.Spec.LaneOverrides = nil
			g.Expect(k8sClient.Update(ctx, got)).To(Succeed())
		}).Should(Succeed())
		Eventually(func() map[string]lanequeue.HandlerMode {
			return q.SessionStats(s.Name).LaneModes
		}).Should(BeEmpty())
		Eventually(func(g Gomega) {
			expectReady(g, getSession(key)(g), metav1.ConditionTrue, agentlanev1alpha1.AgentSessionActiveReason)
		}).Should(Succeed())
	})

	It("reports the session's queue counts and cancels its queued work when deleted", func() {
		lq := testQueue("session-work")
		Expect(k8sClient.Create(ctx, lq)).To(Succeed())
		q := runningScheduler(client.ObjectKeyFromObject(lq))
		s := testSession("worker-session", lq.Name)
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		key := client.ObjectKeyFromObject(s)

		b := newBlocker()
		defer close(b.release)
		tickets := submit(q, 4, s.Name, "execute", b)
		other := submit(q, 1, "someone-else", "query", b)
		Eventually(func(g Gomega) {
			got := getSession(key)(g)
			g.Expect(got.Status.Queue.Pending).To(Equal(int32(3)))
			g.Expect(got.Status.Queue.Active).To(Equal(int32(1)))
		}).Should(Succeed())

		Expect(k8sClient.Delete(ctx, s)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, key, &agentlanev1alpha1.AgentSession{}))
		}).Should(BeTrue())
		for _, t := range tickets {
			Eventually(t.Done()).Should(BeClosed())
			out, _ := t.Outcome()
			Expect(out.State).To(Equal(lanequeue.StateCancelled))
		}
		Consistently(other[0].Done(), "300ms").ShouldNot(BeClosed(), "another session's command was touched")
	})
})
