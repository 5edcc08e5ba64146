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

package sessionapi

import (
	"context"
	"net/http"
)

// CheckBudget asks whether the session may run a command of req's type (or
// in req's lane) now, as the server does before each attempt the budget
// covers. A soft answer still allows it; a check may emit a
// BudgetThresholdHit event.
func (s *SessionClient) CheckBudget(ctx context.Context, req BudgetCheckRequest) (*BudgetCheck, error) {
	var out BudgetCheck
	if err := s.do(ctx, http.MethodPost, "/budget/check", nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RecordUsage adds u to what the session consumed, for usage not reported
// with an attempt's result, and returns what the session consumed in all.
func (s *SessionClient) RecordUsage(ctx context.Context, u Usage) (*Consumed, error) {
	var out Consumed
	if err := s.do(ctx, http.MethodPost, "/budget/record", nil, u, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Budget returns the session's budget limits, what it consumed and whether
// its budget denies commands now.
func (s *SessionClient) Budget(ctx context.Context) (*BudgetStatus, error) {
	var out BudgetStatus
	if err := s.do(ctx, http.MethodGet, "/budget", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
