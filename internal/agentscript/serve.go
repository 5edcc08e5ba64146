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
	"sync"
	"time"

	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// finishTimeout bounds the FinishRun call of a turn, which is made even when
// the runtime is stopping so that the session's next turn is not held up.
const finishTimeout = 10 * time.Second

// Serve runs the session's inbox: it holds the session's runtime event
// stream (runtime=true, reconnecting after failures) and, for each turn
// event, runs the next turn of the script (cycling through it) under the
// event's run ID with the event's text as prompt, then calls FinishRun so
// that the session may start its next turn. Turns run one at a time, in
// event order. The stream starts with the events the server kept; a turn
// event whose run is no longer the session's active run (per Stats) is
// history and is skipped.
//
// Events are read on their own goroutine while a turn runs: a steer event
// for a run is queued for its next tool boundary (TurnReport.Steers), an
// abort event stops the run's calls and marks it Aborted.
//
// Serve saves a checkpoint after each completed step of a turn. On start it
// loads the session's latest checkpoint: a turn it did not finish continues
// from its next step under a new run ID (TurnReport.ResumedFrom) before any
// turn event is taken, and its run is then finished, so that a replayed
// turn event of that run does not run it again. Nothing saved means a fresh
// start; a store that cannot be used is reported in Report.ResumeError.
//
// A PassivationRequested event stops Serve: a turn in progress finishes
// its tool round and saves a checkpoint at that boundary (its run is not
// finished: the runtime that resumes the session continues it), an idle
// Serve saves a checkpoint saying so; then Serve returns with
// Report.Passivated set and a nil error.
//
// Serve returns after maxTurns turns, or when ctx ends if maxTurns is 0; the
// error is nil then. It returns an error when the stream cannot be opened or
// fails for good, when FinishRun fails, and when ctx ends before maxTurns
// turns ran. The report covers the turns run either way.
func (r *Runtime) Serve(ctx context.Context, maxTurns int) (Report, error) {
	if err := r.Script.Validate(); err != nil {
		return Report{}, fmt.Errorf("invalid script: %w", err)
	}
	stream, err := r.Session.Events(ctx, sessionapi.EventsOptions{Runtime: true, Reconnect: true})
	if err != nil {
		return Report{}, fmt.Errorf("open the event stream: %w", err)
	}
	var rep Report
	resume := r.resumePoint(ctx, &rep, func(st checkpointState) bool {
		return st.NextStep <= len(r.Script.Turns[st.Turn%len(r.Script.Turns)].Steps)
	})
	readCtx, stopReading := context.WithCancel(ctx)
	in := &inbox{wake: make(chan struct{}, 1), seen: map[string]bool{}}
	if resume != nil {
		in.seen[resume.RunID] = true
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		r.readEvents(readCtx, stream, in)
	}()
	defer func() {
		stopReading()
		_ = stream.Close()
		<-read
		for _, ev := range in.turns { // received, never run
			r.closeRun(ev.RunID)
		}
	}()

	next := 0 // the place of the next turn among the turns served
	switch {
	case resume != nil && resume.Idle:
		next = resume.Turn
	case resume != nil:
		next = resume.Turn + 1
		passivated, err := r.serveResumed(ctx, resume, &rep)
		if err != nil || passivated {
			rep.Passivated = r.passivation()
			return rep, err
		}
	}
	for maxTurns == 0 || len(rep.Turns) < maxTurns {
		ev, err := in.next(ctx)
		switch {
		case errors.Is(err, errPassivated):
			r.passivateIdle(ctx, next)
			rep.Passivated = r.passivation()
			return rep, nil
		case ctx.Err() != nil && maxTurns == 0:
			return rep, nil
		case ctx.Err() != nil:
			return rep, fmt.Errorf("stopped after %d of %d turns: %w", len(rep.Turns), maxTurns, context.Cause(ctx))
		case err != nil:
			return rep, fmt.Errorf("event stream: %w", err)
		}
		if r.stale(ctx, ev) {
			r.closeRun(ev.RunID)
			continue
		}
		turn := r.Script.Turns[next%len(r.Script.Turns)]
		turn.Prompt = ev.Text
		tr := r.runTurn(ctx, turn, ev.RunID, &position{turn: next})
		next++
		tr.Messages = len(ev.Messages)
		rep.Turns = append(rep.Turns, tr)
		if tr.Passivated {
			// The run goes on in the runtime that resumes the session.
			r.closeRun(ev.RunID)
			rep.Passivated = r.passivation()
			return rep, nil
		}
		// Finish even when ctx ended: the run is over either way.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
		err = r.Session.FinishRunWithOutcome(fctx, ev.RunID, tr.Outcome())
		cancel()
		r.closeRun(ev.RunID)
		if err != nil {
			return rep, fmt.Errorf("finish run %s: %w", ev.RunID, err)
		}
	}
	return rep, nil
}

// serveResumed continues the turn of the checkpoint st, unless it was done,
// then finishes its run so that the session's next turn may start. A turn
// stopped again by a passivation is not finished: passivated says so.
func (r *Runtime) serveResumed(ctx context.Context, st *checkpointState, rep *Report) (passivated bool, err error) {
	if !st.Done {
		turn := r.Script.Turns[st.Turn%len(r.Script.Turns)]
		tr := r.runTurn(ctx, turn, r.newID(), resumed(st))
		rep.Turns = append(rep.Turns, tr)
		if tr.Passivated {
			return true, nil
		}
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	if err := r.Session.FinishRun(fctx, st.RunID); err != nil {
		return false, fmt.Errorf("finish the resumed run %s: %w", st.RunID, err)
	}
	return false, nil
}

// stale tells a turn event that is no longer the session's run: the
// stream starts with the events the server kept, so it replays the turns of
// runs that ended (and of runs an interrupt aborted before they started).
// When the session's stats cannot be read the turn is taken as current.
func (r *Runtime) stale(ctx context.Context, ev sessionapi.Event) bool {
	st, err := r.Session.Stats(ctx)
	if err != nil {
		r.Log.Info("Could not read the session's active run; running the turn", "runId", ev.RunID, "error", err.Error())
		return false
	}
	if st.Session.ActiveRun != ev.RunID {
		r.Log.V(1).Info("Skipping a turn that is not the session's active run", "runId", ev.RunID, "activeRun", st.Session.ActiveRun)
		return true
	}
	return false
}

// readEvents hands turn events to in and steers and aborts to their runs
// until the stream fails or ctx ends.
func (r *Runtime) readEvents(ctx context.Context, stream *sessionapi.EventStream, in *inbox) {
	for {
		ev, err := stream.Next()
		if err != nil {
			if ctx.Err() != nil {
				err = context.Cause(ctx)
			}
			in.fail(err)
			return
		}
		log := r.Log.WithValues("event", ev.ID, "runId", ev.RunID)
		switch ev.Type {
		case sessionapi.EventTurn:
			// The run's state exists from now on, so that a steer or an
			// abort that comes before the turn starts is kept for it.
			if in.add(ev) {
				r.openRun(ev.RunID)
				in.push(ev)
				log.V(1).Info("Turn received", "messages", len(ev.Messages))
			}
		case sessionapi.EventSteer:
			if s := r.lookupRun(ev.RunID); s != nil {
				s.steer(ev.Text)
				log.V(1).Info("Steer received")
			} else {
				log.Info("Steer for a run that is not running; ignored")
			}
		case sessionapi.EventAbort:
			if s := r.lookupRun(ev.RunID); s != nil {
				s.abort()
				log.Info("Run aborted")
			}
		case sessionapi.EventPassivationRequested:
			if r.offerPassivation(ev) {
				in.passivate()
			}
		case sessionapi.EventEventsLost:
			log.Info("Events were lost while the stream was down", "lost", ev.Lost)
		}
	}
}

// inbox is the queue of turn events between the event reader and Serve.
// Turns may queue up while one runs only after an interrupt, so the queue is
// short; it is unbounded so that reading never stops for it.
type inbox struct {
	mu    sync.Mutex
	turns []sessionapi.Event
	seen  map[string]bool // run IDs of turns received, so a replayed one runs once
	err   error           // why the stream ended
	// passivated is set once the runtime was told to passivate: no turn is
	// taken after that.
	passivated bool
	wake       chan struct{} // capacity 1: something was pushed, the stream ended or the runtime is to passivate
}

// errPassivated ends the wait for a turn of a runtime told to passivate.
var errPassivated = errors.New("the session is passivated")

func (in *inbox) passivate() {
	in.mu.Lock()
	in.passivated = true
	in.mu.Unlock()
	in.signal()
}

// add records a turn's run ID and tells whether it is new.
func (in *inbox) add(ev sessionapi.Event) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.seen[ev.RunID] {
		return false
	}
	in.seen[ev.RunID] = true
	return true
}

func (in *inbox) push(ev sessionapi.Event) {
	in.mu.Lock()
	in.turns = append(in.turns, ev)
	in.mu.Unlock()
	in.signal()
}

func (in *inbox) fail(err error) {
	in.mu.Lock()
	in.err = err
	in.mu.Unlock()
	in.signal()
}

func (in *inbox) signal() {
	select {
	case in.wake <- struct{}{}:
	default:
	}
}

// next returns the oldest turn event, waiting for one; it returns an error
// once the stream ended and no turn is left, or when ctx ends, and
// errPassivated once the runtime is told to passivate: a turn not taken yet
// stays the session's, for the runtime that resumes it.
func (in *inbox) next(ctx context.Context) (sessionapi.Event, error) {
	for {
		in.mu.Lock()
		switch {
		case in.passivated:
			in.mu.Unlock()
			return sessionapi.Event{}, errPassivated
		case len(in.turns) > 0:
			ev := in.turns[0]
			in.turns = in.turns[1:]
			in.mu.Unlock()
			return ev, nil
		case in.err != nil:
			err := in.err
			in.mu.Unlock()
			return sessionapi.Event{}, err
		}
		in.mu.Unlock()
		select {
		case <-in.wake:
		case <-ctx.Done():
			return sessionapi.Event{}, context.Cause(ctx)
		}
	}
}
