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
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/budget"
	"github.com/agentlane/agentlane/internal/delegation"
	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/scheduling"
)

// In these specs the test drives the delegation controller's passes itself
// (Reconcile on one lane), with a fake clock and a fake inbox, against the
// real API server; the suite's manager runs the other controllers. The
// lane's scheduler is the test's own, on the same fake clock, started from
// the LaneQueue as the LaneQueue controller starts it.

// delegationSchedulers returns a Schedulers on clk whose hooks do nothing.
func delegationSchedulers(clk *clocktesting.FakeClock) *scheduling.Schedulers {
	GinkgoHelper()
	s := &scheduling.Schedulers{Options: lanequeue.Options{Clock: clk}}
	Expect(s.Bind(scheduling.Hooks{Observer: scheduling.NoObserver,
		OnSessionActivity: func(types.NamespacedName, time.Time) {},
		Rebuild:           func(types.NamespacedName, *lanequeue.Queue, *scheduling.TaskSet) {}})).To(Succeed())
	return s
}

// ensureScheduler starts (or reconfigures) the scheduler of LaneQueue dq of
// ns in sched, when the queue exists.
func ensureScheduler(g Gomega, sched *scheduling.Schedulers, ns string) {
	lq := &agentlanev1alpha1.LaneQueue{}
	err := k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: "dq"}, lq)
	if apierrors.IsNotFound(err) {
		return
	}
	g.Expect(err).NotTo(HaveOccurred())
	cfg, err := QueueConfig(&lq.Spec)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = sched.Ensure(lq, cfg)
	g.Expect(err).NotTo(HaveOccurred())
}

// fakeInboxes records what the delegation controller posts.
type fakeInboxes struct {
	mu     sync.Mutex
	posted map[types.NamespacedName][]string
	// refuse, when set, is the error every post to a worker session gets.
	refuse error
}

func (f *fakeInboxes) Deliver(_ context.Context, key types.NamespacedName, id, text string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse != nil && id != "" && id[:5] == "turn-" {
		return f.refuse
	}
	if f.posted == nil {
		f.posted = map[types.NamespacedName][]string{}
	}
	f.posted[key] = append(f.posted[key], text)
	return nil
}

func (f *fakeInboxes) Busy(context.Context, types.NamespacedName) (bool, error) { return true, nil }

func (f *fakeInboxes) messages(key types.NamespacedName) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.posted[key]...)
}

// cachedReads reads from the manager's cache (with its field indexes) and
// writes to the API server, as the manager's client does.
type cachedReads struct{ client.Client }

func (c cachedReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return managerCache.Get(ctx, key, obj, opts...)
}

func (c cachedReads) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return managerCache.List(ctx, list, opts...)
}

// taskReads counts the ExternalTask reads that reach the API server.
type taskReads struct {
	client.Reader
	n atomic.Int64
}

func (c *taskReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*agentlanev1alpha1.ExternalTask); ok {
		c.n.Add(1)
	}
	return c.Reader.Get(ctx, key, obj, opts...)
}

func (c *taskReads) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*agentlanev1alpha1.ExternalTaskList); ok {
		c.n.Add(1)
	}
	return c.Reader.List(ctx, list, opts...)
}

// delegateQueue creates LaneQueue dq in ns with one Delegate lane, review,
// whose workers get at most 600 tokens.
func delegateQueue(ns string, mutate func(*agentlanev1alpha1.Lane)) {
	GinkgoHelper()
	delegateQueueWith(ns, mutate, nil)
}

// delegateQueueWith is delegateQueue with the queue's spec changed by
// mutateQueue too.
func delegateQueueWith(ns string, mutate func(*agentlanev1alpha1.Lane), mutateQueue func(*agentlanev1alpha1.LaneQueueSpec)) {
	GinkgoHelper()
	lane := agentlanev1alpha1.Lane{Name: "review", Priority: 0, MaxConcurrency: 4,
		ExternalTarget: &agentlanev1alpha1.ExternalTarget{Type: agentlanev1alpha1.ExternalTargetDelegate,
			Delegate: &agentlanev1alpha1.DelegateTarget{SessionTemplate: agentlanev1alpha1.AgentSessionTemplate{
				Spec: agentlanev1alpha1.AgentSessionTemplateSpec{AgentTemplateID: "reviewer",
					Budget: &agentlanev1alpha1.WorkerBudget{Tokens: &agentlanev1alpha1.TokenBudget{Hard: ptr.To[int64](600)}}},
			}}}}
	if mutate != nil {
		mutate(&lane)
	}
	lq := &agentlanev1alpha1.LaneQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dq"},
		Spec: agentlanev1alpha1.LaneQueueSpec{DefaultLane: "review", Lanes: []agentlanev1alpha1.Lane{lane}}}
	if mutateQueue != nil {
		mutateQueue(&lq.Spec)
	}
	Expect(k8sClient.Create(ctx, lq)).To(Succeed())
	// The controller reads the queue from the manager's cache.
	Eventually(func() error {
		return managerCache.Get(ctx, client.ObjectKeyFromObject(lq), &agentlanev1alpha1.LaneQueue{})
	}).Should(Succeed())
}

// noRetries makes a lane retry nothing; noDeadLetters, a queue keep no
// dead letters: a delegation whose attempt times out ends TimedOut.
func noRetries(l *agentlanev1alpha1.Lane) {
	l.RetryPolicy = &agentlanev1alpha1.RetryPolicy{Strategy: agentlanev1alpha1.RetryNone}
}

func noDeadLetters(q *agentlanev1alpha1.LaneQueueSpec) {
	q.DeadLetter = &agentlanev1alpha1.DeadLetterPolicy{Enabled: ptr.To(false)}
}

// producerSession creates the session that delegates.
func producerSession(ns, name string, mutate func(*agentlanev1alpha1.AgentSession)) *agentlanev1alpha1.AgentSession {
	GinkgoHelper()
	s := &agentlanev1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: agentlanev1alpha1.AgentSessionSpec{QueueRef: agentlanev1alpha1.LaneQueueReference{Name: "dq"},
			Identity: &agentlanev1alpha1.Identity{TenantID: "acme", Principal: "alice"}}}
	if mutate != nil {
		mutate(s)
	}
	Expect(k8sClient.Create(ctx, s)).To(Succeed())
	Eventually(func() error {
		return managerCache.Get(ctx, client.ObjectKeyFromObject(s), &agentlanev1alpha1.AgentSession{})
	}).Should(Succeed())
	return s
}

// delegatedTask creates a delegated task as the Session API does.
func delegatedTask(producer *agentlanev1alpha1.AgentSession, name, text string) *agentlanev1alpha1.ExternalTask {
	GinkgoHelper()
	return delegatedTaskWith(producer, name, text, nil)
}

// delegatedTaskWith is delegatedTask with the task changed by mutate
// before it is created.
func delegatedTaskWith(producer *agentlanev1alpha1.AgentSession, name, text string, mutate func(*agentlanev1alpha1.ExternalTask)) *agentlanev1alpha1.ExternalTask {
	GinkgoHelper()
	payload, err := json.Marshal(map[string]string{"text": text})
	Expect(err).NotTo(HaveOccurred())
	t := &agentlanev1alpha1.ExternalTask{
		ObjectMeta: metav1.ObjectMeta{Namespace: producer.Namespace, Name: name,
			Labels: map[string]string{agentlanev1alpha1.DelegatedLabel: "true", agentlanev1alpha1.QueueLabel: "dq",
				agentlanev1alpha1.LaneLabel: "review", agentlanev1alpha1.SessionLabel: producer.Name}},
		Spec: agentlanev1alpha1.ExternalTaskSpec{
			SessionRef:  &agentlanev1alpha1.AgentSessionReference{Name: producer.Name},
			QueueRef:    &agentlanev1alpha1.LaneQueueReference{Name: "dq"},
			Lane:        "review",
			CommandType: delegation.CommandType,
			Payload:     &runtime.RawExtension{Raw: payload},
		}}
	if mutate != nil {
		mutate(t)
	}
	Expect(k8sClient.Create(ctx, t)).To(Succeed())
	// The controller lists the lane's tasks from the manager's cache.
	Eventually(func() error {
		return managerCache.Get(ctx, client.ObjectKeyFromObject(t), &agentlanev1alpha1.ExternalTask{})
	}).Should(Succeed())
	return t
}

var _ = Describe("Delegation controller", func() {
	var (
		ns      string
		clk     *clocktesting.FakeClock
		inboxes *fakeInboxes
		ledger  *budget.Ledger
		r       *DelegationReconciler
		sched   *scheduling.Schedulers
	)
	BeforeEach(func() {
		ns = taskNamespace()
		clk = clocktesting.NewFakeClock(time.Now())
		inboxes = &fakeInboxes{}
		ledger = &budget.Ledger{Clock: clk}
		sched = delegationSchedulers(clk)
		r = &DelegationReconciler{Client: cachedReads{k8sClient}, APIReader: k8sClient, Inboxes: inboxes, Clock: clk,
			Budgets: ledger, Bounds: delegation.Bounds{MaxChildren: 2}.WithDefaults(), startedAt: clk.Now(), Schedulers: sched}
		DeferCleanup(func() { sched.Remove(types.NamespacedName{Namespace: ns, Name: "dq"}) })
	})
	pass := func() {
		GinkgoHelper()
		ensureScheduler(Default, sched, ns)
		_, err := r.Reconcile(ctx, laneKey(ns, "dq", "review"))
		Expect(err).NotTo(HaveOccurred())
	}
	// passUntil runs passes until the task satisfies check: the manager's
	// cache the controller reads some objects from catches up between them.
	passUntil := func(t *agentlanev1alpha1.ExternalTask, check func(Gomega, *agentlanev1alpha1.ExternalTask)) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			ensureScheduler(g, sched, ns)
			_, err := r.Reconcile(ctx, laneKey(ns, "dq", "review"))
			g.Expect(err).NotTo(HaveOccurred())
			check(g, getTask(t)(g))
		}).Should(Succeed())
	}
	worker := func(t *agentlanev1alpha1.ExternalTask) *agentlanev1alpha1.AgentSession {
		GinkgoHelper()
		w := &agentlanev1alpha1.AgentSession{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: t.Status.Worker}, w)).To(Succeed())
		return w
	}

	It("ends a delegation whose worker runs past the lane's timeout TimedOut, deletes the worker and tells the producer", func() {
		// A lane without retries, in a queue without dead letters: the
		// attempt's timeout ends the task.
		delegateQueueWith(ns, func(l *agentlanev1alpha1.Lane) {
			l.Timeout = &metav1.Duration{Duration: time.Minute}
			l.RetryPolicy = &agentlanev1alpha1.RetryPolicy{Strategy: agentlanev1alpha1.RetryNone}
		}, noDeadLetters)
		lead := producerSession(ns, "lead", nil)
		task := delegatedTask(lead, "slow", "Review PR 42")
		passUntil(task, func(g Gomega, t *agentlanev1alpha1.ExternalTask) {
			g.Expect(t.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskRunning))
			g.Expect(cond(t, agentlanev1alpha1.ExternalTaskClaimedCondition)).To(HaveField("Status", metav1.ConditionTrue))
		})
		w := worker(task)
		Expect(inboxes.messages(client.ObjectKeyFromObject(w))).To(Equal([]string{"Review PR 42"}))

		clk.Step(59 * time.Second)
		pass()
		Expect(getTask(task)(Default).Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskRunning), "still within its minute")

		clk.Step(2 * time.Second)
		passUntil(task, func(g Gomega, t *agentlanev1alpha1.ExternalTask) {
			g.Expect(t.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskTimedOut))
			g.Expect(t.Status.Result.Error).To(ContainSubstring("did not finish within 1m0s"))
			g.Expect(cond(t, agentlanev1alpha1.ExternalTaskDeliveredCondition)).To(HaveField("Status", metav1.ConditionTrue))
		})
		Expect(inboxes.messages(client.ObjectKeyFromObject(lead))).To(ConsistOf(
			And(ContainSubstring("task#slow · error"), ContainSubstring("timed out"))))
		Eventually(func() bool {
			err := k8sClient.Get(ctx, client.ObjectKeyFromObject(w), &agentlanev1alpha1.AgentSession{})
			return apierrors.IsNotFound(err)
		}).Should(BeTrue(), "the timed-out worker session is deleted")
	})

	It("gives a delegation without any timeout the default deadline", func() {
		delegateQueueWith(ns, noRetries, noDeadLetters)
		lead := producerSession(ns, "lead", nil)
		task := delegatedTask(lead, "forever", "Review PR 43")
		passUntil(task, func(g Gomega, t *agentlanev1alpha1.ExternalTask) {
			g.Expect(t.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskRunning))
			g.Expect(t.Status.Holder).To(Equal(agentlanev1alpha1.HolderDelegate))
		})
		clk.Step(delegation.DefaultTimeout + time.Second)
		passUntil(task, func(g Gomega, t *agentlanev1alpha1.ExternalTask) {
			g.Expect(t.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskTimedOut))
		})
	})

	DescribeTable("fails at once a delegation whose first turn a worker session cannot take, without creating a worker",
		func(text, fragment string) {
			delegateQueue(ns, nil)
			lead := producerSession(ns, "lead", nil)
			task := delegatedTask(lead, "bad-turn", text)
			pass()
			Expect(getTask(task)(Default).Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskFailed))
			Expect(task.Status.Result.Error).To(ContainSubstring(fragment))
			Expect(task.Status.Worker).To(BeEmpty())
			workers := &agentlanev1alpha1.AgentSessionList{}
			Expect(k8sClient.List(ctx, workers, client.InNamespace(ns), client.HasLabels{agentlanev1alpha1.DelegationTaskLabel})).To(Succeed())
			Expect(workers.Items).To(BeEmpty())
		},
		Entry("a /queue directive", "/queue followup", "/queue directive"),
		Entry("an invalid /queue directive", "/queue sideways", "unknown mode"),
		Entry("a blank turn", "  ", "empty"),
	)

	It("fails a delegation at once when the worker's inbox refuses its first turn for good", func() {
		delegateQueue(ns, nil)
		lead := producerSession(ns, "lead", nil)
		inboxes.refuse = fmt.Errorf("post: %w", lanequeue.ErrInvalidDirective)
		task := delegatedTask(lead, "refused", "Review PR 44")
		pass()
		Expect(getTask(task)(Default).Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskFailed))
		Expect(task.Status.Result.Error).To(ContainSubstring("refused the first turn"))
	})

	It("carves each worker's budget from its producer's, and refuses a producer whose budget is exhausted", func() {
		delegateQueue(ns, nil)
		lead := producerSession(ns, "lead", func(s *agentlanev1alpha1.AgentSession) {
			s.Spec.Budget = &agentlanev1alpha1.Budget{Tokens: &agentlanev1alpha1.TokenBudget{Hard: ptr.To[int64](1000)}}
		})
		first := delegatedTask(lead, "first", "Review part 1")
		passUntil(first, func(g Gomega, t *agentlanev1alpha1.ExternalTask) {
			g.Expect(t.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskRunning))
		})
		Expect(*worker(first).Spec.Budget.Tokens.Hard).To(Equal(int64(600)), "the template's 600 fit in the producer's 1000")
		Expect(ledger.Usage(client.ObjectKeyFromObject(lead)).TokensConsumed).To(Equal(int64(600)), "the producer pays for its worker up front")

		second := delegatedTask(lead, "second", "Review part 2")
		passUntil(second, func(g Gomega, t *agentlanev1alpha1.ExternalTask) {
			g.Expect(t.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskRunning))
		})
		Expect(*worker(second).Spec.Budget.Tokens.Hard).To(Equal(int64(400)), "only 400 were left")

		third := delegatedTask(lead, "third", "Review part 3")
		passUntil(third, func(g Gomega, t *agentlanev1alpha1.ExternalTask) {
			g.Expect(t.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskFailed))
			g.Expect(t.Status.Result.Error).To(HavePrefix(BudgetExhaustedPrefix))
		})
	})

	It("holds a producer's delegations beyond its running-worker bound until one ends", func() {
		delegateQueue(ns, nil)
		lead := producerSession(ns, "lead", nil)
		a := delegatedTask(lead, "a", "one")
		b := delegatedTask(lead, "b", "two")
		c := delegatedTask(lead, "c", "three")
		passUntil(c, func(g Gomega, t *agentlanev1alpha1.ExternalTask) {
			g.Expect(t.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskQueued))
			g.Expect(cond(t, agentlanev1alpha1.ExternalTaskClaimedCondition)).To(HaveField("Reason", agentlanev1alpha1.ExternalTaskAwaitingProducerSlotReason))
		})
		Expect(getTask(a)(Default).Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskRunning))
		Expect(getTask(b)(Default).Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskRunning))

		clk.Step(delegation.DefaultTimeout + time.Second) // a and b end
		passUntil(c, func(g Gomega, t *agentlanev1alpha1.ExternalTask) {
			g.Expect(t.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskRunning))
		})
	})

	It("reads no task from the API server in a pass that starts nothing, however many the lane keeps", func() {
		delegateQueue(ns, func(l *agentlanev1alpha1.Lane) { l.MaxConcurrency = 1 })
		lead := producerSession(ns, "lead", nil)
		tasks := make([]*agentlanev1alpha1.ExternalTask, 0, 6)
		for i := range 6 {
			tasks = append(tasks, delegatedTask(lead, fmt.Sprintf("t%d", i), strings.Repeat("x", 60<<10)))
		}
		passUntil(tasks[5], func(g Gomega, t *agentlanev1alpha1.ExternalTask) {
			g.Expect(cond(t, agentlanev1alpha1.ExternalTaskClaimedCondition)).To(HaveField("Reason", agentlanev1alpha1.ExternalTaskAwaitingWorkerSlotReason))
		})
		reads := &taskReads{Reader: k8sClient}
		r.APIReader = reads
		for range 5 {
			pass()
		}
		Expect(reads.n.Load()).To(BeZero(), "a pass read tasks, with their payloads, from the API server")
	})

	DescribeTable("refuses a producer whose delegation depth is not valid",
		func(depth string) {
			delegateQueue(ns, nil)
			lead := producerSession(ns, "forged", func(s *agentlanev1alpha1.AgentSession) {
				s.Labels = map[string]string{agentlanev1alpha1.DelegationTaskLabel: "earlier"}
				s.Annotations = map[string]string{agentlanev1alpha1.DelegationDepthAnnotation: depth}
			})
			task := delegatedTask(lead, "deep", "Review PR 45")
			pass()
			Expect(getTask(task)(Default).Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskFailed))
			Expect(task.Status.Result.Error).To(ContainSubstring("invalid delegation depth"))
		},
		Entry("negative", "-100"),
		Entry("zero on a worker", "0"),
		Entry("not a number", "deep"),
	)

	It("does not let a delegated task through past the maximum depth", func() {
		delegateQueue(ns, nil)
		lead := producerSession(ns, "third-level", func(s *agentlanev1alpha1.AgentSession) {
			s.Labels = map[string]string{agentlanev1alpha1.DelegationTaskLabel: "earlier"}
			s.Annotations = map[string]string{agentlanev1alpha1.DelegationDepthAnnotation: fmt.Sprint(delegation.DefaultMaxDepth)}
		})
		task := delegatedTask(lead, "too-deep", "Review PR 46")
		pass()
		Expect(getTask(task)(Default).Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskFailed))
		Expect(task.Status.Result.Error).To(ContainSubstring("delegations deep"))
	})
})

var _ = Describe("A worker-pool task labelled agentlane.io/delegated", func() {
	It("is still carried by the ExternalTask controller: the label alone does not make a delegation", func() {
		ns := taskNamespace()
		taskQueue(ns, nil)
		task := queueTask(ns, "labelled")
		Expect(k8sClient.Create(ctx, task)).To(Succeed())
		Eventually(taskPhase(task)).Should(Equal(agentlanev1alpha1.ExternalTaskQueued))
		Expect(k8sClient.Patch(ctx, task, client.RawPatch(types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"agentlane.io/delegated":"true"}}}`)))).To(Succeed())
		Expect(task.Labels).To(HaveKeyWithValue(agentlanev1alpha1.DelegatedLabel, "true"))

		fakeWorker(ns, "w1", 1)
		Eventually(taskPhase(task)).Should(Equal(agentlanev1alpha1.ExternalTaskDispatched))
		Expect(task.Status.Worker).To(Equal("w1"))
	})
})
