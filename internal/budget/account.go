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
	"fmt"
	"math"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/identity"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// budgetAccount is one session's consumption and the state of its
// thresholds.
type budgetAccount struct {
	uid    types.UID
	ref    *corev1.ObjectReference
	labels sessionapi.Identity
	spec   *agentlanev1alpha1.Budget
	tokens int64
	cost   resource.Quantity
	// guard is the guard's last answer (allow, soft or deny; deny also for
	// a failure under failurePolicy Fail), empty before the first or after
	// a failure ignored by failurePolicy Ignore.
	guard, guardMessage string
	// guardResource, guardConsumed and guardLimit are the figures of the
	// guard's last answer, when it gave them.
	guardResource, guardConsumed, guardLimit string
	// notified holds the thresholds consumption stands at or above and
	// whose crossing was emitted.
	notified map[threshold]bool
}

type threshold struct{ resource, kind string }

// crossing is a BudgetThresholdHit to emit.
type crossing struct {
	key    types.NamespacedName
	ref    *corev1.ObjectReference
	labels sessionapi.Identity
	body   sessionapi.BudgetThreshold
}

// observe takes the session's current spec, identity and reference.
func (a *budgetAccount) observe(s *agentlanev1alpha1.AgentSession) {
	if s.UID != "" {
		a.uid = s.UID
	}
	a.spec = s.Spec.Budget.DeepCopy()
	a.labels = identity.Wire(s.Spec.Identity)
	a.ref = &corev1.ObjectReference{
		APIVersion: agentlanev1alpha1.GroupVersion.String(),
		Kind:       "AgentSession",
		Namespace:  s.Namespace,
		Name:       s.Name,
		UID:        s.UID,
	}
}

// limitState is one limit of the budget and whether consumption reached it.
type limitState struct {
	threshold
	consumed, limit string
	reached         bool
}

// limits lists the limits of the budget, hard ones first.
func (a *budgetAccount) limits() []limitState {
	if a.spec == nil {
		return nil
	}
	var out []limitState
	for _, kind := range []string{kindHard, kindSoft} {
		if t := a.spec.Tokens; t != nil {
			limit := t.Hard
			if kind == kindSoft {
				limit = t.Soft
			}
			if limit != nil {
				out = append(out, limitState{threshold: threshold{budgetTokens, kind},
					consumed: fmt.Sprint(a.tokens), limit: fmt.Sprint(*limit), reached: a.tokens >= *limit})
			}
		}
		if c := a.spec.Cost; c != nil {
			limit := c.Hard
			if kind == kindSoft {
				limit = c.Soft
			}
			if limit != nil {
				out = append(out, limitState{threshold: threshold{budgetCost, kind},
					consumed: decimal(a.cost), limit: decimal(*limit), reached: a.cost.Cmp(*limit) >= 0})
			}
		}
	}
	return out
}

// message explains a reached limit.
func (a *budgetAccount) message(ls limitState) string {
	unit := ""
	if ls.resource == budgetCost && a.spec.Cost.Currency != "" {
		unit = " " + a.spec.Cost.Currency
	}
	return fmt.Sprintf("%s consumed %s%s reached the %s limit %s%s", ls.resource, ls.consumed, unit, ls.kind, ls.limit, unit)
}

// syncLimits brings the limit thresholds up to date and returns the
// crossings to emit.
func (a *budgetAccount) syncLimits(key types.NamespacedName) []crossing {
	var out []crossing
	present := map[threshold]bool{}
	for _, ls := range a.limits() {
		present[ls.threshold] = true
		switch {
		case !ls.reached:
			delete(a.notified, ls.threshold)
		case !a.notified[ls.threshold]:
			a.notified[ls.threshold] = true
			out = append(out, a.crossing(key, ls.threshold, ls.consumed, ls.limit, a.message(ls)))
		}
	}
	for t := range a.notified {
		if t.resource != budgetGuard && !present[t] {
			delete(a.notified, t) // the limit was removed from the spec
		}
	}
	return out
}

func (a *budgetAccount) crossing(key types.NamespacedName, t threshold, consumed, limit, msg string) crossing {
	return crossing{key: key, ref: a.ref, labels: a.labels, body: sessionapi.BudgetThreshold{
		Resource: t.resource, Kind: t.kind, Consumed: consumed, Limit: limit, Message: msg}}
}

func (a *budgetAccount) hardLimitReached() bool {
	for _, ls := range a.limits() {
		if ls.kind == kindHard && ls.reached {
			return true
		}
	}
	return false
}

// decision is what the account says now of a command it covers (or, with
// covered false, of one it does not).
func (a *budgetAccount) decision(covered bool) Decision {
	d := Decision{Decision: sessionapi.BudgetAllow, Checked: covered, Consumed: a.usage(),
		Reason: agentlanev1alpha1.AgentSessionWithinBudgetReason, Message: "consumption is below every limit"}
	if a.spec == nil {
		d.Message = "the session has no budget"
	}
	var soft []string
	var firstSoft *limitState
	for _, ls := range a.limits() {
		if !ls.reached {
			continue
		}
		if ls.kind == kindHard {
			d.Decision, d.Reason, d.Message = sessionapi.BudgetDeny, agentlanev1alpha1.AgentSessionHardLimitReason, a.message(ls)
			d.Resource, d.ResourceConsumed, d.Limit = ls.resource, ls.consumed, ls.limit
			return a.uncovered(d, covered)
		}
		if firstSoft == nil {
			firstSoft = &ls
		}
		soft = append(soft, a.message(ls))
	}
	if a.spec != nil && a.spec.Guard != nil && a.guard == sessionapi.BudgetDeny {
		d.Decision, d.Reason, d.Message = sessionapi.BudgetDeny, agentlanev1alpha1.AgentSessionGuardDeniedReason, a.guardText()
		d.Resource, d.ResourceConsumed, d.Limit = a.guardFigures()
		return a.uncovered(d, covered)
	}
	if firstSoft != nil {
		d.Resource, d.ResourceConsumed, d.Limit = firstSoft.resource, firstSoft.consumed, firstSoft.limit
	}
	if a.spec != nil && a.spec.Guard != nil && a.guard == sessionapi.BudgetSoft {
		soft = append(soft, a.guardText())
		if firstSoft == nil {
			d.Resource, d.ResourceConsumed, d.Limit = a.guardFigures()
		}
	}
	if len(soft) > 0 {
		d.Decision, d.Reason, d.Message = sessionapi.BudgetSoft, agentlanev1alpha1.AgentSessionSoftLimitReason, strings.Join(soft, "; ")
	}
	return a.uncovered(d, covered)
}

// uncovered allows a command the budget does not cover, keeping the reason
// and message of the session's state.
func (a *budgetAccount) uncovered(d Decision, covered bool) Decision {
	if !covered {
		d.Decision = sessionapi.BudgetAllow
		d.Resource, d.ResourceConsumed, d.Limit = "", "", ""
	}
	return d
}

// state sums up what the session's status shows, to tell when it changed.
func (a *budgetAccount) state() string {
	d := a.decision(true)
	return fmt.Sprintf("%d|%s|%s|%s", a.tokens, decimal(a.cost), d.Reason, d.Message)
}

func (a *budgetAccount) usage() agentlanev1alpha1.BudgetUsage {
	u := agentlanev1alpha1.BudgetUsage{TokensConsumed: a.tokens}
	if !a.cost.IsZero() {
		c := a.cost.DeepCopy()
		u.CostConsumed = &c
	}
	return u
}

// estimate applies a check's estimated tokens to d, a decision of a covered
// command: a hard token limit the estimate would overrun (consumed plus the
// estimate above it) denies, a soft one it would reach makes an allow soft.
// Nothing is consumed, so the session's condition and the events do not
// change; d.Reason stays the condition's.
func (a *budgetAccount) estimate(d Decision, estimated int64) Decision {
	if estimated <= 0 || d.Denied() || a.spec == nil || a.spec.Tokens == nil {
		return d
	}
	after := a.tokens + estimated
	if after < a.tokens { // overflow
		after = math.MaxInt64
	}
	t := a.spec.Tokens
	if t.Hard != nil && after > *t.Hard {
		d.Decision, d.Resource, d.ResourceConsumed, d.Limit = sessionapi.BudgetDeny, budgetTokens, fmt.Sprint(a.tokens), fmt.Sprint(*t.Hard)
		d.Message = fmt.Sprintf("tokens consumed %d and the %d estimated would overrun the hard limit %d", a.tokens, estimated, *t.Hard)
		return d
	}
	if d.Decision == sessionapi.BudgetAllow && t.Soft != nil && after >= *t.Soft {
		d.Decision, d.Resource, d.ResourceConsumed, d.Limit = sessionapi.BudgetSoft, budgetTokens, fmt.Sprint(a.tokens), fmt.Sprint(*t.Soft)
		d.Message = fmt.Sprintf("tokens consumed %d and the %d estimated would reach the soft limit %d", a.tokens, estimated, *t.Soft)
	}
	return d
}
