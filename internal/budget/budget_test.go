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

package budget

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// published collects the events a ledger publishes.
type published struct {
	mu  sync.Mutex
	evs []sessionapi.Event
}

func (p *published) publish(_ types.NamespacedName, ev sessionapi.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.evs = append(p.evs, ev)
}

// hits returns "resource/kind" of each BudgetThresholdHit published so far.
func (p *published) hits() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, ev := range p.evs {
		if ev.Type == sessionapi.EventBudgetThresholdHit && ev.Budget != nil {
			out = append(out, ev.Budget.Resource+"/"+ev.Budget.Kind)
		}
	}
	return out
}

func newLedger() (*Ledger, *published, *events.FakeRecorder) {
	p := &published{}
	rec := events.NewFakeRecorder(100)
	return &Ledger{Publish: p.publish, Recorder: rec}, p, rec
}

// budgetSession is an AgentSession with budget b.
func budgetSession(b *agentlanev1alpha1.Budget) *agentlanev1alpha1.AgentSession {
	return &agentlanev1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s1", UID: "uid-1", Generation: 3},
		Spec: agentlanev1alpha1.AgentSessionSpec{
			Budget:   b,
			Identity: &agentlanev1alpha1.Identity{TenantID: "acme", Principal: "agent"},
		},
	}
}

func tokenBudget(soft, hard int64) *agentlanev1alpha1.Budget {
	t := &agentlanev1alpha1.TokenBudget{}
	if soft > 0 {
		t.Soft = ptr.To(soft)
	}
	if hard > 0 {
		t.Hard = ptr.To(hard)
	}
	return &agentlanev1alpha1.Budget{Tokens: t}
}

func record(t *testing.T, l *Ledger, s *agentlanev1alpha1.AgentSession, tokens int64, cost string) agentlanev1alpha1.BudgetUsage {
	t.Helper()
	q := resource.MustParse("0")
	if cost != "" {
		q = resource.MustParse(cost)
	}
	u, err := l.Record(s, tokens, q)
	if err != nil {
		t.Fatalf("Record(%d, %q): %v", tokens, cost, err)
	}
	return u
}

func TestBudgetCovers(t *testing.T) {
	for name, tc := range map[string]struct {
		budget      *agentlanev1alpha1.Budget
		lane, typ   string
		wantCovered bool
	}{
		"no budget":                       {nil, "generate", "llm", false},
		"llm in the generate lane":        {tokenBudget(0, 10), "generate", "llm", true},
		"llm routed elsewhere":            {tokenBudget(0, 10), "models", "llm", true},
		"anything in the generate lane":   {tokenBudget(0, 10), "generate", "summarize", true},
		"a tool":                          {tokenBudget(0, 10), "execute", "bash", false},
		"a tool with checkEveryTool":      {&agentlanev1alpha1.Budget{CheckEveryTool: true}, "execute", "bash", true},
		"a read tool with checkEveryTool": {&agentlanev1alpha1.Budget{CheckEveryTool: true}, "query", "read", true},
	} {
		t.Run(name, func(t *testing.T) {
			if got := Covers(tc.budget, tc.lane, tc.typ); got != tc.wantCovered {
				t.Errorf("Covers = %v, want %v", got, tc.wantCovered)
			}
		})
	}
}

func TestBudgetSoftLimitEmitsOncePerCrossing(t *testing.T) {
	l, pub, rec := newLedger()
	s := budgetSession(tokenBudget(100, 1000))
	ctx := context.Background()

	record(t, l, s, 60, "")
	if d := l.Check(ctx, s, "generate", "llm"); d.Decision != sessionapi.BudgetAllow || d.Reason != agentlanev1alpha1.AgentSessionWithinBudgetReason {
		t.Fatalf("below the soft limit: %+v", d)
	}
	record(t, l, s, 60, "") // 120: crosses 100
	for range 3 {
		record(t, l, s, 50, "")
		if d := l.Check(ctx, s, "generate", "llm"); d.Decision != sessionapi.BudgetSoft || d.Denied() {
			t.Fatalf("above the soft limit: %+v", d)
		}
	}
	if diff := cmp.Diff([]string{"tokens/soft"}, pub.hits()); diff != "" {
		t.Fatalf("BudgetThresholdHit events (-want,+got):\n%s", diff)
	}
	select {
	case ev := <-rec.Events:
		if !strings.HasPrefix(ev, "Warning BudgetThresholdHit tokens consumed 120 reached the soft limit 100") {
			t.Errorf("Kubernetes Event %q", ev)
		}
	default:
		t.Fatal("no Kubernetes Event")
	}
	if len(rec.Events) != 0 {
		t.Errorf("%d more Kubernetes Events", len(rec.Events))
	}
	ev := pub.evs[0]
	want := sessionapi.BudgetThreshold{Resource: "tokens", Kind: "soft", Consumed: "120", Limit: "100",
		Message: "tokens consumed 120 reached the soft limit 100"}
	if diff := cmp.Diff(want, *ev.Budget); diff != "" {
		t.Errorf("event body (-want,+got):\n%s", diff)
	}
	if ev.Labels.TenantID != "acme" {
		t.Errorf("event labels %+v, want the session's identity", ev.Labels)
	}

	// Raising the limit above the consumption (270) re-arms it: the next
	// crossing is a new one.
	s.Spec.Budget.Tokens.Soft = ptr.To[int64](300)
	record(t, l, s, 10, "")
	record(t, l, s, 40, "") // 320
	if diff := cmp.Diff([]string{"tokens/soft", "tokens/soft"}, pub.hits()); diff != "" {
		t.Errorf("after the limit was raised and crossed again (-want,+got):\n%s", diff)
	}
}

func TestBudgetHardLimitDeniesCoveredCommands(t *testing.T) {
	l, pub, _ := newLedger()
	s := budgetSession(tokenBudget(50, 100))
	ctx := context.Background()
	record(t, l, s, 99, "")
	if d := l.Check(ctx, s, "generate", "llm"); d.Denied() {
		t.Fatalf("denied below the hard limit: %+v", d)
	}
	record(t, l, s, 1, "")
	d := l.Check(ctx, s, "generate", "llm")
	want := Decision{Decision: sessionapi.BudgetDeny, Checked: true,
		Reason:   agentlanev1alpha1.AgentSessionHardLimitReason,
		Message:  "tokens consumed 100 reached the hard limit 100",
		Consumed: agentlanev1alpha1.BudgetUsage{TokensConsumed: 100},
		Resource: "tokens", ResourceConsumed: "100", Limit: "100"}
	if diff := cmp.Diff(want, d); diff != "" {
		t.Errorf("llm at the hard limit (-want,+got):\n%s", diff)
	}
	if d := l.Check(ctx, s, "execute", "bash"); d.Denied() || d.Checked {
		t.Errorf("a tool the budget does not cover: %+v", d)
	}
	s.Spec.Budget.CheckEveryTool = true
	if d := l.Check(ctx, s, "execute", "bash"); !d.Denied() {
		t.Errorf("a tool with checkEveryTool: %+v", d)
	}
	if diff := cmp.Diff([]string{"tokens/soft", "tokens/hard"}, pub.hits()); diff != "" {
		t.Errorf("BudgetThresholdHit events (-want,+got):\n%s", diff)
	}
	if got := l.Usage(types.NamespacedName{Namespace: "ns", Name: "s1"}); got.TokensConsumed != 100 {
		t.Errorf("Usage = %+v", got)
	}
}

func TestBudgetCost(t *testing.T) {
	l, pub, _ := newLedger()
	s := budgetSession(&agentlanev1alpha1.Budget{Cost: &agentlanev1alpha1.CostBudget{
		Currency: "EUR", Soft: ptr.To(resource.MustParse("0.75")), Hard: ptr.To(resource.MustParse("1"))}})
	record(t, l, s, 10, "0.5")
	u := record(t, l, s, 10, "0.3")
	if got := ConsumedOf(u); got != (sessionapi.Consumed{Tokens: 20, Cost: "0.8"}) {
		t.Errorf("consumed %+v", got)
	}
	record(t, l, s, 0, "0.2125")
	d := l.Check(context.Background(), s, "generate", "llm")
	if !d.Denied() || d.Message != "cost consumed 1.0125 EUR reached the hard limit 1 EUR" {
		t.Errorf("over the cost limit: %+v", d)
	}
	if diff := cmp.Diff([]string{"cost/soft", "cost/hard"}, pub.hits()); diff != "" {
		t.Errorf("BudgetThresholdHit events (-want,+got):\n%s", diff)
	}
	if _, err := l.Record(s, 0, resource.MustParse("-1")); err == nil {
		t.Error("a negative cost was recorded")
	}
	if _, err := l.Record(s, -1, resource.Quantity{}); err == nil {
		t.Error("negative tokens were recorded")
	}
}

func TestBudgetStartsFromStatus(t *testing.T) {
	l, pub, _ := newLedger()
	s := budgetSession(tokenBudget(100, 1000))
	s.Status.Budget = agentlanev1alpha1.BudgetUsage{TokensConsumed: 500, CostConsumed: ptr.To(resource.MustParse("2.5"))}

	// A restarted manager: the soft crossing was emitted before.
	if d := l.Check(context.Background(), s, "generate", "llm"); d.Decision != sessionapi.BudgetSoft {
		t.Fatalf("check after a restart: %+v", d)
	}
	u := record(t, l, s, 600, "0.5")
	if got := ConsumedOf(u); got != (sessionapi.Consumed{Tokens: 1100, Cost: "3"}) {
		t.Errorf("consumed %+v", got)
	}
	if diff := cmp.Diff([]string{"tokens/hard"}, pub.hits()); diff != "" {
		t.Errorf("BudgetThresholdHit events (-want,+got):\n%s", diff)
	}

	// The session was deleted and created again under the same name.
	again := budgetSession(tokenBudget(100, 1000))
	again.UID = "uid-2"
	if d := l.Check(context.Background(), again, "generate", "llm"); d.Decision != sessionapi.BudgetAllow || d.Consumed.TokensConsumed != 0 {
		t.Errorf("a new session with the old one's name: %+v", d)
	}
}

func TestBudgetApplyStatus(t *testing.T) {
	l, _, _ := newLedger()
	s := budgetSession(tokenBudget(100, 200))
	changes := l.Changes()

	l.ApplyStatus(s)
	cond := meta.FindStatusCondition(s.Status.Conditions, agentlanev1alpha1.AgentSessionBudgetExhaustedCondition)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != agentlanev1alpha1.AgentSessionWithinBudgetReason || cond.ObservedGeneration != 3 {
		t.Fatalf("within budget: %+v", cond)
	}

	for _, step := range []struct {
		tokens     int64
		cost       string
		wantStatus metav1.ConditionStatus
		wantReason string
	}{
		{150, "0.25", metav1.ConditionFalse, agentlanev1alpha1.AgentSessionSoftLimitReason},
		{60, "", metav1.ConditionTrue, agentlanev1alpha1.AgentSessionHardLimitReason},
	} {
		record(t, l, s, step.tokens, step.cost)
		select {
		case ev := <-changes:
			if ev.Object.GetName() != "s1" || ev.Object.GetNamespace() != "ns" {
				t.Errorf("announced %s/%s", ev.Object.GetNamespace(), ev.Object.GetName())
			}
		default:
			t.Errorf("after recording %d tokens: no change announced", step.tokens)
		}
		l.ApplyStatus(s)
		cond := meta.FindStatusCondition(s.Status.Conditions, agentlanev1alpha1.AgentSessionBudgetExhaustedCondition)
		if cond.Status != step.wantStatus || cond.Reason != step.wantReason {
			t.Errorf("after recording %d tokens: condition %+v, want %s %s", step.tokens, cond, step.wantStatus, step.wantReason)
		}
	}
	if s.Status.Budget.TokensConsumed != 210 || s.Status.Budget.CostConsumed == nil || s.Status.Budget.CostConsumed.Cmp(resource.MustParse("0.25")) != 0 {
		t.Errorf("status.budget = %+v", s.Status.Budget)
	}

	s.Spec.Budget = nil
	l.ApplyStatus(s)
	if meta.FindStatusCondition(s.Status.Conditions, agentlanev1alpha1.AgentSessionBudgetExhaustedCondition) != nil {
		t.Error("a session without a budget keeps a BudgetExhausted condition")
	}
	if s.Status.Budget.TokensConsumed != 210 {
		t.Errorf("status.budget = %+v after the budget was removed", s.Status.Budget)
	}
}

// guard is a budget guard answering what answer says, and remembering what
// it was asked.
type guard struct {
	mu     sync.Mutex
	answer string // a JSON body, or "" for a 500
	delay  time.Duration
	asked  []GuardRequest
}

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req GuardRequest
	_ = json.NewDecoder(r.Body).Decode(&req)
	g.mu.Lock()
	g.asked = append(g.asked, req)
	answer, delay := g.answer, g.delay
	g.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	if answer == "" {
		http.Error(w, "guard broke", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(answer))
}

func (g *guard) set(answer string, delay time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.answer, g.delay = answer, delay
}

func TestBudgetGuard(t *testing.T) {
	g := &guard{}
	srv := httptest.NewServer(g)
	defer srv.Close()
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()

	// A guard that answers has 5s to do so, however loaded the machine;
	// one too slow is given 200ms.
	withGuard := func(url string, policy agentlanev1alpha1.GuardFailurePolicy, slow bool) *agentlanev1alpha1.AgentSession {
		b := tokenBudget(0, 1000)
		timeout := 5 * time.Second
		if slow {
			timeout = 200 * time.Millisecond
		}
		b.Guard = &agentlanev1alpha1.BudgetGuard{URL: url, FailurePolicy: policy,
			Timeout: &metav1.Duration{Duration: timeout}}
		return budgetSession(b)
	}
	for name, tc := range map[string]struct {
		answer       string
		delay        time.Duration
		url          string // the test guard's when empty
		policy       agentlanev1alpha1.GuardFailurePolicy
		wantDecision string
		wantReason   string
		wantMessage  string
		wantHits     []string
	}{
		"allow": {answer: `{"decision":"allow"}`, wantDecision: "allow", wantReason: "WithinBudget"},
		"soft": {answer: `{"decision":"soft","message":"80% of the monthly quota"}`, wantDecision: "soft",
			wantReason: "SoftLimitReached", wantMessage: "the budget guard answered soft: 80% of the monthly quota",
			wantHits: []string{"guard/soft"}},
		"deny": {answer: `{"decision":"deny","message":"quota exhausted"}`, wantDecision: "deny",
			wantReason: "GuardDenied", wantMessage: "the budget guard denied: quota exhausted", wantHits: []string{"guard/hard"}},
		"down, Ignore": {url: downURL, policy: agentlanev1alpha1.GuardFailureIgnore, wantDecision: "allow", wantReason: "WithinBudget"},
		"down, Fail": {url: downURL, policy: agentlanev1alpha1.GuardFailureFail, wantDecision: "deny",
			wantReason: "GuardDenied", wantMessage: "the budget guard failed and failurePolicy is Fail", wantHits: []string{"guard/hard"}},
		"500, Fail": {answer: "", policy: agentlanev1alpha1.GuardFailureFail, wantDecision: "deny",
			wantReason: "GuardDenied", wantMessage: "500 Internal Server Error: guard broke", wantHits: []string{"guard/hard"}},
		"too slow, Fail": {answer: `{"decision":"allow"}`, delay: 2 * time.Second, policy: agentlanev1alpha1.GuardFailureFail,
			wantDecision: "deny", wantReason: "GuardDenied", wantMessage: "no answer within 200ms", wantHits: []string{"guard/hard"}},
		"too slow, Ignore": {answer: `{"decision":"deny"}`, delay: 2 * time.Second, policy: agentlanev1alpha1.GuardFailureIgnore,
			wantDecision: "allow", wantReason: "WithinBudget"},
		"unknown decision, Fail": {answer: `{"decision":"maybe"}`, policy: agentlanev1alpha1.GuardFailureFail,
			wantDecision: "deny", wantReason: "GuardDenied", wantMessage: `decision "maybe"`, wantHits: []string{"guard/hard"}},
	} {
		t.Run(name, func(t *testing.T) {
			g.set(tc.answer, tc.delay)
			url := tc.url
			if url == "" {
				url = srv.URL
			}
			l, pub, _ := newLedger()
			s := withGuard(url, tc.policy, tc.delay > 0)
			record(t, l, s, 10, "0.5")
			var d Decision
			for range 2 { // one event per crossing, however many checks
				d = l.Check(context.Background(), s, "generate", "llm")
			}
			if d.Decision != tc.wantDecision || d.Reason != tc.wantReason || !strings.Contains(d.Message, tc.wantMessage) {
				t.Errorf("decision %+v, want %s %s %q", d, tc.wantDecision, tc.wantReason, tc.wantMessage)
			}
			if diff := cmp.Diff(tc.wantHits, pub.hits()); diff != "" {
				t.Errorf("BudgetThresholdHit events (-want,+got):\n%s", diff)
			}
		})
	}

	t.Run("the guard is told who asks and what was consumed", func(t *testing.T) {
		g.mu.Lock()
		g.asked, g.answer, g.delay = nil, `{"decision":"allow"}`, 0
		g.mu.Unlock()
		l, _, _ := newLedger()
		s := withGuard(srv.URL, agentlanev1alpha1.GuardFailureIgnore, false)
		record(t, l, s, 42, "0.125")
		l.Check(context.Background(), s, "generate", "llm")
		l.Check(context.Background(), s, "execute", "bash") // not covered: the guard is not asked
		want := []GuardRequest{{Namespace: "ns", Session: "s1", Lane: "generate", CommandType: "llm",
			Identity: sessionapi.Identity{TenantID: "acme", Principal: "agent"},
			Consumed: sessionapi.Consumed{Tokens: 42, Cost: "0.125"}}}
		g.mu.Lock()
		defer g.mu.Unlock()
		if diff := cmp.Diff(want, g.asked); diff != "" {
			t.Errorf("guard requests (-want,+got):\n%s", diff)
		}
	})

	t.Run("the guard is not asked once a hard limit is reached", func(t *testing.T) {
		g.mu.Lock()
		g.asked, g.answer, g.delay = nil, `{"decision":"allow"}`, 0
		g.mu.Unlock()
		l, _, _ := newLedger()
		s := withGuard(srv.URL, agentlanev1alpha1.GuardFailureIgnore, false)
		record(t, l, s, 1000, "")
		if d := l.Check(context.Background(), s, "generate", "llm"); d.Reason != agentlanev1alpha1.AgentSessionHardLimitReason {
			t.Errorf("decision %+v", d)
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		if len(g.asked) != 0 {
			t.Errorf("the guard was asked %d times", len(g.asked))
		}
	})

	t.Run("a guard that allows again re-arms its deny", func(t *testing.T) {
		l, pub, _ := newLedger()
		s := withGuard(srv.URL, agentlanev1alpha1.GuardFailureIgnore, false)
		for _, answer := range []string{"deny", "deny", "allow", "deny"} {
			g.set(`{"decision":"`+answer+`"}`, 0)
			if d := l.Check(context.Background(), s, "generate", "llm"); d.Decision != answer {
				t.Errorf("guard said %s, decision %+v", answer, d)
			}
		}
		if diff := cmp.Diff([]string{"guard/hard", "guard/hard"}, pub.hits()); diff != "" {
			t.Errorf("BudgetThresholdHit events (-want,+got):\n%s", diff)
		}
	})
}

func TestBudgetEstimatedTokens(t *testing.T) {
	l, pub, _ := newLedger()
	s := budgetSession(tokenBudget(50, 100))
	record(t, l, s, 40, "")
	ctx := context.Background()
	for _, tc := range []struct {
		estimated                               int64
		decision, resource, consumedOf, limitOf string
	}{
		{0, "allow", "", "", ""},
		{9, "allow", "", "", ""},
		{10, "soft", "tokens", "40", "50"},
		{60, "soft", "tokens", "40", "50"},
		{61, "deny", "tokens", "40", "100"},
	} {
		d := l.CheckEstimate(ctx, s, "generate", "llm", tc.estimated)
		if d.Decision != tc.decision || d.Resource != tc.resource || d.ResourceConsumed != tc.consumedOf || d.Limit != tc.limitOf {
			t.Errorf("estimate %d: decision %+v, want %s %s %s/%s", tc.estimated, d, tc.decision, tc.resource, tc.consumedOf, tc.limitOf)
		}
		if d.Reason != agentlanev1alpha1.AgentSessionWithinBudgetReason {
			t.Errorf("estimate %d: reason %s, want the condition's WithinBudget", tc.estimated, d.Reason)
		}
	}
	if d := l.CheckEstimate(ctx, s, "execute", "bash", 1000); d.Decision != "allow" || d.Checked {
		t.Errorf("an uncovered command with an estimate: %+v", d)
	}
	if hits := pub.hits(); len(hits) != 0 {
		t.Errorf("an estimate emitted %v", hits)
	}
	if st := l.State(s); st.Denied() || st.Decision != "allow" {
		t.Errorf("an estimate changed the session's state: %+v", st)
	}
}

func TestBudgetDecisionNamesTheLimit(t *testing.T) {
	l, _, _ := newLedger()
	s := budgetSession(tokenBudget(50, 100))
	record(t, l, s, 60, "")
	if d := l.Check(context.Background(), s, "generate", "llm"); d.Decision != "soft" ||
		d.Resource != "tokens" || d.ResourceConsumed != "60" || d.Limit != "50" {
		t.Errorf("soft decision %+v", d)
	}
	record(t, l, s, 40, "")
	if d := l.Check(context.Background(), s, "generate", "llm"); d.Decision != "deny" ||
		d.Resource != "tokens" || d.ResourceConsumed != "100" || d.Limit != "100" {
		t.Errorf("deny decision %+v", d)
	}
	c := budgetSession(&agentlanev1alpha1.Budget{Cost: &agentlanev1alpha1.CostBudget{Hard: ptr.To(resource.MustParse("2"))}})
	record(t, l, c, 0, "2.5")
	if d := l.Check(context.Background(), c, "generate", "llm"); d.Resource != "cost" || d.ResourceConsumed != "2.5" || d.Limit != "2" {
		t.Errorf("cost deny decision %+v", d)
	}
}

func TestBudgetGuardSeedShapes(t *testing.T) {
	g := &guard{}
	srv := httptest.NewServer(g)
	defer srv.Close()
	b := tokenBudget(0, 1000)
	b.Guard = &agentlanev1alpha1.BudgetGuard{URL: srv.URL}
	s := budgetSession(b)

	t.Run("deny with resource and reason", func(t *testing.T) {
		l, pub, _ := newLedger()
		g.set(`{"decision":"deny","resource":"tokens","reason":"monthly cap reached"}`, 0)
		d := l.Check(context.Background(), s, "generate", "llm")
		if !d.Denied() || d.Resource != "tokens" || !strings.Contains(d.Message, "monthly cap reached") {
			t.Errorf("decision %+v", d)
		}
		if diff := cmp.Diff([]string{"tokens/hard"}, pub.hits()); diff != "" {
			t.Errorf("BudgetThresholdHit events (-want,+got):\n%s", diff)
		}
	})
	t.Run("soft with numeric consumed and limit", func(t *testing.T) {
		l, pub, _ := newLedger()
		g.set(`{"decision":"soft","resource":"requests","consumed":80,"limit":100,"message":"80%"}`, 0)
		d := l.Check(context.Background(), s, "generate", "llm")
		if d.Decision != "soft" || d.Resource != "requests" || d.ResourceConsumed != "80" || d.Limit != "100" {
			t.Errorf("decision %+v", d)
		}
		pub.mu.Lock()
		defer pub.mu.Unlock()
		if len(pub.evs) != 1 || pub.evs[0].Budget == nil || *pub.evs[0].Budget != (sessionapi.BudgetThreshold{
			Resource: "requests", Kind: "soft", Consumed: "80", Limit: "100", Message: "the budget guard answered soft: 80%"}) {
			t.Errorf("events %+v", pub.evs)
		}
	})
	t.Run("the estimate reaches the guard and recorded usage is told after", func(t *testing.T) {
		g.mu.Lock()
		g.asked, g.answer, g.delay = nil, `{"decision":"allow"}`, 0
		g.mu.Unlock()
		l, _, _ := newLedger()
		l.CheckEstimate(context.Background(), s, "generate", "llm", 250)
		record(t, l, s, 300, "0.5")
		l.TellGuard(context.Background(), s, sessionapi.Usage{InputTokens: 100, OutputTokens: 200, Cost: "0.5"})
		id := sessionapi.Identity{TenantID: "acme", Principal: "agent"}
		want := []GuardRequest{
			{Namespace: "ns", Session: "s1", Lane: "generate", CommandType: "llm", EstimatedTokens: 250,
				Identity: id, Consumed: sessionapi.Consumed{Tokens: 0, Cost: "0"}},
			{Phase: PhaseRecord, Namespace: "ns", Session: "s1", Identity: id,
				Usage:    &sessionapi.Usage{InputTokens: 100, OutputTokens: 200, Cost: "0.5"},
				Consumed: sessionapi.Consumed{Tokens: 300, Cost: "0.5"}},
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		if diff := cmp.Diff(want, g.asked); diff != "" {
			t.Errorf("guard requests (-want,+got):\n%s", diff)
		}
	})
	t.Run("a guard that fails on record changes nothing", func(t *testing.T) {
		l, pub, _ := newLedger()
		g.set("", 0) // 500
		l.TellGuard(context.Background(), s, sessionapi.Usage{InputTokens: 1})
		if st := l.State(s); st.Denied() || len(pub.hits()) != 0 {
			t.Errorf("state %+v, hits %v", st, pub.hits())
		}
	})
}
