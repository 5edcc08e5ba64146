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
	"sync/atomic"
	"time"
)

// EventType names what happened.
type EventType string

const (
	EventSubmitted             EventType = "submitted"
	EventStarted               EventType = "started"
	EventCompleted             EventType = "completed"
	EventFailed                EventType = "failed"
	EventRetry                 EventType = "retry"
	EventTimeout               EventType = "timeout"
	EventDeadLettered          EventType = "dead_lettered"
	EventCancelled             EventType = "cancelled"
	EventExternalTaskPending   EventType = "external_task_pending"
	EventExternalTaskCompleted EventType = "external_task_completed"
	EventLanePressure          EventType = "queue.lane.pressure"
	EventLaneIdle              EventType = "queue.lane.idle"
	EventAlert                 EventType = "alert"
	// Lane control: a lane paused or resumed (Lane and Depth set); the
	// queue draining, and drained (nothing left queued, retrying or
	// running).
	EventLanePaused    EventType = "queue.lane.paused"
	EventLaneResumed   EventType = "queue.lane.resumed"
	EventQueueDraining EventType = "queue.draining"
	EventQueueDrained  EventType = "queue.drained"
)

// AlertLevel is the severity of an EventAlert.
type AlertLevel string

const (
	AlertWarning  AlertLevel = "warning"
	AlertCritical AlertLevel = "critical"
)

// Event reports one thing that happened in the queue. Command events carry
// the command's fields; lane events (pressure, idle, alert) carry Lane and
// Depth only.
type Event struct {
	// Seq numbers the queue's events from 1 in the order they happened; a gap
	// seen by a subscriber means its buffer overflowed.
	Seq         uint64
	Type        EventType
	Time        time.Time
	CommandID   string
	SessionKey  string
	Lane        string
	CommandType string
	RunID       string
	Attempt     int
	Labels      Identity
	// Error is the failure, for failed, timeout, retry, dead_lettered and
	// cancelled events.
	Error string
	// Delay is the wait before the retry, for retry events.
	Delay time.Duration
	// Depth is the lane's pending count, for lane events.
	Depth int
	// Level is set on alert events.
	Level AlertLevel
	// Terminal is true on the one event that ends a command.
	Terminal bool
}

// Subscription receives the queue's events in order. Delivery never blocks
// the queue: when the buffer is full the event is dropped for this
// subscriber and counted in Dropped (the Seq gap shows where).
type Subscription struct {
	q       *Queue
	ch      chan Event
	dropped atomic.Uint64
	closed  bool // guarded by q.emitMu
	// backlog, when set (SubscribeBacklog), holds the events in place of
	// ch's buffer.
	backlog *backlog
}

// deliver hands ev to the subscription without blocking, or counts it
// dropped.
func (s *Subscription) deliver(ev Event) {
	if s.backlog != nil {
		if !s.backlog.push(ev) {
			s.dropped.Add(1)
		}
		return
	}
	select {
	case s.ch <- ev:
	default:
		s.dropped.Add(1)
	}
}

// end closes the subscription's channel, once: at once for a buffered
// one (what the buffer holds can still be read), once what waits is
// delivered for a backlog when the queue closed (drain).
func (s *Subscription) end(drain bool) {
	if s.closed {
		return
	}
	s.closed = true
	if s.backlog != nil {
		s.backlog.end(drain)
		return
	}
	close(s.ch)
}

// Subscribe starts delivering events that happen from now on, into a buffer
// of the given size (at least 1). Close the subscription when done; Close on
// the queue closes every subscription.
func (q *Queue) Subscribe(buffer int) *Subscription {
	s := &Subscription{q: q, ch: make(chan Event, max(buffer, 1))}
	q.emitMu.Lock()
	defer q.emitMu.Unlock()
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		s.closed = true
		close(s.ch)
		return s
	}
	// Copy on write: a flush in progress keeps the slice it took.
	q.subs = append(q.subs[:len(q.subs):len(q.subs)], s)
	return s
}

// Events returns the channel events arrive on; it is closed by Close.
func (s *Subscription) Events() <-chan Event { return s.ch }

// Dropped returns how many events did not fit in the buffer.
func (s *Subscription) Dropped() uint64 { return s.dropped.Load() }

// Close stops delivery and closes the channel.
func (s *Subscription) Close() {
	q := s.q
	q.emitMu.Lock()
	defer q.emitMu.Unlock()
	q.mu.Lock()
	subs := make([]*Subscription, 0, len(q.subs))
	for _, o := range q.subs {
		if o != s {
			subs = append(subs, o)
		}
	}
	q.subs = subs
	q.mu.Unlock()
	s.end(false)
}

// newEventLocked appends an event and returns it for the caller to fill in,
// or nil when nobody listens, so an unobserved queue builds no events. The
// pointer is valid until the next append.
func (q *Queue) newEventLocked(typ EventType, now int64) *Event {
	if len(q.subs) == 0 {
		return nil
	}
	q.evseq++
	q.events = append(q.events, Event{Seq: q.evseq, Type: typ, Time: unixTime(now)})
	return &q.events[len(q.events)-1]
}

// cmdEventLocked appends an event about t.
func (q *Queue) cmdEventLocked(typ EventType, t *Ticket, now int64, err error) *Event {
	e := q.newEventLocked(typ, now)
	if e == nil {
		return nil
	}
	e.CommandID = t.id
	e.SessionKey = t.ls.sess.key
	e.Lane = t.ls.lane.name
	e.CommandType = t.typ
	e.RunID = t.runID
	e.Attempt = int(t.attempts)
	e.Labels = t.labels
	if err != nil {
		e.Error = err.Error()
	}
	return e
}

func (q *Queue) laneEventLocked(typ EventType, ln *lane, now int64) *Event {
	e := q.newEventLocked(typ, now)
	if e != nil {
		e.Lane = ln.name
		e.Depth = ln.pending
	}
	return e
}

// flush delivers buffered events and external-task hooks outside q.mu.
// Only one goroutine delivers at a time (emitMu), and it takes batches in
// the order they were produced, so subscribers see events in order. A caller
// that finds another delivery in progress leaves its events to that one: the
// deliverer looks again after releasing emitMu.
func (q *Queue) flush() {
	for {
		if !q.emitMu.TryLock() {
			return
		}
		q.mu.Lock()
		evs, hooks, subs := q.events, q.hooks, q.subs
		q.events, q.hooks = q.spareEvents[:0], q.spareHooks[:0]
		hook := q.onExternal
		q.mu.Unlock()

		for i := range evs {
			for _, s := range subs {
				s.deliver(evs[i])
			}
		}
		for _, task := range hooks {
			hook(task)
		}
		clear(evs)
		clear(hooks)
		q.spareEvents, q.spareHooks = evs[:0], hooks[:0]
		q.emitMu.Unlock()

		q.mu.Lock()
		more := len(q.events) > 0 || len(q.hooks) > 0
		q.mu.Unlock()
		if !more {
			return
		}
	}
}

// setTerminal marks e, if one was built, as the command's last event.
func (e *Event) setTerminal() {
	if e != nil {
		e.Terminal = true
	}
}

func unixTime(n int64) time.Time { return time.Unix(0, n).UTC() }
