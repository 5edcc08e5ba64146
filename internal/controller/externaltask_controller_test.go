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
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/scheduling"
	"github.com/agentlane/agentlane/internal/workerproto"
)

// In these specs the test plays the worker: it keeps a worker Lease and
// writes the claim and the result the way cmd/worker does, which lets it
// hold an attempt as long as it likes or never finish it.

func taskNamespace() string {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "xt-"}}
	Expect(k8sClient.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

// taskQueue creates LaneQueue q1 in ns with one External lane "execute".
func taskQueue(ns string, mutate func(*agentlanev1alpha1.LaneQueueSpec)) {
	GinkgoHelper()
	lq := &agentlanev1alpha1.LaneQueue{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "q1"},
		Spec: agentlanev1alpha1.LaneQueueSpec{Lanes: []agentlanev1alpha1.Lane{{
			Name: "execute", HandlerMode: agentlanev1alpha1.HandlerModeExternal,
		}}},
	}
	if mutate != nil {
		mutate(&lq.Spec)
	}
	Expect(k8sClient.Create(ctx, lq)).To(Succeed())
	Eventually(func() bool {
		_, ok := schedulers.Get(client.ObjectKeyFromObject(lq))
		return ok
	}).Should(BeTrue())
}

// fakeWorker creates a live worker Lease valid for an hour.
func fakeWorker(ns, name string, capacity int) {
	GinkgoHelper()
	Expect(k8sClient.Create(ctx, workerLease(ns, name, capacity))).To(Succeed())
}

// workerLease is the Lease of a worker of the given capacity, renewed now
// and valid for an hour.
func workerLease(ns, name string, capacity int) *coordinationv1.Lease {
	now := metav1.NewMicroTime(time.Now())
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: workerproto.LeaseName(name),
			Labels:      map[string]string{workerproto.WorkerLabel: "true", workerproto.NodeLabel: "node-" + name},
			Annotations: map[string]string{workerproto.CapacityAnnotation: fmt.Sprint(capacity)},
		},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](3600), RenewTime: &now},
	}
}

// loseWorker deletes the worker's Lease, as a worker that is gone for good.
func loseWorker(ns, name string) {
	GinkgoHelper()
	Expect(k8sClient.Delete(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: workerproto.LeaseName(name)}})).To(Succeed())
}

func queueTask(ns, name string) *agentlanev1alpha1.ExternalTask {
	return &agentlanev1alpha1.ExternalTask{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: agentlanev1alpha1.ExternalTaskSpec{
			QueueRef:    &agentlanev1alpha1.LaneQueueReference{Name: "q1"},
			CommandType: "bash",
		},
	}
}

func getTask(t *agentlanev1alpha1.ExternalTask) func(Gomega) *agentlanev1alpha1.ExternalTask {
	return func(g Gomega) *agentlanev1alpha1.ExternalTask {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(t), t)).To(Succeed())
		return t
	}
}

func taskPhase(t *agentlanev1alpha1.ExternalTask) func(Gomega) agentlanev1alpha1.ExternalTaskPhase {
	return func(g Gomega) agentlanev1alpha1.ExternalTaskPhase { return getTask(t)(g).Status.Phase }
}

// jsonPatch sends a JSON Patch to the task's status.
func jsonPatch(t *agentlanev1alpha1.ExternalTask, ops string) error {
	return k8sClient.Status().Patch(ctx, t, client.RawPatch(types.JSONPatchType, []byte(ops)))
}

// claim moves attempt of t, dispatched to w, to Running.
func claim(t *agentlanev1alpha1.ExternalTask, w string, attempt int) {
	GinkgoHelper()
	Expect(jsonPatch(t, fmt.Sprintf(`[
		{"op":"test","path":"/status/worker","value":%q},
		{"op":"test","path":"/status/attempt","value":%d},
		{"op":"test","path":"/status/phase","value":"Dispatched"},
		{"op":"replace","path":"/status/phase","value":"Running"},
		{"op":"add","path":"/status/startedAt","value":%q}]`, w, attempt, time.Now().UTC().Format(time.RFC3339)))).To(Succeed())
}

// succeed completes the running attempt of t held by w.
func succeed(t *agentlanev1alpha1.ExternalTask, w string, attempt int) {
	GinkgoHelper()
	Expect(jsonPatch(t, fmt.Sprintf(`[
		{"op":"test","path":"/status/worker","value":%q},
		{"op":"test","path":"/status/attempt","value":%d},
		{"op":"test","path":"/status/phase","value":"Running"},
		{"op":"add","path":"/status/result","value":{"success":true}},
		{"op":"add","path":"/status/finishedAt","value":%q},
		{"op":"replace","path":"/status/phase","value":"Succeeded"}]`, w, attempt, time.Now().UTC().Format(time.RFC3339)))).To(Succeed())
}

// runToSuccess plays the worker w for attempt 1 of t.
func runToSuccess(t *agentlanev1alpha1.ExternalTask, w string) {
	GinkgoHelper()
	Eventually(taskPhase(t)).Should(Equal(agentlanev1alpha1.ExternalTaskDispatched))
	claim(t, w, 1)
	succeed(t, w, 1)
}

// fail completes the running attempt of t held by w with a failed result,
// leaving the phase to the manager as cmd/worker does.
func fail(t *agentlanev1alpha1.ExternalTask, w string, attempt int, msg string) {
	GinkgoHelper()
	Expect(jsonPatch(t, fmt.Sprintf(`[
		{"op":"test","path":"/status/worker","value":%q},
		{"op":"test","path":"/status/attempt","value":%d},
		{"op":"test","path":"/status/phase","value":"Running"},
		{"op":"add","path":"/status/result","value":{"success":false,"error":%q,"exitCode":3}},
		{"op":"add","path":"/status/finishedAt","value":%q}]`, w, attempt, msg, time.Now().UTC().Format(time.RFC3339)))).To(Succeed())
}

// taskEvents lists the task's Kubernetes Events (events.k8s.io/v1).
func taskEvents(t *agentlanev1alpha1.ExternalTask) func(Gomega) []eventsv1.Event {
	return func(g Gomega) []eventsv1.Event {
		list := &eventsv1.EventList{}
		g.Expect(k8sClient.List(ctx, list, client.InNamespace(t.Namespace))).To(Succeed())
		var out []eventsv1.Event
		for _, e := range list.Items {
			if e.Regarding.Kind == "ExternalTask" && e.Regarding.Name == t.Name {
				out = append(out, e)
			}
		}
		return out
	}
}

func cond(t *agentlanev1alpha1.ExternalTask, typ string) *metav1.Condition {
	return meta.FindStatusCondition(t.Status.Conditions, typ)
}

var _ = Describe("ExternalTask controller", func() {
	var ns string
	BeforeEach(func() { ns = taskNamespace() })

	It("queues a task created directly until a worker appears, then dispatches it with labels and conditions", func() {
		taskQueue(ns, nil)
		task := queueTask(ns, "direct")
		Expect(k8sClient.Create(ctx, task)).To(Succeed())
		Eventually(func(g Gomega) {
			getTask(task)(g)
			g.Expect(task.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskQueued))
			g.Expect(task.Status.Lane).To(Equal(agentlanev1alpha1.LaneName("execute")))
			c := cond(task, agentlanev1alpha1.ExternalTaskClaimedCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(agentlanev1alpha1.ExternalTaskAwaitingWorkerReason))
			g.Expect(c.Message).To(ContainSubstring("no live worker"))
			g.Expect(cond(task, agentlanev1alpha1.ExternalTaskFinishedCondition)).To(HaveField("Reason", agentlanev1alpha1.ExternalTaskInProgressReason))
		}).Should(Succeed())
		Expect(task.Labels).To(And(
			HaveKeyWithValue(agentlanev1alpha1.QueueLabel, "q1"), HaveKeyWithValue(agentlanev1alpha1.LaneLabel, "execute")))

		fakeWorker(ns, "w1", 1)
		Eventually(taskPhase(task)).Should(Equal(agentlanev1alpha1.ExternalTaskDispatched))
		Expect(task.Status.Worker).To(Equal("w1"))
		Expect(task.Status.NodeName).To(Equal("node-w1"))
		Expect(task.Status.Attempt).To(Equal(int32(1)))
		Expect(task.Status.DispatchedAt).NotTo(BeNil())
		Expect(task.Status.Holder).To(Equal(agentlanev1alpha1.HolderWorkers))
	})

	It("records the holder of an attempt dispatched before status recorded holders, as inferred", func() {
		taskQueue(ns, nil)
		fakeWorker(ns, "w1", 1)
		task := queueTask(ns, "old")
		Expect(k8sClient.Create(ctx, task)).To(Succeed())
		Eventually(taskPhase(task)).Should(Equal(agentlanev1alpha1.ExternalTaskDispatched))

		By("the attempt as a manager that did not record holders left it")
		Eventually(func(g Gomega) {
			getTask(task)(g)
			task.Status.Holder = ""
			g.Expect(k8sClient.Status().Update(ctx, task)).To(Succeed())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			getTask(task)(g)
			g.Expect(task.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskDispatched))
			g.Expect(task.Status.Worker).To(Equal("w1"))
			g.Expect(task.Status.Holder).To(Equal(agentlanev1alpha1.HolderWorkers), "inferred from status.worker and recorded")
		}).Should(Succeed())
	})

	It("dispatches no more tasks to a worker than its capacity", func() {
		taskQueue(ns, nil)
		fakeWorker(ns, "small", 2)
		for i := range 4 {
			Expect(k8sClient.Create(ctx, queueTask(ns, fmt.Sprintf("t%d", i)))).To(Succeed())
		}
		phases := func(g Gomega) map[agentlanev1alpha1.ExternalTaskPhase]int {
			list := &agentlanev1alpha1.ExternalTaskList{}
			g.Expect(k8sClient.List(ctx, list, client.InNamespace(ns))).To(Succeed())
			out := map[agentlanev1alpha1.ExternalTaskPhase]int{}
			for _, t := range list.Items {
				out[t.Status.Phase]++
			}
			return out
		}
		// The other two wait for the busy worker, unwritten.
		Eventually(phases).Should(Equal(map[agentlanev1alpha1.ExternalTaskPhase]int{
			agentlanev1alpha1.ExternalTaskDispatched: 2, "": 2,
		}))
		Consistently(func(g Gomega) int {
			return phases(g)[agentlanev1alpha1.ExternalTaskDispatched]
		}, 500*time.Millisecond).Should(Equal(2))
	})

	It("times out an attempt nobody finishes, retries it, and ends TimedOut without dead letters", func() {
		taskQueue(ns, func(s *agentlanev1alpha1.LaneQueueSpec) {
			s.Lanes[0].Timeout = &metav1.Duration{Duration: 500 * time.Millisecond}
			s.RetryPolicy = &agentlanev1alpha1.RetryPolicy{Strategy: agentlanev1alpha1.RetryFixed,
				FixedDelay: &metav1.Duration{Duration: 100 * time.Millisecond}, MaxRetries: ptr.To[int32](1)}
			s.DeadLetter = &agentlanev1alpha1.DeadLetterPolicy{Enabled: ptr.To(false)}
		})
		fakeWorker(ns, "slow", 4)
		task := queueTask(ns, "stuck")
		Expect(k8sClient.Create(ctx, task)).To(Succeed())
		Eventually(taskPhase(task)).Should(Equal(agentlanev1alpha1.ExternalTaskDispatched))
		claim(task, "slow", 1)

		Eventually(taskPhase(task), 10*time.Second).Should(Equal(agentlanev1alpha1.ExternalTaskTimedOut))
		Expect(task.Status.Attempt).To(Equal(int32(2)))
		Expect(task.Status.Attempts).To(HaveExactElements(
			And(HaveField("Attempt", int32(1)), HaveField("Outcome", agentlanev1alpha1.AttemptTimedOut),
				HaveField("Worker", "slow"), HaveField("StartedAt", Not(BeNil()))),
			And(HaveField("Attempt", int32(2)), HaveField("Outcome", agentlanev1alpha1.AttemptTimedOut)),
		))
		Expect(cond(task, agentlanev1alpha1.ExternalTaskFinishedCondition)).To(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", "TimedOut")))
		lane := []string{ns, "q1", "execute"}
		counter := func(v *prometheus.CounterVec, outcome ...string) float64 {
			return testutil.ToFloat64(v.WithLabelValues(append(lane, outcome...)...))
		}
		Expect([]float64{
			counter(scheduling.LaneSubmitted),
			counter(scheduling.LaneAttemptsStarted),
			counter(scheduling.LaneAttemptsFinished, "timed_out"),
			counter(scheduling.LaneRetries),
			counter(scheduling.LaneCommandsFinished, "failed"),
			counter(scheduling.LaneCommandsFinished, "dead_lettered"),
		}).To(Equal([]float64{1, 2, 2, 1, 1, 0}),
			"the scheduler's Prometheus counters: submitted, attempts started, attempts timed out, retries, commands failed, commands dead-lettered")

		By("rejecting the worker's completion of the timed-out attempt")
		err := jsonPatch(task, `[{"op":"test","path":"/status/worker","value":"slow"},{"op":"test","path":"/status/attempt","value":1},
			{"op":"add","path":"/status/result","value":{"success":true}}]`)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
	})

	It("reports a failed attempt that will be retried as a Warning event, and a success as no Warning", func() {
		taskQueue(ns, func(s *agentlanev1alpha1.LaneQueueSpec) {
			s.RetryPolicy = &agentlanev1alpha1.RetryPolicy{Strategy: agentlanev1alpha1.RetryFixed,
				FixedDelay: &metav1.Duration{Duration: 100 * time.Millisecond}, MaxRetries: ptr.To[int32](1)}
		})
		fakeWorker(ns, "flaky", 1)
		task := queueTask(ns, "retried")
		Expect(k8sClient.Create(ctx, task)).To(Succeed())
		Eventually(taskPhase(task)).Should(Equal(agentlanev1alpha1.ExternalTaskDispatched))
		claim(task, "flaky", 1)
		fail(task, "flaky", 1, "exit code 3")

		Eventually(func(g Gomega) {
			getTask(task)(g)
			g.Expect(task.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskDispatched))
			g.Expect(task.Status.Attempt).To(Equal(int32(2)))
		}).Should(Succeed())
		Eventually(taskEvents(task)).Should(ContainElement(And(
			HaveField("Type", corev1.EventTypeWarning),
			HaveField("Reason", "Retrying"),
			HaveField("Action", "Retry"),
			HaveField("Note", ContainSubstring("attempt 1 ended Failed: exit code 3")),
		)))

		claim(task, "flaky", 2)
		succeed(task, "flaky", 2)
		Eventually(taskPhase(task)).Should(Equal(agentlanev1alpha1.ExternalTaskSucceeded))
		Consistently(func(g Gomega) []string {
			var warnings []string
			for _, e := range taskEvents(task)(g) {
				if e.Type == corev1.EventTypeWarning {
					warnings = append(warnings, e.Reason)
				}
			}
			return warnings
		}, 500*time.Millisecond).Should(Equal([]string{"Retrying"}), "one Warning for the failed attempt, none for the success")
	})

	It("does not run an attempt's timeout while it waits for a worker, and keeps the lane cap", func() {
		taskQueue(ns, func(s *agentlanev1alpha1.LaneQueueSpec) {
			s.Lanes[0].Timeout = &metav1.Duration{Duration: 300 * time.Millisecond}
			s.Lanes[0].MaxConcurrency = 1
			s.RetryPolicy = &agentlanev1alpha1.RetryPolicy{Strategy: agentlanev1alpha1.RetryFixed,
				FixedDelay: &metav1.Duration{Duration: 50 * time.Millisecond}, MaxRetries: ptr.To[int32](1)}
		})
		first, second := queueTask(ns, "waits-1"), queueTask(ns, "waits-2")
		Expect(k8sClient.Create(ctx, first)).To(Succeed())
		Eventually(func(g Gomega) {
			getTask(first)(g)
			g.Expect(first.Status.Attempt).To(Equal(int32(1)))
			g.Expect(cond(first, agentlanev1alpha1.ExternalTaskClaimedCondition)).To(HaveField("Message", ContainSubstring("has a slot")))
		}).Should(Succeed())
		Expect(k8sClient.Create(ctx, second)).To(Succeed())

		By("waiting several timeouts with no worker: no attempt ends, the lane still holds one")
		Consistently(func(g Gomega) {
			getTask(first)(g)
			g.Expect(first.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskQueued))
			g.Expect(first.Status.Attempt).To(Equal(int32(1)))
			g.Expect(first.Status.Attempts).To(BeEmpty())
			g.Expect(getTask(second)(g).Status.Attempt).To(BeZero(), "the lane's cap is 1")
		}, 1500*time.Millisecond, 100*time.Millisecond).Should(Succeed())

		By("running attempt 1 once a worker has it")
		fakeWorker(ns, "late", 1)
		runToSuccess(first, "late")
		Eventually(taskPhase(first)).Should(Equal(agentlanev1alpha1.ExternalTaskSucceeded))
		Expect(first.Status.Attempts).To(BeEmpty())
		Eventually(taskPhase(second)).Should(Equal(agentlanev1alpha1.ExternalTaskDispatched))
		Expect(second.Status.Attempt).To(Equal(int32(1)))

		By("timing out a dispatched attempt from its dispatch")
		Eventually(func(g Gomega) {
			getTask(second)(g)
			g.Expect(second.Status.Attempts).To(ContainElement(And(HaveField("Attempt", int32(1)),
				HaveField("Outcome", agentlanev1alpha1.AttemptTimedOut))))
		}, 5*time.Second).Should(Succeed())
	})

	It("records no attempt for a task cancelled while it waited for a worker", func() {
		taskQueue(ns, nil)
		task := queueTask(ns, "never-ran")
		Expect(k8sClient.Create(ctx, task)).To(Succeed())
		Eventually(func(g Gomega) int32 { return getTask(task)(g).Status.Attempt }).Should(Equal(int32(1)))
		task.Annotations = map[string]string{CancelAnnotation: "true"}
		Expect(k8sClient.Update(ctx, task)).To(Succeed())
		Eventually(taskPhase(task)).Should(Equal(agentlanev1alpha1.ExternalTaskCancelled))
		Expect(task.Status.Attempts).To(BeEmpty())
	})

	It("fails a task that waits longer than its lane's startTimeout for a worker, without counting an attempt", func() {
		taskQueue(ns, func(s *agentlanev1alpha1.LaneQueueSpec) {
			s.Lanes[0].StartTimeout = &metav1.Duration{Duration: 500 * time.Millisecond}
		})
		task := queueTask(ns, "no-worker")
		Expect(k8sClient.Create(ctx, task)).To(Succeed())
		Eventually(taskPhase(task), 10*time.Second).Should(Equal(agentlanev1alpha1.ExternalTaskFailed))
		Expect(task.Status.Attempts).To(BeEmpty())
		Expect(cond(task, agentlanev1alpha1.ExternalTaskFinishedCondition)).To(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Message", ContainSubstring("did not start in time"))))
	})

	It("re-dispatches a handed-back attempt without counting it", func() {
		taskQueue(ns, nil)
		fakeWorker(ns, "leaving", 1)
		task := queueTask(ns, "handed-back")
		Expect(k8sClient.Create(ctx, task)).To(Succeed())
		Eventually(taskPhase(task)).Should(Equal(agentlanev1alpha1.ExternalTaskDispatched))
		fakeWorker(ns, "staying", 1)
		// A worker that stops marks its Lease draining, then hands back what
		// it has not started.
		lease := &coordinationv1.Lease{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: workerproto.LeaseName("leaving")}, lease)).To(Succeed())
		lease.Annotations[workerproto.DrainingAnnotation] = "true"
		Expect(k8sClient.Update(ctx, lease)).To(Succeed())
		Expect(jsonPatch(task, `[{"op":"test","path":"/status/worker","value":"leaving"},
			{"op":"replace","path":"/status/phase","value":"Queued"},{"op":"remove","path":"/status/worker"}]`)).To(Succeed())

		Eventually(func(g Gomega) string {
			getTask(task)(g)
			g.Expect(task.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskDispatched))
			return task.Status.Worker
		}).Should(Equal("staying"))
		Expect(task.Status.Attempt).To(Equal(int32(1)))
		Expect(task.Status.Attempts).To(BeEmpty())
	})

	It("records an attempt still Dispatched on a worker that was lost, since a short run writes nothing until it ends", func() {
		taskQueue(ns, func(s *agentlanev1alpha1.LaneQueueSpec) {
			s.RetryPolicy = &agentlanev1alpha1.RetryPolicy{Strategy: agentlanev1alpha1.RetryFixed,
				FixedDelay: &metav1.Duration{Duration: 100 * time.Millisecond}, MaxRetries: ptr.To[int32](1)}
		})
		fakeWorker(ns, "doomed", 1)
		task := queueTask(ns, "maybe-ran")
		Expect(k8sClient.Create(ctx, task)).To(Succeed())
		Eventually(taskPhase(task)).Should(Equal(agentlanev1alpha1.ExternalTaskDispatched))
		Expect(task.Status.Worker).To(Equal("doomed"))
		fakeWorker(ns, "rescuer", 1)
		// The worker dies while the attempt is Dispatched: its command may
		// have run, so the attempt is recorded, and a second run is known.
		loseWorker(ns, "doomed")

		Eventually(func(g Gomega) string {
			getTask(task)(g)
			g.Expect(task.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskDispatched))
			return task.Status.Worker
		}).Should(Equal("rescuer"))
		Expect(task.Status.Attempt).To(Equal(int32(2)))
		Expect(task.Status.Attempts).To(HaveLen(1))
		Expect(task.Status.Attempts[0].Outcome).To(Equal(agentlanev1alpha1.AttemptWorkerLost))
		Expect(task.Status.Attempts[0].Worker).To(Equal("doomed"))
		claim(task, "rescuer", 2)
		succeed(task, "rescuer", 2)
		Eventually(taskPhase(task)).Should(Equal(agentlanev1alpha1.ExternalTaskSucceeded))
	})

	It("retries an attempt lost before it started without counting it, even with maxRetries 0", func() {
		taskQueue(ns, func(s *agentlanev1alpha1.LaneQueueSpec) {
			s.RetryPolicy = &agentlanev1alpha1.RetryPolicy{MaxRetries: ptr.To[int32](0)}
		})
		fakeWorker(ns, "doomed", 1)
		task := queueTask(ns, "never-ran")
		Expect(k8sClient.Create(ctx, task)).To(Succeed())
		Eventually(taskPhase(task)).Should(Equal(agentlanev1alpha1.ExternalTaskDispatched))
		Expect(task.Status.Worker).To(Equal("doomed"))
		fakeWorker(ns, "rescuer", 1)
		loseWorker(ns, "doomed")

		Eventually(func(g Gomega) string {
			getTask(task)(g)
			g.Expect(task.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskDispatched))
			return task.Status.Worker
		}).Should(Equal("rescuer"))
		Expect(task.Status.Attempt).To(Equal(int32(2)))
		Expect(task.Status.Attempts).To(ConsistOf(And(
			HaveField("Attempt", int32(1)), HaveField("Worker", "doomed"),
			HaveField("Outcome", agentlanev1alpha1.AttemptWorkerLost), HaveField("NotStarted", true))))
		claim(task, "rescuer", 2)
		succeed(task, "rescuer", 2)
		Eventually(taskPhase(task)).Should(Equal(agentlanev1alpha1.ExternalTaskSucceeded))
	})

	It("counts losses before start once a task had three of them, so a poison pill still ends", func() {
		taskQueue(ns, func(s *agentlanev1alpha1.LaneQueueSpec) {
			s.RetryPolicy = &agentlanev1alpha1.RetryPolicy{MaxRetries: ptr.To[int32](0)}
		})
		last := lanequeue.MaxUncountedNotStarted + 1
		for i := 1; i <= last; i++ {
			fakeWorker(ns, fmt.Sprintf("victim-%d", i), 1)
		}
		task := queueTask(ns, "poison")
		Expect(k8sClient.Create(ctx, task)).To(Succeed())
		// Every worker the task lands on dies before it reports a start.
		for n := 1; n <= last; n++ {
			Eventually(func(g Gomega) int32 {
				getTask(task)(g)
				g.Expect(task.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskDispatched))
				return task.Status.Attempt
			}).Should(Equal(int32(n)))
			loseWorker(ns, task.Status.Worker)
		}
		Eventually(taskPhase(task)).Should(Equal(agentlanev1alpha1.ExternalTaskDeadLettered))
		Expect(task.Status.Attempts).To(HaveLen(last))
		for _, a := range task.Status.Attempts {
			Expect(a).To(And(HaveField("Outcome", agentlanev1alpha1.AttemptWorkerLost), HaveField("NotStarted", true)))
		}
	})

	It("cancels a task annotated agentlane.io/cancel", func() {
		taskQueue(ns, nil)
		task := queueTask(ns, "unwanted")
		Expect(k8sClient.Create(ctx, task)).To(Succeed())
		Eventually(taskPhase(task)).Should(Equal(agentlanev1alpha1.ExternalTaskQueued))
		task.Annotations = map[string]string{CancelAnnotation: "true"}
		Expect(k8sClient.Update(ctx, task)).To(Succeed())
		Eventually(taskPhase(task)).Should(Equal(agentlanev1alpha1.ExternalTaskCancelled))
		Expect(cond(task, agentlanev1alpha1.ExternalTaskFinishedCondition)).To(HaveField("Reason", "Cancelled"))
		Expect(task.Status.FinishedAt).NotTo(BeNil())
	})

	It("fails a task the scheduler cannot take, with the reason", func() {
		taskQueue(ns, nil)
		task := queueTask(ns, "lost-lane")
		task.Spec.Lane = "nowhere"
		Expect(k8sClient.Create(ctx, task)).To(Succeed())
		Eventually(taskPhase(task)).Should(Equal(agentlanev1alpha1.ExternalTaskFailed))
		Expect(cond(task, agentlanev1alpha1.ExternalTaskFinishedCondition).Message).To(ContainSubstring("nowhere"))
	})

	It("keeps tasks in the manager's cache without their managedFields", func() {
		taskQueue(ns, nil)
		task := queueTask(ns, "lean")
		Expect(k8sClient.Create(ctx, task)).To(Succeed())
		Expect(task.ManagedFields).NotTo(BeEmpty(), "the API server records field managers")
		cached := &agentlanev1alpha1.ExternalTask{}
		Eventually(func(g Gomega) {
			g.Expect(managerCache.Get(ctx, client.ObjectKeyFromObject(task), cached)).To(Succeed())
			g.Expect(cached.Status.Phase).NotTo(BeEmpty())
		}).Should(Succeed())
		Expect(cached.ManagedFields).To(BeEmpty())
	})

	It("fails a task whose lane does not accept its command type, and never dispatches it", func() {
		taskQueue(ns, func(s *agentlanev1alpha1.LaneQueueSpec) {
			s.Lanes[0].CommandTypes = []agentlanev1alpha1.CommandType{"read", "grep"}
		})
		fakeWorker(ns, "w1", 4)
		task := queueTask(ns, "shell") // bash
		Expect(k8sClient.Create(ctx, task)).To(Succeed())
		Eventually(taskPhase(task)).Should(Equal(agentlanev1alpha1.ExternalTaskFailed))
		Expect(cond(task, agentlanev1alpha1.ExternalTaskFinishedCondition).Message).To(
			ContainSubstring(`lane "execute" does not accept command type "bash"; it accepts read, grep`))
		Expect(task.Status.Worker).To(BeEmpty())
		Expect(task.Status.Attempt).To(BeZero())
	})

	It("deletes finished tasks after ttlAfterFinished and beyond maxFinished, oldest first", func() {
		taskQueue(ns, func(s *agentlanev1alpha1.LaneQueueSpec) {
			s.TaskRetention = &agentlanev1alpha1.TaskRetention{
				TTLAfterFinished: &metav1.Duration{Duration: time.Hour}, MaxFinished: ptr.To[int32](2)}
		})
		fakeWorker(ns, "w", 1)
		for i := range 4 {
			t := queueTask(ns, fmt.Sprintf("done-%d", i))
			Expect(k8sClient.Create(ctx, t)).To(Succeed())
			runToSuccess(t, "w")
			Eventually(func(g Gomega) *metav1.Condition {
				return cond(getTask(t)(g), agentlanev1alpha1.ExternalTaskFinishedCondition)
			}).Should(HaveField("Status", metav1.ConditionTrue))
			time.Sleep(1100 * time.Millisecond) // finish times are in whole seconds
		}
		Eventually(func(g Gomega) []string {
			list := &agentlanev1alpha1.ExternalTaskList{}
			g.Expect(k8sClient.List(ctx, list, client.InNamespace(ns))).To(Succeed())
			var names []string
			for _, t := range list.Items {
				names = append(names, t.Name)
			}
			return names
		}).Should(ConsistOf("done-2", "done-3"))

		By("shortening the TTL")
		lq := &agentlanev1alpha1.LaneQueue{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: "q1"}, lq)).To(Succeed())
		lq.Spec.TaskRetention.TTLAfterFinished = &metav1.Duration{Duration: time.Second}
		Expect(k8sClient.Update(ctx, lq)).To(Succeed())
		last := queueTask(ns, "short-lived")
		Expect(k8sClient.Create(ctx, last)).To(Succeed())
		runToSuccess(last, "w")
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(last), last))
		}, 10*time.Second).Should(BeTrue())
	})

	It("deletes a session's tasks when the session is deleted", func() {
		taskQueue(ns, nil)
		s := &agentlanev1alpha1.AgentSession{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s1"},
			Spec:       agentlanev1alpha1.AgentSessionSpec{QueueRef: agentlanev1alpha1.LaneQueueReference{Name: "q1"}},
		}
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		fakeWorker(ns, "w", 1)
		held := queueTask(ns, "held")
		held.Spec.QueueRef, held.Spec.SessionRef = nil, &agentlanev1alpha1.AgentSessionReference{Name: "s1"}
		waiting := held.DeepCopy()
		waiting.Name = "waiting"
		Expect(k8sClient.Create(ctx, held)).To(Succeed())
		Eventually(taskPhase(held)).Should(Equal(agentlanev1alpha1.ExternalTaskDispatched))
		Expect(k8sClient.Create(ctx, waiting)).To(Succeed())
		Eventually(awaitingWorker(waiting)).Should(BeTrue())
		Expect(held.OwnerReferences).To(HaveExactElements(HaveField("Name", "s1")))

		Expect(k8sClient.Delete(ctx, s)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(s), s))
		}).Should(BeTrue(), "the finalizer lets the session go")
		for _, t := range []*agentlanev1alpha1.ExternalTask{held, waiting} {
			Expect(apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(t), t))).To(BeTrue(), t.Name)
		}
		q, _ := schedulers.Get(types.NamespacedName{Namespace: ns, Name: "q1"})
		Eventually(func() int { return q.Stats().Active + q.Stats().Pending }).Should(BeZero())
	})
})
