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
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// What a session's budget covers, and how its guard is called.
const (
	// Lane is the lane whose commands a budget always covers: the
	// Generate lane of the A3S lane set.
	Lane = "generate"
	// CommandType is the command type a budget always covers, in
	// whatever lane the queue routes it to.
	CommandType = "llm"
	// DefaultGuardTimeout bounds a guard call whose spec sets no timeout.
	DefaultGuardTimeout = 2 * time.Second
	// ThresholdHitReason is the reason of the Kubernetes Events the
	// ledger records on an AgentSession.
	ThresholdHitReason = sessionapi.EventBudgetThresholdHit
	// maxGuardReply bounds how much of a guard's answer is read.
	maxGuardReply = 64 << 10
)

// Resources and kinds of a BudgetThresholdHit.
const (
	budgetTokens = "tokens"
	budgetCost   = "cost"
	budgetGuard  = "guard"
	kindSoft     = "soft"
	kindHard     = "hard"
)

// Covers reports whether budget b checks a command of commandType in
// lane: every command when b.checkEveryTool is set, otherwise the commands
// of the generate lane and the llm commands, wherever they are routed. A
// nil budget covers nothing.
func Covers(b *agentlanev1alpha1.Budget, lane, commandType string) bool {
	return b != nil && (b.CheckEveryTool || lane == Lane || commandType == CommandType)
}

// Decision is the outcome of a budget check.
type Decision struct {
	// Decision is sessionapi.BudgetAllow, BudgetSoft or BudgetDeny.
	Decision string
	// Checked is false when the budget does not cover the command;
	// Decision is then allow.
	Checked bool
	// Reason is the reason of the session's BudgetExhausted condition after
	// the check (agentlanev1alpha1.AgentSession*Reason).
	Reason string
	// Message explains Reason.
	Message string
	// Consumed is what the session had consumed when it was checked.
	Consumed agentlanev1alpha1.BudgetUsage
	// Resource, ResourceConsumed and Limit name the limit a soft or deny
	// decision is about: tokens or cost with the session's consumption and
	// the limit, or the resource and figures the guard answered with
	// (resource guard when it named none). Empty on allow.
	Resource, ResourceConsumed, Limit string
}

// Denied reports whether the command must not run.
func (d Decision) Denied() bool { return d.Decision == sessionapi.BudgetDeny }

// Ledger keeps what each AgentSession consumed and decides whether
// its commands may spend more. The Session API checks it before each
// covered attempt and records the usage runtimes report; the AgentSession
// controller copies it into status with ApplyStatus. It is safe for
// concurrent use.
//
// A session's account starts from its status.budget, so consumption
// survives a manager restart. Each threshold (a soft or hard limit of
// tokens or cost, or a soft or deny answer of the guard) emits one
// BudgetThresholdHit when it is crossed, that is when the session goes from
// below it to at or above it; staying above it, however many more commands
// run or usages are recorded, emits nothing more. Crossings that happened
// before a restart are not emitted again.
type Ledger struct {
	// Publish, when set, puts BudgetThresholdHit events on the session's
	// event stream (Schedulers.Publish).
	Publish func(session types.NamespacedName, ev sessionapi.Event)
	// Recorder, when set, records BudgetThresholdHit as a Warning
	// Kubernetes Event on the AgentSession.
	Recorder events.EventRecorder
	// HTTPClient calls the guards; a client without a timeout when nil (each
	// call is bounded by the guard's timeout).
	HTTPClient *http.Client
	// Clock stamps the events; the real clock when nil.
	Clock clock.PassiveClock

	mu       sync.Mutex
	accounts map[types.NamespacedName]*budgetAccount
	// changed announces the sessions whose status.budget or
	// BudgetExhausted condition must be rewritten; created by Changes.
	changed chan event.GenericEvent
}

// Changes returns the channel on which the sessions whose budget status
// changed are announced, for the AgentSession controller to watch (a
// source.Channel). It is created on first use; when it is full an
// announcement is dropped, and the session's next reconcile writes the
// latest status anyway.
func (l *Ledger) Changes() <-chan event.GenericEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changesLocked()
}

func (l *Ledger) changesLocked() chan event.GenericEvent {
	if l.changed == nil {
		l.changed = make(chan event.GenericEvent, 1024)
	}
	return l.changed
}

// Check decides whether the session s may run a command of commandType in
// lane, and emits the BudgetThresholdHit events of the thresholds the
// session crossed. A command the budget does not cover (see Covers)
// is allowed unchecked. Otherwise the limits of spec.budget decide first: a
// hard limit reached denies (HardLimitReached) without asking the guard.
// Then the guard, if any, is asked; a guard that cannot be reached, times
// out or answers badly allows the command under failurePolicy Ignore and
// denies it under Fail. Deny wins over soft, soft over allow.
func (l *Ledger) Check(ctx context.Context, s *agentlanev1alpha1.AgentSession, lane, commandType string) Decision {
	return l.CheckEstimate(ctx, s, lane, commandType, 0)
}

// CheckEstimate is Check for a command expected to consume estimated tokens
// (the A3S guard's checkBeforeLlm(sessionId, estimatedTokens)): the guard is
// told the estimate, and a hard token limit that consumption plus the
// estimate would overrun denies the command, a soft one it would reach
// makes an allow soft. The estimate consumes nothing: it changes neither
// the session's BudgetExhausted condition nor emits events.
func (l *Ledger) CheckEstimate(ctx context.Context, s *agentlanev1alpha1.AgentSession, lane, commandType string, estimated int64) Decision {
	key := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
	l.mu.Lock()
	a := l.accountLocked(s)
	before := a.state()
	crossings := a.syncLimits(key)
	covered := Covers(a.spec, lane, commandType)
	var guard *agentlanev1alpha1.BudgetGuard
	if covered && a.spec.Guard != nil && !a.hardLimitReached() {
		guard = a.spec.Guard.DeepCopy()
	}
	req := GuardRequest{Namespace: key.Namespace, Session: key.Name, Identity: a.labels,
		Lane: lane, CommandType: commandType, EstimatedTokens: estimated, Consumed: ConsumedOf(a.usage())}
	if guard == nil {
		d := a.decision(covered)
		if covered {
			d = a.estimate(d, estimated)
		}
		l.finishLocked(key, a, before)
		l.mu.Unlock()
		l.emit(crossings)
		return d
	}
	l.mu.Unlock()
	l.emit(crossings)

	ans, err := l.askGuard(ctx, guard, req)
	if err != nil {
		log := logf.FromContext(ctx).WithValues("agentSession", key, "url", guard.URL)
		if guard.FailurePolicy == agentlanev1alpha1.GuardFailureFail {
			log.Info("The budget guard failed; failurePolicy Fail denies the command", "error", err.Error())
			ans = GuardResponse{Decision: sessionapi.BudgetDeny,
				Message: fmt.Sprintf("the budget guard failed and failurePolicy is Fail: %v", err)}
		} else {
			log.Info("The budget guard failed; failurePolicy Ignore allows the command", "error", err.Error())
			ans = GuardResponse{Message: fmt.Sprintf("the budget guard failed and failurePolicy is Ignore: %v", err)}
		}
	}
	l.mu.Lock()
	before = a.state()
	crossings = a.applyGuard(key, ans)
	d := a.estimate(a.decision(true), estimated)
	l.finishLocked(key, a, before)
	l.mu.Unlock()
	l.emit(crossings)
	return d
}

// Record adds what a command of the session s consumed and emits the
// BudgetThresholdHit events of the limits it crossed. It returns what the
// session consumed in all.
func (l *Ledger) Record(s *agentlanev1alpha1.AgentSession, tokens int64, cost resource.Quantity) (agentlanev1alpha1.BudgetUsage, error) {
	if tokens < 0 {
		return agentlanev1alpha1.BudgetUsage{}, fmt.Errorf("tokens must not be negative, got %d", tokens)
	}
	if cost.Sign() < 0 {
		return agentlanev1alpha1.BudgetUsage{}, fmt.Errorf("cost must not be negative, got %s", decimal(cost))
	}
	key := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
	l.mu.Lock()
	a := l.accountLocked(s)
	before := a.state()
	a.tokens += tokens
	a.cost.Add(cost)
	crossings := a.syncLimits(key)
	u := a.usage()
	l.finishLocked(key, a, before)
	l.mu.Unlock()
	l.emit(crossings)
	return u, nil
}

// TellGuard posts usage, just recorded for the session s, to the session's
// budget guard with phase record (the guard's recordAfterLlm), so that a
// guard metering its own quota sees every call. Its answer is not read; a
// guard that fails is logged and otherwise ignored. A session without a
// guard is not called for.
func (l *Ledger) TellGuard(ctx context.Context, s *agentlanev1alpha1.AgentSession, usage sessionapi.Usage) {
	if s.Spec.Budget == nil || s.Spec.Budget.Guard == nil {
		return
	}
	key := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
	l.mu.Lock()
	a := l.accountLocked(s)
	req := GuardRequest{Phase: PhaseRecord, Namespace: key.Namespace, Session: key.Name, Identity: a.labels,
		Usage: &usage, Consumed: ConsumedOf(a.usage())}
	guard := s.Spec.Budget.Guard.DeepCopy()
	l.mu.Unlock()
	if _, err := l.askGuard(ctx, guard, req); err != nil {
		logf.FromContext(ctx).Info("The budget guard could not be told of recorded usage",
			"agentSession", key, "url", guard.URL, "error", err.Error())
	}
}

// Usage returns what the session key consumed, as far as the ledger knows
// (nothing before it first saw the session).
func (l *Ledger) Usage(key types.NamespacedName) agentlanev1alpha1.BudgetUsage {
	l.mu.Lock()
	defer l.mu.Unlock()
	if a := l.accounts[key]; a != nil {
		return a.usage()
	}
	return agentlanev1alpha1.BudgetUsage{}
}

// State returns the session's budget as the last check and the usage
// recorded leave it, without asking the guard and without emitting events:
// Checked is false and Decision says whether a covered command would be
// denied by what is known now.
func (l *Ledger) State(s *agentlanev1alpha1.AgentSession) Decision {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.accountLocked(s).decision(true)
	d.Checked = false
	return d
}

// ApplyStatus writes what the session consumed into s.status.budget and
// sets its BudgetExhausted condition: True with reason HardLimitReached or
// GuardDenied while covered commands are denied, False with reason
// SoftLimitReached or WithinBudget otherwise. A session without a budget has
// no BudgetExhausted condition. The first call for a session starts its
// account from s.status.budget.
func (l *Ledger) ApplyStatus(s *agentlanev1alpha1.AgentSession) {
	l.mu.Lock()
	a := l.accountLocked(s)
	d := a.decision(true)
	s.Status.Budget = a.usage()
	l.mu.Unlock()
	if s.Spec.Budget == nil {
		meta.RemoveStatusCondition(&s.Status.Conditions, agentlanev1alpha1.AgentSessionBudgetExhaustedCondition)
		return
	}
	status := metav1.ConditionFalse
	if d.Denied() {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&s.Status.Conditions, metav1.Condition{
		Type:               agentlanev1alpha1.AgentSessionBudgetExhaustedCondition,
		Status:             status,
		Reason:             d.Reason,
		Message:            d.Message,
		ObservedGeneration: s.Generation,
	})
}

// Forget drops the account of the deleted session key.
func (l *Ledger) Forget(key types.NamespacedName) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.accounts, key)
}

// accountLocked returns the session's account, brought up to date with s's
// spec and identity. A new account, or one whose session was deleted and
// created again, starts from s.status.budget; the thresholds consumption
// already stands at or above count as emitted.
func (l *Ledger) accountLocked(s *agentlanev1alpha1.AgentSession) *budgetAccount {
	key := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
	a := l.accounts[key]
	if a == nil || (a.uid != "" && s.UID != "" && a.uid != s.UID) {
		a = &budgetAccount{tokens: s.Status.Budget.TokensConsumed, notified: map[threshold]bool{}}
		a.cost = *resource.NewQuantity(0, resource.DecimalSI)
		if c := s.Status.Budget.CostConsumed; c != nil {
			a.cost = c.DeepCopy()
		}
		if l.accounts == nil {
			l.accounts = map[types.NamespacedName]*budgetAccount{}
		}
		l.accounts[key] = a
		a.observe(s)
		a.syncLimits(key) // crossings before a restart were emitted then
		return a
	}
	a.observe(s)
	return a
}

// finishLocked announces the session if its budget status changed.
func (l *Ledger) finishLocked(key types.NamespacedName, a *budgetAccount, before string) {
	if a.state() == before {
		return
	}
	obj := &agentlanev1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	select {
	case l.changesLocked() <- event.GenericEvent{Object: obj}:
	default:
	}
}

// emit publishes the crossings on the sessions' streams and as Kubernetes
// Events.
func (l *Ledger) emit(crossings []crossing) {
	if len(crossings) == 0 {
		return
	}
	var clk clock.PassiveClock = clock.RealClock{}
	if l.Clock != nil {
		clk = l.Clock
	}
	now := clk.Now()
	for _, c := range crossings {
		if l.Publish != nil {
			body := c.body
			l.Publish(c.key, sessionapi.Event{Type: sessionapi.EventBudgetThresholdHit, Time: now.UTC(),
				Labels: c.labels, Budget: &body})
		}
		if l.Recorder != nil && c.ref != nil {
			l.Recorder.Eventf(c.ref, nil, corev1.EventTypeWarning, ThresholdHitReason, "CheckBudget",
				"%s (%s %s)", c.body.Message, c.body.Kind, c.body.Resource)
		}
	}
}

// ConsumedOf shows what a session consumed as the Session API does.
func ConsumedOf(u agentlanev1alpha1.BudgetUsage) sessionapi.Consumed {
	out := sessionapi.Consumed{Tokens: u.TokensConsumed, Cost: "0"}
	if u.CostConsumed != nil {
		out.Cost = decimal(*u.CostConsumed)
	}
	return out
}

// FormatCost writes an amount as a plain decimal, such as 0.0125, rather
// than in the canonical form of quantities (12500u).
func FormatCost(q resource.Quantity) string { return decimal(q) }

func decimal(q resource.Quantity) string {
	s := q.AsDec().String()
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if s == "" || s == "-" {
		return "0"
	}
	return s
}
