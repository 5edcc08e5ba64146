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
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/agentscript"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// alice is the identity of the producers of the specs.
var alice = &agentlanev1alpha1.Identity{TenantID: "tenant-a", Principal: "alice"}

// resultHeader matches the header of a delegated task's result message.
var resultHeader = regexp.MustCompile(`^from queue:review · task#([0-9a-z-]+) · (ok|error) · \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`)

// delegationQueue creates LaneQueue q1 with a review lane that delegates to
// reviewer sessions, at most maxParallel at once, and a producer session
// with identity id.
func delegationQueue(ns string, maxParallel int32, id *agentlanev1alpha1.Identity) *agentlanev1alpha1.AgentSession {
	GinkgoHelper()
	lq := &agentlanev1alpha1.LaneQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "q1"}, Spec: agentlanev1alpha1.LaneQueueSpec{
		RetryPolicy: &agentlanev1alpha1.RetryPolicy{Strategy: agentlanev1alpha1.RetryNone},
		Lanes: []agentlanev1alpha1.Lane{
			{Name: "execute", Priority: 2},
			{Name: "generate", Priority: 3, MaxConcurrencyPerSession: 1},
			{Name: "review", Priority: 1, MaxConcurrency: maxParallel, ExternalTarget: &agentlanev1alpha1.ExternalTarget{
				Type: agentlanev1alpha1.ExternalTargetDelegate,
				Delegate: &agentlanev1alpha1.DelegateTarget{SessionTemplate: agentlanev1alpha1.AgentSessionTemplate{
					Spec: agentlanev1alpha1.AgentSessionTemplateSpec{AgentTemplateID: "reviewer"},
				}},
			}},
		},
	}}
	Expect(k8sClient.Create(suiteCtx, lq)).To(Succeed())
	return activeSession(ns, "producer", "q1", id)
}

// activeSession creates a session and waits until it is Active.
func activeSession(ns, name, queue string, id *agentlanev1alpha1.Identity) *agentlanev1alpha1.AgentSession {
	GinkgoHelper()
	s := &agentlanev1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: agentlanev1alpha1.AgentSessionSpec{QueueRef: agentlanev1alpha1.LaneQueueReference{Name: queue}, Identity: id,
			Retention: &agentlanev1alpha1.SessionRetention{MaxFinishedTasks: ptr.To[int32](100)}},
	}
	Expect(k8sClient.Create(suiteCtx, s)).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(s), s)).To(Succeed())
		g.Expect(s.Status.Phase).To(Equal(agentlanev1alpha1.SessionActive))
	}).Should(Succeed())
	return s
}

// workerScript is the script a worker session's runtime follows, given its
// first turn; nil means no runtime serves the worker.
type workerScript func(firstTurn string) *agentscript.Script

// serveWorkers runs a scripted runtime, for one turn, for every worker
// session that appears in ns, until ctx ends.
func serveWorkers(ctx context.Context, c *sessionapi.Client, ns string, scriptFor workerScript) {
	served := map[string]bool{}
	go func() {
		defer GinkgoRecover()
		for ctx.Err() == nil {
			list := &agentlanev1alpha1.AgentSessionList{}
			if err := k8sClient.List(ctx, list, client.InNamespace(ns), client.HasLabels{agentlanev1alpha1.DelegationTaskLabel}); err == nil {
				for _, w := range list.Items {
					if served[w.Name] {
						continue
					}
					served[w.Name] = true
					task := &agentlanev1alpha1.ExternalTask{}
					if k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: w.Labels[agentlanev1alpha1.DelegationTaskLabel]}, task) != nil {
						continue
					}
					script := scriptFor(string(task.Spec.Payload.Raw))
					if script == nil {
						continue
					}
					rt := &agentscript.Runtime{Session: c.Session(ns, w.Name), Script: *script}
					go func() { _, _ = rt.Serve(ctx, 1) }()
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
}

// reviewerScript answers a review after a model call of 1.5s; a review
// whose text says FAIL runs a command that fails, so the worker errs.
func reviewerScript(firstTurn string) *agentscript.Script {
	doc := fmt.Sprintf("turns:\n- llm: {outputTokens: 20, duration: 1500ms, text: %q}\n", "reviewed: "+turnText(firstTurn))
	if strings.Contains(firstTurn, "FAIL") {
		doc += "  steps:\n  - {type: bash, payload: {command: \"echo broken build >&2; exit 3\"}}\n"
	}
	s, err := agentscript.Parse([]byte(doc))
	Expect(err).NotTo(HaveOccurred())
	return &s
}

// turnText is the text of a delegated task's payload.
func turnText(payload string) string {
	_, rest, _ := strings.Cut(payload, `"text":"`)
	text, _, _ := strings.Cut(rest, `"`)
	return text
}

// inboxMessages reads turn events from the stream and returns the text of
// each message they bring, until want result messages have arrived.
func inboxMessages(events *sessionapi.EventStream, want int) (results, others []string) {
	GinkgoHelper()
	for len(results) < want {
		ev, err := events.Next()
		Expect(err).NotTo(HaveOccurred())
		if ev.Type != sessionapi.EventTurn {
			continue
		}
		texts := []string{ev.Text}
		if len(ev.Messages) > 0 {
			texts = texts[:0]
			for _, m := range ev.Messages {
				texts = append(texts, m.Text)
			}
		}
		for _, t := range texts {
			if strings.HasPrefix(t, "from queue:") {
				results = append(results, t)
			} else {
				others = append(others, t)
			}
		}
	}
	return results, others
}

// laneWatch records the most tasks of ns seen Running at once.
type laneWatch struct {
	mu         sync.Mutex
	maxRunning int
	waited     bool
}

func watchLane(ctx context.Context, ns string) *laneWatch {
	lw := &laneWatch{}
	go func() {
		for ctx.Err() == nil {
			list := &agentlanev1alpha1.ExternalTaskList{}
			if err := k8sClient.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{agentlanev1alpha1.DelegatedLabel: "true"}); err == nil {
				running, waiting := 0, 0
				for _, t := range list.Items {
					switch t.Status.Phase {
					case agentlanev1alpha1.ExternalTaskRunning:
						running++
					case agentlanev1alpha1.ExternalTaskQueued:
						waiting++
					}
				}
				lw.mu.Lock()
				lw.maxRunning = max(lw.maxRunning, running)
				lw.waited = lw.waited || (running == 2 && waiting > 0)
				lw.mu.Unlock()
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return lw
}

var _ = Describe("Delegation queues", func() {
	BeforeEach(showManagerLogOnFailure)

	It("delegates three reviews to a lane capped at 2 while the producer keeps working, and delivers each result to its inbox", func() {
		ns := newNamespace()
		producer := delegationQueue(ns, 2, alice)
		c, err := sessionapi.NewClient(sessionAPI, sessionapi.WithToken(sessionToken(ns)))
		Expect(err).NotTo(HaveOccurred())
		session := c.Session(ns, producer.Name)
		ctx, cancel := context.WithTimeout(suiteCtx, 3*time.Minute)
		defer cancel()

		events, err := session.Events(ctx, sessionapi.EventsOptions{Reconnect: true})
		Expect(err).NotTo(HaveOccurred())
		defer func() { _ = events.Close() }()
		// The producer's own runtime answers every turn with a short model call.
		own, err := agentscript.Parse([]byte("turns:\n- llm: {outputTokens: 5, duration: 10ms, text: noted}\n"))
		Expect(err).NotTo(HaveOccurred())
		go func() { _, _ = (&agentscript.Runtime{Session: session, Script: own}).Serve(ctx, 0) }()
		serveWorkers(ctx, c, ns, reviewerScript)
		lane := watchLane(ctx, ns)

		By("delegating three reviews, fire and forget")
		var ids []string
		for _, text := range []string{"review PR 1", "review PR 2", "review PR 3 FAIL"} {
			d, err := session.Delegate(ctx, sessionapi.DelegationRequest{Lane: "review", Text: text})
			Expect(err).NotTo(HaveOccurred())
			Expect(d.Phase).To(Equal("Queued"))
			Expect(d.Callback).To(BeTrue())
			ids = append(ids, d.ID)
		}
		By("the producer keeps working: a user message gets its turn while reviews run")
		_, err = session.Post(ctx, sessionapi.Message{Text: "user: how is it going?"})
		Expect(err).NotTo(HaveOccurred())

		results, others := inboxMessages(events, 3)
		Expect(others).To(ContainElement("user: how is it going?"))
		byID := map[string][]string{}
		for _, r := range results {
			header, body, _ := strings.Cut(r, "\n")
			m := resultHeader.FindStringSubmatch(header)
			Expect(m).NotTo(BeNil(), "header %q", header)
			byID[m[1]] = []string{m[2], body}
		}
		Expect(byID).To(HaveLen(3))
		Expect(byID[ids[0]]).To(Equal([]string{"ok", "reviewed: review PR 1"}))
		Expect(byID[ids[1]]).To(Equal([]string{"ok", "reviewed: review PR 2"}))
		Expect(byID[ids[2]][0]).To(Equal("error"))
		Expect(byID[ids[2]][1]).To(ContainSubstring("bash command"))

		By("at most two workers ran at once, and the third waited for a slot")
		lane.mu.Lock()
		Expect(lane.maxRunning).To(Equal(2))
		Expect(lane.waited).To(BeTrue())
		lane.mu.Unlock()

		By("the status of each task, through the Session API and the ExternalTask")
		// The result reaches the inbox before the task records that it did.
		Eventually(func(g Gomega) {
			for _, id := range ids {
				d, err := session.GetDelegation(ctx, id)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(d.Delivered).To(BeTrue())
			}
		}).Should(Succeed())
		failed, err := session.GetDelegation(ctx, ids[2])
		Expect(err).NotTo(HaveOccurred())
		Expect(failed.Phase).To(Equal("Failed"))
		Expect(failed.Error).To(ContainSubstring("exit code 3"))
		list, err := session.Delegations(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(list.Items).To(HaveLen(3))
		for i, id := range ids {
			task := &agentlanev1alpha1.ExternalTask{}
			Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: id}, task)).To(Succeed())
			Expect(meta.IsStatusConditionTrue(task.Status.Conditions, agentlanev1alpha1.ExternalTaskDeliveredCondition)).To(BeTrue())
			Expect(list.Items[i].WorkerSession).To(Equal(task.Status.Worker))

			By("worker " + task.Status.Worker + " is the producer's, in its namespace, with its identity")
			w := &agentlanev1alpha1.AgentSession{}
			Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: task.Status.Worker}, w)).To(Succeed())
			Expect(metav1.IsControlledBy(w, producer)).To(BeTrue())
			Expect(w.Spec.Identity.TenantID).To(Equal("tenant-a"))
			Expect(w.Spec.Identity.Principal).To(Equal("alice"))
			Expect(w.Spec.Identity.AgentTemplateID).To(Equal("reviewer"))
		}
	})

	It("ends a delegation in flight during a manager restart as failed: interrupted, delivered to the producer, and runs the next", func() {
		ns := newNamespace()
		producer := delegationQueue(ns, 1, alice)
		c, err := sessionapi.NewClient(sessionAPI, sessionapi.WithToken(sessionToken(ns)))
		Expect(err).NotTo(HaveOccurred())
		session := c.Session(ns, producer.Name)
		ctx, cancel := context.WithTimeout(suiteCtx, 3*time.Minute)
		defer cancel()
		// No runtime serves the first worker: its run is in flight when
		// the manager goes away.
		serveWorkers(ctx, c, ns, func(turn string) *agentscript.Script {
			if strings.Contains(turn, "HANG") {
				return nil
			}
			return reviewerScript(turn)
		})
		hung, err := session.Delegate(ctx, sessionapi.DelegationRequest{Lane: "review", Text: "review PR 7 HANG"})
		Expect(err).NotTo(HaveOccurred())
		next, err := session.Delegate(ctx, sessionapi.DelegationRequest{Lane: "review", Text: "review PR 8", Callback: ptr.To(false)})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			task := &agentlanev1alpha1.ExternalTask{}
			g.Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: hung.ID}, task)).To(Succeed())
			g.Expect(task.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskRunning))
			// The worker has its first turn: its run is in flight.
			g.Expect(meta.IsStatusConditionTrue(task.Status.Conditions, agentlanev1alpha1.ExternalTaskClaimedCondition)).To(BeTrue())
		}).Should(Succeed())

		By("killing the manager and starting a new one")
		manager.kill()
		manager = startManager()

		var d *sessionapi.Delegation
		Eventually(func(g Gomega) {
			d, err = session.GetDelegation(ctx, hung.ID)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d.Phase).To(Equal("Failed"))
			g.Expect(d.Delivered).To(BeTrue())
		}, time.Minute).Should(Succeed())
		Expect(d.Error).To(HavePrefix("interrupted: "))

		events, err := session.Events(ctx, sessionapi.EventsOptions{})
		Expect(err).NotTo(HaveOccurred())
		defer func() { _ = events.Close() }()
		results, _ := inboxMessages(events, 1)
		Expect(results[0]).To(MatchRegexp(`^from queue:review · task#%s · error · .*\ninterrupted: `, hung.ID))

		By("the next delegation then gets the slot and succeeds, without a callback")
		Eventually(func(g Gomega) {
			d, err = session.GetDelegation(ctx, next.ID)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d.Phase).To(Equal("Succeeded"))
		}, time.Minute).Should(Succeed())
		Expect(d.Answer).To(Equal("reviewed: review PR 8"))
		Expect(d.Delivered).To(BeFalse())
	})

	It("cleans up finished delegations and their worker sessions per the producer's retention", func() {
		ns := newNamespace()
		producer := delegationQueue(ns, 2, alice)
		Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(producer), producer)).To(Succeed())
		producer.Spec.Retention.MaxFinishedTasks = ptr.To[int32](1)
		Expect(k8sClient.Update(suiteCtx, producer)).To(Succeed())
		c, err := sessionapi.NewClient(sessionAPI, sessionapi.WithToken(sessionToken(ns)))
		Expect(err).NotTo(HaveOccurred())
		session := c.Session(ns, producer.Name)
		ctx, cancel := context.WithTimeout(suiteCtx, 3*time.Minute)
		defer cancel()
		serveWorkers(ctx, c, ns, reviewerScript)
		for _, text := range []string{"review PR 4", "review PR 5"} {
			_, err := session.Delegate(ctx, sessionapi.DelegationRequest{Lane: "review", Text: text, Callback: ptr.To(false)})
			Expect(err).NotTo(HaveOccurred())
		}
		By("a command submitted to the Delegate lane is delegated too")
		cmd, err := session.Submit(ctx, sessionapi.SubmitRequest{Type: "review", Lane: "review", Payload: []byte(`{"text":"review PR 6"}`)})
		Expect(err).NotTo(HaveOccurred())
		Expect(cmd.State).To(Equal(sessionapi.StateQueued))
		Expect(cmd.Task).NotTo(BeEmpty())
		Eventually(func(g Gomega) {
			d, err := session.GetDelegation(ctx, cmd.Task)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d.Answer).To(Equal("reviewed: review PR 6"))
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			tasks := &agentlanev1alpha1.ExternalTaskList{}
			g.Expect(k8sClient.List(ctx, tasks, client.InNamespace(ns))).To(Succeed())
			g.Expect(tasks.Items).To(HaveLen(1))
			g.Expect(tasks.Items[0].Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskSucceeded))
			workers := &agentlanev1alpha1.AgentSessionList{}
			g.Expect(k8sClient.List(ctx, workers, client.InNamespace(ns), client.HasLabels{agentlanev1alpha1.DelegationTaskLabel})).To(Succeed())
			g.Expect(workers.Items).To(HaveLen(1))
			g.Expect(workers.Items[0].Labels).To(HaveKeyWithValue(agentlanev1alpha1.DelegationTaskLabel, tasks.Items[0].Name))
		}, time.Minute).Should(Succeed())
	})

	It("keeps delegation inside the caller's namespace and identity", func() {
		nsA, nsB := newNamespace(), newNamespace()
		delegationQueue(nsA, 1, alice)
		delegationQueue(nsB, 1, &agentlanev1alpha1.Identity{TenantID: "tenant-b", Principal: "mallory"})
		tokenB := sessionToken(nsB)
		c, err := sessionapi.NewClient(sessionAPI, sessionapi.WithToken(tokenB))
		Expect(err).NotTo(HaveOccurred())

		By("a tenant of namespace B cannot delegate as a session of namespace A")
		_, err = c.Session(nsA, "producer").Delegate(suiteCtx, sessionapi.DelegationRequest{Lane: "review", Text: "steal"})
		Expect(sessionapi.IsCode(err, sessionapi.CodeForbidden)).To(BeTrue(), "got %v", err)

		By("a task created in B that names A's identity runs with the identity of its producer in B")
		spoof := &agentlanev1alpha1.ExternalTask{
			ObjectMeta: metav1.ObjectMeta{Namespace: nsB, Name: "spoof", Labels: map[string]string{
				agentlanev1alpha1.DelegatedLabel: "true", agentlanev1alpha1.QueueLabel: "q1", agentlanev1alpha1.LaneLabel: "review"}},
			Spec: agentlanev1alpha1.ExternalTaskSpec{
				SessionRef:  &agentlanev1alpha1.AgentSessionReference{Name: "producer"},
				Lane:        "review",
				CommandType: "delegate",
				Payload:     &runtime.RawExtension{Raw: []byte(`{"text":"act as alice"}`)},
				Identity:    &agentlanev1alpha1.Identity{TenantID: "tenant-a", Principal: "alice"},
			},
		}
		Expect(k8sClient.Create(suiteCtx, spoof)).To(Succeed())
		w := &agentlanev1alpha1.AgentSession{}
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(spoof), spoof)).To(Succeed())
			g.Expect(spoof.Status.Worker).NotTo(BeEmpty())
			g.Expect(k8sClient.Get(suiteCtx, types.NamespacedName{Namespace: nsB, Name: spoof.Status.Worker}, w)).To(Succeed())
		}).Should(Succeed())
		Expect(w.Spec.Identity.TenantID).To(Equal("tenant-b"))
		Expect(w.Spec.Identity.Principal).To(Equal("mallory"))
		Expect(w.Spec.QueueRef.Name).To(Equal("q1"))

		By("a task in B that names a producer B does not have fails, creating nothing")
		orphan := spoof.DeepCopy()
		orphan.ObjectMeta = metav1.ObjectMeta{Namespace: nsB, Name: "orphan", Labels: spoof.Labels}
		orphan.Status = agentlanev1alpha1.ExternalTaskStatus{}
		orphan.Spec.SessionRef.Name = "alice-session"
		Expect(k8sClient.Create(suiteCtx, orphan)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(orphan), orphan)).To(Succeed())
			g.Expect(orphan.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskFailed))
		}).Should(Succeed())
		Expect(orphan.Status.Result.Error).To(ContainSubstring("producer session alice-session does not exist"))
		sessions := &agentlanev1alpha1.AgentSessionList{}
		Expect(k8sClient.List(suiteCtx, sessions, client.InNamespace(nsA))).To(Succeed())
		Expect(sessions.Items).To(HaveLen(1), "namespace A has only its producer")
	})
})
