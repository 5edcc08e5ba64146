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

// GuardRequest is the body the ledger posts to a session's budget
// guard (spec.budget.guard.url) before each covered command.
type GuardRequest struct {
	Namespace   string              `json:"namespace"`
	Session     string              `json:"session"`
	Identity    sessionapi.Identity `json:"identity"`
	Lane        string              `json:"lane,omitempty"`
	CommandType string              `json:"commandType,omitempty"`
	Consumed    sessionapi.Consumed `json:"consumed"`
}

// GuardResponse is a guard's answer: decision allow, soft or deny,
// with a message that the denied command's error and the events carry.
type GuardResponse struct {
	Decision string `json:"decision"`
	Message  string `json:"message,omitempty"`
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
	if err := json.Unmarshal(data, &ans); err != nil {
		return GuardResponse{}, fmt.Errorf("its answer is not JSON: %w", err)
	}
	switch ans.Decision {
	case sessionapi.BudgetAllow, sessionapi.BudgetSoft, sessionapi.BudgetDeny:
		return ans, nil
	}
	return GuardResponse{}, fmt.Errorf("its answer has decision %q, not allow, soft or deny", ans.Decision)
}

// applyGuard records the guard's answer (empty Decision: a failure that
// failurePolicy Ignore allows) and returns the crossings to emit.
func (a *budgetAccount) applyGuard(key types.NamespacedName, ans GuardResponse) []crossing {
	a.guard, a.guardMessage = ans.Decision, ans.Message
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
			consumed := fmt.Sprintf("%d tokens, %s cost", a.tokens, decimal(a.cost))
			out = append(out, a.crossing(key, t, consumed, "", a.guardText()))
		}
	}
	return out
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
