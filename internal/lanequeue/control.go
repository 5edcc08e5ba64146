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
	"slices"
	"time"
)

// Lane control: pausing and resuming a lane, clearing its queued commands,
// and draining the whole queue before a restart or an upgrade.

// DrainConfig drains a queue: while it is set the queue refuses new
// submissions with ErrDraining (Adopt still registers commands that already
// run elsewhere, and Submit a Durable command), and queued, retrying and running commands go on as
// before. When Timeout has passed since the drain began, the commands still
// queued or waiting for a retry end Cancelled with ErrDrainDeadline; running
// ones keep running until they end or their own timeout. The queue is
// drained once it holds no live command (Stats.Drain.Drained, and an
// EventQueueDrained). Removing the drain opens intake again.
type DrainConfig struct {
	// Timeout is how long queued work may still start; 0 is no deadline.
	Timeout time.Duration
}

// DrainStats describes a draining queue.
type DrainStats struct {
	// Since is when the drain began; Deadline when queued work is
	// cancelled (zero without a deadline).
	Since    time.Time
	Deadline time.Time
	// Expired is set once the deadline passed.
	Expired bool
	// Drained is set while the queue holds no live command.
	Drained bool
	// Live counts the commands still queued, retrying or running.
	Live int
}

// drainState is the scheduler's side of Config.Drain. Guarded by q.mu.
type drainState struct {
	since    int64
	deadline int64 // 0: none
	expired  bool
	drained  bool
}

// refusal is the error a submission to the draining queue gets.
func (d *drainState) refusal() error {
	if d.deadline == 0 {
		return fmt.Errorf("%w since %s", ErrDraining, unixTime(d.since).Format(time.RFC3339))
	}
	return fmt.Errorf("%w since %s (deadline %s)", ErrDraining,
		unixTime(d.since).Format(time.RFC3339), unixTime(d.deadline).Format(time.RFC3339))
}

// PauseLane pauses a lane: its commands are still accepted and queued, and
// its running commands finish, but none starts until ResumeLane. A later
// Reconfigure sets the lane's state to its LaneConfig.Paused.
func (q *Queue) PauseLane(name string) error { return q.setLanePaused(name, true) }

// ResumeLane lets a paused lane start its queued commands again, in their
// usual order.
func (q *Queue) ResumeLane(name string) error { return q.setLanePaused(name, false) }

func (q *Queue) setLanePaused(name string, paused bool) error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return ErrClosed
	}
	ln := q.byName[name]
	if ln == nil {
		q.mu.Unlock()
		return fmt.Errorf("%w: %q", ErrUnknownLane, name)
	}
	now := q.now()
	if ln.cfg.Paused != paused {
		ln.cfg.Paused = paused
		for i := range q.cfg.Lanes {
			if q.cfg.Lanes[i].Name == name {
				q.cfg.Lanes[i].Paused = paused
			}
		}
		q.lanePausedEventLocked(ln, now)
	}
	q.dispatchLocked(now)
	q.unlock(now)
	return nil
}

func (q *Queue) lanePausedEventLocked(ln *lane, now int64) {
	typ := EventLaneResumed
	if ln.cfg.Paused {
		typ = EventLanePaused
	}
	q.laneEventLocked(typ, ln, now)
}

// ClearLane cancels the commands of a lane that have not started, queued
// or waiting for a retry, of one session, or of every session when
// sessionKey is empty, and returns how many. They end Cancelled with
// ErrLaneCleared. Running commands keep running.
func (q *Queue) ClearLane(name, sessionKey string) (int, error) {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return 0, ErrClosed
	}
	ln := q.byName[name]
	if ln == nil {
		q.mu.Unlock()
		return 0, fmt.Errorf("%w: %q", ErrUnknownLane, name)
	}
	now := q.now()
	var victims []*Ticket
	all := func(*Ticket) bool { return true }
	for key, ls := range ln.sessions {
		if (sessionKey != "" && key != sessionKey) || ls.queue.len() == 0 {
			continue
		}
		n := len(victims)
		victims = ls.queue.extract(all, victims)
		for _, t := range victims[n:] {
			t.state = stDetached
		}
		q.refreshLocked(ls, now, true)
	}
	for _, t := range q.due.items {
		if t.state == stRetrying && t.ls.lane == ln && (sessionKey == "" || t.ls.sess.key == sessionKey) {
			victims = append(victims, t)
		}
	}
	q.cancelInOrderLocked(victims, ErrLaneCleared, now)
	q.dispatchLocked(now)
	q.unlock(now)
	return len(victims), nil
}

// cancelInOrderLocked cancels victims in submit order.
func (q *Queue) cancelInOrderLocked(victims []*Ticket, err error, now int64) {
	slices.SortFunc(victims, func(a, b *Ticket) int { return compareUint(a.seq, b.seq) })
	for _, t := range victims {
		q.cancelLocked(t, err, now)
	}
}

// applyDrainLocked starts, moves the deadline of, or ends the drain.
func (q *Queue) applyDrainLocked(dc *DrainConfig, now int64) {
	if dc == nil {
		q.drain = nil
		return
	}
	if q.drain == nil {
		q.drain = &drainState{since: now}
		q.newEventLocked(EventQueueDraining, now)
	}
	d := q.drain
	d.deadline = 0
	if dc.Timeout > 0 {
		d.deadline = after(d.since, int64(dc.Timeout))
	}
	// A deadline moved later, or removed, lets retries wait again; one
	// that has passed (again) cancels what has not started.
	d.expired = false
	q.expireDrainLocked(now)
}

// expireDrainLocked cancels what has not started once the drain deadline
// passed. Work that becomes queued later (a running command's retry) is
// cancelled as it comes back, on the next timer or operation.
func (q *Queue) expireDrainLocked(now int64) {
	d := q.drain
	if d == nil || d.deadline == 0 || d.deadline > now {
		return
	}
	d.expired = true
	var victims []*Ticket
	for _, t := range q.tickets {
		if t.state == stQueued || t.state == stRetrying {
			victims = append(victims, t)
		}
	}
	q.cancelInOrderLocked(victims, ErrDrainDeadline, now)
}

// drainWakeLocked is when the timer must expire the drain; 0 if never.
func (q *Queue) drainWakeLocked() int64 {
	if d := q.drain; d != nil && !d.expired {
		return d.deadline
	}
	return 0
}

// noteDrainedLocked reports the drained queue once it holds no live
// command, and again after more work came (Adopt) and went.
func (q *Queue) noteDrainedLocked(now int64) {
	d := q.drain
	if d == nil {
		return
	}
	empty := len(q.tickets) == 0
	if empty == d.drained {
		return
	}
	d.drained = empty
	if empty {
		q.newEventLocked(EventQueueDrained, now)
	}
}

func (q *Queue) drainStatsLocked() *DrainStats {
	d := q.drain
	if d == nil {
		return nil
	}
	s := &DrainStats{Since: unixTime(d.since), Expired: d.expired, Drained: len(q.tickets) == 0, Live: len(q.tickets)}
	if d.deadline != 0 {
		s.Deadline = unixTime(d.deadline)
	}
	return s
}
