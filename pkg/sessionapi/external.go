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
	"encoding/json"
	"net/http"
	"net/url"
)

// Error codes of the external-task completion route.
const (
	CodeAlreadyCompleted = "AlreadyCompleted" // 409: the attempt already has a completion, or the task has finished
	CodeNotHandlerTask   = "NotHandlerTask"   // 409: the attempt is held by a worker or a Job, not offered to handlers (the lane's external target is not Handler)
)

// Completion is the result a handler reports for one attempt of an
// ExternalTask of a Handler lane: POST .../external/{id}/complete. It is
// fenced by Attempt: a completion for any attempt but the current one is
// refused with StaleAttempt, and only the first completion of an attempt
// counts (a second gets AlreadyCompleted).
type Completion struct {
	// Attempt is the attempt the handler ran, as GET .../external listed it.
	Attempt int `json:"attempt"`
	// Success tells whether the command succeeded. A failure goes through
	// the lane's retry policy, as a worker's would.
	Success bool `json:"success"`
	// Result is the command's output: any JSON value.
	Result json.RawMessage `json:"result,omitempty"`
	// Error says why the command failed.
	Error string `json:"error,omitempty"`
	// ExitCode is the exit code of a process the handler ran, if any.
	ExitCode *int32 `json:"exitCode,omitempty"`
}

// CompletionResult is the reply to a completion that was taken.
type CompletionResult struct {
	// ID is the task (the command's id).
	ID string `json:"id"`
	// Attempt is the attempt the completion was recorded for.
	Attempt int `json:"attempt"`
	// Phase is the task's phase after the completion: Succeeded, or Running
	// for a failure until the manager applies the retry policy.
	Phase string `json:"phase"`
}

// Complete reports the result of attempt c.Attempt of the session's external
// task id, served by a Handler lane. The caller needs the update verb on the
// session's agentsessions/api subresource.
func (s *SessionClient) Complete(ctx context.Context, id string, c Completion) (*CompletionResult, error) {
	var out CompletionResult
	if err := s.do(ctx, http.MethodPost, "/external/"+url.PathEscape(id)+"/complete", nil, c, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
