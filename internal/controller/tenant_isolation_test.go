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
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	coordinationv1 "k8s.io/api/coordination/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/workerproto"
)

var _ = Describe("What a tenant's session may change about a lane", func() {
	It("refuses an override that switches an Internal lane to External, so bash stays off the shared workers", func() {
		ns := taskNamespace()
		By("a queue whose execute lane is Internal and accepts any type, and whose only External lane accepts read")
		lq := &agentlanev1alpha1.LaneQueue{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared"},
			Spec: agentlanev1alpha1.LaneQueueSpec{Lanes: []agentlanev1alpha1.Lane{
				{Name: "execute", Priority: 1},
				{Name: "reads", Priority: 0, HandlerMode: agentlanev1alpha1.HandlerModeExternal,
					CommandTypes: []agentlanev1alpha1.CommandType{"read"}},
			}},
		}
		Expect(k8sClient.Create(ctx, lq)).To(Succeed())
		q := runningScheduler(client.ObjectKeyFromObject(lq))
		fakeWorker(ns, "shared-pool", 10)

		By("a session that overrides execute to External")
		s := &agentlanev1alpha1.AgentSession{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "attacker"},
			Spec: agentlanev1alpha1.AgentSessionSpec{
				QueueRef: agentlanev1alpha1.LaneQueueReference{Name: lq.Name},
				LaneOverrides: []agentlanev1alpha1.LaneOverride{
					{Lane: "execute", HandlerMode: agentlanev1alpha1.HandlerModeExternal},
				},
			},
		}
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		key := client.ObjectKeyFromObject(s)
		Eventually(func(g Gomega) {
			c := expectReady(g, getSession(key)(g), metav1.ConditionFalse, agentlanev1alpha1.AgentSessionLaneOverrideRefusedReason)
			g.Expect(c.Message).To(ContainSubstring("execute: External"))
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			list := &eventsv1.EventList{}
			g.Expect(k8sClient.List(ctx, list, client.InNamespace(ns))).To(Succeed())
			var notes []string
			for _, e := range list.Items {
				if e.Regarding.Kind == "AgentSession" && e.Regarding.Name == s.Name && e.Reason == agentlanev1alpha1.AgentSessionLaneOverrideRefusedReason {
					notes = append(notes, e.Note)
				}
			}
			g.Expect(notes).To(ContainElement(ContainSubstring("execute: External")))
		}).Should(Succeed())

		By("submitting bash: it routes to execute in the lane's own mode, Internal, which the session's own runtime runs")
		Expect(q.SessionStats(s.Name).LaneModes).To(BeEmpty())
		lane, mode, err := q.Route(s.Name, "", "bash")
		Expect(err).NotTo(HaveOccurred())
		Expect(lane).To(Equal("execute"))
		Expect(mode).To(Equal(lanequeue.Internal))
		Expect(q.SetSessionLaneMode(s.Name, "execute", lanequeue.External)).To(MatchError(lanequeue.ErrModeOverrideRefused),
			"the scheduler refuses the switch too")
		Consistently(func(g Gomega) []agentlanev1alpha1.ExternalTask {
			list := &agentlanev1alpha1.ExternalTaskList{}
			g.Expect(k8sClient.List(ctx, list, client.InNamespace(ns))).To(Succeed())
			return list.Items
		}, 500*time.Millisecond).Should(BeEmpty(), "no task reaches the worker pool")

		By("the queue allowing the switch: the override applies")
		Eventually(func(g Gomega) {
			got := &agentlanev1alpha1.LaneQueue{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(lq), got)).To(Succeed())
			got.Spec.Lanes[0].SessionOverrides = &agentlanev1alpha1.LaneSessionOverrides{
				AllowedModes: []agentlanev1alpha1.HandlerMode{agentlanev1alpha1.HandlerModeExternal}}
			g.Expect(k8sClient.Update(ctx, got)).To(Succeed())
		}).Should(Succeed())
		Eventually(func() lanequeue.HandlerMode {
			_, mode, _ := q.Route(s.Name, "", "bash")
			return mode
		}).Should(Equal(lanequeue.External))
		Eventually(func(g Gomega) {
			expectReady(g, getSession(key)(g), metav1.ConditionTrue, agentlanev1alpha1.AgentSessionActiveReason)
		}).Should(Succeed())

		By("the queue withdrawing it again: new commands run in the lane's own mode at once")
		Eventually(func(g Gomega) {
			got := &agentlanev1alpha1.LaneQueue{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(lq), got)).To(Succeed())
			got.Spec.Lanes[0].SessionOverrides = nil
			g.Expect(k8sClient.Update(ctx, got)).To(Succeed())
		}).Should(Succeed())
		Eventually(func() lanequeue.HandlerMode {
			_, mode, _ := q.Route(s.Name, "", "bash")
			return mode
		}).Should(Equal(lanequeue.Internal))
		Eventually(func(g Gomega) {
			expectReady(g, getSession(key)(g), metav1.ConditionFalse, agentlanev1alpha1.AgentSessionLaneOverrideRefusedReason)
		}).Should(Succeed())
	})
})

var _ = Describe("Worker Leases", func() {
	It("takes no Lease as a worker's but by its name: a labelled Lease of another name attracts no task", func() {
		ns := taskNamespace()
		taskQueue(ns, nil)
		By("another application's Lease carrying the worker label, a huge capacity and a worker-like holder")
		now := metav1.NewMicroTime(time.Now())
		forged := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "my-app-leader",
				Labels:      map[string]string{workerproto.WorkerLabel: "true", workerproto.NodeLabel: "node-x"},
				Annotations: map[string]string{workerproto.CapacityAnnotation: "10000"}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("my-app-leader"), LeaseDurationSeconds: ptr.To[int32](3600), RenewTime: &now},
		}
		Expect(k8sClient.Create(ctx, forged)).To(Succeed())
		By("and a worker's Lease by name whose holder is another worker")
		misheld := workerLease(ns, "w-named", 100)
		misheld.Spec.HolderIdentity = ptr.To("w-other")
		Expect(k8sClient.Create(ctx, misheld)).To(Succeed())

		var tasks []*agentlanev1alpha1.ExternalTask
		for i := range 3 {
			t := queueTask(ns, fmt.Sprintf("lure-%d", i))
			Expect(k8sClient.Create(ctx, t)).To(Succeed())
			tasks = append(tasks, t)
		}
		for _, t := range tasks {
			Eventually(func(g Gomega) {
				getTask(t)(g)
				g.Expect(t.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskQueued))
				g.Expect(cond(t, agentlanev1alpha1.ExternalTaskClaimedCondition)).To(HaveField("Reason", agentlanev1alpha1.ExternalTaskAwaitingWorkerReason))
			}).Should(Succeed())
		}
		Consistently(func(g Gomega) []string {
			var workers []string
			for _, t := range tasks {
				workers = append(workers, getTask(t)(g).Status.Worker)
			}
			return workers
		}, time.Second).Should(Equal([]string{"", "", ""}), "no task goes to a Lease that is not a worker's")

		By("a real worker's Lease takes them")
		fakeWorker(ns, "real", 3)
		for _, t := range tasks {
			Eventually(taskPhase(t)).Should(Equal(agentlanev1alpha1.ExternalTaskDispatched))
			Expect(t.Status.Worker).To(Equal("real"))
		}
	})
})
