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
	"math"
	"time"
)

// The queue keeps one timer on its clock. Everything that waits on time
// (attempt timeouts, retry delays, priority boost steps and rate-limit
// refills) is a due time in q.due or a lane's rateWake, and the timer is
// armed for the earliest of them.

// dueNever is the due time of an attempt whose timeout has not started.
const dueNever = math.MaxInt64

// after returns the time d after t (both in nanoseconds), saturated just
// below dueNever: a duration too large for the clock (a timeout of a
// hundred years, a huge retry delay) means "not in this process's life",
// never a time that wrapped around into the past and fires at once.
func after(t, d int64) int64 {
	if d <= 0 {
		return t + d
	}
	if t > dueNever-1-d {
		return dueNever - 1
	}
	return t + d
}

// unixNanos returns t in nanoseconds, saturated to the range after uses:
// a time past 2262 (a deadline "in the year 9999") is just below dueNever
// and one before 1678 far in the past, where UnixNano would wrap.
func unixNanos(t time.Time) int64 {
	if hi := time.Unix(0, dueNever-1); t.After(hi) {
		return dueNever - 1
	}
	if lo := time.Unix(0, math.MinInt64+1); t.Before(lo) {
		return math.MinInt64 + 1
	}
	return t.UnixNano()
}

func dueLess(a, b *Ticket) bool {
	if a.due != b.due {
		return a.due < b.due
	}
	return a.seq < b.seq
}

func dueSlot(t *Ticket) *int32 { return &t.dueIdx }

// armLocked makes sure the timer fires no later than the earliest thing
// waiting on time. A timer that fires early just re-arms; moving it later is
// never needed, which keeps the common start/finish path free of timer calls.
func (q *Queue) armLocked(now int64) {
	next := int64(0)
	if q.due.Len() > 0 && q.due.Peek().due != dueNever {
		next = q.due.Peek().due
	}
	if q.rateWake > 0 && (next == 0 || q.rateWake < next) {
		next = q.rateWake
	}
	for _, ln := range q.lanes {
		if ln.rateWake > 0 && (next == 0 || ln.rateWake < next) {
			next = ln.rateWake
		}
	}
	if w := q.drainWakeLocked(); w > 0 && (next == 0 || w < next) {
		next = w
	}
	if next == 0 || q.timer == nil || q.closed {
		return
	}
	if q.armedAt != 0 && q.armedAt <= next {
		return
	}
	q.armedAt = next
	q.timer.Reset(time.Duration(max(next-now, 0)))
}

func (q *Queue) timerLoop(c <-chan time.Time) {
	for {
		select {
		case <-c:
			q.mu.Lock()
			q.armedAt = 0
			now := q.now()
			q.advanceLocked(now)
			q.unlock(now)
		case <-q.stop:
			return
		}
	}
}

// advance processes everything due at the clock's current time. The timer
// goroutine calls it; tests using manualTimers call it after moving the clock.
func (q *Queue) advance() {
	q.mu.Lock()
	now := q.now()
	q.advanceLocked(now)
	q.unlock(now)
}

func (q *Queue) advanceLocked(now int64) {
	for q.due.Len() > 0 && q.due.Peek().due <= now {
		t := q.due.Pop()
		switch t.state {
		case stRunning:
			if t.run.waitingSince != 0 {
				q.startTimedOutLocked(t.run, now)
				continue
			}
			q.endAttemptLocked(t, endTimeout, Result{}, t.run.expiredErr(now), now)
		case stRetrying:
			if q.drain != nil && q.drain.expired {
				// Past the drain deadline nothing starts again.
				q.cancelLocked(t, ErrDrainDeadline, now)
				continue
			}
			q.enqueueLocked(t, now, true)
		case stQueued:
			// A boost step was reached: re-key the session head.
			q.refreshLocked(t.ls, now, true)
		}
	}
	if w := q.drainWakeLocked(); w > 0 && w <= now {
		q.expireDrainLocked(now)
	}
	if q.rateWake > 0 && q.rateWake <= now {
		q.rateWake = 0
	}
	for _, ln := range q.lanes {
		if ln.rateWake > 0 && ln.rateWake <= now {
			ln.rateWake = 0
		}
	}
	q.dispatchLocked(now)
}
