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
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/oklog/ulid/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/agentlane/agentlane/internal/executor"
	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/truncate"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// errAborted stops the context of a run the session aborted.
var errAborted = errors.New("the session aborted the run")

// Runtime drives one session through the Session API by following a Script.
// Its exported fields are set before the first call and not changed after;
// a Runtime is not copied once used.
type Runtime struct {
	// Session is the session's API client.
	Session *sessionapi.SessionClient
	// Script is what the agent does.
	Script Script
	// Executors runs the Internal and Hybrid grants of tool commands
	// locally, with the executors workers use; nil means
	// executor.NewRegistry(executor.DefaultMaxOutputBytes).
	Executors *executor.Registry
	// Clock times the reports and the model calls, and measures how long a
	// grant has left until its deadline; nil means the real clock.
	Clock clock.Clock
	// IDs names the runs RunScript starts and the commands the runtime
	// submits; nil means lowercase ULIDs (NewID). Sequential IDs with a
	// fake Clock make a run replay to the same IDs and times. Command IDs
	// name ExternalTasks, so they must not repeat in the session's
	// namespace: give each session's runtime a prefix of its own.
	IDs lanequeue.IDGenerator
	// Log receives progress; the zero Logger discards it.
	Log logr.Logger
	// Resume makes RunScript start from the session's latest checkpoint:
	// the interrupted turn continues from its next step under a new run ID
	// (TurnReport.ResumedFrom), and the turns after it follow. Serve always
	// resumes.
	Resume bool
	// Identity labels the runtime's checkpoints. Its fields win over those
	// restored from the checkpoint resumed from; the server fills the ones
	// still empty with the session's identity.
	Identity sessionapi.Identity
	// Pod is the runtime pod the runtime runs in (AGENTLANE_POD_NAME), if
	// any. A passivation request that names another pod is an earlier pod's
	// and is ignored.
	Pod string

	pass     passivation
	mu       sync.Mutex
	runs     map[string]*runState // by run ID: the runs steers and aborts may reach
	restored sessionapi.Identity  // of the checkpoint resumed from
	storeErr error                // the server's NoStore answer: no checkpoints are saved
}

// runState is what the event reader tells a running turn.
type runState struct {
	mu      sync.Mutex
	steers  []string // not yet taken at a tool boundary
	aborted bool
	cancel  context.CancelCauseFunc // stops the turn's calls; nil until it starts
}

// steer queues text for the run's next tool boundary.
func (s *runState) steer(text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.steers = append(s.steers, text)
}

// abort marks the run aborted and stops its calls.
func (s *runState) abort() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.aborted = true
	if s.cancel != nil {
		s.cancel(errAborted)
	}
}

// start attaches the turn's cancel function; an abort that came first
// cancels at once.
func (s *runState) start(cancel context.CancelCauseFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cancel = cancel
	if s.aborted {
		cancel(errAborted)
	}
}

// boundary takes the queued steers and tells whether the run was aborted.
func (s *runState) boundary() (steers []string, aborted bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	steers, s.steers = s.steers, nil
	return steers, s.aborted
}

// openRun returns the state of runID, creating it if needed; created tells
// which.
func (r *Runtime) openRun(runID string) (s *runState, created bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.runs[runID]; s != nil {
		return s, false
	}
	if r.runs == nil {
		r.runs = map[string]*runState{}
	}
	s = &runState{}
	r.runs[runID] = s
	return s, true
}

func (r *Runtime) lookupRun(runID string) *runState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runs[runID]
}

func (r *Runtime) closeRun(runID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.runs, runID)
}

func (r *Runtime) clock() clock.Clock {
	if r.Clock == nil {
		return clock.RealClock{}
	}
	return r.Clock
}

func (r *Runtime) executors() *executor.Registry {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Executors == nil {
		r.Executors = executor.NewRegistry(executor.DefaultMaxOutputBytes)
	}
	return r.Executors
}

// NewID returns a new lowercase ULID, which names a run or a command.
func NewID() string { return strings.ToLower(ulid.Make().String()) }

// newID names a run or a command with IDs, else NewID.
func (r *Runtime) newID() string {
	if r.IDs == nil {
		return NewID()
	}
	return r.IDs.NewID()
}

// RunScript runs each turn of the script once, in order, each under a new
// run ID, and saves a checkpoint after each completed step. With Resume it
// starts where the session's latest checkpoint says instead. It stops early
// when ctx ends or the API refuses the session (see Report.Refusal).
//
// While it runs it follows the session's event stream: once the session is
// to be passivated (a PassivationRequested event) it finishes the tool
// round in progress, saves a checkpoint at that boundary and returns, with
// Report.Passivated saying where a resumed runtime continues.
func (r *Runtime) RunScript(ctx context.Context) Report {
	var rep Report
	first, at := r.scriptStart(ctx, &rep)
	stopWatching := r.watchPassivation(ctx)
	defer stopWatching()
	next, idle := first, false
	for ; next < len(r.Script.Turns) && ctx.Err() == nil; next++ {
		if next > first {
			at = &position{turn: next}
		}
		// A resumed turn stops at its first boundary itself, keeping what
		// the runtime before it held.
		if r.passivating() && at.resumed == nil {
			idle = true
			break
		}
		tr := r.runTurn(ctx, r.Script.Turns[next], r.newID(), at)
		rep.Turns = append(rep.Turns, tr)
		if tr.Passivated || fatal(rep.Refusal()) {
			break
		}
	}
	if next == len(r.Script.Turns) && ctx.Err() == nil && r.passivating() {
		idle = true // told while the last turn ended
	}
	if idle {
		r.passivateIdle(ctx, next)
	}
	rep.Passivated = r.passivation()
	return rep
}

// RunTurn runs one turn under runID: its model call, then its steps in
// order, each step's commands carrying runID. Internal and Hybrid grants run
// locally with Executors; External commands run on workers and the turn
// waits for their result. Before each step, and once more at the end, the
// turn takes the steering messages that arrived (see Serve); once the run is
// aborted it submits nothing more and reports Aborted. A refusal of the API
// that no later call can get past (authentication, authorization, a missing
// or unready session) also ends the turn.
//
// RunTurn saves no checkpoint: RunScript and Serve, which know where the
// turn stands among the others, do. It stops at a tool boundary once the
// runtime was told to passivate (TurnReport.Passivated), leaving the
// commands that had not started queued (CommandReport.Held).
func (r *Runtime) RunTurn(ctx context.Context, turn Turn, runID string) TurnReport {
	return r.runTurn(ctx, turn, runID, nil)
}

// runTurn is RunTurn for the turn at at: it saves a checkpoint after each
// completed step, and a resumed turn starts at at.from, following the
// commands the runtime before it left held there.
func (r *Runtime) runTurn(ctx context.Context, turn Turn, runID string, at *position) (rep TurnReport) {
	st, created := r.openRun(runID)
	if created {
		defer r.closeRun(runID)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	st.start(cancel)

	log := r.Log.WithValues("runId", runID)
	rep = TurnReport{RunID: runID, Prompt: turn.Prompt, Started: r.clock().Now(), Commands: []CommandReport{}}
	if at != nil && at.resumed != nil {
		from := *at.resumed
		if from.Step == 0 && turn.LLM == nil {
			from.Step = 1 // no model call to resume at
		}
		rep.ResumedFrom = &from
	}
	checkpoints := r.checkpointer(at, &rep, len(turn.Steps))
	// boundary takes the steers that arrived and tells whether the run was
	// aborted.
	boundary := func() bool {
		steers, aborted := st.boundary()
		for _, s := range steers {
			log.Info("Steered", "text", truncate.Runes(s, 80, "…"))
		}
		rep.Steers = append(rep.Steers, steers...)
		rep.Aborted = rep.Aborted || aborted
		return rep.Aborted
	}
	// stop is the tool boundary before step next (before the model call
	// while modelCalled is false): it tells whether the turn ends there. A
	// runtime told to passivate saves its checkpoint there, with held, the
	// commands of that step a runtime before it left held.
	stop := func(next int, modelCalled bool, held []heldCommand) bool {
		if boundary() {
			return true
		}
		if ctx.Err() != nil {
			rep.Error = fmt.Sprintf("stopped: %v", context.Cause(ctx))
			return true
		}
		if r.passivating() {
			log.Info("Passivating at a tool boundary", "nextStep", next, "held", len(held))
			checkpoints.passivate(ctx, next, modelCalled, held)
			return true
		}
		return false
	}
	defer func() {
		boundary()
		if ctx.Err() != nil && rep.Error == "" && !rep.Aborted {
			rep.Error = fmt.Sprintf("stopped: %v", context.Cause(ctx)) // in its last step
		}
		checkpoints.end(ctx)
		rep.Finished = r.clock().Now()
		log.Info("Turn finished", "commands", len(rep.Commands), "aborted", rep.Aborted, "passivated", rep.Passivated, "steers", len(rep.Steers))
	}()
	log.Info("Turn started", "prompt", truncate.Runes(turn.Prompt, 80, "…"))

	// What a runtime before this one left held belongs to the model call
	// until it is made, then to the first step to run.
	var modelHeld, stepHeld []heldCommand
	if at != nil && at.modelDone() {
		stepHeld = at.held
	} else if at != nil {
		modelHeld = at.held
	}
	// A resumed turn made its model call before it was interrupted.
	if c := turn.LLM; c != nil && !at.modelDone() {
		if stop(0, false, modelHeld) {
			return rep
		}
		attach := ""
		if h, ok := find(modelHeld, 0); ok {
			attach = h.ID
		}
		cr := r.llm(ctx, runID, turn.Prompt, *c, attach)
		rep.Commands = append(rep.Commands, cr)
		if fatal(cr.Refused) {
			rep.Error = "the API refused the session: " + cr.Refused.Error()
			return rep
		}
		if cr.Held {
			checkpoints.passivate(ctx, 0, false, []heldCommand{{ID: cr.ID, State: cr.State}})
			return rep
		}
	}
	for i, step := range turn.Steps {
		if i < at.first() {
			continue // completed before the runtime resumed
		}
		var held []heldCommand
		if i == at.first() {
			held = stepHeld
		}
		if stop(i, true, held) {
			return rep
		}
		group := step.Parallel
		if group == nil {
			group = []Step{step}
		}
		// A group's commands are submitted one after another in script
		// order, so that their IDs and their places in the lanes do not
		// depend on how goroutines are scheduled, then followed to their
		// ends together. Each submission of a group waits only briefly for
		// its grant: a command the lane cannot start before another of the
		// group ends must not hold up the submission of the rest.
		wait := submitWait
		if len(group) > 1 {
			wait = groupSubmitWait
		}
		subs := make([]*submission, len(group))
		for k, c := range group {
			h, ok := find(held, k)
			if ok && sessionapi.Final(h.State) {
				continue // ended before the runtime resumed
			}
			subs[k] = r.tool(ctx, runID, c, h.ID, wait)
		}
		crs := make([]CommandReport, len(group))
		var wg sync.WaitGroup
		for k, s := range subs {
			if s == nil {
				continue
			}
			wg.Go(func() {
				crs[k] = r.finish(ctx, s)
				crs[k].Step, crs[k].Parallel = i+1, step.Parallel != nil
			})
		}
		wg.Wait()
		// left is the step as a passivation leaves it: every command
		// submitted, with the state it had.
		var done []CommandReport
		var left []heldCommand
		passivating := false
		for k := range group {
			if subs[k] == nil {
				h, _ := find(held, k)
				left = append(left, h)
				continue
			}
			cr := crs[k]
			rep.Commands = append(rep.Commands, cr)
			done = append(done, cr)
			left = append(left, heldCommand{Index: k, ID: cr.ID, State: cr.State})
			passivating = passivating || cr.Held
		}
		for _, cr := range done {
			if fatal(cr.Refused) {
				rep.Error = "the API refused the session: " + cr.Refused.Error()
				return rep
			}
		}
		if passivating {
			log.Info("Passivating in the middle of a step", "step", i+1, "held", len(left))
			checkpoints.passivate(ctx, i, true, left)
			return rep
		}
		checkpoints.round(ctx, i+1, done)
	}
	return rep
}

// find returns the held command at index.
func find(held []heldCommand, index int) (heldCommand, bool) {
	for _, h := range held {
		if h.Index == index {
			return h, true
		}
	}
	return heldCommand{}, false
}

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
// knows (the manager restarted and lost it before it ran) is submitted
// again under its ID. finish follows the command to its end.
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
		if !sessionapi.IsCode(s.err, sessionapi.CodeCommandNotFound) {
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
