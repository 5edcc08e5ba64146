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
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentlane/agentlane/internal/executor"
	"github.com/agentlane/agentlane/internal/truncate"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// tool submits one tool command of a step, waiting at most wait for its
// grant; attach, when set, is the ID of the command a runtime before this
// one submitted for it. finish follows it.
func (r *Runtime) tool(ctx context.Context, runID string, st Step, attach string, wait time.Duration) *submission {
	req := sessionapi.SubmitRequest{Type: st.Type, Lane: st.Lane, Payload: st.Payload}
	if st.Timeout != nil && st.Timeout.Duration > 0 {
		req.Timeout = &metav1.Duration{Duration: st.Timeout.Duration}
	}
	return r.submit(ctx, runID, req, attach, wait, func(ctx context.Context, cmd *sessionapi.Command) (sessionapi.Result, *sessionapi.Usage) {
		return r.execute(ctx, cmd, st.Payload), nil
	})
}

// llmPayload is the payload of a turn's model call.
type llmPayload struct {
	Prompt       string `json:"prompt"`
	InputTokens  int    `json:"inputTokens,omitempty"`
	OutputTokens int    `json:"outputTokens,omitempty"`
}

// LLMOutput is the output a model call reports.
type LLMOutput struct {
	Text  string   `json:"text"`
	Usage LLMUsage `json:"usage"`
}

// LLMUsage is the token usage of a model call.
type LLMUsage struct {
	InputTokens  int `json:"inputTokens"`
	OutputTokens int `json:"outputTokens"`
}

// llm runs the turn's model call; attach is as for tool.
func (r *Runtime) llm(ctx context.Context, runID, prompt string, c LLMCall, attach string) CommandReport {
	payload, _ := json.Marshal(llmPayload{Prompt: prompt, InputTokens: c.InputTokens, OutputTokens: c.OutputTokens}) // strings and ints only
	req := sessionapi.SubmitRequest{Type: llmType, Payload: payload}
	return r.finish(ctx, r.submit(ctx, runID, req, attach, submitWait, func(ctx context.Context, _ *sessionapi.Command) (sessionapi.Result, *sessionapi.Usage) {
		res := r.generate(ctx, prompt, c)
		if !res.Success {
			return res, nil // the call was stopped before the model answered
		}
		// The session's budget counts what the call consumed.
		return res, &sessionapi.Usage{InputTokens: int64(c.InputTokens), OutputTokens: int64(c.OutputTokens)}
	}))
}

// generate stands in for a granted model call: it takes c.Duration on the
// runtime's clock and reports c's usage.
func (r *Runtime) generate(ctx context.Context, prompt string, c LLMCall) sessionapi.Result {
	if d := c.Duration.Duration; d > 0 {
		t := r.clock().NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C():
		case <-ctx.Done():
			return sessionapi.Result{Error: fmt.Sprintf("model call stopped: %v", context.Cause(ctx))}
		}
	}
	text := c.Text
	if text == "" {
		text = fmt.Sprintf("Scripted reply to %q.", truncate.Runes(prompt, 80, "…"))
	}
	out, _ := json.Marshal(LLMOutput{Text: text, Usage: LLMUsage{InputTokens: c.InputTokens, OutputTokens: c.OutputTokens}}) // strings and ints only
	return sessionapi.Result{Success: true, Output: out}
}

// runAttempt runs a granted Internal or Hybrid attempt of a command and
// says what it consumed, which is reported with its result.
type runAttempt func(context.Context, *sessionapi.Command) (sessionapi.Result, *sessionapi.Usage)

// submission is a command the runtime submitted, or attached to, and has
// yet to follow to its end.
type submission struct {
	// cr is the report as far as it is known before the command is
	// followed.
	cr  CommandReport
	cmd *sessionapi.Command
	err error // of the submission or of reading the command attached to
	fn  runAttempt
	log logr.Logger
}

// submit names req with a new ID and submits it under runID, waiting at
// most wait for its grant, or reads the command attach a runtime before
// this one submitted. A command to attach to that the server no longer
// knows (CommandNotFound), or that it says a manager restart interrupted
// (Interrupted: the restart lost it before it ran, since a held command
// had not started), is submitted again under its ID. finish follows the
// command to its end.
func (r *Runtime) submit(ctx context.Context, runID string, req sessionapi.SubmitRequest, attach string, wait time.Duration, fn runAttempt) *submission {
	req.ID, req.RunID = attach, runID
	if attach == "" {
		req.ID = r.newID()
	}
	s := &submission{fn: fn, cr: CommandReport{ID: req.ID, Type: req.Type, Lane: req.Lane, Submitted: r.clock().Now()},
		log: r.Log.WithValues("runId", runID, "commandId", req.ID, "type", req.Type)}
	if attach != "" {
		s.log.Info("Following a command a runtime before this one left queued")
		s.cmd, s.err = r.Session.Get(ctx, req.ID, 0)
		if !sessionapi.IsCode(s.err, sessionapi.CodeCommandNotFound) && !sessionapi.IsCode(s.err, sessionapi.CodeInterrupted) {
			return s
		}
	} else {
		s.log.V(1).Info("Submitting")
	}
	req.Wait = &metav1.Duration{Duration: wait}
	s.cmd, s.err = r.Session.Submit(ctx, req)
	return s
}

// finish follows a submitted command to its end: s.fn runs each Internal
// or Hybrid grant; External commands are waited for. Once the runtime is
// told to passivate, a command that has not started is left queued and
// reported Held.
func (r *Runtime) finish(ctx context.Context, s *submission) CommandReport {
	cr, log := s.cr, s.log
	cmd, held, err := s.cmd, false, s.err
	if err == nil {
		cmd, held, err = r.follow(ctx, cmd, s.fn)
	}
	if sessionapi.IsCode(err, sessionapi.CodeInterrupted) && ctx.Err() == nil {
		log.Info("The manager restarted and lost the command: it failed, interrupted", "reason", err.Error())
		cmd, err = interruptedCommand(cmd, cr.ID, err), nil
	}
	cr.Finished = r.clock().Now()
	cr.Held = held
	if cmd != nil {
		cr.ID, cr.Type, cr.Lane, cr.Mode, cr.State, cr.Attempts = cmd.ID, cmd.Type, cmd.Lane, cmd.Mode, cmd.State, cmd.Attempt
		cr.Error = cmd.Error
		if res := cmd.Result; res != nil {
			cr.Output = res.Output
			if cr.Error == "" {
				cr.Error = res.Error
			}
		}
	}
	if held {
		log.Info("Left queued for the runtime that resumes the session", "state", cr.State)
		return cr
	}
	if err != nil {
		cr.Refused = refusal(err)
		cr.Error = err.Error()
		if ctx.Err() != nil {
			// The run was aborted or the runtime is stopping: say so rather
			// than how the call in flight broke, and let go of the command.
			// A submission cut short may still have been taken: the
			// command is cancelled by the ID the runtime gave it.
			cr.Error = fmt.Sprintf("the runtime stopped waiting: %v", context.Cause(ctx))
			if cmd == nil || !cmd.Final() {
				if last := r.cancel(ctx, s.cr.ID); last != nil {
					cr.State, cr.Attempts = last.State, last.Attempt
				}
			}
		}
		log.Info("Command did not finish", "error", err.Error(), "state", cr.State)
		return cr
	}
	log.V(1).Info("Command finished", "state", cr.State, "lane", cr.Lane, "mode", cr.Mode)
	return cr
}

const (
	// submitWait bounds how long a submission waits for its grant before
	// the runtime polls for it, so that a runtime told to passivate can
	// leave a command that has not started. A submission is never given up
	// while in flight: the runtime could not tell whether it was taken.
	submitWait = time.Second
	// groupSubmitWait is the wait of each submission of a parallel group:
	// long enough for an Internal grant given at once to come with the
	// reply, short enough that a command left queued behind the group's
	// others, or an External one (whose reply waits for its end), hardly
	// delays the next submission.
	groupSubmitWait = time.Millisecond
	// pollWait is the wait of each long poll of a command.
	pollWait = 30 * time.Second
	// Bounds of the backoff between polls of a command whose grant the
	// server reports at once.
	minBackoff = 100 * time.Millisecond
	maxBackoff = 5 * time.Second
)

// follow carries the submitted command cmd to its end as
// sessionapi.SessionClient.RunWithUsage does: whenever the command holds a
// grant of an attempt not seen before, fn runs it and its result is
// reported. Once the runtime is told to passivate it stops waiting for a
// command that has not started (queued, or waiting for a retry) and returns
// it with held set: the session, paused, keeps it for the runtime that
// resumes. A command that started is followed to its end.
func (r *Runtime) follow(ctx context.Context, cmd *sessionapi.Command, fn runAttempt) (_ *sessionapi.Command, held bool, err error) {
	handled := 0 // the last attempt passed to fn; attempts count from 1
	var backoff time.Duration
	for {
		if cmd.Final() {
			return cmd, false, nil
		}
		if g := cmd.Grant; g != nil && g.Attempt > handled {
			handled = g.Attempt
			attemptCtx, cancel := r.untilDeadline(ctx, g.Deadline, nil)
			res, usage := fn(attemptCtx, cmd)
			cancel()
			next, err := r.Session.Report(ctx, cmd.ID, sessionapi.ReportRequest{Attempt: g.Attempt, Result: res, Usage: usage})
			switch {
			case err == nil:
				cmd, backoff = next, 0
				continue
			case sessionapi.IsCode(err, sessionapi.CodeStaleAttempt), sessionapi.IsCode(err, sessionapi.CodeNotRunning):
				// The attempt lost its slot; a retry brings a new grant.
			default:
				return cmd, false, err
			}
		}
		started := cmd.Grant != nil || cmd.State == sessionapi.StateRunning
		if !started && r.passivating() {
			return cmd, true, nil
		}
		wctx, stopWaiting := ctx, context.CancelFunc(func() {})
		switch {
		case !started:
			// A passivation request ends the wait: the command is then
			// looked at again, and left if it still has not started.
			wctx, stopWaiting = r.untilPassivation(ctx)
		case cmd.Grant != nil:
			// The server does not wait while the command holds a grant
			// already handled: do not spin until the grant ends.
			backoff = min(max(2*backoff, minBackoff), maxBackoff)
			if err := r.sleep(ctx, backoff); err != nil {
				return cmd, false, err
			}
		}
		next, err := r.Session.Get(wctx, cmd.ID, pollWait)
		stopWaiting()
		if err != nil && ctx.Err() == nil && wctx.Err() != nil {
			next, err = r.Session.Get(ctx, cmd.ID, 0)
		}
		if err != nil {
			return cmd, false, err
		}
		cmd = next
	}
}

// untilDeadline returns a context that ends with cause when the time the
// runtime's clock says is left until deadline (a grant's, a time of the
// server's clock) has passed; a zero deadline sets none. A context's
// deadline is a wall-clock time, which a fake clock does not follow.
func (r *Runtime) untilDeadline(ctx context.Context, deadline time.Time, cause error) (context.Context, context.CancelFunc) {
	if deadline.IsZero() {
		return context.WithCancel(ctx)
	}
	return context.WithTimeoutCause(ctx, deadline.Sub(r.clock().Now()), cause)
}

// sleep waits for d on the runtime's clock, or until ctx ends.
func (r *Runtime) sleep(ctx context.Context, d time.Duration) error {
	t := r.clock().NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// cancelTimeout bounds the cancellation of a command the runtime stopped
// waiting for.
const cancelTimeout = 5 * time.Second

// cancel cancels a command the runtime no longer waits for, because its run
// was aborted or the runtime is stopping, so that an attempt holding a grant
// does not keep its slot until it times out, and returns the command as it
// then stands. It is best effort: nil means it is not known.
func (r *Runtime) cancel(ctx context.Context, id string) *sessionapi.Command {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelTimeout)
	defer cancel()
	if _, err := r.Session.Cancel(ctx, sessionapi.CancelRequest{CommandID: id}); err != nil {
		r.Log.V(1).Info("Could not cancel a command left behind", "commandId", id, "error", err.Error())
		return nil
	}
	cmd, err := r.Session.Get(ctx, id, 0)
	if err != nil {
		return nil
	}
	return cmd
}

// execute runs a granted Internal or Hybrid attempt of a tool command with
// the registry, as a worker would run it, and returns the attempt's result.
// The attempt stops at the grant's deadline; an executor that panics fails
// the attempt.
func (r *Runtime) execute(ctx context.Context, cmd *sessionapi.Command, payload json.RawMessage) (res sessionapi.Result) {
	if g := cmd.Grant; g != nil {
		var cancel context.CancelFunc
		ctx, cancel = r.untilDeadline(ctx, g.Deadline, fmt.Errorf("attempt %d ran past its grant deadline", g.Attempt))
		defer cancel()
	}
	defer func() {
		if p := recover(); p != nil {
			res = sessionapi.Result{Error: fmt.Sprintf("executor for %q panicked: %v", cmd.Type, p)}
		}
	}()
	out, err := r.executors().Run(ctx, executor.Task{CommandType: cmd.Type, Payload: payload})
	return result(out, err)
}

// result turns what an executor returned into an attempt's result, the way
// a worker reports it on an ExternalTask: the exit code and the output JSON
// only when the command ran.
func result(out executor.Output, err error) sessionapi.Result {
	res := sessionapi.Result{Success: err == nil && out.Success}
	switch {
	case err != nil:
		res.Error = err.Error()
	case !out.Success && out.Error != "":
		res.Error = out.Error
	case !out.Success:
		res.Error = "the command failed without an error message"
	}
	if err == nil || out.ExitCode != 0 || out.Stdout != "" || out.Stderr != "" {
		res.ExitCode = out.ExitCode
		res.Output, _ = json.Marshal(out) // strings, ints, bools and JSON only
	}
	return res
}

// interruptedCommand is cmd (or, when nil, the command id) failed by the
// manager restart that err reports: the turn goes on as after any failed
// command.
func interruptedCommand(cmd *sessionapi.Command, id string, err error) *sessionapi.Command {
	out := sessionapi.Command{ID: id}
	if cmd != nil {
		out = *cmd
	}
	out.State, out.Grant, out.Result = sessionapi.StateFailed, nil, nil
	out.Error = "interrupted: " + err.Error()
	if e := refusal(err); e != nil {
		out.Error = "interrupted: " + e.Message
	}
	return &out
}
