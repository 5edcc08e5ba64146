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
	"errors"
	"fmt"
	"time"
)

// RetryStrategy names how the delay before a retry is computed.
type RetryStrategy string

const (
	// RetryExponential waits InitialDelay, then doubles the wait for every
	// further retry, never waiting longer than MaxDelay.
	RetryExponential RetryStrategy = "Exponential"
	// RetryFixed waits FixedDelay before every retry.
	RetryFixed RetryStrategy = "Fixed"
	// RetryNone never retries: the first failure is final.
	RetryNone RetryStrategy = "None"
)

// Retry defaults.
const (
	DefaultMaxRetries   = 3
	DefaultInitialDelay = 100 * time.Millisecond
	DefaultMaxDelay     = 30 * time.Second
)

// RetryPolicy decides whether and when a failed attempt runs again. The zero
// value is Exponential with 3 retries, 100ms initial delay and a 30s cap.
type RetryPolicy struct {
	// Strategy defaults to Exponential.
	Strategy RetryStrategy
	// MaxRetries is the number of retries after the first attempt; 0 means
	// the default (3). Use Strategy None to disable retries.
	MaxRetries int
	// InitialDelay is the first Exponential delay; 0 means 100ms.
	InitialDelay time.Duration
	// MaxDelay caps Exponential delays; 0 means 30s.
	MaxDelay time.Duration
	// FixedDelay is the Fixed delay; required (> 0) for Fixed.
	FixedDelay time.Duration
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.Strategy == "" {
		p.Strategy = RetryExponential
	}
	if p.MaxRetries == 0 {
		p.MaxRetries = DefaultMaxRetries
	}
	if p.InitialDelay == 0 {
		p.InitialDelay = DefaultInitialDelay
	}
	if p.MaxDelay == 0 {
		p.MaxDelay = DefaultMaxDelay
	}
	if p.Strategy == RetryNone {
		p.MaxRetries = 0
	}
	return p
}

func (p RetryPolicy) validate(path string) []error {
	var errs []error
	switch p.Strategy {
	case "", RetryExponential, RetryNone:
	case RetryFixed:
		if p.FixedDelay <= 0 {
			errs = append(errs, fmt.Errorf("%s.fixedDelay: must be > 0 when strategy is Fixed", path))
		}
	default:
		errs = append(errs, fmt.Errorf("%s.strategy: unknown strategy %q (want Exponential, Fixed or None)", path, p.Strategy))
	}
	if p.MaxRetries < 0 {
		errs = append(errs, fmt.Errorf("%s.maxRetries: must be >= 0, got %d", path, p.MaxRetries))
	}
	if p.InitialDelay < 0 || p.MaxDelay < 0 || p.FixedDelay < 0 {
		errs = append(errs, fmt.Errorf("%s: delays must be >= 0", path))
	}
	if p.InitialDelay > 0 && p.MaxDelay > 0 && p.MaxDelay < p.InitialDelay {
		errs = append(errs, fmt.Errorf("%s.maxDelay: %v is less than initialDelay %v", path, p.MaxDelay, p.InitialDelay))
	}
	return errs
}

// Delay returns the wait before the given retry (1 for the first retry) of a
// policy with defaults applied.
func (p RetryPolicy) Delay(retry int) time.Duration {
	p = p.withDefaults()
	switch p.Strategy {
	case RetryFixed:
		return p.FixedDelay
	case RetryNone:
		return 0
	}
	d := p.InitialDelay
	for i := 1; i < retry && d < p.MaxDelay; i++ {
		if d > p.MaxDelay/2 {
			// Doubling would pass the cap (or overflow a huge one).
			return p.MaxDelay
		}
		d *= 2
	}
	return min(d, p.MaxDelay)
}

// Errors reported by the queue. The ones marked permanent never retry.
var (
	// ErrTimeout: an attempt ran past its timeout. Retryable. The error a
	// timed-out attempt ends with wraps it and says how long the attempt ran
	// and which budget ran out: "... after 25ms (lane execute timeout 25ms)",
	// "(command timeout ...)" or "(queue default timeout ...)".
	ErrTimeout = errors.New("lanequeue: attempt timed out")
	// ErrHeartbeatTimeout: a running External attempt went without a
	// Heartbeat for its lane's HeartbeatTimeout. The error also wraps
	// ErrTimeout, so it retries as a timeout does, and says how long the
	// attempt was silent: "... no heartbeat for 3s (lane execute
	// heartbeatTimeout 3s)".
	ErrHeartbeatTimeout = errors.New("lanequeue: no heartbeat")
	// ErrExtendRefused: ExtendDeadline would pass a bound (MaxExtensions,
	// MaxExtendedFactor) or was asked of an attempt that is not running.
	ErrExtendRefused = errors.New("lanequeue: deadline extension refused")
	// ErrStartTimeout: a granted attempt of an AwaitStart command waited
	// longer than its lane's StartTimeout for MarkStarted. Permanent: it
	// never ran, and another attempt would wait the same.
	ErrStartTimeout = errors.New("lanequeue: attempt did not start in time")
	// ErrCancelled: the command was cancelled. Permanent.
	ErrCancelled = errors.New("lanequeue: command cancelled")
	// ErrLaneRemoved: the command's lane was removed by Reconfigure. Permanent.
	ErrLaneRemoved = errors.New("lanequeue: lane removed by reconfiguration")
	// ErrNoHandler: an Internal or Hybrid command had no Handler. Permanent.
	ErrNoHandler = errors.New("lanequeue: no handler for an Internal command")
	// ErrClosed: the queue is closed. Permanent.
	ErrClosed = errors.New("lanequeue: queue closed")
	// ErrDraining refuses a submission to a draining queue.
	ErrDraining = errors.New("lanequeue: queue is draining")
	// ErrDrainDeadline (wrapping ErrCancelled) ends, Cancelled, a command still queued or waiting
	// for a retry when its draining queue's deadline passes.
	ErrDrainDeadline = fmt.Errorf("%w: the queue's drain deadline passed before it started", ErrCancelled)
	// ErrLaneCleared (wrapping ErrCancelled) ends, Cancelled, a queued command removed by ClearLane.
	ErrLaneCleared = fmt.Errorf("%w: its lane was cleared", ErrCancelled)
	// ErrInvalidCommand: the command cannot be accepted. Permanent.
	ErrInvalidCommand = errors.New("lanequeue: invalid command")
	// ErrUnknownLane: the command names a lane the queue does not have.
	ErrUnknownLane = errors.New("lanequeue: unknown lane")
	// ErrCommandTypeRefused: the command's lane does not accept its type
	// (LaneConfig.CommandTypes). Permanent.
	ErrCommandTypeRefused = errors.New("lanequeue: command type not accepted by the lane")
	// ErrDuplicateID: a live command already has this ID.
	ErrDuplicateID = errors.New("lanequeue: duplicate command id")
	// ErrNotFound: no live command has this ID.
	ErrNotFound = errors.New("lanequeue: command not found")
	// ErrNotPending: the command exists but is not a pending external task.
	ErrNotPending = errors.New("lanequeue: command is not a pending external task")
	// ErrStaleAttempt: a completion named an attempt that is no longer running.
	ErrStaleAttempt = errors.New("lanequeue: stale attempt")
	// ErrSessionBusy: the session still has work and cannot be forgotten.
	ErrSessionBusy = errors.New("lanequeue: session has queued or running commands")
	// ErrNotStarted marks the failure of an attempt that may never have
	// started: its runner was lost before it reported a start (FailAttempt
	// with an error wrapping it). The attempt is retried without counting
	// against the retry policy's MaxRetries, up to MaxUncountedNotStarted
	// times per command; its attempt number is used up all the same.
	ErrNotStarted = errors.New("lanequeue: attempt lost before it was known to start")
)

// MaxUncountedNotStarted bounds how many ErrNotStarted failures of one
// command are retried without counting against MaxRetries; further ones
// count like any failure. It lets a command whose runners are lost before
// it starts run again, while a command that kills every runner it lands on
// before it can report a start (a poison pill) still ends.
const MaxUncountedNotStarted = 3

// permanentError marks a failure that retrying cannot fix.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks err as not worth retrying: a command failing with it ends
// Failed at once, without retries and without a dead letter. Use it for
// denied budgets, invalid input and the like. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err (or anything it wraps) was marked with
// Permanent, or is one of the queue's own permanent errors.
func IsPermanent(err error) bool {
	if err == nil {
		return false
	}
	var p *permanentError
	return errors.As(err, &p) ||
		errors.Is(err, ErrCancelled) || errors.Is(err, ErrLaneRemoved) ||
		errors.Is(err, ErrNoHandler) || errors.Is(err, ErrClosed) ||
		errors.Is(err, ErrInvalidCommand) || errors.Is(err, ErrCommandTypeRefused) ||
		errors.Is(err, ErrStartTimeout)
}

// failLocked handles a failed attempt: retry it after the policy's delay, or
// end it Failed (permanent), DeadLettered (out of retries) or, with dead
// letters disabled, Failed or TimedOut.
func (q *Queue) failLocked(t *Ticket, timedOut bool, r Result, err error, now int64) {
	ln := t.ls.lane
	// held is the count of this timeout when it waits for ConfirmTimeout.
	held := q.deciding
	evType := EventFailed
	if timedOut {
		if held == nil {
			ln.counts.timeouts++
		}
		evType = EventTimeout
	}
	policy := q.cfg.Retry
	if ln.cfg.Retry != nil {
		policy = *ln.cfg.Retry
	}
	policy = policy.withDefaults()

	counted := t.countAttempt(err)
	var final state
	switch {
	case IsPermanent(err):
		final = stFailed
	case ln.removed:
		final, err = stFailed, fmt.Errorf("%w: %w", ErrLaneRemoved, err)
	case counted <= policy.MaxRetries:
		delay := policy.Delay(max(counted, 1))
		q.cmdEventLocked(evType, t, now, err)
		t.state = stRetrying
		t.due = after(now, int64(delay))
		q.due.PushOrUpdate(t)
		q.addPendingLocked(t.ls, 1, now)
		if held != nil {
			held.retried = true
		} else {
			ln.counts.retried++
			ln.m.retries.Inc()
		}
		if e := q.cmdEventLocked(EventRetry, t, now, err); e != nil {
			e.Delay = delay
		}
		return
	case q.dlqOn:
		final = stDeadLettered
	case timedOut:
		final = stTimedOut
	default:
		final = stFailed
	}
	if final == stDeadLettered {
		q.cmdEventLocked(evType, t, now, err)
		dl := DeadLetter{
			ID:          t.id,
			CommandType: t.typ,
			Lane:        ln.name,
			SessionKey:  t.ls.sess.key,
			RunID:       t.runID,
			Payload:     t.payload,
			Error:       err.Error(),
			Attempts:    int(t.attempts),
			FailedAt:    unixTime(now),
			Labels:      t.labels,
		}
		if held != nil {
			held.dead = &dl
		} else {
			q.dlq.add(dl)
		}
		q.terminalLocked(t, final, r, err, now)
		q.cmdEventLocked(EventDeadLettered, t, now, err).setTerminal()
		return
	}
	q.terminalLocked(t, final, r, err, now)
	q.cmdEventLocked(evType, t, now, err).setTerminal()
}

// countAttempt is how many of t's attempts count against its retries once
// the attempt that just failed with err is taken into account: an
// ErrNotStarted failure is free while fewer than MaxUncountedNotStarted
// were. Called with the queue's lock held.
func (t *Ticket) countAttempt(err error) int {
	if errors.Is(err, ErrNotStarted) && t.notStarted < MaxUncountedNotStarted {
		t.notStarted++
	}
	return int(t.attempts - t.notStarted)
}
