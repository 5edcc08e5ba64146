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
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/truncate"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// Phases of a GuardRequest.
const (
	// PhaseCheck (sent as an absent phase): before a covered command, the
	// guard's checkBeforeLlm. It answers with a decision.
	PhaseCheck = ""
	// PhaseRecord: after a command's usage was recorded, the guard's
	// recordAfterLlm. Its answer is not read.
	PhaseRecord = "record"
)

// GuardRequest is the body the ledger posts to a session's budget
// guard (spec.budget.guard.url) before each covered command and, with
// phase record, after each usage recorded.
type GuardRequest struct {
	// Phase is empty for a check and "record" after usage was recorded.
	Phase       string              `json:"phase,omitempty"`
	Namespace   string              `json:"namespace"`
	Session     string              `json:"session"`
	Identity    sessionapi.Identity `json:"identity"`
	Lane        string              `json:"lane,omitempty"`
	CommandType string              `json:"commandType,omitempty"`
	// EstimatedTokens is what the caller of a check expects the command to
	// consume, when it said.
	EstimatedTokens int64 `json:"estimatedTokens,omitempty"`
	// Usage is what was recorded, on a record.
	Usage    *sessionapi.Usage   `json:"usage,omitempty"`
	Consumed sessionapi.Consumed `json:"consumed"`
}

// GuardResponse is a guard's answer: decision allow, soft or deny,
// with a message that the denied command's error and the events carry.
// Resource, Consumed and Limit (strings or numbers) say which budget of the
// guard's own the answer is about; Reason is read as the message when
// Message is empty.
type GuardResponse struct {
	Decision string      `json:"decision"`
	Message  string      `json:"message,omitempty"`
	Reason   string      `json:"reason,omitempty"`
	Resource string      `json:"resource,omitempty"`
	Consumed looseString `json:"consumed,omitempty"`
	Limit    looseString `json:"limit,omitempty"`
}

// looseString is a JSON string or number, kept as text.
type looseString string

func (s *looseString) UnmarshalJSON(b []byte) error {
	var str string
	if err := json.Unmarshal(b, &str); err == nil {
		*s = looseString(str)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("not a string or a number: %s", truncate.Runes(string(b), 40, "..."))
	}
	*s = looseString(n.String())
	return nil
}

// askGuard posts req to the guard and returns its answer; an error means
// the guard could not be reached, timed out or answered badly.
func (l *Ledger) askGuard(ctx context.Context, g *agentlanev1alpha1.BudgetGuard, req GuardRequest) (GuardResponse, error) {
	timeout := DefaultGuardTimeout
	if g.Timeout != nil && g.Timeout.Duration > 0 {
		timeout = g.Timeout.Duration
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	body, err := json.Marshal(req)
	if err != nil {
		return GuardResponse{}, err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, g.URL, bytes.NewReader(body))
	if err != nil {
		return GuardResponse{}, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	hc := l.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(hreq)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return GuardResponse{}, fmt.Errorf("no answer within %s", timeout)
		}
		return GuardResponse{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxGuardReply))
	if err != nil {
		return GuardResponse{}, fmt.Errorf("reading the answer: %w", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return GuardResponse{}, fmt.Errorf("it answered %s: %s", resp.Status, truncate.Runes(strings.TrimSpace(string(data)), 203, "..."))
	}
	var ans GuardResponse
	if req.Phase == PhaseRecord {
		return ans, nil
	}
	if err := json.Unmarshal(data, &ans); err != nil {
		return GuardResponse{}, fmt.Errorf("its answer is not JSON: %w", err)
	}
	switch ans.Decision {
	case sessionapi.BudgetAllow, sessionapi.BudgetSoft, sessionapi.BudgetDeny:
		if ans.Message == "" {
			ans.Message = ans.Reason
		}
		return ans, nil
	}
	return GuardResponse{}, fmt.Errorf("its answer has decision %q, not allow, soft or deny", ans.Decision)
}

// applyGuard records the guard's answer (empty Decision: a failure that
// failurePolicy Ignore allows) and returns the crossings to emit.
func (a *budgetAccount) applyGuard(key types.NamespacedName, ans GuardResponse) []crossing {
	a.guard, a.guardMessage = ans.Decision, ans.Message
	a.guardResource, a.guardConsumed, a.guardLimit = ans.Resource, string(ans.Consumed), string(ans.Limit)
	if ans.Decision == "" {
		return nil
	}
	var out []crossing
	for decision, kind := range map[string]string{sessionapi.BudgetSoft: kindSoft, sessionapi.BudgetDeny: kindHard} {
		t := threshold{budgetGuard, kind}
		switch {
		case ans.Decision != decision:
			delete(a.notified, t)
		case !a.notified[t]:
			a.notified[t] = true
			res, consumed, limit := a.guardFigures()
			c := a.crossing(key, t, consumed, limit, a.guardText())
			if res != budgetGuard {
				c.body.Resource = res
			}
			out = append(out, c)
		}
	}
	return out
}

// guardFigures returns the resource, consumption and limit the guard's last
// answer is about: its own when it named a resource, otherwise resource
// guard with the session's tokens and cost.
func (a *budgetAccount) guardFigures() (res, consumed, limit string) {
	if a.guardResource != "" {
		return a.guardResource, a.guardConsumed, a.guardLimit
	}
	return budgetGuard, fmt.Sprintf("%d tokens, %s cost", a.tokens, decimal(a.cost)), a.guardLimit
}

func (a *budgetAccount) guardText() string {
	verb := map[string]string{sessionapi.BudgetSoft: "answered soft", sessionapi.BudgetDeny: "denied"}[a.guard]
	if strings.HasPrefix(a.guardMessage, "the budget guard failed") {
		return a.guardMessage
	}
	if a.guardMessage == "" {
		return "the budget guard " + verb
	}
	return "the budget guard " + verb + ": " + a.guardMessage
}
