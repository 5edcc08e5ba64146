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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/scheduling"
)

var _ = Describe("Rebuilding a scheduler from the cluster's tasks", func() {
	It("adopts the attempt a worker holds before it grants a queued task the lane's only slot", func() {
		// The namespace has no LaneQueue q1: the suite's manager leaves the
		// tasks alone, and the test plays a new leader whose q1 starts.
		ns := taskNamespace()
		labelled := func(name string) *agentlanev1alpha1.ExternalTask {
			t := queueTask(ns, name)
			t.Labels = map[string]string{agentlanev1alpha1.QueueLabel: "q1"}
			return t
		}
		older := labelled("queued-1")
		Expect(k8sClient.Create(ctx, older)).To(Succeed())
		running := labelled("held")
		Expect(k8sClient.Create(ctx, running)).To(Succeed())
		Expect(k8sClient.Create(ctx, labelled("queued-2"))).To(Succeed())
		startedAt := metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))
		Eventually(func(g Gomega) {
			getTask(running)(g)
			running.Status.Phase = agentlanev1alpha1.ExternalTaskRunning
			running.Status.Attempt = 1
			running.Status.Worker = "w1"
			running.Status.DispatchedAt = &startedAt
			running.Status.StartedAt = &startedAt
			g.Expect(k8sClient.Status().Update(ctx, running)).To(Succeed())
		}).Should(Succeed())

		q, err := lanequeue.New(lanequeue.Config{Lanes: []lanequeue.LaneConfig{{
			Name: "execute", Mode: lanequeue.External, MaxConcurrency: 1, Timeout: time.Hour}}}, lanequeue.Options{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(q.Close)
		tasks := &scheduling.TaskSet{}
		r := &ExternalTaskReconciler{Client: k8sClient, Clock: clock.RealClock{}}
		r.rebuild(client.ObjectKey{Namespace: ns, Name: "q1"}, q, tasks)

		pending := q.PendingExternal()
		Expect(pending).To(HaveLen(1), "one slot, held by the adopted attempt")
		Expect(pending[0]).To(And(HaveField("ID", "held"), HaveField("Attempt", 1),
			HaveField("StartedAt", BeTemporally("==", startedAt.Time))))
		Expect(q.Stats().Pending).To(Equal(2), "both queued tasks wait for the slot")
		for _, name := range []string{"held", "queued-1", "queued-2"} {
			Expect(tasks.Has(name)).To(BeTrue(), "task %s is tracked", name)
		}

		By("granting the queued tasks oldest first once the slot frees")
		Expect(q.CompleteAttempt("held", 1, lanequeue.Result{Success: true})).To(Succeed())
		Expect(q.PendingExternal()).To(ConsistOf(HaveField("ID", older.Name)))
	})

	It("keeps attempts lost before they started uncounted after a restart", func() {
		ns := taskNamespace()
		task := queueTask(ns, "lost-twice")
		task.Labels = map[string]string{agentlanev1alpha1.QueueLabel: "q1"}
		Expect(k8sClient.Create(ctx, task)).To(Succeed())
		lost := func(n int32) agentlanev1alpha1.TaskAttempt {
			return agentlanev1alpha1.TaskAttempt{Attempt: n, Worker: "gone", Outcome: agentlanev1alpha1.AttemptWorkerLost, NotStarted: true}
		}
		Eventually(func(g Gomega) {
			getTask(task)(g)
			task.Status.Phase = agentlanev1alpha1.ExternalTaskQueued
			task.Status.Attempt = 2
			task.Status.Attempts = []agentlanev1alpha1.TaskAttempt{lost(1), lost(2)}
			g.Expect(k8sClient.Status().Update(ctx, task)).To(Succeed())
		}).Should(Succeed())

		q, err := lanequeue.New(lanequeue.Config{Lanes: []lanequeue.LaneConfig{{
			Name: "execute", Mode: lanequeue.External, MaxConcurrency: 1, Timeout: time.Hour,
			Retry: &lanequeue.RetryPolicy{Strategy: lanequeue.RetryNone}}}}, lanequeue.Options{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(q.Close)
		tasks := &scheduling.TaskSet{}
		r := &ExternalTaskReconciler{Client: k8sClient, Clock: clock.RealClock{}}
		r.rebuild(client.ObjectKey{Namespace: ns, Name: "q1"}, q, tasks)

		Expect(q.PendingExternal()).To(ConsistOf(HaveField("Attempt", 3)), "no retries, yet both losses were free")
		lose := func(n int) error {
			return q.FailAttempt(task.Name, n, fmt.Errorf("worker lost: %w", lanequeue.ErrNotStarted))
		}
		Expect(lose(3)).To(Succeed())
		Eventually(q.PendingExternal).Should(ConsistOf(HaveField("Attempt", 4)), "the third free loss")
		Expect(lose(4)).To(Succeed())
		tt, ok := tasks.Get(task.Name)
		Expect(ok).To(BeTrue())
		Eventually(func() lanequeue.State { o, _ := tt.Ticket.Outcome(); return o.State }).Should(Equal(lanequeue.StateDeadLettered),
			"a fourth loss counts")
	})
})
