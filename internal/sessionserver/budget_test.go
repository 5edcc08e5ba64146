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

package sessionserver

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/agentscript"
	"github.com/agentlane/agentlane/internal/budget"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

var _ = Describe("Budgets", func() {
	var a tenant

	BeforeEach(func() {
		a = newTenant()
		a.newQueue(internalLanes())
	})

	// budgetSession creates an AgentSession with budget b on queue "q" and
	// waits until it is Active.
	budgetSession := func(name string, b *agentlanev1alpha1.Budget) *agentlanev1alpha1.AgentSession {
		GinkgoHelper()
		s := &agentlanev1alpha1.AgentSession{
			ObjectMeta: metav1.ObjectMeta{Namespace: a.ns, Name: name},
			Spec: agentlanev1alpha1.AgentSessionSpec{
				QueueRef: agentlanev1alpha1.LaneQueueReference{Name: "q"},
				Identity: &agentlanev1alpha1.Identity{TenantID: a.ns, Principal: "agent"},
				Budget:   b,
			},
		}
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
			g.Expect(s.Status.Phase).To(Equal(agentlanev1alpha1.SessionActive))
		}).Should(Succeed())
		return s
	}
	tokens := func(soft, hard int64) *agentlanev1alpha1.Budget {
		t := &agentlanev1alpha1.TokenBudget{}
		if soft > 0 {
			t.Soft = ptr.To(soft)
		}
		if hard > 0 {
			t.Hard = ptr.To(hard)
		}
		return &agentlanev1alpha1.Budget{Tokens: t}
	}
	// llm runs an llm command that reports usage and returns it final.
	llm := func(s *sessionapi.SessionClient, id string, usage *sessionapi.Usage) *sessionapi.Command {
		GinkgoHelper()
		cmd, err := s.RunWithUsage(ctx, sessionapi.SubmitRequest{ID: id, Type: "llm"},
			func(context.Context, *sessionapi.Command) (sessionapi.Result, *sessionapi.Usage) {
				return sessionapi.Result{Success: true, Output: json.RawMessage(`{"text":"ok"}`)}, usage
			})
		Expect(err).NotTo(HaveOccurred())
		Expect(cmd.Final()).To(BeTrue())
		return cmd
	}
	// thresholdEvents returns the BudgetThresholdHit Kubernetes Events of
	// the session.
	thresholdEvents := func(g Gomega, name string) []string {
		list := &eventsv1.EventList{}
		g.Expect(k8sClient.List(ctx, list, client.InNamespace(a.ns))).To(Succeed())
		var notes []string
		for _, e := range list.Items {
			if e.Regarding.Kind == "AgentSession" && e.Regarding.Name == name && e.Reason == budget.ThresholdHitReason {
				Expect(e.Type).To(Equal("Warning"))
				notes = append(notes, e.Note)
			}
		}
		return notes
	}

	It("soft limit: emits exactly one BudgetThresholdHit per crossing, on the stream and as a Kubernetes Event, and lets commands run", func() {
		budgetSession("s1", tokens(100, 100000))
		s := a.session("s1")
		events := follow(s, sessionapi.EventsOptions{})

		consumed, err := s.RecordUsage(ctx, sessionapi.Usage{InputTokens: 50, OutputTokens: 10, Cost: "0.25"})
		Expect(err).NotTo(HaveOccurred())
		Expect(*consumed).To(Equal(sessionapi.Consumed{Tokens: 60, Cost: "0.25"}))

		// The scripted runtime's model call reports its usage with its
		// result: 60 + 40 + 10 crosses the soft limit of 100.
		rt := &agentscript.Runtime{Session: s}
		turn := rt.RunTurn(ctx, agentscript.Turn{Prompt: "plan", LLM: &agentscript.LLMCall{InputTokens: 40, OutputTokens: 10}}, agentscript.NewID())
		Expect(turn.Commands).To(HaveLen(1))
		Expect(turn.Commands[0].State).To(Equal(sessionapi.StateSucceeded))

		hit := events.next(sessionapi.EventBudgetThresholdHit)
		Expect(*hit.Budget).To(Equal(sessionapi.BudgetThreshold{Resource: "tokens", Kind: "soft", Consumed: "110", Limit: "100",
			Message: "tokens consumed 110 reached the soft limit 100"}))
		Expect(hit.Labels.TenantID).To(Equal(a.ns))

		// Further usage and commands stay above the limit: no new crossing.
		for i := range 3 {
			_, err := s.RecordUsage(ctx, sessionapi.Usage{OutputTokens: 30})
			Expect(err).NotTo(HaveOccurred())
			cmd := llm(s, "after-soft-"+string(rune('a'+i)), &sessionapi.Usage{InputTokens: 5})
			Expect(cmd.State).To(Equal(sessionapi.StateSucceeded), "a soft limit lets the command run")
		}
		check, err := s.CheckBudget(ctx, sessionapi.BudgetCheckRequest{CommandType: "llm"})
		Expect(err).NotTo(HaveOccurred())
		Expect(check.Decision).To(Equal(sessionapi.BudgetSoft))
		Expect(check.Checked).To(BeTrue())
		Expect(check.Reason).To(Equal(agentlanev1alpha1.AgentSessionSoftLimitReason))
		Expect(check.Consumed.Tokens).To(Equal(int64(110 + 3*30 + 3*5)))
		events.quiet(time.Second, sessionapi.EventBudgetThresholdHit)

		Eventually(func(g Gomega) []string { return thresholdEvents(g, "s1") }).Should(
			ConsistOf("tokens consumed 110 reached the soft limit 100 (soft tokens)"))
		Consistently(func(g Gomega) []string { return thresholdEvents(g, "s1") }, 500*time.Millisecond).Should(HaveLen(1))

		st, err := s.Budget(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(st.Consumed).To(Equal(sessionapi.Consumed{Tokens: 215, Cost: "0.25"}))
		Expect(st.Tokens).To(Equal(&sessionapi.TokenLimits{Soft: ptr.To[int64](100), Hard: ptr.To[int64](100000)}))
		Expect(st.Exhausted).To(BeFalse())
		Expect(st.Reason).To(Equal(agentlanev1alpha1.AgentSessionSoftLimitReason))
	})

	It("hard limit: the next llm command fails as BudgetExhausted without a retry, tools still run, and an allowed command runs again", func() {
		budgetSession("s1", tokens(0, 1000))
		s := a.session("s1")
		events := follow(s, sessionapi.EventsOptions{})

		first := llm(s, "llm-1", &sessionapi.Usage{InputTokens: 700, OutputTokens: 400})
		Expect(first.State).To(Equal(sessionapi.StateSucceeded), "checked before it ran, at 0 tokens")
		hard := events.next(sessionapi.EventBudgetThresholdHit)
		Expect(hard.Budget.Kind).To(Equal("hard"))
		Expect(hard.Budget.Consumed).To(Equal("1100"))

		// The generate lane retries once, but a denied budget is not retried.
		denied, err := s.Submit(ctx, sessionapi.SubmitRequest{ID: "llm-2", Type: "llm"})
		Expect(err).NotTo(HaveOccurred())
		Expect(denied.State).To(Equal(sessionapi.StateFailed))
		Expect(denied.Attempt).To(Equal(1))
		Expect(denied.Grant).To(BeNil(), "the runtime was never offered the attempt")
		Expect(denied.Error).To(Equal("BudgetExhausted: tokens consumed 1100 reached the hard limit 1000"))
		ev := events.next("retry", "failed", "dead_lettered")
		for ev.CommandID != "llm-2" {
			ev = events.next("retry", "failed", "dead_lettered")
		}
		Expect(ev.Type).To(Equal("failed"))
		Expect(ev.Terminal).To(BeTrue())
		letters, err := s.DeadLetters(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(letters).To(BeEmpty(), "a denied command fails for good without a dead letter")

		// An External command the budget covers is refused at submission.
		_, err = s.Submit(ctx, sessionapi.SubmitRequest{ID: "remote-llm", Type: "llm", Lane: "remote", Payload: json.RawMessage(`{}`)})
		Expect(sessionapi.IsCode(err, sessionapi.CodeBudgetExhausted)).To(BeTrue(), "%v", err)
		err = k8sClient.Get(ctx, types.NamespacedName{Namespace: a.ns, Name: "remote-llm"}, &agentlanev1alpha1.ExternalTask{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no ExternalTask for a refused command: %v", err)

		// The session stays usable: tools are not covered.
		tool, err := s.Run(ctx, sessionapi.SubmitRequest{ID: "bash-1", Type: "bash"}, func(context.Context, *sessionapi.Command) sessionapi.Result {
			return sessionapi.Result{Success: true}
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(tool.State).To(Equal(sessionapi.StateSucceeded))

		st, err := s.Budget(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(st.Exhausted).To(BeTrue())
		Expect(st.Reason).To(Equal(agentlanev1alpha1.AgentSessionHardLimitReason))
		Expect(st.Consumed.Tokens).To(Equal(int64(1100)))

		// Raising the limit lets the next llm command run.
		// The controller writes the session too: update it from a fresh read
		// until no write slips in between.
		Eventually(func(g Gomega) {
			sess := &agentlanev1alpha1.AgentSession{}
			g.Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: a.ns, Name: "s1"}, sess)).To(Succeed())
			sess.Spec.Budget.Tokens.Hard = ptr.To[int64](5000)
			g.Expect(k8sClient.Update(ctx, sess)).To(Succeed())
		}).Should(Succeed())
		n := 0
		Eventually(func(g Gomega) {
			n++
			cmd, err := s.Submit(ctx, sessionapi.SubmitRequest{ID: "llm-after-raise-" + string(rune('a'+n)), Type: "llm"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cmd.Grant).NotTo(BeNil(), "state %s: %s", cmd.State, cmd.Error)
		}).Should(Succeed())
	})

	// Enable once AgentSessionReconciler calls Schedulers.Budgets.ApplyStatus
	// (and watches Schedulers.Budgets.Changes()).
	It("hard limit: status.budget shows the total and BudgetExhausted is True", func() {
		budgetSession("s1", tokens(0, 1000))
		s := a.session("s1")
		llm(s, "llm-1", &sessionapi.Usage{InputTokens: 700, OutputTokens: 400})
		Eventually(func(g Gomega) {
			sess := &agentlanev1alpha1.AgentSession{}
			g.Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: a.ns, Name: "s1"}, sess)).To(Succeed())
			g.Expect(sess.Status.Budget.TokensConsumed).To(Equal(int64(1100)))
			cond := meta.FindStatusCondition(sess.Status.Conditions, agentlanev1alpha1.AgentSessionBudgetExhaustedCondition)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(cond.Reason).To(Equal(agentlanev1alpha1.AgentSessionHardLimitReason))
		}).Should(Succeed())
	})

	It("records the usage of failed reports and refuses bad usage", func() {
		budgetSession("s1", &agentlanev1alpha1.Budget{Cost: &agentlanev1alpha1.CostBudget{Currency: "EUR", Hard: ptr.To(resource.MustParse("10"))}})
		s := a.session("s1")
		cmd, err := s.Submit(ctx, sessionapi.SubmitRequest{ID: "llm-1", Type: "llm"})
		Expect(err).NotTo(HaveOccurred())
		_, err = s.Report(ctx, "llm-1", sessionapi.ReportRequest{Attempt: cmd.Grant.Attempt, Usage: &sessionapi.Usage{Cost: "1e3"}})
		Expect(sessionapi.IsCode(err, sessionapi.CodeInvalidRequest)).To(BeTrue(), "%v", err)
		_, err = s.Report(ctx, "llm-1", sessionapi.ReportRequest{Attempt: cmd.Grant.Attempt,
			Result: sessionapi.Result{Error: "provider overloaded"}, Usage: &sessionapi.Usage{InputTokens: 900, Cost: "0.0125"}})
		Expect(err).NotTo(HaveOccurred())
		_, err = s.RecordUsage(ctx, sessionapi.Usage{OutputTokens: -1})
		Expect(sessionapi.IsCode(err, sessionapi.CodeInvalidRequest)).To(BeTrue(), "%v", err)

		st, err := s.Budget(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(st.Consumed).To(Equal(sessionapi.Consumed{Tokens: 900, Cost: "0.0125"}))
		Expect(st.Cost).To(Equal(&sessionapi.CostLimits{Currency: "EUR", Hard: "10"}))
		check, err := s.CheckBudget(ctx, sessionapi.BudgetCheckRequest{CommandType: "bash"})
		Expect(err).NotTo(HaveOccurred())
		Expect(check.Checked).To(BeFalse(), "tools are not covered without checkEveryTool")
		_, err = s.CheckBudget(ctx, sessionapi.BudgetCheckRequest{Lane: "nope"})
		Expect(sessionapi.IsCode(err, sessionapi.CodeUnknownLane)).To(BeTrue(), "%v", err)
	})

	Describe("the HTTP guard", func() {
		// guard answers what answer holds and remembers who asked.
		type guard struct {
			mu     sync.Mutex
			answer string
			asked  []budget.GuardRequest
		}
		var (
			g   *guard
			srv *httptest.Server
		)
		BeforeEach(func() {
			g = &guard{answer: `{"decision":"allow"}`}
			srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var req budget.GuardRequest
				_ = json.NewDecoder(r.Body).Decode(&req)
				g.mu.Lock()
				g.asked = append(g.asked, req)
				answer := g.answer
				g.mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(answer))
			}))
			DeferCleanup(srv.Close)
		})
		answer := func(body string) {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.answer = body
		}
		withGuard := func(url string, policy agentlanev1alpha1.GuardFailurePolicy) *agentlanev1alpha1.Budget {
			return &agentlanev1alpha1.Budget{Guard: &agentlanev1alpha1.BudgetGuard{URL: url, FailurePolicy: policy,
				Timeout: &metav1.Duration{Duration: time.Second}}}
		}
		// downURL is the address of a guard that is not there.
		downURL := func() string {
			GinkgoHelper()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			Expect(err).NotTo(HaveOccurred())
			url := "http://" + ln.Addr().String() + "/check"
			Expect(ln.Close()).To(Succeed())
			return url
		}

		It("deny fails the command as BudgetExhausted, and the next allowed command runs", func() {
			budgetSession("s1", withGuard(srv.URL, agentlanev1alpha1.GuardFailureIgnore))
			s := a.session("s1")
			events := follow(s, sessionapi.EventsOptions{})

			answer(`{"decision":"deny","message":"the tenant's monthly quota is spent"}`)
			cmd, err := s.Submit(ctx, sessionapi.SubmitRequest{ID: "llm-1", Type: "llm"})
			Expect(err).NotTo(HaveOccurred())
			Expect(cmd.State).To(Equal(sessionapi.StateFailed))
			Expect(cmd.Attempt).To(Equal(1))
			Expect(cmd.Error).To(Equal("BudgetExhausted: the budget guard denied: the tenant's monthly quota is spent"))
			hit := events.next(sessionapi.EventBudgetThresholdHit)
			Expect(hit.Budget.Resource).To(Equal("guard"))
			Expect(hit.Budget.Kind).To(Equal("hard"))
			st, err := s.Budget(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(st.Reason).To(Equal(agentlanev1alpha1.AgentSessionGuardDeniedReason))

			answer(`{"decision":"allow"}`)
			cmd, err = s.Submit(ctx, sessionapi.SubmitRequest{ID: "llm-2", Type: "llm"})
			Expect(err).NotTo(HaveOccurred())
			Expect(cmd.Grant).NotTo(BeNil(), "state %s: %s", cmd.State, cmd.Error)

			g.mu.Lock()
			defer g.mu.Unlock()
			Expect(g.asked).To(HaveLen(2), "a tool is not checked; each llm attempt is")
			Expect(g.asked[0]).To(Equal(budget.GuardRequest{Namespace: a.ns, Session: "s1", Lane: "generate", CommandType: "llm",
				Identity: sessionapi.Identity{TenantID: a.ns, Principal: "agent"}, Consumed: sessionapi.Consumed{Tokens: 0, Cost: "0"}}))
		})

		It("the seed's guard: estimatedTokens on the check, resource, consumed and limit on the answer, recorded usage told after", func() {
			b := withGuard(srv.URL, agentlanev1alpha1.GuardFailureIgnore)
			b.Tokens = &agentlanev1alpha1.TokenBudget{Hard: ptr.To[int64](1000)}
			budgetSession("s1", b)
			s := a.session("s1")

			answer(`{"decision":"soft","resource":"requests","consumed":80,"limit":100}`)
			check, err := s.CheckBudget(ctx, sessionapi.BudgetCheckRequest{CommandType: "llm", EstimatedTokens: 300})
			Expect(err).NotTo(HaveOccurred())
			Expect(check.Decision).To(Equal(sessionapi.BudgetSoft))
			Expect([]string{check.Resource, check.ResourceConsumed, check.Limit}).To(Equal([]string{"requests", "80", "100"}))

			consumed, err := s.RecordUsage(ctx, sessionapi.Usage{InputTokens: 600, OutputTokens: 100, Cost: "0.5"})
			Expect(err).NotTo(HaveOccurred())
			Expect(consumed.Tokens).To(Equal(int64(700)))

			answer(`{"decision":"allow"}`)
			check, err = s.CheckBudget(ctx, sessionapi.BudgetCheckRequest{CommandType: "llm", EstimatedTokens: 301})
			Expect(err).NotTo(HaveOccurred())
			Expect(check.Decision).To(Equal(sessionapi.BudgetDeny), "700 consumed and 301 estimated overrun the hard limit 1000")
			Expect([]string{check.Resource, check.ResourceConsumed, check.Limit}).To(Equal([]string{"tokens", "700", "1000"}))
			Expect(check.Reason).To(Equal(agentlanev1alpha1.AgentSessionWithinBudgetReason), "an estimate consumes nothing")

			_, err = s.CheckBudget(ctx, sessionapi.BudgetCheckRequest{CommandType: "llm", EstimatedTokens: -1})
			Expect(sessionapi.IsCode(err, sessionapi.CodeInvalidRequest)).To(BeTrue(), "%v", err)

			id := sessionapi.Identity{TenantID: a.ns, Principal: "agent"}
			g.mu.Lock()
			defer g.mu.Unlock()
			Expect(g.asked).To(Equal([]budget.GuardRequest{
				{Namespace: a.ns, Session: "s1", Lane: "generate", CommandType: "llm", EstimatedTokens: 300,
					Identity: id, Consumed: sessionapi.Consumed{Tokens: 0, Cost: "0"}},
				{Phase: budget.PhaseRecord, Namespace: a.ns, Session: "s1", Identity: id,
					Usage:    &sessionapi.Usage{InputTokens: 600, OutputTokens: 100, Cost: "0.5"},
					Consumed: sessionapi.Consumed{Tokens: 700, Cost: "0.5"}},
				{Namespace: a.ns, Session: "s1", Lane: "generate", CommandType: "llm", EstimatedTokens: 301,
					Identity: id, Consumed: sessionapi.Consumed{Tokens: 700, Cost: "0.5"}},
			}))
		})

		It("when the guard is down, failurePolicy Fail denies and Ignore allows", func() {
			down := downURL()
			budgetSession("fail", withGuard(down, agentlanev1alpha1.GuardFailureFail))
			budgetSession("ignore", withGuard(down, agentlanev1alpha1.GuardFailureIgnore))

			cmd, err := a.session("fail").Submit(ctx, sessionapi.SubmitRequest{ID: "llm-1", Type: "llm"})
			Expect(err).NotTo(HaveOccurred())
			Expect(cmd.State).To(Equal(sessionapi.StateFailed))
			Expect(cmd.Attempt).To(Equal(1))
			Expect(cmd.Error).To(HavePrefix("BudgetExhausted: the budget guard failed and failurePolicy is Fail: "))

			cmd, err = a.session("ignore").Submit(ctx, sessionapi.SubmitRequest{ID: "llm-1", Type: "llm"})
			Expect(err).NotTo(HaveOccurred())
			Expect(cmd.Grant).NotTo(BeNil(), "state %s: %s", cmd.State, cmd.Error)
		})
	})
})
