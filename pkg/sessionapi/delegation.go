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
	"net/url"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DelegationRequest hands work to a Delegate lane of the session's queue: a
// worker session made from the lane's template takes Text as its first turn,
// and its final answer comes back as the delegation's result.
type DelegationRequest struct {
	// ID names the delegated task (a lowercase ULID when empty).
	ID string `json:"id,omitempty"`
	// Lane is the Delegate lane, such as review.
	Lane string `json:"lane"`
	// Text is the worker's first turn.
	Text string `json:"text"`
	// Callback, true when nil, posts the result to the session's inbox as
	// an inbound message headed "from queue:<lane> · task#<id> · ok|error ·
	// <time>". With false the session reads the result with GetDelegation.
	Callback *bool `json:"callback,omitempty"`
	// Timeout, such as "10m", bounds each attempt of the delegation (from
	// its worker session's start to its finished run), within the lane's
	// timeout (else its queue's defaultTimeout) when it has one. Without
	// it the lane's applies. Between 100ms and 24h.
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// Delegation is a delegated task as the Session API shows it.
type Delegation struct {
	ID   string `json:"id"`
	Lane string `json:"lane"`
	// Phase is the task's phase: Queued (waiting for one of the lane's
	// worker slots, or for a retry), Running (a worker session works on
	// it), Succeeded, Failed, TimedOut, DeadLettered or Cancelled.
	Phase string `json:"phase"`
	// Producer is the session that delegated the task.
	Producer string `json:"producer"`
	// WorkerSession is the AgentSession working on it, once started.
	WorkerSession string `json:"workerSession,omitempty"`
	// Answer is the worker's final answer, once Succeeded.
	Answer string `json:"answer,omitempty"`
	// Error says why the task failed, such as "interrupted: ...".
	Error string `json:"error,omitempty"`
	// Timeout is the delegation's own timeout, as bounded by its lane's.
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// Attempt is the current (or last) attempt, from 1; each attempt runs
	// in a worker session of its own. 0 before the first starts.
	Attempt int32 `json:"attempt,omitempty"`
	// Callback says whether the result goes to the producer's inbox;
	// Delivered, that it went.
	Callback  bool `json:"callback"`
	Delivered bool `json:"delivered,omitempty"`

	CreatedAt  time.Time `json:"createdAt,omitzero"`
	StartedAt  time.Time `json:"startedAt,omitzero"`
	FinishedAt time.Time `json:"finishedAt,omitzero"`
}

// DelegationList is one page of the session's delegated tasks that the
// cluster keeps, oldest first.
type DelegationList struct {
	Items []Delegation `json:"items"`
	// Continue, when set, asks for the next page (GET /delegations?continue=).
	Continue string `json:"continue,omitempty"`
}

// RunOutcome is how a run ended, as its runtime reports it when it finishes
// the run. For a worker session of a Delegate lane the outcome of its first
// run is the delegated task's result.
type RunOutcome struct {
	// Answer is the run's final answer: the agent's last reply.
	Answer string `json:"answer,omitempty"`
	// Error, when set, says why the run failed; the answer is then ignored.
	Error string `json:"error,omitempty"`
}

// Delegate hands work to a Delegate lane and returns the queued task at once:
// the session is not blocked while the worker runs.
func (s *SessionClient) Delegate(ctx context.Context, req DelegationRequest) (*Delegation, error) {
	var d Delegation
	if err := s.do(ctx, http.MethodPost, "/delegations", nil, req, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// GetDelegation returns one delegated task of the session.
func (s *SessionClient) GetDelegation(ctx context.Context, id string) (*Delegation, error) {
	var d Delegation
	if err := s.do(ctx, http.MethodGet, "/delegations/"+url.PathEscape(id), nil, nil, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// Delegations lists the session's delegated tasks, every page of them.
func (s *SessionClient) Delegations(ctx context.Context) (*DelegationList, error) {
	all := &DelegationList{Items: []Delegation{}}
	cont := ""
	for {
		l, err := s.DelegationsPage(ctx, 0, cont)
		if err != nil {
			return nil, err
		}
		all.Items = append(all.Items, l.Items...)
		if l.Continue == "" {
			return all, nil
		}
		cont = l.Continue
	}
}

// DelegationsPage lists one page of the session's delegated tasks: at most
// limit (the server's page size when 0), after the page whose Continue is
// cont ("" for the first).
func (s *SessionClient) DelegationsPage(ctx context.Context, limit int, cont string) (*DelegationList, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cont != "" {
		q.Set("continue", cont)
	}
	var l DelegationList
	if err := s.do(ctx, http.MethodGet, "/delegations", q, nil, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// FinishRunWithOutcome tells the session that the run ended and how: its
// answer, or why it failed.
func (s *SessionClient) FinishRunWithOutcome(ctx context.Context, runID string, out RunOutcome) error {
	return s.do(ctx, http.MethodPost, "/runs/"+url.PathEscape(runID)+"/finish", nil, out, nil)
}
