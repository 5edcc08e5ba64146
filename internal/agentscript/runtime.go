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
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"github.com/oklog/ulid/v2"
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

	rep = TurnReport{RunID: runID, Prompt: turn.Prompt, Started: r.clock().Now(), Commands: []CommandReport{}}
	if at != nil && at.resumed != nil {
		from := *at.resumed
		if from.Step == 0 && turn.LLM == nil {
			from.Step = 1 // no model call to resume at
		}
		rep.ResumedFrom = &from
	}
	t := &turnRun{r: r, runID: runID, run: st, log: r.Log.WithValues("runId", runID), rep: &rep,
		checkpoints: r.checkpointer(at, &rep, len(turn.Steps))}
	defer t.end(ctx)
	t.log.Info("Turn started", "prompt", truncate.Runes(turn.Prompt, 80, "…"))

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
		if t.stop(ctx, 0, false, modelHeld) || t.modelCall(ctx, turn.Prompt, *c, modelHeld) {
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
		if t.stop(ctx, i, true, held) || t.step(ctx, i, step, held) {
			return rep
		}
	}
	return rep
}

// turnRun is one run of a turn: what runTurn's parts share.
type turnRun struct {
	r           *Runtime
	runID       string
	run         *runState
	log         logr.Logger
	rep         *TurnReport
	checkpoints *checkpointer
}

// boundary takes the steers that arrived and tells whether the run was
// aborted.
func (t *turnRun) boundary() bool {
	steers, aborted := t.run.boundary()
	for _, s := range steers {
		t.log.Info("Steered", "text", truncate.Runes(s, 80, "…"))
	}
	t.rep.Steers = append(t.rep.Steers, steers...)
	t.rep.Aborted = t.rep.Aborted || aborted
	return t.rep.Aborted
}

// stop is the tool boundary before step next (before the model call while
// modelCalled is false): it tells whether the turn ends there. A runtime
// told to passivate saves its checkpoint there, with held, the commands of
// that step a runtime before it left held.
func (t *turnRun) stop(ctx context.Context, next int, modelCalled bool, held []heldCommand) bool {
	if t.boundary() {
		return true
	}
	if ctx.Err() != nil {
		t.rep.Error = fmt.Sprintf("stopped: %v", context.Cause(ctx))
		return true
	}
	if t.r.passivating() {
		t.log.Info("Passivating at a tool boundary", "nextStep", next, "held", len(held))
		t.checkpoints.passivate(ctx, next, modelCalled, held)
		return true
	}
	return false
}

// end closes the turn's report and its checkpoints, however it ended.
func (t *turnRun) end(ctx context.Context) {
	t.boundary()
	if ctx.Err() != nil && t.rep.Error == "" && !t.rep.Aborted {
		t.rep.Error = fmt.Sprintf("stopped: %v", context.Cause(ctx)) // in its last step
	}
	t.checkpoints.end(ctx)
	t.rep.Finished = t.r.clock().Now()
	t.log.Info("Turn finished", "commands", len(t.rep.Commands), "aborted", t.rep.Aborted, "passivated", t.rep.Passivated, "steers", len(t.rep.Steers))
}

// modelCall makes the turn's model call, following the command a runtime
// before this one left held for it; it tells whether the turn ends there.
func (t *turnRun) modelCall(ctx context.Context, prompt string, c LLMCall, held []heldCommand) bool {
	attach := ""
	if h, ok := find(held, 0); ok {
		attach = h.ID
	}
	cr := t.r.llm(ctx, t.runID, prompt, c, attach)
	t.rep.Commands = append(t.rep.Commands, cr)
	if fatal(cr.Refused) {
		t.rep.Error = "the API refused the session: " + cr.Refused.Error()
		return true
	}
	if cr.Held {
		t.checkpoints.passivate(ctx, 0, false, []heldCommand{{ID: cr.ID, State: cr.State}})
		return true
	}
	return false
}

// step runs step i of the turn (its parallel group, or the single command)
// and saves the checkpoint of the completed round; it tells whether the
// turn ends there.
func (t *turnRun) step(ctx context.Context, i int, step Step, held []heldCommand) bool {
	group := step.Parallel
	if group == nil {
		group = []Step{step}
	}
	subs := t.submitGroup(ctx, group, held)
	crs := make([]CommandReport, len(group))
	var wg sync.WaitGroup
	for k, s := range subs {
		if s == nil {
			continue
		}
		wg.Go(func() {
			crs[k] = t.r.finish(ctx, s)
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
		t.rep.Commands = append(t.rep.Commands, cr)
		done = append(done, cr)
		left = append(left, heldCommand{Index: k, ID: cr.ID, State: cr.State})
		passivating = passivating || cr.Held
	}
	for _, cr := range done {
		if fatal(cr.Refused) {
			t.rep.Error = "the API refused the session: " + cr.Refused.Error()
			return true
		}
	}
	if passivating {
		t.log.Info("Passivating in the middle of a step", "step", i+1, "held", len(left))
		t.checkpoints.passivate(ctx, i, true, left)
		return true
	}
	t.checkpoints.round(ctx, i+1, done)
	return false
}

// submitGroup submits a group's commands one after another in script
// order, so that their IDs and their places in the lanes do not depend on
// how goroutines are scheduled; the caller then follows them to their ends
// together. Each submission of a group waits only briefly for its grant: a
// command the lane cannot start before another of the group ends must not
// hold up the submission of the rest. A command that ended before the
// runtime resumed gets no submission (nil).
func (t *turnRun) submitGroup(ctx context.Context, group []Step, held []heldCommand) []*submission {
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
		subs[k] = t.r.tool(ctx, t.runID, c, h.ID, wait)
	}
	return subs
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
