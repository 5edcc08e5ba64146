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
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// checkpointTimeout bounds one save or load of a checkpoint.
const checkpointTimeout = 10 * time.Second

// checkpointState is the runtime's state in a checkpoint
// (sessionapi.Checkpoint.State).
type checkpointState struct {
	// Turn is the turn's place in the runtime's sequence of turns: the
	// script's turn under RunScript; under Serve the number of turns served
	// before it, the script turn being Turn modulo the script's length.
	Turn int `json:"turn"`
	// NextStep is the index of the turn's first step not completed.
	NextStep int `json:"nextStep"`
	// RunID is the run the checkpoint belongs to.
	RunID string `json:"runId"`
	// Done is set once the turn ended: every step ran, or the session
	// aborted it. Nothing is left to resume.
	Done bool `json:"done,omitempty"`
	// Idle is set when the runtime passivated between turns: Turn is the
	// place of the next turn, and RunID names the checkpoint only.
	Idle bool `json:"idle,omitempty"`
	// ModelCalled is set when the turn's model call ended before step
	// NextStep; a checkpoint of a later step implies it.
	ModelCalled bool `json:"modelCalled,omitempty"`
	// Held are the commands of the unfinished step (or model call) that the
	// runtime had submitted when it passivated in the middle of it.
	Held []heldCommand `json:"held,omitempty"`
}

// heldCommand is a command of a step left unfinished by a passivation.
type heldCommand struct {
	// Index is the command's place in its parallel group; 0 for a step of
	// one command and for the model call.
	Index int `json:"index"`
	// ID is the command's ID.
	ID string `json:"id"`
	// State is Queued or Retrying for a command that had not started: it
	// stays queued in the session and the resumed run follows it by ID
	// instead of submitting it again. A final state is that of a command
	// that had ended: the resumed run does not run it again.
	State string `json:"state"`
}

// modelCalled tells whether the turn's model call ended before the state
// was saved.
func (st *checkpointState) modelCalled() bool { return st.NextStep > 0 || st.ModelCalled }

// Resumption names the run a resumed turn continues.
type Resumption struct {
	// RunID is the interrupted run.
	RunID string `json:"runId"`
	// Step is the first step the resumed turn ran, counted from 1 as in
	// CommandReport.Step; the steps before it completed in RunID.
	Step int `json:"step"`
}

// position is where a turn stands in the runtime's sequence of turns, for
// its checkpoints. A nil position saves none.
type position struct {
	// turn is checkpointState.Turn.
	turn int
	// from is the first step to run; the steps before it completed before
	// the runtime resumed.
	from int
	// resumed is set for a resumed turn.
	resumed *Resumption
	// modelCalled is set when the turn's model call ended before the
	// runtime resumed.
	modelCalled bool
	// held are the commands of step from (or of the model call, until it
	// was made) that an earlier runtime left when it passivated.
	held []heldCommand
}

func (p *position) first() int {
	if p == nil {
		return 0
	}
	return p.from
}

// modelDone tells whether the turn's model call was made before the runtime
// resumed.
func (p *position) modelDone() bool { return p != nil && p.modelCalled }

// checkpointer saves the checkpoints of one turn: one after each completed
// step, never while a command of the step is in flight, and a last one
// marked done when the session aborts the turn.
type checkpointer struct {
	r     *Runtime
	at    *position
	rep   *TurnReport
	steps int
	// next is the first step not completed; done is set once a checkpoint
	// marked done was saved.
	next int
	done bool
}

func (r *Runtime) checkpointer(at *position, rep *TurnReport, steps int) *checkpointer {
	return &checkpointer{r: r, at: at, rep: rep, steps: steps, next: at.first()}
}

// round is called after the step before next ended. The step is complete
// when the turn was not stopped and every command of the step is final.
func (c *checkpointer) round(ctx context.Context, next int, crs []CommandReport) {
	if c.at == nil || ctx.Err() != nil {
		return
	}
	for _, cr := range crs {
		if !sessionapi.Final(cr.State) {
			return
		}
	}
	c.next, c.done = next, next == c.steps
	c.r.saveCheckpoint(ctx, c.rep, checkpointState{Turn: c.at.turn, NextStep: next, RunID: c.rep.RunID, Done: c.done})
}

// passivate saves the checkpoint of a turn that stops because the runtime
// was told to passivate: at a tool boundary, before step next (or before
// its model call when modelCalled is false), with the commands of that step
// it left held. It is saved even when the last round's checkpoint says the
// same, since the operator waits for one newer than its request.
func (c *checkpointer) passivate(ctx context.Context, next int, modelCalled bool, held []heldCommand) {
	c.rep.Passivated = true
	st := checkpointState{RunID: c.rep.RunID, NextStep: next, ModelCalled: modelCalled && next == 0, Held: held}
	if c.at != nil {
		st.Turn = c.at.turn
		c.next = next
		c.r.saveCheckpoint(ctx, c.rep, st)
	}
	var ids []string
	for _, h := range held {
		if !sessionapi.Final(h.State) {
			ids = append(ids, h.ID)
		}
	}
	c.r.passivated(st, ids, c.rep.CheckpointError)
}

// end is called once the turn is over. An aborted turn, and one that had no
// step left to run, is saved as done; a turn that was stopped keeps its last
// checkpoint, so that it resumes from there.
func (c *checkpointer) end(ctx context.Context) {
	if c.at == nil || c.done || c.rep.Passivated {
		return
	}
	if c.rep.Aborted || (c.rep.Error == "" && ctx.Err() == nil && c.next == c.steps) {
		c.done = true
		c.r.saveCheckpoint(ctx, c.rep, checkpointState{Turn: c.at.turn, NextStep: c.next, RunID: c.rep.RunID, Done: true})
	}
}

// saveCheckpoint saves st as the latest checkpoint of its run and counts it
// in rep, or records in rep why it could not. Once the server says it has
// no session store the runtime stops trying.
func (r *Runtime) saveCheckpoint(ctx context.Context, rep *TurnReport, st checkpointState) {
	log := r.Log.WithValues("runId", st.RunID, "nextStep", st.NextStep)
	if err := r.noStore(); err != nil {
		rep.CheckpointError = cmp.Or(rep.CheckpointError, err.Error())
		return
	}
	state, _ := json.Marshal(st) // ints, a string and a bool
	cp := sessionapi.Checkpoint{RunID: st.RunID, Turn: st.Turn, Round: st.NextStep, Identity: r.checkpointIdentity(), State: state}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), checkpointTimeout)
	defer cancel()
	saved, err := r.Session.SaveCheckpoint(ctx, cp)
	if err != nil {
		if sessionapi.IsCode(err, sessionapi.CodeNoStore) {
			r.setNoStore(err)
		}
		rep.CheckpointError = cmp.Or(rep.CheckpointError, err.Error())
		log.Info("Could not save a checkpoint", "error", err.Error())
		return
	}
	rep.Checkpoints++
	log.V(1).Info("Checkpoint saved", "location", saved.Location, "done", st.Done)
}

// checkpointIdentity is the identity the runtime's checkpoints carry: its
// own Identity's fields, else those restored from the checkpoint it resumed
// from. The server fills what is still empty with the session's identity.
func (r *Runtime) checkpointIdentity() sessionapi.Identity {
	r.mu.Lock()
	defer r.mu.Unlock()
	id, old := r.Identity, r.restored
	return sessionapi.Identity{
		TenantID:        cmp.Or(id.TenantID, old.TenantID),
		Principal:       cmp.Or(id.Principal, old.Principal),
		AgentTemplateID: cmp.Or(id.AgentTemplateID, old.AgentTemplateID),
		CorrelationID:   cmp.Or(id.CorrelationID, old.CorrelationID),
	}
}

func (r *Runtime) noStore() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.storeErr
}

func (r *Runtime) setNoStore(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.storeErr = err
}

// resumePoint loads the session's latest checkpoint and returns its state,
// or nil to start fresh: when nothing is saved, and when the checkpoint
// cannot be used (no store, a checkpoint of another runtime or script),
// which rep.ResumeError then says. turnOK tells whether a state fits the
// script. The checkpoint's identity is restored for the checkpoints to
// come.
func (r *Runtime) resumePoint(ctx context.Context, rep *Report, turnOK func(checkpointState) bool) *checkpointState {
	lctx, cancel := context.WithTimeout(ctx, checkpointTimeout)
	defer cancel()
	cp, err := r.Session.LoadCheckpoint(lctx, "")
	switch {
	case sessionapi.IsCode(err, sessionapi.CodeCheckpointNotFound):
		r.Log.Info("No checkpoint to resume from; starting fresh")
		return nil
	case err != nil:
		if sessionapi.IsCode(err, sessionapi.CodeNoStore) {
			r.setNoStore(err)
		}
		rep.ResumeError = fmt.Sprintf("could not load the latest checkpoint, starting fresh: %v", err)
		r.Log.Info("Could not load the latest checkpoint; starting fresh", "error", err.Error())
		return nil
	}
	var st checkpointState
	if json.Unmarshal(cp.State, &st) != nil || st.RunID != cp.RunID || st.NextStep < 0 || st.Turn < 0 || !turnOK(st) {
		rep.ResumeError = fmt.Sprintf("the latest checkpoint (run %s) is not one of this script's, starting fresh", cp.RunID)
		r.Log.Info("The latest checkpoint does not fit the script; starting fresh", "runId", cp.RunID)
		return nil
	}
	r.mu.Lock()
	r.restored = cp.Identity
	r.mu.Unlock()
	r.resumedFrom(cp.Time)
	r.Log.Info("Resuming", "runId", st.RunID, "turn", st.Turn, "nextStep", st.NextStep, "done", st.Done, "idle", st.Idle, "held", len(st.Held))
	return &st
}

// resumed is where a resumed turn continues from st.
func resumed(st *checkpointState) *position {
	step := st.NextStep + 1
	if !st.modelCalled() {
		step = 0 // the model call, if the turn has one
	}
	return &position{turn: st.Turn, from: st.NextStep, resumed: &Resumption{RunID: st.RunID, Step: step},
		modelCalled: st.modelCalled(), held: st.Held}
}

// scriptStart is where RunScript starts: the first turn, or with Resume the
// turn of the latest checkpoint (from its next step, under a new run ID) or
// the one after it when that turn was done. at is the first turn's
// position.
func (r *Runtime) scriptStart(ctx context.Context, rep *Report) (first int, at *position) {
	if !r.Resume {
		return 0, &position{}
	}
	st := r.resumePoint(ctx, rep, func(st checkpointState) bool {
		if st.Idle {
			return st.Turn <= len(r.Script.Turns)
		}
		return st.Turn < len(r.Script.Turns) && st.NextStep <= len(r.Script.Turns[st.Turn].Steps)
	})
	switch {
	case st == nil:
		return 0, &position{}
	case st.Idle:
		return st.Turn, &position{turn: st.Turn}
	case st.Done:
		return st.Turn + 1, &position{turn: st.Turn + 1}
	}
	return st.Turn, resumed(st)
}

// passivateIdle saves the checkpoint of a runtime that passivates between
// turns, turn being the place of the next one, and records it in rep.
func (r *Runtime) passivateIdle(ctx context.Context, turn int) {
	if r.passivation() != nil {
		return // a turn stopped for it already
	}
	st := checkpointState{Turn: turn, RunID: r.newID(), Idle: true}
	var tr TurnReport
	r.saveCheckpoint(ctx, &tr, st)
	r.passivated(st, nil, tr.CheckpointError)
}
