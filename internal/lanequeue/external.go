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
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// ExternalTask is a granted External-mode attempt waiting for something
// outside the queue to run it and report back with Complete,
// CompleteAttempt or FailAttempt before Deadline. It holds its slots until
// then.
type ExternalTask struct {
	ID          string
	Attempt     int
	SessionKey  string
	Lane        string
	CommandType string
	Payload     []byte
	Labels      Identity
	RunID       string
	// CreatedAt is when the attempt was granted.
	CreatedAt time.Time
	// StartedAt is when the attempt started running, and Deadline when it
	// times out; both are zero while a command with AwaitStart waits for
	// MarkStarted.
	StartedAt time.Time
	Deadline  time.Time
	// Timeout is how long the attempt may run once started.
	Timeout time.Duration
	// HeartbeatTimeout is how long the running attempt may go without a
	// Heartbeat; 0 when the lane sets none.
	HeartbeatTimeout time.Duration
	// Extensions counts the ExtendDeadline calls that moved Deadline.
	Extensions int
}

// Remaining returns how long the task has left at now (never negative). A
// task that has not started has its whole timeout left.
func (t ExternalTask) Remaining(now time.Time) time.Duration {
	if t.Deadline.IsZero() {
		return t.Timeout
	}
	return max(t.Deadline.Sub(now), 0)
}

func externalTaskOf(t *Ticket) ExternalTask {
	a := t.run
	return ExternalTask{
		ID:          t.id,
		Attempt:     int(a.number),
		SessionKey:  t.ls.sess.key,
		Lane:        t.ls.lane.name,
		CommandType: t.typ,
		Payload:     t.payload,
		Labels:      t.labels,
		RunID:       t.runID,
		CreatedAt:   unixTime(a.granted),
		StartedAt:   timeOrZero(a.started),
		Deadline:    timeOrZero(a.deadline),
		Timeout:     time.Duration(a.timeout),

		HeartbeatTimeout: time.Duration(a.heartbeatBudget()),
		Extensions:       int(a.extensions),
	}
}

// PendingExternal lists the pending external tasks, oldest grant first.
func (q *Queue) PendingExternal() []ExternalTask {
	q.mu.Lock()
	defer q.mu.Unlock()
	ts := make([]*Ticket, 0, len(q.external))
	for _, t := range q.external {
		ts = append(ts, t)
	}
	slices.SortFunc(ts, func(a, b *Ticket) int {
		return cmp.Or(cmp.Compare(a.run.granted, b.run.granted), cmp.Compare(a.seq, b.seq))
	})
	out := make([]ExternalTask, len(ts))
	for i, t := range ts {
		out[i] = externalTaskOf(t)
	}
	return out
}

// Complete reports the result of the pending external task id, whatever its
// attempt. A Result without Success is a failure and goes through retry.
func (q *Queue) Complete(id string, r Result) error {
	return q.reportExternal(id, 0, r, nil)
}

// CompleteAttempt is Complete fenced by attempt number: it fails with
// ErrStaleAttempt unless attempt is the one currently pending, so a worker
// that lost its task (timed out and retried) cannot complete the new attempt.
func (q *Queue) CompleteAttempt(id string, attempt int, r Result) error {
	if attempt <= 0 {
		return fmt.Errorf("%w: attempt must be >= 1", ErrInvalidCommand)
	}
	return q.reportExternal(id, attempt, r, nil)
}

// FailAttempt reports that attempt of the pending external task id failed
// with err. Wrap err with Permanent to skip retries. Attempt 0 matches any.
func (q *Queue) FailAttempt(id string, attempt int, err error) error {
	if err == nil {
		err = errors.New("lanequeue: external task failed")
	}
	return q.reportExternal(id, attempt, Result{Error: err.Error()}, err)
}

func (q *Queue) reportExternal(id string, attempt int, r Result, err error) error {
	q.mu.Lock()
	now := q.now()
	t := q.external[id]
	if t == nil {
		_, live := q.tickets[id]
		q.mu.Unlock()
		switch {
		case !live:
			return fmt.Errorf("%w: %s", ErrNotFound, id)
		case attempt > 0:
			return fmt.Errorf("%w: %s attempt %d is not pending", ErrStaleAttempt, id, attempt)
		default:
			return fmt.Errorf("%w: %s", ErrNotPending, id)
		}
	}
	if attempt > 0 && int(t.attempts) != attempt {
		cur := t.attempts
		q.mu.Unlock()
		return fmt.Errorf("%w: %s attempt %d, pending attempt is %d", ErrStaleAttempt, id, attempt, cur)
	}
	q.reportLocked(t.run, r, err, now)
	q.dispatchLocked(now)
	q.unlock(now)
	return nil
}

// MarkStarted reports that attempt of the pending external task id started
// running at at: its timeout runs from then. For a command with AwaitStart
// this is what starts the timeout; a later call (the attempt handed to
// another runner) starts it again from its at. It fails like
// CompleteAttempt when attempt is not the pending one.
func (q *Queue) MarkStarted(id string, attempt int, at time.Time) error {
	return q.markExternal(id, attempt, func(a *attemptCtx, _ int64) { q.startTimerLocked(a, unixNanos(at)) })
}

// MarkWaiting reports that nothing runs attempt of the pending external task
// id any more and it waits to start again (its runner handed it back
// unfinished): it keeps its slots, and its timeout stops until the next
// MarkStarted; the lane's StartTimeout counts from the first MarkWaiting
// after a start. It fails like CompleteAttempt when attempt is not the
// pending one.
func (q *Queue) MarkWaiting(id string, attempt int) error {
	return q.markExternal(id, attempt, q.stopTimerLocked)
}

func (q *Queue) markExternal(id string, attempt int, mark func(a *attemptCtx, now int64)) error {
	if attempt <= 0 {
		return fmt.Errorf("%w: attempt must be >= 1", ErrInvalidCommand)
	}
	q.mu.Lock()
	now := q.now()
	t := q.external[id]
	switch {
	case t == nil:
		_, live := q.tickets[id]
		q.mu.Unlock()
		if !live {
			return fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		return fmt.Errorf("%w: %s attempt %d is not pending", ErrStaleAttempt, id, attempt)
	case int(t.attempts) != attempt:
		cur := t.attempts
		q.mu.Unlock()
		return fmt.Errorf("%w: %s attempt %d, pending attempt is %d", ErrStaleAttempt, id, attempt, cur)
	}
	mark(t.run, now)
	q.unlock(now)
	return nil
}

// startTimerLocked starts the timeout of attempt a, which started running
// at startedAt.
func (q *Queue) startTimerLocked(a *attemptCtx, startedAt int64) {
	t := a.t
	t.started = startedAt
	a.waitingSince = 0
	a.started = startedAt
	a.lastBeat = startedAt
	a.deadline = after(startedAt, a.timeout)
	q.rekeyRunningLocked(a)
}

// stopTimerLocked holds the timeout of attempt a until it starts, and
// bounds its wait by the lane's StartTimeout, counted from now unless it
// already waits. The attempt stays in q.due (due never without a bound) so
// that cancellation, which looks for running commands there, finds it.
func (q *Queue) stopTimerLocked(a *attemptCtx, now int64) {
	if a.waitingSince != 0 {
		return
	}
	t := a.t
	a.waitingSince = now
	a.started, a.deadline = 0, 0
	t.due = dueNever
	if d := int64(t.ls.lane.cfg.StartTimeout); d > 0 {
		t.due = after(now, d)
	}
	q.due.PushOrUpdate(t)
}

// startTimedOutLocked ends the command of attempt a, which waited longer
// than its lane's StartTimeout to start. The attempt never ran: it is not
// counted.
func (q *Queue) startTimedOutLocked(a *attemptCtx, now int64) {
	t := a.t
	err := fmt.Errorf("%w: attempt %d waited %s to start (start timeout %s)", ErrStartTimeout,
		a.number, time.Duration(now-a.waitingSince), t.ls.lane.cfg.StartTimeout)
	t.attempts--
	q.endAttemptLocked(t, endFailure, Result{Error: err.Error()}, err, now)
}

// Settle ends the live command id with r, whichever of its attempts the
// queue holds and even while it waits for a retry: Succeeded when
// r.Success, else Failed without retries. It is for a result that counts
// although the queue moved on, such as a worker's completion an
// ExternalTask's status recorded while the queue's timeout of that attempt
// fired: the durable record decides, and the command is counted once, as
// what it records (not Cancelled). A running attempt's context is
// cancelled. A timeout still waiting for ConfirmTimeout is not counted:
// the attempt counts as r says, and a command the timeout ended (a dead
// letter) ends again as r says. It fails with ErrNotFound when the command
// has already ended otherwise.
func (q *Queue) Settle(id string, r Result) error {
	q.mu.Lock()
	now := q.now()
	t, u := q.tickets[id], q.unconfirmed[id]
	if t == nil && u == nil {
		q.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	st, kind, err := stSucceeded, endSuccess, error(nil)
	if !r.Success {
		st, kind, err = stFailed, endFailure, Permanent(&resultError{msg: r.Error, code: r.ExitCode})
	}
	switch {
	case u != nil && q.settleUnconfirmedLocked(u, r, err, now):
		// The timeout had ended the command; it ends as r says.
	case t == nil:
	case t.state == stRunning:
		t.run.abandonLocked(context.Canceled)
		q.endAttemptLocked(t, kind, r, err, now)
	case q.dropLiveLocked(t, now):
		q.terminalLocked(t, st, r, err, now)
		if st == stSucceeded {
			q.cmdEventLocked(EventCompleted, t, now, nil).setTerminal()
		} else {
			q.cmdEventLocked(EventFailed, t, now, err).setTerminal()
		}
	}
	q.dispatchLocked(now)
	q.unlock(now)
	return nil
}
