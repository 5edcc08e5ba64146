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
	"sync"
	"time"

	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// Passivation is how a runtime that was told to passivate stopped: the
// request it answered and the checkpoint it left for the runtime that
// resumes the session.
type Passivation struct {
	// Reason and Deadline are the request's.
	Reason   string    `json:"reason"`
	Deadline time.Time `json:"deadline"`
	// Pod is the runtime pod the request named, if any.
	Pod string `json:"pod,omitempty"`
	// RunID is the run of the checkpoint saved on stopping; Step is where
	// the resumed runtime continues it, counted from 1 as in
	// CommandReport.Step (0 is the turn's model call). A runtime that
	// stopped between turns saves a checkpoint of no run's step: RunID
	// then names that checkpoint and Step is 0.
	RunID string `json:"runId,omitempty"`
	Step  int    `json:"step,omitempty"`
	// Held are the commands the runtime submitted that had not started:
	// they stay queued in the session, and the resumed runtime follows them
	// by ID instead of submitting them again.
	Held []string `json:"held,omitempty"`
	// CheckpointError says why the checkpoint could not be saved; the
	// operator then evicts the pod at the deadline and the session resumes
	// from an older checkpoint.
	CheckpointError string `json:"checkpointError,omitempty"`
}

// passivation is the passivation request the runtime answers, once one
// came.
type passivation struct {
	mu sync.Mutex
	// resumedAt is the time of the checkpoint the runtime resumed from.
	resumedAt time.Time
	// taken is set once a request was taken; requested is closed then.
	taken     *Passivation
	requested chan struct{}
	// stopped is set once the runtime stopped for it, at a tool boundary.
	stopped bool
}

func (p *passivation) init() {
	if p.requested == nil {
		p.requested = make(chan struct{})
	}
}

// offerPassivation takes a PassivationRequested event unless it is history.
// The stream starts with the events the server kept, so a runtime may read
// the request that moved its session off a previous pod. A request is
// history when it names another pod than Runtime.Pod; when either side
// names none, when it came no later than the checkpoint the runtime
// resumed from (which answered it) or when its deadline has passed (the
// pod was evicted at the deadline before this runtime started). It tells
// whether the request was taken.
func (r *Runtime) offerPassivation(ev sessionapi.Event) bool {
	req := ev.Passivation
	if req == nil {
		return false
	}
	p := &r.pass
	p.mu.Lock()
	defer p.mu.Unlock()
	p.init()
	if p.taken != nil {
		return false
	}
	log := r.Log.WithValues("reason", req.Reason, "deadline", req.Deadline, "pod", req.Pod)
	switch {
	case req.Pod != "" && r.Pod != "":
		if req.Pod != r.Pod {
			log.V(1).Info("Passivation request for another pod; ignored")
			return false
		}
	case !p.resumedAt.IsZero() && !ev.Time.After(p.resumedAt):
		log.V(1).Info("Passivation request older than the checkpoint resumed from; ignored")
		return false
	case !req.Deadline.IsZero() && !req.Deadline.After(r.clock().Now()):
		log.V(1).Info("Passivation request past its deadline; ignored")
		return false
	}
	log.Info("Passivation requested: finishing the tool round in progress")
	p.taken = &Passivation{Reason: req.Reason, Deadline: req.Deadline, Pod: req.Pod}
	close(p.requested)
	return true
}

// passivating tells whether the runtime was told to passivate.
func (r *Runtime) passivating() bool {
	r.pass.mu.Lock()
	defer r.pass.mu.Unlock()
	return r.pass.taken != nil
}

// passivationRequested returns a channel closed once the runtime is told to
// passivate.
func (r *Runtime) passivationRequested() <-chan struct{} {
	r.pass.mu.Lock()
	defer r.pass.mu.Unlock()
	r.pass.init()
	return r.pass.requested
}

// resumedFrom records the time of the checkpoint the runtime resumed from.
func (r *Runtime) resumedFrom(t time.Time) {
	r.pass.mu.Lock()
	defer r.pass.mu.Unlock()
	r.pass.resumedAt = t
}

// untilPassivation returns a context that also ends when the runtime is told
// to passivate, for waits that must then be given up.
func (r *Runtime) untilPassivation(ctx context.Context) (context.Context, context.CancelFunc) {
	wctx, cancel := context.WithCancel(ctx)
	requested := r.passivationRequested()
	go func() {
		select {
		case <-requested:
			cancel()
		case <-wctx.Done():
		}
	}()
	return wctx, cancel
}

// passivated records the checkpoint the runtime saved on stopping.
func (r *Runtime) passivated(st checkpointState, held []string, saveErr string) {
	r.pass.mu.Lock()
	defer r.pass.mu.Unlock()
	p := r.pass.taken
	if p == nil {
		return
	}
	r.pass.stopped = true
	p.RunID, p.Held, p.CheckpointError = st.RunID, held, saveErr
	p.Step = 0
	if !st.Idle && (st.NextStep > 0 || st.ModelCalled) {
		p.Step = st.NextStep + 1
	}
}

// passivation returns how the runtime passivated, or nil when it did not
// stop for a passivation request (it was not told to, or was stopped before
// it reached a tool boundary).
func (r *Runtime) passivation() *Passivation {
	r.pass.mu.Lock()
	defer r.pass.mu.Unlock()
	if !r.pass.stopped {
		return nil
	}
	p := *r.pass.taken
	return &p
}

// watchPassivation follows the session's event stream for a passivation
// request until the returned function is called; RunScript uses it, Serve
// reads the requests from its own stream. A stream that cannot be opened is
// logged: the runtime then runs on without hearing of passivation, and the
// operator evicts its pod at the deadline.
func (r *Runtime) watchPassivation(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	stream, err := r.Session.Events(ctx, sessionapi.EventsOptions{Reconnect: true})
	if err != nil {
		cancel()
		r.Log.Info("Could not follow the session's events; passivation requests go unheard", "error", err.Error())
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			ev, err := stream.Next()
			if err != nil {
				if ctx.Err() == nil {
					r.Log.Info("The session's event stream ended; passivation requests go unheard", "error", err.Error())
				}
				return
			}
			if ev.Type == sessionapi.EventPassivationRequested {
				r.offerPassivation(ev)
			}
		}
	}()
	return func() {
		cancel()
		_ = stream.Close()
		<-done
	}
}
