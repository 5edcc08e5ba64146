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
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/lanequeue"
)

// testQueue is a LaneQueue with a parallel query lane and a serial execute
// lane, a low pressure threshold and low alert depths.
func testQueue(name string) *agentlanev1alpha1.LaneQueue {
	return &agentlanev1alpha1.LaneQueue{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: agentlanev1alpha1.LaneQueueSpec{
			Lanes: []agentlanev1alpha1.Lane{
				{Name: "execute", Priority: 2, MaxConcurrency: 1},
				{Name: "query", Priority: 1, MaxConcurrency: 4},
			},
			PressureThreshold: ptr.To[int32](3),
			Alerts:            &agentlanev1alpha1.DepthAlerts{WarningDepth: ptr.To[int32](4), CriticalDepth: ptr.To[int32](6)},
		},
	}
}

// blocker is a handler whose commands run until released.
type blocker struct{ release chan struct{} }

func newBlocker() *blocker { return &blocker{release: make(chan struct{})} }

func (b *blocker) Run(ctx context.Context, _ lanequeue.Attempt) (lanequeue.Result, error) {
	select {
	case <-b.release:
		return lanequeue.Result{Success: true}, nil
	case <-ctx.Done():
		return lanequeue.Result{}, ctx.Err()
	}
}

func getQueue(key types.NamespacedName) func(Gomega) *agentlanev1alpha1.LaneQueue {
	return func(g Gomega) *agentlanev1alpha1.LaneQueue {
		lq := &agentlanev1alpha1.LaneQueue{}
		g.Expect(k8sClient.Get(ctx, key, lq)).To(Succeed())
		return lq
	}
}

func runningScheduler(key types.NamespacedName) *lanequeue.Queue {
	GinkgoHelper()
	var q *lanequeue.Queue
	Eventually(func() bool {
		var ok bool
		q, ok = schedulers.Get(key)
		return ok
	}).Should(BeTrue(), "no scheduler runs for %s", key)
	return q
}

func submit(q *lanequeue.Queue, n int, session, lane string, h lanequeue.Handler) []*lanequeue.Ticket {
	GinkgoHelper()
	var tickets []*lanequeue.Ticket
	for i := 0; i < n; i++ {
		t, err := q.Submit(lanequeue.Command{SessionKey: session, Type: "bash", Lane: lane, Handler: h})
		Expect(err).NotTo(HaveOccurred())
		tickets = append(tickets, t)
	}
	return tickets
}

var _ = Describe("LaneQueue controller", func() {
	It("runs a scheduler for the queue and reports it Ready with its lanes in priority order", func() {
		lq := testQueue("ready")
		Expect(k8sClient.Create(ctx, lq)).To(Succeed())
		key := client.ObjectKeyFromObject(lq)

		Eventually(func(g Gomega) {
			got := getQueue(key)(g)
			ready := meta.FindStatusCondition(got.Status.Conditions, agentlanev1alpha1.LaneQueueReadyCondition)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(ready.Reason).To(Equal(agentlanev1alpha1.LaneQueueSchedulingReason))
			g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
			g.Expect(got.Status.LaneNames).To(Equal("query,execute"))
			g.Expect(got.Status.Lanes).To(HaveLen(2))
			pressure := meta.FindStatusCondition(got.Status.Conditions, agentlanev1alpha1.LaneQueueUnderPressureCondition)
			g.Expect(pressure).NotTo(BeNil())
			g.Expect(pressure.Status).To(Equal(metav1.ConditionFalse))
		}).Should(Succeed())

		q := runningScheduler(key)
		Expect(q.Config().Lanes).To(HaveLen(2))
	})

	It("publishes per-lane counts, reports pressure with an Event, and returns to idle", func() {
		lq := testQueue("pressure")
		Expect(k8sClient.Create(ctx, lq)).To(Succeed())
		key := client.ObjectKeyFromObject(lq)
		q := runningScheduler(key)

		b := newBlocker()
		tickets := submit(q, 7, "s1", "execute", b)
		Eventually(func(g Gomega) {
			got := getQueue(key)(g)
			g.Expect(got.Status.Pending).To(Equal(int32(6)))
			g.Expect(got.Status.Active).To(Equal(int32(1)))
			g.Expect(got.Status.Lanes).To(ContainElement(agentlanev1alpha1.LaneStatus{Name: "execute", Pending: 6, Active: 1}))
			pressure := meta.FindStatusCondition(got.Status.Conditions, agentlanev1alpha1.LaneQueueUnderPressureCondition)
			g.Expect(pressure).NotTo(BeNil())
			g.Expect(pressure.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(pressure.Reason).To(Equal(agentlanev1alpha1.LaneQueueCriticalDepthReason))
			g.Expect(pressure.Message).To(ContainSubstring("execute (6 pending)"))
		}).Should(Succeed())

		Eventually(func(g Gomega) []string {
			list := &eventsv1.EventList{}
			g.Expect(k8sClient.List(ctx, list, client.InNamespace("default"))).To(Succeed())
			var reasons []string
			for _, e := range list.Items {
				if e.Regarding.Kind == "LaneQueue" && e.Regarding.Name == lq.Name {
					reasons = append(reasons, e.Reason)
				}
			}
			return reasons
		}).Should(ContainElements("LanePressure", "QueueDepthWarning", "QueueDepthCritical"))

		close(b.release)
		for _, t := range tickets {
			Eventually(t.Done()).Should(BeClosed())
		}
		Eventually(func(g Gomega) {
			got := getQueue(key)(g)
			g.Expect(got.Status.Pending).To(BeZero())
			g.Expect(got.Status.Active).To(BeZero())
			g.Expect(got.Status.Lanes).To(ContainElement(agentlanev1alpha1.LaneStatus{Name: "execute", Completed: 7}))
			pressure := meta.FindStatusCondition(got.Status.Conditions, agentlanev1alpha1.LaneQueueUnderPressureCondition)
			g.Expect(pressure.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(pressure.Reason).To(Equal(agentlanev1alpha1.LaneQueueIdleReason))
		}).Should(Succeed())

		By("writing no status while nothing changes")
		settled := getQueue(key)(Default).ResourceVersion
		Consistently(func(g Gomega) string {
			return getQueue(key)(g).ResourceVersion
		}, "1s", "100ms").Should(Equal(settled))
	})

	It("reconfigures the running scheduler in place when the spec changes, keeping its commands", func() {
		lq := testQueue("reconfigure")
		Expect(k8sClient.Create(ctx, lq)).To(Succeed())
		key := client.ObjectKeyFromObject(lq)
		q := runningScheduler(key)

		b := newBlocker()
		tickets := submit(q, 5, "s1", "execute", b)
		Eventually(func() int { return q.Stats().Active }).Should(Equal(1))

		Eventually(func(g Gomega) {
			got := getQueue(key)(g)
			got.Spec.Lanes[0].MaxConcurrency = 3
			g.Expect(k8sClient.Update(ctx, got)).To(Succeed())
		}).Should(Succeed())

		Eventually(func() int { return q.Stats().Active }).Should(Equal(3))
		Expect(q.Stats().Pending).To(Equal(2))
		same, ok := schedulers.Get(key)
		Expect(ok).To(BeTrue())
		Expect(same).To(BeIdenticalTo(q), "the scheduler was replaced instead of reconfigured")
		Eventually(func(g Gomega) {
			got := getQueue(key)(g)
			g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
			g.Expect(got.Status.Active).To(Equal(int32(3)))
		}).Should(Succeed())

		close(b.release)
		for _, t := range tickets {
			Eventually(t.Done()).Should(BeClosed())
			out, _ := t.Outcome()
			Expect(out.State).To(Equal(lanequeue.StateSucceeded))
		}
	})

	It("counts the AgentSessions that use the queue", func() {
		lq := testQueue("sessions")
		Expect(k8sClient.Create(ctx, lq)).To(Succeed())
		for i := 0; i < 2; i++ {
			Expect(k8sClient.Create(ctx, &agentlanev1alpha1.AgentSession{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("sessions-%d", i), Namespace: "default"},
				Spec:       agentlanev1alpha1.AgentSessionSpec{QueueRef: agentlanev1alpha1.LaneQueueReference{Name: lq.Name}},
			})).To(Succeed())
		}
		Eventually(func(g Gomega) int32 {
			return getQueue(client.ObjectKeyFromObject(lq))(g).Status.Sessions
		}).Should(Equal(int32(2)))
	})

	It("stops the scheduler when the queue is deleted, cancelling what waits", func() {
		lq := testQueue("deleted")
		Expect(k8sClient.Create(ctx, lq)).To(Succeed())
		key := client.ObjectKeyFromObject(lq)
		q := runningScheduler(key)
		b := newBlocker()
		defer close(b.release)
		tickets := submit(q, 3, "s1", "execute", b)

		Expect(k8sClient.Delete(ctx, lq)).To(Succeed())
		Eventually(func() bool {
			_, ok := schedulers.Get(key)
			return ok
		}).Should(BeFalse())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, key, &agentlanev1alpha1.LaneQueue{}))
		}).Should(BeTrue())
		for _, t := range tickets[1:] {
			Eventually(t.Done(), 5*time.Second).Should(BeClosed())
			out, _ := t.Outcome()
			Expect(out.State).To(Equal(lanequeue.StateCancelled))
		}
	})
})
