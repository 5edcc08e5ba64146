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

package delegation

import (
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

func TestIsDelegated(t *testing.T) {
	task := func(commandType string, labelled bool) *agentlanev1alpha1.ExternalTask {
		xt := &agentlanev1alpha1.ExternalTask{Spec: agentlanev1alpha1.ExternalTaskSpec{CommandType: agentlanev1alpha1.CommandType(commandType)}}
		if labelled {
			xt.Labels = map[string]string{agentlanev1alpha1.DelegatedLabel: "true"}
		}
		return xt
	}
	cases := map[string]struct {
		task *agentlanev1alpha1.ExternalTask
		want bool
	}{
		"a delegation":                          {task: task(CommandType, true), want: true},
		"a worker-pool task labelled delegated": {task: task("bash", true), want: false},
		"a delegate command without the label":  {task: task(CommandType, false), want: false},
		"a worker-pool task without the label":  {task: task("read", false), want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := IsDelegated(tc.task); got != tc.want {
				t.Errorf("IsDelegated() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDepth(t *testing.T) {
	producerRef := metav1.OwnerReference{APIVersion: agentlanev1alpha1.GroupVersion.String(), Kind: "AgentSession",
		Name: "lead", UID: "u1", Controller: ptr.To(true)}
	session := func(labelled bool, depth *string, controlled bool) *agentlanev1alpha1.AgentSession {
		s := &agentlanev1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: "s"}}
		if labelled {
			s.Labels = map[string]string{agentlanev1alpha1.DelegationTaskLabel: "t1"}
		}
		if depth != nil {
			s.Annotations = map[string]string{agentlanev1alpha1.DelegationDepthAnnotation: *depth}
		}
		if controlled {
			s.OwnerReferences = []metav1.OwnerReference{producerRef}
		}
		return s
	}
	cases := map[string]struct {
		s       *agentlanev1alpha1.AgentSession
		want    int
		wantErr bool
	}{
		"a session nobody delegated to":                 {s: session(false, nil, false), want: 0},
		"a worker two deep":                             {s: session(true, ptr.To("2"), true), want: 2},
		"a negative depth":                              {s: session(true, ptr.To("-5"), true), wantErr: true},
		"a negative depth without the worker label":     {s: session(false, ptr.To("-1"), false), wantErr: true},
		"depth zero on a worker":                        {s: session(true, ptr.To("0"), true), wantErr: true},
		"not a number":                                  {s: session(true, ptr.To("deep"), true), wantErr: true},
		"a worker whose depth annotation was removed":   {s: session(true, nil, true), wantErr: true},
		"label removed, still controlled by a producer": {s: session(false, nil, true), wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Depth(tc.s)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Depth() error = %v, want error %v", err, tc.wantErr)
			}
			if err == nil && got != tc.want {
				t.Errorf("Depth() = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestCarveBudget(t *testing.T) {
	producer := func(hard int64) *agentlanev1alpha1.AgentSession {
		s := &agentlanev1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: "lead"}}
		s.Spec.Budget = &agentlanev1alpha1.Budget{Tokens: &agentlanev1alpha1.TokenBudget{Hard: ptr.To(hard)}}
		return s
	}
	template := &agentlanev1alpha1.Budget{Tokens: &agentlanev1alpha1.TokenBudget{Soft: ptr.To[int64](800), Hard: ptr.To[int64](1000)}}
	cases := map[string]struct {
		producer  *agentlanev1alpha1.AgentSession
		consumed  int64
		wantHard  int64
		wantSoft  *int64
		exhausted bool
	}{
		"the template fits in what is left":      {producer: producer(10000), wantHard: 1000, wantSoft: ptr.To[int64](800)},
		"lowered to what is left":                {producer: producer(1000), consumed: 400, wantHard: 600},
		"an exhausted producer gives nothing":    {producer: producer(1000), consumed: 1000, exhausted: true},
		"overspent by its last call":             {producer: producer(1000), consumed: 1200, exhausted: true},
		"no producer budget: the template as is": {producer: &agentlanev1alpha1.AgentSession{}, wantHard: 1000, wantSoft: ptr.To[int64](800)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := CarveBudget(template, tc.producer, agentlanev1alpha1.BudgetUsage{TokensConsumed: tc.consumed})
			var ex *ErrBudgetExhausted
			if tc.exhausted {
				if !errors.As(err, &ex) {
					t.Fatalf("CarveBudget() error = %v, want ErrBudgetExhausted", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("CarveBudget() error = %v", err)
			}
			if *got.Tokens.Hard != tc.wantHard {
				t.Errorf("hard = %d, want %d", *got.Tokens.Hard, tc.wantHard)
			}
			if (got.Tokens.Soft == nil) != (tc.wantSoft == nil) || (tc.wantSoft != nil && *got.Tokens.Soft != *tc.wantSoft) {
				t.Errorf("soft = %v, want %v", got.Tokens.Soft, tc.wantSoft)
			}
			if *template.Tokens.Hard != 1000 {
				t.Errorf("the template was changed")
			}
		})
	}
}

func TestCarveBudgetCost(t *testing.T) {
	hard := resource.MustParse("10")
	used := resource.MustParse("7.5")
	p := &agentlanev1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: "lead"}}
	p.Spec.Budget = &agentlanev1alpha1.Budget{Cost: &agentlanev1alpha1.CostBudget{Currency: "EUR", Hard: &hard}}
	got, err := CarveBudget(nil, p, agentlanev1alpha1.BudgetUsage{CostConsumed: &used})
	if err != nil {
		t.Fatal(err)
	}
	if got.Cost == nil || got.Cost.Hard.Cmp(resource.MustParse("2.5")) != 0 || got.Cost.Currency != "EUR" {
		t.Errorf("cost = %+v, want a hard limit of 2.5 EUR", got.Cost)
	}
	if _, c := Hold(got, p); c.Cmp(resource.MustParse("2.5")) != 0 {
		t.Errorf("the producer pays %s for the worker, want 2.5", c.String())
	}
	if _, err := CarveBudget(nil, p, agentlanev1alpha1.BudgetUsage{CostConsumed: &hard}); err == nil {
		t.Errorf("a producer whose cost is all spent or held gave a worker a budget")
	}
}

// node is a session in a simulated delegation tree: its hard token limit,
// what it consumed (its workers' budgets included, paid when they were
// created), and its workers.
type node struct {
	s        *agentlanev1alpha1.AgentSession
	parent   *node
	children []*node
}

// spend charges tokens to the session, as the ledger records a runtime's
// usage; a session at its hard limit is denied before the call.
func (n *node) spend(tokens int64) bool {
	if n.s.Status.Budget.TokensConsumed >= *n.s.Spec.Budget.Tokens.Hard {
		return false
	}
	n.s.Status.Budget.TokensConsumed += tokens
	return true
}

// TestDelegationTreeCannotBuyMoreThanTheRoot builds a depth-3 tree with
// fan-out k under a producer with a hard limit of H tokens, whose lane's
// template grants H/2 to every worker: without carving, the tree could
// spend H + (k + k^2 + k^3) H/2. Every session spends until it is denied; what the
// whole tree spent stays within the root's H (plus the one call each
// session makes that crosses its limit).
func TestDelegationTreeCannotBuyMoreThanTheRoot(t *testing.T) {
	const H, k, depth, call = 1000, 3, 3, 10
	template := &agentlanev1alpha1.Budget{Tokens: &agentlanev1alpha1.TokenBudget{Hard: ptr.To[int64](H / 2)}}
	root := &node{s: &agentlanev1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: "root"},
		Spec: agentlanev1alpha1.AgentSessionSpec{Budget: &agentlanev1alpha1.Budget{
			Tokens: &agentlanev1alpha1.TokenBudget{Hard: ptr.To[int64](H)}}}}}
	sessions, refused := 1, 0
	var grow func(n *node, level int)
	grow = func(n *node, level int) {
		if level == depth {
			return
		}
		for range k {
			b, err := CarveBudget(template, n.s, n.s.Status.Budget)
			if err != nil {
				refused++
				continue
			}
			held, _ := Hold(b, n.s)
			n.s.Status.Budget.TokensConsumed += held
			c := &node{s: &agentlanev1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: "w"},
				Spec: agentlanev1alpha1.AgentSessionSpec{Budget: b}}, parent: n}
			n.children = append(n.children, c)
			sessions++
			grow(c, level+1)
		}
	}
	grow(root, 0)
	var all []*node
	var walk func(n *node)
	walk = func(n *node) {
		all = append(all, n)
		for _, c := range n.children {
			walk(c)
		}
	}
	walk(root)
	for spent := true; spent; {
		spent = false
		for _, n := range all {
			spent = n.spend(call) || spent
		}
	}
	var total int64 // what the tree spent on calls, not on holds
	for _, n := range all {
		total += n.s.Status.Budget.TokensConsumed
		for _, c := range n.children {
			total -= *c.s.Spec.Budget.Tokens.Hard
		}
	}
	if limit := int64(H + call*len(all)); total > limit {
		t.Errorf("the tree of %d sessions spent %d tokens; the root's hard limit is %d (at most %d with each session's last call)", len(all), total, H, limit)
	}
	if refused == 0 {
		t.Errorf("no worker was refused: every one of the %d sessions got a budget", sessions)
	}
	t.Logf("%d sessions, %d workers refused, %d tokens spent (uncarved: up to %d)", sessions, refused, total, H+(k+k*k+k*k*k)*H/2)
}
