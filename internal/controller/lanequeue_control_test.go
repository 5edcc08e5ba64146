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
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/lanequeue"
)

func laneQueueEventReasons(g Gomega, name string) []string {
	list := &eventsv1.EventList{}
	g.Expect(k8sClient.List(ctx, list, client.InNamespace("default"))).To(Succeed())
	var reasons []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "LaneQueue" && e.Regarding.Name == name {
			reasons = append(reasons, e.Reason)
		}
	}
	return reasons
}

func editQueue(key types.NamespacedName, edit func(*agentlanev1alpha1.LaneQueue)) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		lq := getQueue(key)(g)
		edit(lq)
		g.Expect(k8sClient.Update(ctx, lq)).To(Succeed())
	}).Should(Succeed())
}

var _ = Describe("Lane control through the LaneQueue spec", func() {
	It("pauses a lane: commands queue but do not start until it is resumed", func() {
		lq := testQueue("pause-lane")
		lq.Spec.Lanes[0].Paused = true // execute
		Expect(k8sClient.Create(ctx, lq)).To(Succeed())
		key := client.ObjectKeyFromObject(lq)
		q := runningScheduler(key)

		b := newBlocker()
		defer close(b.release)
		submit(q, 2, "s1", "execute", b)
		submit(q, 1, "s1", "query", b)
		Eventually(func(g Gomega) {
			got := getQueue(key)(g)
			g.Expect(got.Status.Lanes).To(ContainElements(
				agentlanev1alpha1.LaneStatus{Name: "execute", Pending: 2, Paused: true},
				agentlanev1alpha1.LaneStatus{Name: "query", Active: 1}))
		}).Should(Succeed())
		Consistently(func() int { return q.Stats().Lanes[0].Active }, "300ms").Should(BeZero())

		editQueue(key, func(lq *agentlanev1alpha1.LaneQueue) { lq.Spec.Lanes[0].Paused = false })
		Eventually(func(g Gomega) {
			got := getQueue(key)(g)
			g.Expect(got.Status.Lanes).To(ContainElement(agentlanev1alpha1.LaneStatus{Name: "execute", Pending: 1, Active: 1}))
		}).Should(Succeed())

		editQueue(key, func(lq *agentlanev1alpha1.LaneQueue) { lq.Spec.Lanes[0].Paused = true })
		Eventually(func(g Gomega) []string { return laneQueueEventReasons(g, lq.Name) }).
			Should(ContainElements(agentlanev1alpha1.LaneQueueLaneResumedReason, agentlanev1alpha1.LaneQueueLanePausedReason))
	})

	It("drains a queue: refuses new commands, finishes queued ones and reports Drained", func() {
		lq := testQueue("drain")
		Expect(k8sClient.Create(ctx, lq)).To(Succeed())
		key := client.ObjectKeyFromObject(lq)
		q := runningScheduler(key)
		Eventually(func(g Gomega) {
			c := meta.FindStatusCondition(getQueue(key)(g).Status.Conditions, agentlanev1alpha1.LaneQueueDrainingCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(agentlanev1alpha1.LaneQueueNotDrainingReason))
		}).Should(Succeed())

		b := newBlocker()
		tickets := submit(q, 2, "s1", "execute", b)
		editQueue(key, func(lq *agentlanev1alpha1.LaneQueue) {
			lq.Spec.Drain = &agentlanev1alpha1.QueueDrain{Timeout: &metav1.Duration{Duration: time.Hour}}
		})
		Eventually(func(g Gomega) {
			c := meta.FindStatusCondition(getQueue(key)(g).Status.Conditions, agentlanev1alpha1.LaneQueueDrainingCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(agentlanev1alpha1.LaneQueueDrainingReason))
			g.Expect(c.Message).To(ContainSubstring("2 commands left"))
		}).Should(Succeed())
		_, err := q.Submit(lanequeue.Command{SessionKey: "s1", Type: "bash", Lane: "execute", Handler: b})
		Expect(err).To(MatchError(lanequeue.ErrDraining))

		close(b.release)
		for _, t := range tickets {
			Eventually(t.Done()).Should(BeClosed())
			o, _ := t.Outcome()
			Expect(o.State).To(Equal(lanequeue.StateSucceeded))
		}
		Eventually(func(g Gomega) {
			c := meta.FindStatusCondition(getQueue(key)(g).Status.Conditions, agentlanev1alpha1.LaneQueueDrainingCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(agentlanev1alpha1.LaneQueueDrainedReason))
		}).Should(Succeed())
		Eventually(func(g Gomega) []string { return laneQueueEventReasons(g, lq.Name) }).
			Should(ContainElements(agentlanev1alpha1.LaneQueueDrainingEventReason, agentlanev1alpha1.LaneQueueDrainedEventReason))

		editQueue(key, func(lq *agentlanev1alpha1.LaneQueue) { lq.Spec.Drain = nil })
		Eventually(func() error {
			_, err := q.Submit(lanequeue.Command{SessionKey: "s1", Type: "bash", Lane: "query", Handler: lanequeue.HandlerFunc(
				func(_ context.Context, _ lanequeue.Attempt) (lanequeue.Result, error) {
					return lanequeue.Result{Success: true}, nil
				})})
			return err
		}).Should(Succeed())
	})

	It("cancels what has not started when the drain deadline passes", func() {
		lq := testQueue("drain-deadline")
		Expect(k8sClient.Create(ctx, lq)).To(Succeed())
		key := client.ObjectKeyFromObject(lq)
		q := runningScheduler(key)

		b := newBlocker()
		defer close(b.release)
		tickets := submit(q, 2, "s1", "execute", b) // one runs, one waits
		editQueue(key, func(lq *agentlanev1alpha1.LaneQueue) {
			lq.Spec.Drain = &agentlanev1alpha1.QueueDrain{Timeout: &metav1.Duration{Duration: time.Second}}
		})
		Eventually(tickets[1].Done(), "10s").Should(BeClosed())
		o, _ := tickets[1].Outcome()
		Expect(o.State).To(Equal(lanequeue.StateCancelled))
		Expect(o.Err).To(MatchError(lanequeue.ErrDrainDeadline))
		Expect(tickets[0].Done()).NotTo(BeClosed(), "a running command is left to finish")
		Eventually(func(g Gomega) {
			c := meta.FindStatusCondition(getQueue(key)(g).Status.Conditions, agentlanev1alpha1.LaneQueueDrainingCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(agentlanev1alpha1.LaneQueueDrainingReason))
			g.Expect(c.Message).To(ContainSubstring("1 commands left"))
			g.Expect(c.Message).To(ContainSubstring("passed"))
		}).Should(Succeed())
	})

	It("still schedules ExternalTasks, which the cluster keeps, while the queue drains", func() {
		ns := taskNamespace()
		taskQueue(ns, func(spec *agentlanev1alpha1.LaneQueueSpec) {
			spec.Drain = &agentlanev1alpha1.QueueDrain{Timeout: &metav1.Duration{Duration: time.Hour}}
		})
		q := runningScheduler(types.NamespacedName{Namespace: ns, Name: "q1"})
		_, err := q.Submit(lanequeue.Command{SessionKey: "s1", Type: "bash", External: true})
		Expect(err).To(MatchError(lanequeue.ErrDraining))

		task := queueTask(ns, "kept")
		Expect(k8sClient.Create(ctx, task)).To(Succeed())
		fakeWorker(ns, "w1", 1)
		runToSuccess(task, "w1")
		Eventually(taskPhase(task)).Should(Equal(agentlanev1alpha1.ExternalTaskSucceeded))
	})

	It("refuses a drain timeout outside 1s to 24h at admission", func() {
		lq := testQueue("drain-invalid")
		lq.Spec.Drain = &agentlanev1alpha1.QueueDrain{Timeout: &metav1.Duration{Duration: 25 * time.Hour}}
		err := k8sClient.Create(ctx, lq)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("drain timeout must be a duration between 1s and 24h"))
	})
})
