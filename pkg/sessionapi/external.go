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
	// CodeLaneSwitchRefused (403): the LaneQueue does not let the session
	// handle the lane's commands itself (PUT .../lanes/{lane}/handler).
	CodeLaneSwitchRefused = "LaneSwitchRefused"
)

// Lane handler modes of LaneHandler.
const (
	// LaneHandlerExternal: the session's own runtime completes the lane's
	// commands (GET .../external, POST .../external/{id}/complete).
	LaneHandlerExternal = "External"
	// LaneHandlerInternal: the runtime runs the lane's commands on a
	// grant, whatever the lane's own mode.
	LaneHandlerInternal = "Internal"
	// LaneHandlerDefault removes the session's switch: the lane's mode and
	// the AgentSession's spec.laneOverrides apply again.
	LaneHandlerDefault = "Default"
)

// LaneHandler switches who handles a lane's commands for the session:
// PUT .../lanes/{lane}/handler. Commands already submitted keep theirs.
type LaneHandler struct {
	// Lane is the lane (in replies; the path names it).
	Lane string `json:"lane,omitempty"`
	// Mode is External, Internal or Default.
	Mode string `json:"mode"`
}

// Completion is the result a handler reports for one attempt of an
// ExternalTask of a Handler lane: POST .../external/{id}/complete. It is
// fenced by Attempt: a completion for any attempt but the current one is
// refused with StaleAttempt, and only the first completion of an attempt
// counts (a second gets AlreadyCompleted).
type Completion struct {
	// Attempt is the attempt the handler ran, as GET .../external listed
	// it. 0 completes the attempt that is current when the call is served,
	// still fenced: a task that finished, or whose current attempt already
	// has a completion or is held by a worker or a Job, is refused. Only a
	// handler that names the attempt is sure its result is not taken for a
	// retry's.
	Attempt int `json:"attempt,omitempty"`
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
	// for a failure until the manager applies the retry policy. For a
	// command of a lane the session handles itself it is the command's
	// state: Succeeded, Retrying, Failed, TimedOut or DeadLettered.
	Phase string `json:"phase"`
}

// Complete reports the result of attempt c.Attempt of the session's external
// task id. For a task of a Handler lane the caller needs the update verb on
// the session's agentsessions/api subresource; for a task of a lane the
// session handles itself (SetLaneHandler External), the access that
// submits.
func (s *SessionClient) Complete(ctx context.Context, id string, c Completion) (*CompletionResult, error) {
	var out CompletionResult
	if err := s.do(ctx, http.MethodPost, "/external/"+url.PathEscape(id)+"/complete", nil, c, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SetLaneHandler switches who handles lane's new commands for the session:
// LaneHandlerExternal (the session completes them itself, with Complete),
// LaneHandlerInternal or LaneHandlerDefault. It is refused with
// LaneSwitchRefused on a lane the LaneQueue does not let the session run
// itself.
func (s *SessionClient) SetLaneHandler(ctx context.Context, lane, mode string) (*LaneHandler, error) {
	var out LaneHandler
	if err := s.do(ctx, http.MethodPut, "/lanes/"+url.PathEscape(lane)+"/handler", nil, LaneHandler{Mode: mode}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CompleteExternalTask completes the current attempt of the session's
// external task id with output, as A3S's complete_external_task does: a
// success with output as its result. Use Complete to report a failure or
// to name the attempt.
func (s *SessionClient) CompleteExternalTask(ctx context.Context, id string, output json.RawMessage) (*CompletionResult, error) {
	return s.Complete(ctx, id, Completion{Success: true, Result: output})
}
