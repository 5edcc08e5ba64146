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
	"fmt"
	"time"
)

// Long-running attempts. A running External attempt of a lane with a
// HeartbeatTimeout must show it is alive: its start is its first heartbeat
// and each Heartbeat another; once it has been silent for HeartbeatTimeout
// it times out, long before its timeout would end it. Its deadline (start
// plus timeout) may be moved later while it runs with ExtendDeadline, a
// bounded number of times and never past MaxExtendedFactor times its
// timeout. Both move the attempt's one due time in q.due: the earlier of
// its deadline and its last heartbeat plus HeartbeatTimeout.

const (
	// MaxExtensions is how many times ExtendDeadline may move the deadline
	// of one attempt.
	MaxExtensions = 8
	// MaxExtendedFactor bounds an extended deadline: an attempt never runs
	// longer than this many times its timeout.
	MaxExtendedFactor = 10
)

// heartbeatBudget is how long the attempt may go without a heartbeat: its
// lane's HeartbeatTimeout for an External attempt, 0 (no bound) otherwise.
// A reconfigured lane's new HeartbeatTimeout applies to its running
// attempts from their next heartbeat.
func (a *attemptCtx) heartbeatBudget() int64 {
	if a.mode != External {
		return 0
	}
	return int64(a.t.ls.lane.cfg.HeartbeatTimeout)
}

// rekeyRunningLocked sets the due time of the running attempt a: its
// deadline, or its heartbeat's expiry when that comes first.
func (q *Queue) rekeyRunningLocked(a *attemptCtx) {
	t := a.t
	t.due = a.deadline
	if hb := a.heartbeatBudget(); hb > 0 {
		t.due = min(t.due, after(a.lastBeat, hb))
	}
	q.due.PushOrUpdate(t)
}

// adoptedBeatLocked counts an adopted attempt's adoption as a heartbeat:
// whoever adopts it has just seen it running, however long ago it started.
func (q *Queue) adoptedBeatLocked(a *attemptCtx, now int64) {
	if now > a.lastBeat {
		a.lastBeat = now
		q.rekeyRunningLocked(a)
	}
}

// expiredErr is the error of the running attempt a whose due time came at
// now: its timeout's, or its heartbeat's when the deadline is still ahead.
func (a *attemptCtx) expiredErr(now int64) error {
	if hb := a.heartbeatBudget(); hb > 0 && now < a.deadline {
		return &heartbeatError{
			silent: time.Duration(now - a.lastBeat),
			budget: time.Duration(hb),
			lane:   a.t.ls.lane.name,
		}
	}
	return a.timeoutErr(now)
}

// heartbeatError is the error of an attempt that went without a heartbeat
// for its lane's HeartbeatTimeout. It is both ErrHeartbeatTimeout and
// ErrTimeout.
type heartbeatError struct {
	silent, budget time.Duration
	lane           string
}

func (e *heartbeatError) Error() string {
	return fmt.Sprintf("%v: no heartbeat for %s (lane %s heartbeatTimeout %s)", ErrTimeout, e.silent, e.lane, e.budget)
}

func (e *heartbeatError) Is(target error) bool {
	return target == ErrTimeout || target == ErrHeartbeatTimeout
}

// Heartbeat records that attempt of the running command id is alive now:
// its heartbeat expiry moves to now plus its lane's HeartbeatTimeout. A
// heartbeat for an attempt that waits to start (AwaitStart) or of a lane
// without HeartbeatTimeout changes nothing. It fails with ErrNotFound for
// a command the queue no longer holds, and with ErrStaleAttempt unless
// attempt is the one running, so a runner that lost its attempt cannot
// keep the next one alive.
func (q *Queue) Heartbeat(id string, attempt int) error {
	q.mu.Lock()
	now := q.now()
	a, err := q.runningAttemptLocked(id, attempt)
	if err != nil {
		q.mu.Unlock()
		return err
	}
	if a.waitingSince == 0 && now > a.lastBeat {
		a.lastBeat = now
		if a.heartbeatBudget() > 0 {
			q.rekeyRunningLocked(a)
		}
	}
	q.unlock(now)
	return nil
}

// Extension is what ExtendDeadline made of an attempt's deadline.
type Extension struct {
	// Attempt is the attempt extended.
	Attempt int
	// Deadline is its deadline now.
	Deadline time.Time
	// Extensions counts the extensions of the attempt so far.
	Extensions int
}

// ExtendDeadline moves the deadline of attempt of the running command id
// (0: whichever attempt runs) by d. It refuses, with ErrExtendRefused, a
// d that is not positive, an attempt not started yet, a (MaxExtensions+1)th
// extension of the same attempt, and a deadline past MaxExtendedFactor
// times the attempt's timeout from its start; it fails like Heartbeat for
// a command or attempt that is not running. A new attempt (a retry) starts
// again from its lane's timeout.
func (q *Queue) ExtendDeadline(id string, attempt int, d time.Duration) (Extension, error) {
	if d <= 0 {
		return Extension{}, fmt.Errorf("%w: the extension must be positive, got %s", ErrExtendRefused, d)
	}
	return q.extend(id, attempt, func(a *attemptCtx) int64 { return int64(d) })
}

// ExtendDeadlineTo moves the deadline of attempt of the running command id
// to the later time to, as one ExtendDeadline: it restores an extension
// recorded elsewhere (an ExternalTask's status) onto an adopted attempt. A
// deadline already at or past to is left as it is.
func (q *Queue) ExtendDeadlineTo(id string, attempt int, to time.Time) (Extension, error) {
	return q.extend(id, attempt, func(a *attemptCtx) int64 { return unixNanos(to) - a.deadline })
}

func (q *Queue) extend(id string, attempt int, by func(a *attemptCtx) int64) (Extension, error) {
	q.mu.Lock()
	now := q.now()
	a, err := q.runningAttemptLocked(id, attempt)
	if err == nil && a.waitingSince == 0 && a.started != 0 && by(a) <= 0 {
		x := a.extension()
		q.mu.Unlock()
		return x, nil
	}
	if err == nil {
		err = a.extendLocked(by(a))
	}
	if err != nil {
		q.mu.Unlock()
		return Extension{}, err
	}
	q.rekeyRunningLocked(a)
	x := a.extension()
	q.unlock(now)
	return x, nil
}

func (a *attemptCtx) extension() Extension {
	return Extension{Attempt: int(a.number), Deadline: unixTime(a.deadline), Extensions: int(a.extensions)}
}

// extendLocked moves a's deadline by d within the bounds ExtendDeadline
// states.
func (a *attemptCtx) extendLocked(d int64) error {
	switch {
	case a.waitingSince != 0 || a.started == 0:
		return fmt.Errorf("%w: attempt %d of %s has not started", ErrExtendRefused, a.number, a.t.id)
	case a.extensions >= MaxExtensions:
		return fmt.Errorf("%w: attempt %d of %s was already extended %d times, the most allowed", ErrExtendRefused, a.number, a.t.id, MaxExtensions)
	}
	limit := after(a.started, a.timeout*MaxExtendedFactor)
	if a.timeout > (dueNever-1)/MaxExtendedFactor {
		limit = dueNever - 1
	}
	next := after(a.deadline, d)
	if next > limit {
		return fmt.Errorf("%w: attempt %d of %s may run at most %s (%d times its timeout %s); the deadline can move by at most %s more",
			ErrExtendRefused, a.number, a.t.id, time.Duration(limit-a.started), MaxExtendedFactor,
			time.Duration(a.timeout), time.Duration(max(limit-a.deadline, 0)))
	}
	a.deadline = next
	a.extensions++
	return nil
}

// runningAttemptLocked returns the running attempt of command id, checked
// against attempt (0 matches any).
func (q *Queue) runningAttemptLocked(id string, attempt int) (*attemptCtx, error) {
	t := q.tickets[id]
	switch {
	case t == nil:
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	case t.state != stRunning || t.run == nil:
		if attempt > 0 {
			return nil, fmt.Errorf("%w: %s attempt %d is not running", ErrStaleAttempt, id, attempt)
		}
		return nil, fmt.Errorf("%w: %s is not running", ErrNotPending, id)
	case attempt > 0 && int(t.run.number) != attempt:
		return nil, fmt.Errorf("%w: %s attempt %d, running attempt is %d", ErrStaleAttempt, id, attempt, t.run.number)
	}
	return t.run, nil
}

// TimeoutError returns the error of the timeout of attempt of the command
// while its count waits for ConfirmTimeout, nil otherwise: the runner's
// record of the attempt can say which budget ran out (its timeout, or its
// lane's HeartbeatTimeout).
func (t *Ticket) TimeoutError(attempt int) error {
	q := t.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if u := q.unconfirmed[t.id]; u != nil && int(u.attempt) == attempt {
		return u.err
	}
	return nil
}
