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

package sessionserver

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// call is a command submitted through the API, from submission until a
// while after it ended. For Internal and Hybrid commands it is also the
// command's handler: a granted attempt waits in Run for the runtime's
// report.
type call struct {
	session types.NamespacedName
	typ     string
	runID   string
	mode    string
	labels  sessionapi.Identity
	ticket  *lanequeue.Ticket
	// task is the ExternalTask of an External command.
	task string
	// self marks an External command of a lane the session handles itself
	// (lanehandlers.go): its attempts wait as the scheduler's external
	// tasks for the session's completion, without an ExternalTask.
	self bool
	// direct runs the attempts of a command of a Direct lane (direct.go);
	// stop ends its waits when the server stops.
	direct *directCall
	stop   <-chan struct{}
	// admit, when set, runs before each attempt is offered to the runtime
	// (the budget check); its error fails the attempt.
	admit func(context.Context, lanequeue.Attempt) error

	mu    sync.Mutex
	grant *grant
	// changed is closed, and cleared, when the grant changes; made by the
	// first waiter that needs it. An External command has no grant to
	// wait for: its waiters wait for its end only, and it has none.
	changed chan struct{}
	// endedAt is when the sweeper first saw the command final.
	endedAt time.Time
}

// grant is an attempt that waits for the runtime's report.
type grant struct {
	attempt  int
	deadline time.Time
	report   chan lanequeue.Result
}

// Run implements lanequeue.Handler: it offers the attempt to the runtime
// and waits for its report.
func (c *call) Run(ctx context.Context, a lanequeue.Attempt) (lanequeue.Result, error) {
	if c.admit != nil {
		if err := c.admit(ctx, a); err != nil {
			return lanequeue.Result{Error: err.Error()}, err
		}
	}
	g := &grant{attempt: a.Number, deadline: a.Deadline, report: make(chan lanequeue.Result, 1)}
	c.setGrant(g)
	defer c.clearGrant(g)
	select {
	case r := <-g.report:
		return r, nil
	case <-ctx.Done():
		return lanequeue.Result{}, ctx.Err()
	}
}

func (c *call) setGrant(g *grant) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.grant = g
	c.notifyLocked()
}

func (c *call) clearGrant(g *grant) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.grant == g {
		c.grant = nil
		c.notifyLocked()
	}
}

func (c *call) notifyLocked() {
	if c.changed != nil {
		close(c.changed)
		c.changed = nil
	}
}

// report hands the runtime's result to the waiting attempt.
func (c *call) report(attempt int, r lanequeue.Result) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.grant
	if g == nil || g.attempt != attempt {
		o, final := c.ticket.Outcome()
		switch {
		case final:
			return apiErrorf(409, sessionapi.CodeNotRunning, "command %s already ended %s", c.ticket.ID(), o.State)
		case attempt > o.Attempts:
			return apiErrorf(409, sessionapi.CodeNotRunning, "command %s has no attempt %d waiting for a report (it is %s at attempt %d)", c.ticket.ID(), attempt, o.State, o.Attempts)
		default:
			return apiErrorf(409, sessionapi.CodeStaleAttempt, "attempt %d of command %s no longer holds its slot (the current attempt is %d)", attempt, c.ticket.ID(), o.Attempts)
		}
	}
	g.report <- r
	c.grant = nil
	c.notifyLocked()
	return nil
}

// view returns the command as the API shows it.
func (c *call) view() sessionapi.Command {
	o, final := c.ticket.Outcome()
	cmd := sessionapi.Command{
		ID:      c.ticket.ID(),
		Session: c.session.Name,
		Type:    c.typ,
		Lane:    c.ticket.Lane(),
		RunID:   c.runID,
		Mode:    c.mode,
		State:   string(o.State),
		Labels:  c.labels,
		Attempt: o.Attempts,
		Task:    c.task,
	}
	if c.direct != nil {
		if c.direct.isRecorded() {
			cmd.Task = cmd.ID
		}
		cmd.StartedAt = c.direct.startedAt()
	}
	c.mu.Lock()
	if g := c.grant; g != nil && !final {
		cmd.Grant = &sessionapi.Grant{Attempt: g.attempt, Deadline: g.deadline}
	}
	c.mu.Unlock()
	if final {
		cmd.Result = resultOf(o.Result)
		if o.Err != nil {
			cmd.Error = o.Err.Error()
		}
	}
	return cmd
}

// wait returns the command once done says it is, or when ctx ends.
func (c *call) wait(ctx context.Context, done func(*sessionapi.Command) bool) (sessionapi.Command, bool) {
	for {
		c.mu.Lock()
		if c.changed == nil && c.task == "" && c.direct == nil && !c.self {
			c.changed = make(chan struct{})
		}
		changed := c.changed // nil, never ready, for an External command
		c.mu.Unlock()
		v := c.view()
		if done(&v) {
			return v, true
		}
		ended, settled := c.ticket.Done(), (<-chan struct{})(nil)
		if c.direct != nil {
			// A Direct command's answer also waits for its record's end.
			settled = c.direct.settled
			if v.Final() {
				ended = nil
			}
		}
		select {
		case <-changed:
		case <-ended:
		case <-settled:
		case <-ctx.Done():
			return c.view(), false
		case <-c.stop:
			return c.view(), false
		}
	}
}

// interrupted is the answer to a wait for a Direct command that had not
// succeeded when the server stopped (its attempt was cut short then), or
// nil.
func (c *call) interrupted() error {
	if c.direct == nil || !isClosed(c.stop) {
		return nil
	}
	if o, final := c.ticket.Outcome(); final && o.State == lanequeue.StateSucceeded {
		return nil
	}
	return interruptedDirect(c.ticket.ID(), c.direct.isRecorded())
}

// answered tells when a call's command is ready for the reply: an External
// command once it ended, an Internal or Hybrid one once it holds a slot.
func (c *call) answered() func(*sessionapi.Command) bool {
	switch {
	case c.direct != nil:
		// Once its end is recorded, if it must be: a leader stopped after
		// the answer would leave a record its successor fails, interrupted,
		// against what the submitter was told.
		return func(v *sessionapi.Command) bool { return v.Final() && c.direct.endSettled() }
	case c.task != "" || c.self:
		return final
	}
	return granted
}

// granted: an Internal or Hybrid command holds a slot, or the command ended.
func granted(c *sessionapi.Command) bool { return c.Grant != nil || c.Final() }

// final: the command ended.
func final(c *sessionapi.Command) bool { return c.Final() }

// settled: a reported attempt has been taken in by the scheduler: the
// command ended, waits for a retry, or runs a later attempt.
func settled(attempt int) func(*sessionapi.Command) bool {
	return func(c *sessionapi.Command) bool {
		return c.Final() || c.State != sessionapi.StateRunning || c.Attempt > attempt || c.Grant != nil
	}
}

func resultOf(r lanequeue.Result) *sessionapi.Result {
	out := &sessionapi.Result{Success: r.Success, Error: r.Error, ExitCode: r.ExitCode}
	if len(r.Output) > 0 {
		if json.Valid(r.Output) {
			out.Output = json.RawMessage(r.Output)
		} else {
			out.Output, _ = json.Marshal(string(r.Output))
		}
	}
	return out
}

// calls indexes the live and recently ended calls by namespace and command
// ID. An ended call stays until DefaultKeepEnded has passed, or until more
// calls of its session ended after it than the session's maxFinishedTasks,
// whichever comes first.
type calls struct {
	mu sync.Mutex
	m  map[types.NamespacedName]*call
	// done are, per session, the calls in m known to have ended, in the
	// order they ended.
	done map[types.NamespacedName][]*call
}

func (cs *calls) get(namespace, id string) *call {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.m[types.NamespacedName{Namespace: namespace, Name: id}]
}

func (cs *calls) put(namespace, id string, c *call) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.m == nil {
		cs.m = make(map[types.NamespacedName]*call)
	}
	cs.m[types.NamespacedName{Namespace: namespace, Name: id}] = c
}

// ended records that the session's command id ended, then forgets the
// session's ended calls beyond keep, those that ended first.
func (cs *calls) ended(session types.NamespacedName, id string, keep int) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c := cs.m[types.NamespacedName{Namespace: session.Namespace, Name: id}]
	if c == nil || c.session != session {
		return // not submitted through this server, or already forgotten
	}
	if cs.done == nil {
		cs.done = make(map[types.NamespacedName][]*call)
	}
	cs.done[session] = append(cs.done[session], c)
	cs.trimLocked(session, keep)
}

// trim forgets the session's ended calls beyond keep, those that ended
// first.
func (cs *calls) trim(session types.NamespacedName, keep int) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.trimLocked(session, keep)
}

func (cs *calls) trimLocked(session types.NamespacedName, keep int) {
	ended := cs.done[session]
	n := max(len(ended)-keep, 0)
	for _, c := range ended[:n] {
		cs.forgetLocked(c)
	}
	if n == len(ended) {
		delete(cs.done, session)
		return
	}
	cs.done[session] = slices.Delete(ended, 0, n)
}

// forgetLocked removes c from the index, unless a later call of the same
// id replaced it.
func (cs *calls) forgetLocked(c *call) {
	k := types.NamespacedName{Namespace: c.session.Namespace, Name: c.ticket.ID()}
	if cs.m[k] == c {
		delete(cs.m, k)
	}
}

// sweep forgets the calls that ended more than keep before now.
func (cs *calls) sweep(now time.Time, keep time.Duration) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for k, c := range cs.m {
		if _, final := c.ticket.Outcome(); !final {
			continue
		}
		if c.endedAt.IsZero() {
			c.endedAt = now
		} else if now.Sub(c.endedAt) > keep {
			delete(cs.m, k)
		}
	}
	for session, ended := range cs.done {
		ended = slices.DeleteFunc(ended, func(c *call) bool {
			return cs.m[types.NamespacedName{Namespace: session.Namespace, Name: c.ticket.ID()}] != c
		})
		if len(ended) == 0 {
			delete(cs.done, session)
		} else {
			cs.done[session] = ended
		}
	}
}
