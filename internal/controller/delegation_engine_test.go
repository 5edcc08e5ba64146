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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/budget"
	"github.com/agentlane/agentlane/internal/delegation"
	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/scheduling"
	"github.com/agentlane/agentlane/internal/taskstate"
)

// A delegated task is a command of its Delegate lane in the lane engine:
// these specs read the lane's scheduler (its counts, dead letters) while
// the test drives the delegation controller's passes on a fake clock, as
// the specs of delegation_controller_test.go do.
var _ = Describe("Delegation through the lane engine", func() {
	var (
		ns      string
		clk     *clocktesting.FakeClock
		inboxes *fakeInboxes
		r       *DelegationReconciler
		sched   *scheduling.Schedulers
	)
	queueKey := func() types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: "dq"} }
	BeforeEach(func() {
		ns = taskNamespace()
		clk = clocktesting.NewFakeClock(time.Now())
		inboxes = &fakeInboxes{}
		sched = delegationSchedulers(clk)
		r = &DelegationReconciler{Client: cachedReads{k8sClient}, APIReader: k8sClient, Inboxes: inboxes, Clock: clk,
			Budgets: &budget.Ledger{Clock: clk}, Bounds: delegation.Bounds{}.WithDefaults(), startedAt: clk.Now(), Schedulers: sched}
		DeferCleanup(func() { sched.Remove(queueKey()) })
	})
	passUntil := func(t *agentlanev1alpha1.ExternalTask, check func(Gomega, *agentlanev1alpha1.ExternalTask)) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			ensureScheduler(g, sched, ns)
			_, err := r.Reconcile(ctx, laneKey(ns, "dq", "review"))
			g.Expect(err).NotTo(HaveOccurred())
			check(g, getTask(t)(g))
		}).Should(Succeed())
	}
	laneStats := func() lanequeue.LaneStats {
		GinkgoHelper()
		q, ok := sched.Get(queueKey())
		Expect(ok).To(BeTrue())
		for _, l := range q.Stats().Lanes {
			if l.Name == "review" {
				return l
			}
		}
		Fail("the scheduler has no lane review")
		return lanequeue.LaneStats{}
	}
	gone := func(name string) func() bool {
		return func() bool {
			err := k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &agentlanev1alpha1.AgentSession{})
			return apierrors.IsNotFound(err)
		}
	}
	// finishRun completes the task as the Session API does when its
	// worker session's run finishes with answer.
	finishRun := func(t *agentlanev1alpha1.ExternalTask) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			cur := getTask(t)(g)
			res := agentlanev1alpha1.TaskResult{Success: true}
			g.Expect(taskstate.SessionFinish(&cur.Status, cur.Generation, metav1.NewTime(clk.Now()), cur.Status.Worker, res)).To(Succeed())
			g.Expect(k8sClient.Status().Update(ctx, cur)).To(Succeed())
		}).Should(Succeed())
	}

	It("counts a Delegate lane's delegations in its scheduler: waiting and running ones, and finished ones by outcome", func() {
		delegateQueue(ns, func(l *agentlanev1alpha1.Lane) { l.MaxConcurrency = 1 })
		lead := producerSession(ns, "lead", nil)
		first := delegatedTask(lead, "first", "Review part 1")
		passUntil(first, func(g Gomega, t *agentlanev1alpha1.ExternalTask) {
			g.Expect(t.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskRunning))
		})
		second := delegatedTask(lead, "second", "Review part 2")
		passUntil(second, func(g Gomega, t *agentlanev1alpha1.ExternalTask) {
			g.Expect(cond(t, agentlanev1alpha1.ExternalTaskClaimedCondition)).To(HaveField("Reason", agentlanev1alpha1.ExternalTaskAwaitingWorkerSlotReason))
		})
		st := laneStats()
		Expect(st.Active).To(Equal(1), "the running delegation holds the lane's slot")
		Expect(st.Pending).To(Equal(1), "the other one waits in the lane")
		Expect(st.Submitted).To(Equal(uint64(2)))

		finishRun(first)
		passUntil(second, func(g Gomega, t *agentlanev1alpha1.ExternalTask) {
			g.Expect(t.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskRunning), "the finished delegation freed its slot")
		})
		st = laneStats()
		Expect(st.Completed).To(Equal(uint64(1)))
		Expect(st.Active).To(Equal(1))
		Expect(st.Pending).To(BeZero())
	})

	It("ends the attempt of a worker session whose runtime pod fails (WorkerLost), frees the lane's slot, and retries the task in a new worker session", func() {
		delegateQueue(ns, func(l *agentlanev1alpha1.Lane) {
			l.MaxConcurrency = 1
			l.RetryPolicy = &agentlanev1alpha1.RetryPolicy{Strategy: agentlanev1alpha1.RetryFixed,
				FixedDelay: &metav1.Duration{Duration: 10 * time.Second}, MaxRetries: ptr.To[int32](2)}
			l.ExternalTarget.Delegate.SessionTemplate.Spec.Runtime = &agentlanev1alpha1.SessionRuntime{
				PodTemplate: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "reviewer:v1"}}}}}
		})
		lead := producerSession(ns, "lead", nil)
		task := delegatedTask(lead, "flaky", "Review PR 50")
		By("the worker session's runtime pod takes the attempt")
		passUntil(task, func(g Gomega, t *agentlanev1alpha1.ExternalTask) {
			g.Expect(t.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskRunning))
			g.Expect(t.Status.WorkerIncarnation).NotTo(BeEmpty(), "the runtime pod that runs the attempt is recorded")
		})
		firstWorker, incarnation := task.Status.Worker, task.Status.WorkerIncarnation
		w := &agentlanev1alpha1.AgentSession{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: firstWorker}, w)).To(Succeed())
		pod := w.Status.PodName
		other := delegatedTask(lead, "other", "Review PR 51")
		passUntil(other, func(g Gomega, t *agentlanev1alpha1.ExternalTask) {
			g.Expect(cond(t, agentlanev1alpha1.ExternalTaskClaimedCondition)).To(HaveField("Reason", agentlanev1alpha1.ExternalTaskAwaitingWorkerSlotReason))
		})
		Expect(laneStats().Active).To(Equal(1))

		By("the runtime pod fails; no manager restarts")
		p := &corev1.Pod{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: pod}, p)).To(Succeed())
		p.Status.Phase = corev1.PodFailed
		Expect(k8sClient.Status().Update(ctx, p)).To(Succeed())

		passUntil(task, func(g Gomega, t *agentlanev1alpha1.ExternalTask) {
			g.Expect(t.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskQueued))
			g.Expect(t.Status.Attempts).To(HaveLen(1))
			g.Expect(t.Status.Attempts[0].Outcome).To(Equal(agentlanev1alpha1.AttemptWorkerLost))
			g.Expect(t.Status.Attempts[0].Worker).To(Equal(firstWorker))
			g.Expect(cond(t, agentlanev1alpha1.ExternalTaskClaimedCondition)).To(HaveField("Reason", agentlanev1alpha1.ExternalTaskWorkerLostReason))
		})
		Eventually(gone(firstWorker)).Should(BeTrue(), "the lost attempt's worker session is deleted")
		By("its slot goes to the next delegation at once")
		passUntil(other, func(g Gomega, t *agentlanev1alpha1.ExternalTask) {
			g.Expect(t.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskRunning))
		})
		st := laneStats()
		Expect(st.Retried).To(Equal(uint64(1)))
		Expect(st.Active).To(Equal(1))
		Expect(st.Pending).To(Equal(1), "the lost task waits for its retry")

		By("after the retry delay, and once the slot is free, attempt 2 runs in a new worker session")
		clk.Step(10 * time.Second)
		finishRun(other)
		passUntil(task, func(g Gomega, t *agentlanev1alpha1.ExternalTask) {
			g.Expect(t.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskRunning))
			g.Expect(t.Status.Attempt).To(Equal(int32(2)))
			g.Expect(t.Status.Worker).To(Equal(firstWorker + "-a2"))
			g.Expect(t.Status.WorkerIncarnation).NotTo(Equal(incarnation))
		})
		Expect(inboxes.messages(types.NamespacedName{Namespace: ns, Name: firstWorker + "-a2"})).To(Equal([]string{"Review PR 50"}))
	})

	It("retries a delegation whose attempts time out by the lane's policy, then dead-letters it and tells the producer", func() {
		delegateQueue(ns, func(l *agentlanev1alpha1.Lane) {
			l.Timeout = &metav1.Duration{Duration: time.Minute}
			l.RetryPolicy = &agentlanev1alpha1.RetryPolicy{Strategy: agentlanev1alpha1.RetryFixed,
				FixedDelay: &metav1.Duration{Duration: time.Second}, MaxRetries: ptr.To[int32](1)}
		})
		lead := producerSession(ns, "lead", nil)
		task := delegatedTask(lead, "stuck", "Review PR 52")
		passUntil(task, func(g Gomega, t *agentlanev1alpha1.ExternalTask) {
			g.Expect(t.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskRunning))
			g.Expect(cond(t, agentlanev1alpha1.ExternalTaskClaimedCondition)).To(HaveField("Status", metav1.ConditionTrue))
		})
		first := task.Status.Worker

		clk.Step(time.Minute + time.Second)
		passUntil(task, func(g Gomega, t *agentlanev1alpha1.ExternalTask) {
			g.Expect(t.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskQueued))
			g.Expect(t.Status.Attempts).To(HaveLen(1))
			g.Expect(t.Status.Attempts[0].Outcome).To(Equal(agentlanev1alpha1.AttemptTimedOut))
			g.Expect(t.Status.Attempts[0].Error).To(ContainSubstring("did not finish within 1m0s"))
		})
		Eventually(gone(first)).Should(BeTrue(), "the timed-out attempt's worker session is deleted")
		Expect(laneStats().Timeouts).To(Equal(uint64(1)), "the timeout counts once its record is written")

		clk.Step(time.Second)
		passUntil(task, func(g Gomega, t *agentlanev1alpha1.ExternalTask) {
			g.Expect(t.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskRunning))
			g.Expect(t.Status.Attempt).To(Equal(int32(2)))
		})
		clk.Step(time.Minute + time.Second)
		passUntil(task, func(g Gomega, t *agentlanev1alpha1.ExternalTask) {
			g.Expect(t.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskDeadLettered))
			g.Expect(t.Status.Attempts).To(HaveLen(2))
			g.Expect(t.Status.Attempts[1].Outcome).To(Equal(agentlanev1alpha1.AttemptTimedOut))
			g.Expect(cond(t, agentlanev1alpha1.ExternalTaskDeliveredCondition)).To(HaveField("Status", metav1.ConditionTrue))
		})
		Expect(inboxes.messages(client.ObjectKeyFromObject(lead))).To(ConsistOf(ContainSubstring("task#stuck · error")))
		q, _ := sched.Get(queueKey())
		Expect(q.DeadLetters()).To(ContainElement(HaveField("ID", "stuck")))
		st := laneStats()
		Expect(st.DeadLettered).To(Equal(uint64(1)))
		Expect(st.Timeouts).To(Equal(uint64(2)))
		Expect(st.Active + st.Pending).To(BeZero())
	})

	It("times a delegation by its own timeout when the lane's is longer, and by the lane's when its own is longer", func() {
		delegateQueueWith(ns, func(l *agentlanev1alpha1.Lane) {
			l.Timeout = &metav1.Duration{Duration: time.Minute}
			noRetries(l)
		}, noDeadLetters)
		lead := producerSession(ns, "lead", nil)
		timeout := func(d time.Duration) func(*agentlanev1alpha1.ExternalTask) {
			return func(t *agentlanev1alpha1.ExternalTask) { t.Spec.Timeout = &metav1.Duration{Duration: d} }
		}
		short := delegatedTaskWith(lead, "short", "Quick look", timeout(10*time.Second))
		long := delegatedTaskWith(lead, "long", "Slow look", timeout(time.Hour))
		passUntil(long, func(g Gomega, t *agentlanev1alpha1.ExternalTask) {
			g.Expect(t.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskRunning))
			g.Expect(getTask(short)(g).Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskRunning))
		})
		clk.Step(11 * time.Second)
		passUntil(short, func(g Gomega, t *agentlanev1alpha1.ExternalTask) {
			g.Expect(t.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskTimedOut))
			g.Expect(t.Status.Result.Error).To(ContainSubstring("within 10s"))
		})
		Expect(getTask(long)(Default).Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskRunning))
		clk.Step(50 * time.Second)
		passUntil(long, func(g Gomega, t *agentlanev1alpha1.ExternalTask) {
			g.Expect(t.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskTimedOut), "bounded by the lane's minute")
			g.Expect(t.Status.Result.Error).To(ContainSubstring("within 1m0s"))
		})
	})

	It("starts a Delegate lane's delegations no faster than the lane's rate limit", func() {
		delegateQueue(ns, func(l *agentlanev1alpha1.Lane) {
			l.RateLimit = &agentlanev1alpha1.RateLimit{Count: 1, Per: agentlanev1alpha1.RateLimitPerMinute}
		})
		lead := producerSession(ns, "lead", nil)
		first := delegatedTask(lead, "first", "Review part 1")
		second := delegatedTask(lead, "second", "Review part 2")
		passUntil(second, func(g Gomega, t *agentlanev1alpha1.ExternalTask) {
			g.Expect(getTask(first)(g).Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskRunning))
			g.Expect(t.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskQueued), "one start a minute, though the lane has 4 slots")
		})
		Consistently(func(g Gomega) {
			_, err := r.Reconcile(ctx, laneKey(ns, "dq", "review"))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(getTask(second)(g).Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskQueued))
		}, time.Second, 100*time.Millisecond).Should(Succeed())
		clk.Step(time.Minute)
		passUntil(second, func(g Gomega, t *agentlanev1alpha1.ExternalTask) {
			g.Expect(t.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskRunning))
		})
	})

	It("shows a Delegate lane's delegations in the LaneQueue's status, as the manager's schedulers count them", func() {
		// The suite's schedulers, whose counts the suite's LaneQueue
		// controller writes into status, on the real clock.
		live := &DelegationReconciler{Client: cachedReads{k8sClient}, APIReader: k8sClient, Inboxes: inboxes, Clock: clock.RealClock{},
			Bounds: delegation.Bounds{}.WithDefaults(), startedAt: time.Now(), Schedulers: schedulers}
		delegateQueue(ns, func(l *agentlanev1alpha1.Lane) { l.MaxConcurrency = 1 })
		lead := producerSession(ns, "lead", nil)
		first := delegatedTask(lead, "first", "Review part 1")
		second := delegatedTask(lead, "second", "Review part 2")
		Eventually(func(g Gomega) {
			_, err := live.Reconcile(ctx, laneKey(ns, "dq", "review"))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(getTask(first)(g).Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskRunning))
			g.Expect(getTask(second)(g).Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskQueued))
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			lq := &agentlanev1alpha1.LaneQueue{}
			g.Expect(k8sClient.Get(ctx, queueKey(), lq)).To(Succeed())
			g.Expect(lq.Status.Lanes).To(ContainElement(And(HaveField("Name", agentlanev1alpha1.LaneName("review")),
				HaveField("Active", int32(1)), HaveField("Pending", int32(1)))))
		}).Should(Succeed())
	})
})
