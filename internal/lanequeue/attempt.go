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

package lanequeue

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"
)

// beginAttemptLocked makes t a running attempt in mode, holding its slots,
// that was granted at startedAt (now, except for adopted commands). Its
// timeout runs from then, except for an External command that awaits its
// start: that waits for MarkStarted (Adopt starts it at once).
func (q *Queue) beginAttemptLocked(t *Ticket, now, startedAt int64, mode HandlerMode, announce bool) {
	ls := t.ls
	ln := ls.lane
	ln.active++
	ls.active++
	ls.sess.active++
	if !ln.cfg.Isolated {
		q.active++
	}
	ln.m.active.Set(float64(ln.active))
	ln.m.attemptsStarted.Inc()
	t.attempts++
	t.state = stRunning
	t.started = startedAt
	timeout, budget := t.timeout, budgetCommand
	if timeout == 0 {
		timeout, budget = int64(ln.cfg.Timeout), budgetLane
	}
	if timeout == 0 {
		timeout, budget = q.defaultTimeout, budgetQueue
	}
	q.starts++
	a := &attemptCtx{
		q:        q,
		t:        t,
		seqStart: q.starts,
		number:   t.attempts,
		mode:     mode,
		granted:  startedAt,
		timeout:  timeout,
		budget:   budget,
	}
	t.run = a
	if mode == External && t.awaitStart {
		q.stopTimerLocked(a, now)
	} else {
		q.startTimerLocked(a, startedAt)
	}
	q.refreshLocked(ls, now, false)
	q.cmdEventLocked(EventStarted, t, now, nil)

	switch mode {
	case External:
		q.external[t.id] = t
		q.cmdEventLocked(EventExternalTaskPending, t, now, nil)
		if announce && q.onExternal != nil {
			q.hooks = append(q.hooks, externalTaskOf(t))
		}
	default:
		a.handler = t.handler
		if a.handler == nil {
			a.handler = q.defHandler
		}
		if a.handler == nil {
			q.endAttemptLocked(t, endFailure, Result{}, ErrNoHandler, now)
			return
		}
		if mode == Hybrid {
			q.cmdEventLocked(EventExternalTaskPending, t, now, nil)
		}
		if q.grantsTail == nil {
			q.grants = a
		} else {
			q.grantsTail.next = a
		}
		q.grantsTail = a
	}
}

type endKind uint8

const (
	endSuccess endKind = iota
	endFailure
	endTimeout
	endCancel
)

// outcome is the metrics' name for an attempt that ended so.
func (k endKind) outcome() AttemptOutcome {
	switch k {
	case endSuccess:
		return AttemptSucceeded
	case endTimeout:
		return AttemptTimedOut
	case endCancel:
		return AttemptCancelled
	}
	return AttemptFailed
}

// reportLocked records what attempt a produced, unless the attempt was
// already abandoned (timed out, cancelled), in which case it is ignored.
func (q *Queue) reportLocked(a *attemptCtx, r Result, err error, now int64) {
	t := a.t
	if t.run != a {
		return
	}
	kind := endSuccess
	if err != nil || !r.Success {
		kind = endFailure
		if err == nil {
			err = &resultError{msg: r.Error, code: r.ExitCode}
		}
	}
	if a.mode != Internal {
		q.cmdEventLocked(EventExternalTaskCompleted, t, now, err)
	}
	q.endAttemptLocked(t, kind, r, err, now)
}

// resultError is the failure of an attempt that reported Success false.
type resultError struct {
	msg  string
	code int
}

func (e *resultError) Error() string {
	if e.msg == "" {
		return fmt.Sprintf("command failed (exit code %d)", e.code)
	}
	return e.msg
}

// endAttemptLocked releases the slots of t's running attempt and moves t on:
// to Succeeded, Cancelled, a retry, or its final failure.
func (q *Queue) endAttemptLocked(t *Ticket, kind endKind, r Result, err error, now int64) {
	ls := t.ls
	ln := ls.lane
	a := t.run
	t.run = nil
	q.due.Delete(t)
	if a.mode == External {
		delete(q.external, t.id)
	}
	switch kind {
	case endTimeout:
		a.abandonLocked(context.DeadlineExceeded)
	case endCancel:
		a.abandonLocked(context.Canceled)
	}
	ln.active--
	ls.active--
	ls.sess.active--
	if !ln.cfg.Isolated {
		q.active--
	}
	ln.m.active.Set(float64(ln.active))
	d := now - t.started
	ln.runLat.observe(d)
	q.runLat.observe(d)
	ln.m.runSeconds.Observe(float64(d) / 1e9)
	held := q.holdTimeoutLocked(t, a, kind)
	if held != nil {
		held.err = err
	}
	if held == nil {
		ln.m.attemptsFinished[kind.outcome()].Inc()
	}
	q.refreshLocked(ls, now, false)

	switch kind {
	case endSuccess:
		q.terminalLocked(t, stSucceeded, r, nil, now)
		q.cmdEventLocked(EventCompleted, t, now, nil).setTerminal()
	case endCancel:
		q.terminalLocked(t, stCancelled, r, err, now)
		q.cmdEventLocked(EventCancelled, t, now, err).setTerminal()
	default:
		q.deciding = held
		q.failLocked(t, kind == endTimeout, r, err, now)
		q.deciding = nil
	}
}

// terminalLocked ends t in st. Every command passes here exactly once.
func (q *Queue) terminalLocked(t *Ticket, st state, r Result, err error, now int64) {
	ls := t.ls
	ln := ls.lane
	sess := ls.sess
	t.state = st
	if err != nil || st != stSucceeded || !r.Success || r.Output != nil || r.Error != "" || r.ExitCode != 0 {
		t.fin = &finish{result: r, err: err}
	}
	delete(q.tickets, t.id)
	q.due.Delete(t)
	ls.refs--
	if ls.refs == 0 {
		ln.runnable.Delete(ls)
		delete(ln.sessions, sess.key)
	}
	switch u := q.unconfirmed[t.id]; {
	case u != nil && u == q.deciding:
		u.final = st // counted once confirmed
	case u != nil:
		// It ends otherwise before its timeout's record was confirmed:
		// that record stands.
		q.countTimeoutLocked(u)
		q.countTerminalLocked(t, st)
	default:
		q.countTerminalLocked(t, st)
	}
	if t.done != nil {
		close(t.done)
	}
	if ln.removed && ln.active == 0 && ln.pending == 0 {
		q.draining = slices.DeleteFunc(q.draining, func(l *lane) bool { return l == ln })
	}
}

func (q *Queue) spawn(a *attemptCtx) {
	if q.spawnHook != nil {
		q.spawnHook(a)
		return
	}
	go q.runLoop(a)
}

// runLoop runs a granted attempt, reports it, and keeps going with the next
// attempt granted by that report, so a busy lane reuses its goroutines
// instead of starting one per command.
func (q *Queue) runLoop(a *attemptCtx) {
	for a != nil {
		r, err := runHandler(a)
		q.mu.Lock()
		now := q.now()
		q.reportLocked(a, r, err, now)
		q.dispatchLocked(now)
		q.noteDrainedLocked(now)
		q.armLocked(now)
		g := q.grants
		q.grants, q.grantsTail = nil, nil
		flush := len(q.events) > 0 || len(q.hooks) > 0
		q.mu.Unlock()
		if flush {
			q.flush()
		}
		a = g
		if g != nil {
			for rest := g.next; rest != nil; {
				next := rest.next
				rest.next = nil
				q.spawn(rest)
				rest = next
			}
			g.next = nil
		}
	}
}

// runAttempt runs one granted attempt on the calling goroutine and hands any
// attempts it unblocks to spawn. Tests use it with a spawn hook to run
// Internal commands deterministically.
func (q *Queue) runAttempt(a *attemptCtx) {
	r, err := runHandler(a)
	q.mu.Lock()
	now := q.now()
	q.reportLocked(a, r, err, now)
	q.dispatchLocked(now)
	q.unlock(now)
}

func runHandler(a *attemptCtx) (r Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("lanequeue: handler panicked: %v", p)
		}
	}()
	return a.handler.Run(a, a.attempt())
}

// attemptCtx is the context handed to a Handler, and the record of one
// granted attempt. Everything but done, next and the start of an External
// attempt (started, deadline, waitingSince) is immutable once the attempt
// is granted, so the runner reads it without the lock.
type attemptCtx struct {
	q       *Queue
	t       *Ticket
	handler Handler
	// deadline and started (unix nanos) are when the attempt times out and
	// when it started; granted is when it got its slots; timeout is its run
	// timeout. An External attempt that awaits its start has started and
	// deadline 0 (the zero time.Time) until MarkStarted sets them under
	// q.mu; ExtendDeadline moves deadline under q.mu, so a handler reads it
	// through Deadline and attempt, which take the lock.
	deadline int64
	started  int64
	granted  int64
	timeout  int64
	// budget says whose setting timeout is, for the timeout's error.
	budget timeoutBudget
	// lastBeat is when the attempt last showed it was alive (its start,
	// then each Heartbeat); guarded by q.mu. Its heartbeat budget is
	// heartbeatBudget().
	lastBeat int64
	// waitingSince is when an External attempt began to wait for
	// MarkStarted; 0 while it runs. Guarded by q.mu.
	waitingSince int64
	number       int32
	// extensions counts how often ExtendDeadline moved the deadline;
	// guarded by q.mu.
	extensions int32
	// mode is how the attempt runs.
	mode HandlerMode
	// seqStart numbers starts queue-wide, ordering attempts granted at the
	// same instant.
	seqStart uint64
	// err is set once, when the attempt is abandoned (timeout, cancel, close).
	err atomic.Pointer[error]
	// done is created on first use; guarded by q.mu.
	done chan struct{}
	// next links granted attempts waiting to be run; guarded by q.mu.
	next *attemptCtx
}

var _ context.Context = &attemptCtx{}

func (a *attemptCtx) Deadline() (time.Time, bool) {
	a.q.mu.Lock()
	defer a.q.mu.Unlock()
	return timeOrZero(a.deadline), true
}
func (a *attemptCtx) Value(any) any { return nil }

func (a *attemptCtx) Err() error {
	if p := a.err.Load(); p != nil {
		return *p
	}
	return nil
}

func (a *attemptCtx) Done() <-chan struct{} {
	a.q.mu.Lock()
	defer a.q.mu.Unlock()
	if a.err.Load() != nil {
		return closedChan
	}
	if a.done == nil {
		a.done = make(chan struct{})
	}
	return a.done
}

// abandonLocked cancels the attempt's context. Caller holds q.mu.
func (a *attemptCtx) abandonLocked(err error) {
	if a.err.Load() != nil {
		return
	}
	a.err.Store(&err)
	if a.done != nil {
		close(a.done)
	}
}

func (a *attemptCtx) attempt() Attempt {
	t := a.t
	a.q.mu.Lock()
	started, deadline := a.started, a.deadline
	a.q.mu.Unlock()
	return Attempt{
		ID:          t.id,
		SessionKey:  t.ls.sess.key,
		CommandType: t.typ,
		Lane:        t.ls.lane.name,
		RunID:       t.runID,
		Payload:     t.payload,
		Labels:      t.labels,
		Number:      int(a.number),
		Mode:        a.mode,
		StartedAt:   timeOrZero(started),
		Deadline:    timeOrZero(deadline),
	}
}

// countTerminalLocked counts command t's end in st.
func (q *Queue) countTerminalLocked(t *Ticket, st state) {
	ln, sess := t.ls.lane, t.ls.sess
	switch st {
	case stSucceeded:
		ln.counts.completed++
		sess.counts.completed++
		ln.m.commandsFinished[CommandSucceeded].Inc()
	case stFailed, stTimedOut:
		ln.counts.failed++
		sess.counts.failed++
		ln.m.commandsFinished[CommandFailed].Inc()
	case stDeadLettered:
		ln.counts.deadLettered++
		sess.counts.deadLettered++
		ln.m.commandsFinished[CommandDeadLettered].Inc()
	case stCancelled:
		ln.counts.cancelled++
		sess.counts.cancelled++
		ln.m.commandsFinished[CommandCancelled].Inc()
	}
}

// timeoutBudget names the setting an attempt's timeout came from.
type timeoutBudget uint8

const (
	budgetCommand timeoutBudget = iota // Command.Timeout
	budgetLane                         // LaneConfig.Timeout
	budgetQueue                        // Config.DefaultTimeout
)

// timeoutErr is the error of attempt a timed out at now: ErrTimeout, with
// how long the attempt ran and which budget ran out, e.g. "attempt timed
// out after 25ms (lane execute timeout 25ms)".
func (a *attemptCtx) timeoutErr(now int64) error {
	ran := unixTime(now).Sub(timeOrZero(a.started))
	budget := time.Duration(a.timeout)
	switch a.budget {
	case budgetCommand:
		source := "command"
		if a.t.timeoutSource != nil {
			source = *a.t.timeoutSource
		}
		return fmt.Errorf("%w after %s (%s timeout %s)", ErrTimeout, ran, source, budget)
	case budgetLane:
		return fmt.Errorf("%w after %s (lane %s timeout %s)", ErrTimeout, ran, a.t.ls.lane.name, budget)
	default:
		return fmt.Errorf("%w after %s (queue default timeout %s)", ErrTimeout, ran, budget)
	}
}

// timeOrZero is unixTime(n), or the zero time for 0, which stands for "not
// set" in attemptCtx.
func timeOrZero(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return unixTime(n)
}
