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

// HandlerMode says who runs a lane's commands.
type HandlerMode string

const (
	// Internal: when granted a slot, the command's Handler runs on a
	// queue-owned goroutine.
	Internal HandlerMode = "Internal"
	// External: when granted a slot, the command becomes a pending
	// ExternalTask that something else completes with Complete or
	// CompleteAttempt before its timeout.
	External HandlerMode = "External"
	// Hybrid: runs like Internal and also emits the external-task events so
	// observers can follow it.
	Hybrid HandlerMode = "Hybrid"
)

func (m HandlerMode) valid() bool {
	switch m {
	case "", Internal, External, Hybrid:
		return true
	}
	return false
}

func (m HandlerMode) orDefault() HandlerMode {
	if m == "" {
		return Internal
	}
	return m
}

// FairnessPolicy orders the sessions that share a lane.
type FairnessPolicy string

const (
	// FairFIFO starts the session head that was submitted first (default).
	FairFIFO FairnessPolicy = "FIFO"
	// FairRoundRobin takes turns between sessions: a session that just
	// started a command goes to the back of the line.
	FairRoundRobin FairnessPolicy = "RoundRobin"
	// FairWeightedTenant shares starts between tenants (Identity.TenantID)
	// in proportion to their weights, FIFO within a tenant.
	FairWeightedTenant FairnessPolicy = "WeightedTenant"
)

// LaneConfig describes one lane.
type LaneConfig struct {
	// Name identifies the lane; unique within a queue.
	Name string
	// Priority orders lanes: 0 is the highest.
	Priority int
	// Mode defaults to Internal.
	Mode HandlerMode
	// MaxConcurrency caps the lane's running commands across all sessions;
	// 0 is unlimited.
	MaxConcurrency int
	// MaxConcurrencyPerSession caps the lane's running commands of any one
	// session; 0 is unlimited.
	MaxConcurrencyPerSession int
	// Paused lanes start nothing new: their commands are still accepted and
	// queued, and running ones finish, but no queued command starts until
	// the lane is resumed. See PauseLane.
	Paused bool
	// Isolated lanes sit outside the queue-wide cap and rate limit: their
	// commands neither wait for nor take capacity other lanes need (a cron
	// or background lane).
	Isolated bool
	// Timeout bounds each attempt; 0 defers to Config.DefaultTimeout.
	Timeout time.Duration
	// StartTimeout bounds how long a granted attempt of an AwaitStart
	// command may wait for MarkStarted (again, after MarkWaiting); 0 is no
	// bound. When it passes, the command ends Failed with ErrStartTimeout,
	// without retries, and the attempt that never started is not counted.
	StartTimeout time.Duration
	// HeartbeatTimeout bounds how long a running External attempt may go
	// without a Heartbeat (its start counts as the first); 0 is no bound.
	// When it passes, the attempt ends as a timeout whose error wraps
	// ErrHeartbeatTimeout and ErrTimeout, and goes through retry.
	// Attempts in other modes are not affected.
	HeartbeatTimeout time.Duration
	// Retry, when set, replaces Config.Retry for this lane.
	Retry *RetryPolicy
	// RateLimit, when set, limits starts in this lane (in addition to any
	// queue-wide limit).
	RateLimit *RateLimit
	// CommandTypes, when set, are the only command types the lane accepts:
	// a command of any other type that would go to the lane is refused at
	// submission with ErrCommandTypeRefused. Empty accepts every type.
	CommandTypes []string
	// SessionModes, when not nil, are the only modes a session may switch
	// the lane to (SetSessionLaneMode) besides the lane's own Mode: a
	// session's override of any other mode is refused, and one set before a
	// reconfiguration narrowed the list no longer applies. Nil allows every
	// mode; empty allows none.
	SessionModes []HandlerMode
}

// allowsSessionMode tells whether a session may run the lane's commands in
// mode.
func (l LaneConfig) allowsSessionMode(mode HandlerMode) bool {
	return l.SessionModes == nil || mode == l.Mode.orDefault() || slices.Contains(l.SessionModes, mode)
}

// accepts tells whether the lane takes commands of type typ.
func (l LaneConfig) accepts(typ string) bool {
	return len(l.CommandTypes) == 0 || slices.Contains(l.CommandTypes, typ)
}

func (l LaneConfig) validate(path string) []error {
	var errs []error
	if l.Name == "" {
		errs = append(errs, fmt.Errorf("%s.name: required", path))
	}
	if l.Priority < 0 {
		errs = append(errs, fmt.Errorf("%s.priority: must be >= 0, got %d", path, l.Priority))
	}
	if !l.Mode.valid() {
		errs = append(errs, fmt.Errorf("%s.mode: unknown mode %q (want Internal, External or Hybrid)", path, l.Mode))
	}
	if l.MaxConcurrency < 0 {
		errs = append(errs, fmt.Errorf("%s.maxConcurrency: must be >= 0, got %d", path, l.MaxConcurrency))
	}
	if l.MaxConcurrencyPerSession < 0 {
		errs = append(errs, fmt.Errorf("%s.maxConcurrencyPerSession: must be >= 0, got %d", path, l.MaxConcurrencyPerSession))
	}
	if l.Timeout < 0 {
		errs = append(errs, fmt.Errorf("%s.timeout: must be >= 0", path))
	}
	if l.StartTimeout < 0 {
		errs = append(errs, fmt.Errorf("%s.startTimeout: must be >= 0", path))
	}
	if l.HeartbeatTimeout < 0 {
		errs = append(errs, fmt.Errorf("%s.heartbeatTimeout: must be >= 0", path))
	}
	if l.Retry != nil {
		errs = append(errs, l.Retry.validate(path+".retry")...)
	}
	errs = append(errs, l.RateLimit.validate(path+".rateLimit")...)
	seen := make(map[string]bool, len(l.CommandTypes))
	for i, typ := range l.CommandTypes {
		switch {
		case typ == "":
			errs = append(errs, fmt.Errorf("%s.commandTypes[%d]: must not be empty", path, i))
		case seen[typ]:
			errs = append(errs, fmt.Errorf("%s.commandTypes[%d]: duplicate command type %q", path, i, typ))
		}
		seen[typ] = true
	}
	return errs
}

// lane is the scheduler state of one lane. Guarded by q.mu.
type lane struct {
	name string
	cfg  LaneConfig // with defaults applied
	// removed is set when Reconfigure dropped the lane; it then only drains
	// its running commands and is never scheduled again.
	removed bool

	// sessions holds one entry per session with queued, retrying or running
	// commands in this lane; an entry is dropped when its refs reach 0.
	sessions map[string]*laneSession
	// runnable holds exactly the entries that could start their head now as
	// far as the session is concerned: queue non-empty, session not paused,
	// under the per-session cap. Lane and queue caps are checked at dispatch.
	runnable indexedHeap[*laneSession]

	bucket   *bucket // per-lane rate limit; nil when unlimited
	rateWake int64   // when a lane blocked only by its bucket wants a retry; 0 if none

	pending int // queued + retrying commands
	active  int // running commands

	turn  int64             // RoundRobin turn counter
	vtime uint64            // WeightedTenant virtual time: tag of the last start
	tags  map[string]uint64 // WeightedTenant last tag handed out per tenant

	// Depth signalling state.
	pressured, warned, critical bool

	counts laneCounts
	wait   histogram
	runLat histogram
	m      *laneMetrics
}

type laneCounts struct {
	submitted, completed, failed, retried, timeouts, deadLettered, cancelled uint64
}

// laneSession is one session's queue within one lane.
type laneSession struct {
	lane *lane
	sess *session
	// queue holds the queued commands in start order: submit order, except
	// that a command returning from a retry delay slots back in by seq.
	queue deque
	// active counts this session's running commands in the lane.
	active int
	// refs counts queued, retrying and running commands bound here.
	refs int
	// heapIdx is the position in lane.runnable; -1 when absent.
	heapIdx int32
	// Ordering key of the head while in lane.runnable: effective priority,
	// the policy's second key, then the head's seq.
	kPrio int
	kSub  int64
	kSeq  uint64
	// turn is the RoundRobin position, refreshed whenever the session
	// starts a command or becomes runnable.
	turn int64
}

func lsLess(a, b *laneSession) bool {
	if a.kPrio != b.kPrio {
		return a.kPrio < b.kPrio
	}
	if a.kSub != b.kSub {
		return a.kSub < b.kSub
	}
	return a.kSeq < b.kSeq
}

func lsSlot(ls *laneSession) *int32 { return &ls.heapIdx }

// deque is a ring buffer of tickets. The zero value is empty.
type deque struct {
	buf  []*Ticket
	head int
	n    int
}

func (d *deque) len() int { return d.n }

func (d *deque) front() *Ticket { return d.buf[d.head] }

func (d *deque) at(i int) *Ticket { return d.buf[(d.head+i)&(len(d.buf)-1)] }

func (d *deque) grow() {
	c := len(d.buf) * 2
	if c == 0 {
		c = 2
	}
	nb := make([]*Ticket, c)
	for i := 0; i < d.n; i++ {
		nb[i] = d.at(i)
	}
	d.buf, d.head = nb, 0
}

func (d *deque) pushBack(t *Ticket) {
	if d.n == len(d.buf) {
		d.grow()
	}
	d.buf[(d.head+d.n)&(len(d.buf)-1)] = t
	d.n++
}

func (d *deque) popFront() *Ticket {
	t := d.buf[d.head]
	d.buf[d.head] = nil
	d.head = (d.head + 1) & (len(d.buf) - 1)
	d.n--
	if d.n == 0 {
		d.head = 0
		if len(d.buf) > 64 {
			d.buf = nil // give a burst's memory back
		}
	}
	return t
}

// insertBySeq inserts t before the first ticket with a larger seq. Used for
// retries, which are older than almost everything queued, so the scan is short.
func (d *deque) insertBySeq(t *Ticket) {
	if d.n == len(d.buf) {
		d.grow()
	}
	i := 0
	for i < d.n && d.at(i).seq < t.seq {
		i++
	}
	for j := d.n; j > i; j-- {
		d.buf[(d.head+j)&(len(d.buf)-1)] = d.at(j - 1)
	}
	d.buf[(d.head+i)&(len(d.buf)-1)] = t
	d.n++
}

// remove deletes t and reports whether it was present. Removing the front,
// which is what bulk cancellation in submit order does, is O(1).
func (d *deque) remove(t *Ticket) bool {
	if d.n > 0 && d.buf[d.head] == t {
		d.popFront()
		return true
	}
	for i := 1; i < d.n; i++ {
		if d.at(i) != t {
			continue
		}
		for j := i; j < d.n-1; j++ {
			d.buf[(d.head+j)&(len(d.buf)-1)] = d.at(j + 1)
		}
		d.buf[(d.head+d.n-1)&(len(d.buf)-1)] = nil
		d.n--
		return true
	}
	return false
}

// extract removes every ticket for which match is true, in one pass, and
// appends them to out in queue order.
func (d *deque) extract(match func(*Ticket) bool, out []*Ticket) []*Ticket {
	kept := 0
	for i := 0; i < d.n; i++ {
		t := d.at(i)
		if match(t) {
			out = append(out, t)
			continue
		}
		d.buf[(d.head+kept)&(len(d.buf)-1)] = t
		kept++
	}
	for i := kept; i < d.n; i++ {
		d.buf[(d.head+i)&(len(d.buf)-1)] = nil
	}
	d.n = kept
	if d.n == 0 {
		d.head = 0
	}
	return out
}

// refreshLocked restores the invariant of ln.runnable for ls: present with
// its head's current key exactly when the session could start its head. It
// also schedules the head's next priority boost. With keepTurn the
// RoundRobin position is left alone (used when rebuilding).
func (q *Queue) refreshLocked(ls *laneSession, now int64, keepTurn bool) {
	ln := ls.lane
	if ls.queue.len() == 0 || ls.sess.paused || ln.removed ||
		(ln.cfg.MaxConcurrencyPerSession > 0 && ls.active >= ln.cfg.MaxConcurrencyPerSession) {
		ln.runnable.Delete(ls)
		return
	}
	h := ls.queue.front()
	prio, next := q.priorityLocked(h, now)
	ls.kPrio = prio
	ls.kSeq = h.seq
	switch q.fairness {
	case FairRoundRobin:
		if !keepTurn && !ln.runnable.Contains(ls) {
			ln.turn++
			ls.turn = ln.turn
		}
		ls.kSub = ls.turn
	case FairWeightedTenant:
		ls.kSub = int64(h.tag)
	default:
		// FIFO: submit order, which is kSeq. Not the submit time: a wall
		// clock that steps back must not put a later submit first.
		ls.kSub = 0
	}
	ln.runnable.PushOrUpdate(ls)
	if next > 0 {
		h.due = next
		q.due.PushOrUpdate(h)
	}
}

// priorityLocked returns t's effective priority at now and when it changes.
func (q *Queue) priorityLocked(t *Ticket, now int64) (int, int64) {
	base := t.ls.lane.cfg.Priority
	if t.prio >= 0 {
		base = int(t.prio)
	}
	if t.deadline == 0 {
		return base, 0
	}
	return boostedPriority(q.boost, base, t.submit, t.deadline, now)
}

// headBefore orders two runnable session heads from different lanes:
// effective priority, then submit order (seq, never the submit time, which
// a wall clock stepping back would invert).
func headBefore(a, b *laneSession) bool {
	if a.kPrio != b.kPrio {
		return a.kPrio < b.kPrio
	}
	return a.queue.front().seq < b.queue.front().seq
}

// addPendingLocked changes the pending count of ls's lane and session and
// raises depth signals as they cross their thresholds.
func (q *Queue) addPendingLocked(ls *laneSession, delta int, now int64) {
	ln := ls.lane
	ln.pending += delta
	ls.sess.pending += delta
	ln.m.pending.Set(float64(ln.pending))
	p := ln.pending
	if q.pressureAt > 0 {
		if !ln.pressured && p >= q.pressureAt {
			ln.pressured = true
			q.laneEventLocked(EventLanePressure, ln, now)
		} else if ln.pressured && p == 0 {
			ln.pressured = false
			q.laneEventLocked(EventLaneIdle, ln, now)
		}
	}
	if q.warnAt > 0 {
		if !ln.warned && p >= q.warnAt {
			ln.warned = true
			if e := q.laneEventLocked(EventAlert, ln, now); e != nil {
				e.Level = AlertWarning
			}
		} else if ln.warned && p < q.warnAt {
			ln.warned = false
		}
		if !ln.critical && p >= q.critAt {
			ln.critical = true
			if e := q.laneEventLocked(EventAlert, ln, now); e != nil {
				e.Level = AlertCritical
			}
		} else if ln.critical && p < q.critAt {
			ln.critical = false
		}
	}
}

// nextTagLocked returns the virtual finish tag of a new command of tenant in
// ln (self-clocked fair queuing): each command costs 1/weight after the
// tenant's previous one, and a tenant that was idle starts from the lane's
// virtual time, the tag of the last command started, so it cannot bank
// credit while away.
func (q *Queue) nextTagLocked(ln *lane, tenant string) uint64 {
	const unit = 1 << 20
	w := uint64(1)
	if v, ok := q.cfg.TenantWeights[tenant]; ok && v > 0 {
		w = uint64(v)
	}
	if ln.tags == nil {
		ln.tags = make(map[string]uint64)
	}
	tag := max(ln.tags[tenant], ln.vtime) + unit/w
	ln.tags[tenant] = tag
	return tag
}
