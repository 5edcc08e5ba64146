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

package agentscript

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// Report is what a runtime did, turn by turn.
type Report struct {
	Turns []TurnReport `json:"turns"`
	// ResumeError says why the runtime started fresh although it was to
	// resume: the server has no session store (NoStore), or the latest
	// checkpoint could not be read or is not one of this script's. No
	// checkpoint at all is no error.
	ResumeError string `json:"resumeError,omitempty"`
	// Passivated is set when the runtime stopped because the session was
	// passivated: it finished the tool round in progress, saved a
	// checkpoint at that boundary and left the commands that had not
	// started queued for the runtime that resumes the session.
	Passivated *Passivation `json:"passivated,omitempty"`
}

// TurnReport is one turn (one run) of the agent.
type TurnReport struct {
	RunID string `json:"runId"`
	// Prompt is the script's prompt, or the turn's text under Serve.
	Prompt string `json:"prompt,omitempty"`
	// Messages counts the inbound messages the turn answers (Serve only).
	Messages int `json:"messages,omitempty"`
	// Steers are the steering messages taken at the turn's tool
	// boundaries, in order.
	Steers []string `json:"steers,omitempty"`
	// Aborted is set when the session aborted the run; the turn submitted
	// nothing after it learnt so.
	Aborted bool `json:"aborted,omitempty"`
	// Passivated is set when the turn stopped at a tool boundary because
	// the session was passivated; its last checkpoint lets a resumed
	// runtime continue it.
	Passivated bool `json:"passivated,omitempty"`
	// Error says why the turn stopped before its last step, other than an
	// abort: the API refused the session, or the runtime was stopped.
	Error string `json:"error,omitempty"`
	// ResumedFrom is set when the turn continued an interrupted run from
	// its latest checkpoint: the steps before ResumedFrom.Step completed in
	// that run and were not run again, nor was the model call. Commands of
	// step ResumedFrom.Step that the interrupted run left queued are
	// followed under their own IDs; those that had ended are not run again
	// and not reported.
	ResumedFrom *Resumption `json:"resumedFrom,omitempty"`
	// Checkpoints counts the checkpoints saved, one after each completed
	// step; CheckpointError is why the first that could not be saved was
	// not, such as NoStore when the manager runs without a session store.
	Checkpoints     int    `json:"checkpoints,omitempty"`
	CheckpointError string `json:"checkpointError,omitempty"`
	// Commands are the turn's commands in submission order; a parallel
	// group's commands are in script order.
	Commands []CommandReport `json:"commands"`
	Started  time.Time       `json:"started"`
	Finished time.Time       `json:"finished"`
}

// CommandReport is how one command ended, as far as the runtime knows.
type CommandReport struct {
	ID    string `json:"id"`
	Type  string `json:"type"`
	Lane  string `json:"lane,omitempty"`
	Mode  string `json:"mode,omitempty"`
	State string `json:"state,omitempty"`
	// Attempts is the number of the last attempt.
	Attempts int `json:"attempts"`
	// Output is the last attempt's output.
	Output json.RawMessage `json:"output,omitempty"`
	// Error explains a state other than Succeeded, or why the runtime
	// stopped waiting for the command.
	Error string `json:"error,omitempty"`
	// Refused is the API's reply when it refused a call for the command
	// (authentication, authorization, a missing session, a bad request).
	Refused *sessionapi.Error `json:"refused,omitempty"`
	// Held is set when the runtime passivated before the command started:
	// the command stays queued in the session (State), and the runtime
	// that resumes the session follows it.
	Held bool `json:"held,omitempty"`
	// Submitted and Finished are the runtime's clock before submitting and
	// once the command ended (or the runtime stopped waiting).
	Submitted time.Time `json:"submitted"`
	Finished  time.Time `json:"finished"`
	// Step is the step's position in the turn, from 1; 0 is the turn's
	// model call.
	Step int `json:"step"`
	// Parallel is set for the commands of a parallel group.
	Parallel bool `json:"parallel,omitempty"`
}

// Refusal returns the first refusal of the API in the report, or nil when
// the API took every call.
func (r Report) Refusal() *sessionapi.Error {
	for _, t := range r.Turns {
		for _, c := range t.Commands {
			if c.Refused != nil {
				return c.Refused
			}
		}
	}
	return nil
}

// Unfinished returns the commands the runtime stopped waiting for before
// they reached a final state: the server could not be reached, refused the
// call, the run was aborted or the runtime was stopped. Commands held for
// the resumed runtime of a passivated session are not among them.
func (r Report) Unfinished() []CommandReport {
	var out []CommandReport
	for _, t := range r.Turns {
		for _, c := range t.Commands {
			if !sessionapi.Final(c.State) && !c.Held {
				out = append(out, c)
			}
		}
	}
	return out
}

// refusal returns err's API error when it is a refusal of the request, as
// opposed to an attempt that lost a race (a stale or finished attempt).
func refusal(err error) *sessionapi.Error {
	var e *sessionapi.Error
	if !errors.As(err, &e) {
		return nil
	}
	switch e.Code {
	case sessionapi.CodeStaleAttempt, sessionapi.CodeNotRunning:
		return nil
	}
	return e
}

// fatal tells a refusal after which no call of the session can succeed.
func fatal(e *sessionapi.Error) bool {
	if e == nil {
		return false
	}
	switch e.Code {
	case sessionapi.CodeUnauthenticated, sessionapi.CodeForbidden, sessionapi.CodeSessionNotFound, sessionapi.CodeSessionNotReady:
		return true
	}
	return false
}
