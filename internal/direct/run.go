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

package direct

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/workerproto"
)

// Task is a Direct command as Run hands it to a worker.
type Task struct {
	Namespace, Queue, Lane, Session, ID, CommandType, RunID string
	Payload                                                 json.RawMessage
	// Traceparent is the trace context the Task frame carries to the
	// worker (workerproto.DirectTask.Traceparent); empty when not traced.
	Traceparent string
	// Selector is matched against the worker's Hello.Labels; nil matches
	// any worker.
	Selector labels.Selector
	// MaterializeAfter > 0: OnRecord is called, in its own goroutine and at
	// most once per phase per attempt, when the attempt waited that long
	// for a free worker (RecordWaiting) and when it ran that long on a
	// worker (RecordRunning).
	MaterializeAfter time.Duration
	OnRecord         func(Record)
	// Sent, when set, is filled by Run with the worker the attempt was
	// sent to (Phase RecordRunning, Since when it was sent); it is left as
	// it is when no worker got the attempt. Run writes it before it
	// returns, under the hub's lock, and never after.
	Sent *Record
	// Started, when set, is filled by Run, as Sent is, with when the
	// worker says the attempt started, clamped between its sending and
	// the receipt of its Result (clampStart); it is left as it is when the
	// worker's Result did not say. It is for measurement only: the worker
	// may lie within those bounds.
	Started *time.Time
}

// RecordPhase is the phase an attempt outlived MaterializeAfter in.
type RecordPhase string

const (
	RecordWaiting RecordPhase = "Waiting"
	RecordRunning RecordPhase = "Running"
)

// Record tells that an attempt outlived its task's MaterializeAfter.
type Record struct {
	Phase   RecordPhase
	Attempt int
	// Worker, Node and Incarnation name the worker, for RecordRunning.
	Worker, Node, Incarnation string
	// Since is when the attempt began waiting (RecordWaiting) or was sent
	// to the worker (RecordRunning).
	Since time.Time
}

type callState uint8

const (
	callWaiting   callState = iota // in its namespace's waiters
	callRunning                    // sent over a stream, Run waits for the Result
	callAbandoned                  // sent, Run returned (ctx ended); the stream still holds it
	callDone                       // Run has, or will get, its outcome
)

// call is one attempt in the hub, from Run until its Result or the end of
// the stream that holds it.
type call struct {
	t        *Task
	key      attemptKey
	deadline time.Time
	// Guarded by Hub.mu.
	state callState
	// prev/next link the call in its namespace's waiters while it waits,
	// in its stream's held attempts while a stream holds it.
	prev, next *call
	ns         *namespace
	s          *stream
	since      time.Time // when Run began
	sentAt     time.Time
	timer      stopper
	recorded   [2]bool // RecordWaiting, RecordRunning
	res        lanequeue.Result
	err        error
	// done is closed when state becomes callDone with res/err set.
	done chan struct{}
}

func (c *call) finishLocked(err error) {
	c.err = err
	c.state = callDone
	close(c.done)
}

func (c *call) stopTimerLocked() {
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
}

// callList is an intrusive FIFO of calls.
type callList struct{ head, tail *call }

func (l *callList) push(c *call) {
	c.next = nil
	c.prev = l.tail
	if l.tail != nil {
		l.tail.next = c
	} else {
		l.head = c
	}
	l.tail = c
}

func (l *callList) remove(c *call) {
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		l.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		l.tail = c.prev
	}
	c.prev, c.next = nil, nil
}

// Run runs attempt a of t on a connected worker that serves t: of t's
// namespace, that serves its queue and lane (or all), runs its command
// type, whose labels match its selector, not draining and with a free slot;
// the least loaded one first. When none has a free slot the attempt waits,
// FIFO within the namespace, until one frees, a worker connects, or ctx
// ends.
//
// It returns the worker's Result, ErrWorkerLost when the stream that held
// the attempt ended first, ErrInterrupted when the hub stopped leading, or
// ctx.Err(). When ctx ends while the worker runs the attempt, the worker is
// sent a Cancel frame and its slot stays busy until its Result for the
// attempt arrives (it is then dropped as late) or its stream ends.
func (h *Hub) Run(ctx context.Context, t *Task, a lanequeue.Attempt) (lanequeue.Result, error) {
	if err := ctx.Err(); err != nil {
		return lanequeue.Result{}, err
	}
	if len(t.Payload) > MaxPayloadBytes {
		return lanequeue.Result{}, lanequeue.Permanent(ErrPayloadTooLarge)
	}
	c := &call{
		t:        t,
		key:      attemptKey{taskKey{t.Namespace, t.ID}, a.Number},
		deadline: a.Deadline,
		since:    h.clock.Now(),
		done:     make(chan struct{}),
	}
	h.mu.Lock()
	if !h.leading {
		h.mu.Unlock()
		return lanequeue.Result{}, ErrInterrupted
	}
	if _, dup := h.attempts[c.key]; dup {
		h.mu.Unlock()
		return lanequeue.Result{}, errDuplicateAttempt
	}
	h.attempts[c.key] = c
	h.held[c.key.taskKey]++
	ns := h.namespaceLocked(t.Namespace)
	if s := ns.pickLocked(t); s != nil {
		h.sendLocked(s, c, c.since)
	} else {
		c.state = callWaiting
		c.ns = ns
		ns.waiters.push(c)
		if t.MaterializeAfter > 0 && t.OnRecord != nil {
			c.timer = h.after(t.MaterializeAfter, func() { go h.record(c, RecordWaiting) })
		}
	}
	h.mu.Unlock()

	select {
	case <-c.done:
		return c.res, c.err
	case <-ctx.Done():
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch c.state {
	case callWaiting:
		c.ns.waiters.remove(c)
		h.forgetLocked(c)
		h.gcNamespaceLocked(c.ns)
		c.state = callDone
	case callRunning:
		// The worker keeps the slot until it answers: it may still be
		// running the attempt.
		c.state = callAbandoned
		c.stopTimerLocked()
		reason := "cancelled"
		if ctx.Err() == context.DeadlineExceeded {
			reason = "timed out"
		}
		c.s.enqueue(outFrame{kind: frameCancel, c: c, reason: reason})
	case callDone:
		// The outcome arrived as ctx ended: it counts.
		return c.res, c.err
	}
	return lanequeue.Result{}, ctx.Err()
}

// pickLocked returns the least loaded worker of ns that serves t and has a
// free slot, or nil.
func (ns *namespace) pickLocked(t *Task) *stream {
	var best *stream
	for _, s := range ns.list {
		if s.draining || s.busy >= s.hello.Capacity || !s.serves(t) {
			continue
		}
		// s is less loaded than best when s.busy/s.cap < best.busy/best.cap.
		if best == nil || s.busy*best.hello.Capacity < best.busy*s.hello.Capacity {
			best = s
		}
	}
	return best
}

// serves tells whether the worker runs t (its namespace is the stream's).
func (s *stream) serves(t *Task) bool {
	h := &s.hello
	if len(h.Queues) > 0 && !slices.Contains(h.Queues, t.Queue) {
		return false
	}
	if len(h.Lanes) > 0 && !slices.Contains(h.Lanes, t.Lane) {
		return false
	}
	if !slices.Contains(h.CommandTypes, t.CommandType) {
		return false
	}
	return t.Selector == nil || t.Selector.Matches(labels.Set(h.Labels))
}

// sendLocked hands c to s, which has a free slot.
func (h *Hub) sendLocked(s *stream, c *call, now time.Time) {
	c.stopTimerLocked()
	c.state = callRunning
	c.s = s
	c.ns = nil
	c.sentAt = now
	if c.t.Sent != nil {
		*c.t.Sent = Record{Phase: RecordRunning, Attempt: c.key.attempt, Worker: s.hello.Worker, Node: s.hello.Node,
			Incarnation: s.hello.Incarnation, Since: now}
	}
	s.held.push(c)
	s.busy++
	s.ns.g.busy.Inc()
	s.ns.g.free.Dec()
	if t := c.t; t.MaterializeAfter > 0 && t.OnRecord != nil {
		c.timer = h.after(t.MaterializeAfter, func() { go h.record(c, RecordRunning) })
	}
	s.enqueue(outFrame{kind: frameTask, c: c})
	AttemptsSent.Inc()
	WaitSeconds.Observe(now.Sub(c.since).Seconds())
}

// dispatchLocked gives s's free slots to the oldest waiters it serves.
func (h *Hub) dispatchLocked(s *stream) {
	if s.draining || s.gone {
		return
	}
	var now time.Time
	for c := s.ns.waiters.head; c != nil && s.busy < s.hello.Capacity; {
		next := c.next
		if s.serves(c.t) {
			if now.IsZero() {
				now = h.clock.Now()
			}
			s.ns.waiters.remove(c)
			h.sendLocked(s, c, now)
		}
		c = next
	}
}

// deliver takes a Result that arrived on s.
func (h *Hub) deliver(s *stream, r *workerproto.DirectResult) {
	key := attemptKey{taskKey{s.hello.Namespace, r.ID}, r.Attempt}
	h.mu.Lock()
	c := h.attempts[key]
	if c == nil || c.s != s || (c.state != callRunning && c.state != callAbandoned) {
		h.mu.Unlock()
		if c != nil && c.s != nil {
			dropWrongStream.Inc()
		} else {
			dropUnknown.Inc()
		}
		return
	}
	s.held.remove(c)
	h.forgetLocked(c)
	s.busy--
	s.ns.g.busy.Dec()
	if !s.draining {
		s.ns.g.free.Inc()
	}
	late := c.state == callAbandoned
	var started time.Time
	if r.StartedAt > 0 {
		started = clampStart(r.StartedAt, c.sentAt, h.clock.Now())
	}
	if late {
		c.state = callDone
	} else {
		c.res = lanequeue.Result{Success: r.Success, Output: r.Output, Error: r.Error, ExitCode: r.ExitCode}
		if c.t.Started != nil && !started.IsZero() {
			*c.t.Started = started
		}
		c.finishLocked(nil)
	}
	h.dispatchLocked(s)
	h.mu.Unlock()
	if !started.IsZero() {
		StartSeconds.Observe(started.Sub(c.since).Seconds())
	}
	switch {
	case late:
		dropLate.Inc()
	case r.Cancelled:
		resultCancelled.Inc()
	case r.Success:
		resultSucceeded.Inc()
	default:
		resultFailed.Inc()
	}
}

// failSent fails attempt c, which s holds but could not be sent (its frame
// did not encode), with err, and frees its slot.
func (h *Hub) failSent(s *stream, c *call, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c.s != s || (c.state != callRunning && c.state != callAbandoned) || s.gone {
		return
	}
	s.held.remove(c)
	h.forgetLocked(c)
	s.busy--
	s.ns.g.busy.Dec()
	if !s.draining {
		s.ns.g.free.Inc()
	}
	if c.state == callRunning {
		c.finishLocked(err)
	} else {
		c.state = callDone
	}
	h.dispatchLocked(s)
}

// drain stops handing s attempts.
func (h *Hub) drain(s *stream) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s.draining || s.gone {
		return
	}
	s.draining = true
	s.ns.g.free.Sub(float64(s.hello.Capacity - s.busy))
}

// record calls the task's OnRecord when c is still in phase.
func (h *Hub) record(c *call, phase RecordPhase) {
	h.mu.Lock()
	i := 0
	want := callWaiting
	if phase == RecordRunning {
		i, want = 1, callRunning
	}
	if c.state != want || c.recorded[i] {
		h.mu.Unlock()
		return
	}
	c.recorded[i] = true
	r := Record{Phase: phase, Attempt: c.key.attempt, Since: c.since}
	if phase == RecordRunning {
		r.Worker, r.Node, r.Incarnation, r.Since = c.s.hello.Worker, c.s.hello.Node, c.s.hello.Incarnation, c.sentAt
	}
	h.mu.Unlock()
	c.t.OnRecord(r)
}

// clampStart is the start a worker reported, in Unix nanoseconds of its
// clock, within what the hub saw: not before the attempt was sent, not
// after its Result arrived. A worker's clock is only trusted this far, and
// only for measurement.
func clampStart(unixNano int64, sent, received time.Time) time.Time {
	t := time.Unix(0, unixNano)
	switch {
	case t.Before(sent):
		return sent
	case t.After(received):
		return received
	}
	return t
}
