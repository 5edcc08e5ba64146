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
	"fmt"
	"math"
	"net/http"
	"regexp"

	"k8s.io/apimachinery/pkg/api/resource"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/budget"
	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// budgetExhausted is the error a denied command fails with; its text
// starts with the code, so that a runtime reading Command.error can tell.
func budgetExhausted(d budget.Decision) error {
	return fmt.Errorf("%s: %s", sessionapi.CodeBudgetExhausted, d.Message)
}

// admitBudget returns the check an Internal or Hybrid command of type typ
// passes before each attempt is offered to the runtime: a denied attempt
// fails the command at once, without retries. The session is read again so
// that a budget changed since submission applies.
func (s *Server) admitBudget(sc *sessionCall, typ string) func(context.Context, lanequeue.Attempt) error {
	return func(ctx context.Context, a lanequeue.Attempt) error {
		sess := &agentlanev1alpha1.AgentSession{}
		if err := s.Client.Get(ctx, sc.key, sess); err != nil {
			sess = sc.session
		}
		if d := s.Budgets.Check(ctx, sess, a.Lane, typ); d.Denied() {
			return lanequeue.Permanent(budgetExhausted(d))
		}
		return nil
	}
}

// checkExternalBudget checks an External command at submission, since
// nothing of this server runs before its attempts start: a denied command
// is refused with 409 BudgetExhausted and no ExternalTask is created.
func (s *Server) checkExternalBudget(ctx context.Context, sc *sessionCall, lane, typ string) error {
	if d := s.Budgets.Check(ctx, sc.session, lane, typ); d.Denied() {
		return apiError(http.StatusConflict, sessionapi.CodeBudgetExhausted, budgetExhausted(d).Error())
	}
	return nil
}

// plainDecimal is what a cost looks like: no sign, exponent or suffix.
var plainDecimal = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)

// usage is a Usage checked and parsed.
type usage struct {
	tokens int64
	cost   resource.Quantity
	// wire is the Usage as received, for the budget guard.
	wire sessionapi.Usage
}

// parseUsage checks u and returns its tokens and cost.
func parseUsage(u *sessionapi.Usage) (usage, error) {
	if u.InputTokens < 0 || u.OutputTokens < 0 || u.InputTokens > math.MaxInt64-u.OutputTokens {
		return usage{}, apiErrorf(http.StatusBadRequest, sessionapi.CodeInvalidRequest,
			"usage: inputTokens and outputTokens must be non-negative, got %d and %d", u.InputTokens, u.OutputTokens)
	}
	out := usage{tokens: u.InputTokens + u.OutputTokens, wire: *u}
	if u.Cost != "" {
		q, err := resource.ParseQuantity(u.Cost)
		if err != nil || q.Sign() < 0 || !plainDecimal.MatchString(u.Cost) {
			return usage{}, apiErrorf(http.StatusBadRequest, sessionapi.CodeInvalidRequest,
				"usage: cost %q is not a non-negative decimal such as 0.0125", u.Cost)
		}
		out.cost = q
	}
	return out, nil
}

// record adds usage to the session's account, then tells the session's
// budget guard, if any, what was recorded (recordAfterLlm).
func (s *Server) record(ctx context.Context, sc *sessionCall, used usage) (sessionapi.Consumed, error) {
	u, err := s.Budgets.Record(sc.session, used.tokens, used.cost)
	if err != nil {
		return sessionapi.Consumed{}, apiErrorf(http.StatusBadRequest, sessionapi.CodeInvalidRequest, "usage: %v", err)
	}
	s.Budgets.TellGuard(ctx, sc.session, used.wire)
	return budget.ConsumedOf(u), nil
}

func (s *Server) getBudget(w http.ResponseWriter, _ *http.Request, sc *sessionCall) error {
	d := s.Budgets.State(sc.session)
	out := sessionapi.BudgetStatus{Consumed: budget.ConsumedOf(d.Consumed), Exhausted: d.Denied(),
		Reason: d.Reason, Message: d.Message}
	if b := sc.session.Spec.Budget; b != nil {
		out.Guard, out.CheckEveryTool = b.Guard != nil, b.CheckEveryTool
		if t := b.Tokens; t != nil {
			out.Tokens = &sessionapi.TokenLimits{Soft: t.Soft, Hard: t.Hard}
		}
		if c := b.Cost; c != nil {
			out.Cost = &sessionapi.CostLimits{Currency: c.Currency, Soft: decimalOf(c.Soft), Hard: decimalOf(c.Hard)}
			if out.Cost.Currency == "" {
				out.Cost.Currency = "USD"
			}
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) checkBudget(w http.ResponseWriter, r *http.Request, sc *sessionCall) error {
	var req sessionapi.BudgetCheckRequest
	if err := readJSON(r, &req); err != nil {
		return err
	}
	if req.Lane == "" && req.CommandType == "" {
		return apiError(http.StatusBadRequest, sessionapi.CodeInvalidRequest, "set commandType (such as llm), lane, or both")
	}
	if req.EstimatedTokens < 0 {
		return apiErrorf(http.StatusBadRequest, sessionapi.CodeInvalidRequest, "estimatedTokens must not be negative, got %d", req.EstimatedTokens)
	}
	lane, _, err := sc.queue.Route(sc.key.Name, req.Lane, req.CommandType)
	if err != nil {
		return schedulerError(err)
	}
	d := s.Budgets.CheckEstimate(r.Context(), sc.session, lane, req.CommandType, req.EstimatedTokens)
	writeJSON(w, http.StatusOK, sessionapi.BudgetCheck{Decision: d.Decision, Checked: d.Checked,
		Reason: d.Reason, Message: d.Message, Consumed: budget.ConsumedOf(d.Consumed),
		Resource: d.Resource, ResourceConsumed: d.ResourceConsumed, Limit: d.Limit})
	return nil
}

func (s *Server) recordUsage(w http.ResponseWriter, r *http.Request, sc *sessionCall) error {
	var u sessionapi.Usage
	if err := readJSON(r, &u); err != nil {
		return err
	}
	used, err := parseUsage(&u)
	if err != nil {
		return err
	}
	out, err := s.record(r.Context(), sc, used)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func decimalOf(q *resource.Quantity) string {
	if q == nil {
		return ""
	}
	return budget.FormatCost(*q)
}
