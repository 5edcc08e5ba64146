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
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
	"k8s.io/utils/clock"
)

// Options are the host environment of a queue. Nil fields get defaults.
type Options struct {
	// Clock drives every timestamp, timeout, retry delay, boost and rate
	// limit; the real clock by default.
	Clock clock.WithTicker
	// IDs names commands submitted without an ID; lowercase ULIDs by default.
	IDs IDGenerator
	// Metrics receives per-lane metrics; discarded by default.
	Metrics MetricsProvider
	// OnExternalTask, when set, is called once for every external task that
	// becomes pending, outside the queue lock and in the order tasks became
	// pending, so an operator can materialize it. It must return quickly: it holds up the
	// delivery of later events (not scheduling). It may call back into the
	// queue, except Subscribe, Subscription.Close and Close.
	OnExternalTask func(ExternalTask)
	// Handler runs Internal and Hybrid commands that carry no Handler.
	Handler Handler
	// ConfirmExternalTimeouts counts the timeout of an External attempt
	// (the timed-out attempt, and the retry or the end it causes) only once
	// ConfirmTimeout says its runner's record of it stood; Settle counts
	// the runner's result instead when that won. For an operator whose
	// record of an attempt is written once, by whoever comes first.
	ConfirmExternalTimeouts bool

	// Test seams. manualTimers disables the timer goroutine: the test calls
	// advance after moving the fake clock. spawn, when set, receives
	// granted Internal attempts instead of a goroutine. checkStart is called
	// under the lock just before a command starts.
	manualTimers bool
	spawn        func(*attemptCtx)
	checkStart   func(*laneSession)
}

// Queue schedules commands through lanes. All methods are safe for
// concurrent use. See the package documentation for the ordering rules.
type Queue struct {
	// mu guards everything below that is not marked otherwise. Handlers,
	// subscribers and hooks never run while it is held.
	mu sync.Mutex

	clock clock.WithTicker
	ids   IDGenerator
	// ownIDs is ids when it is the queue's own ULID generator, on the
	// queue's clock: Submit then names a command under the lock, from the
	// time it reads anyway, instead of reading the clock once more.
	ownIDs     *ULIDGenerator
	provider   MetricsProvider
	onExternal func(ExternalTask)
	defHandler Handler
	spawnHook  func(*attemptCtx)
	checkStart func(*laneSession)
	// metrics caches each lane name's metrics so a lane that is removed and
	// added again reports to the same series.
	metrics map[string]*laneMetrics

	// Policy, from the current Config.
	cfg             Config
	lanes           []*lane          // configured lanes, in configuration order
	byName          map[string]*lane // configured lanes by name
	draining        []*lane          // removed lanes that still have running commands
	routes          map[string]*lane
	defLane         *lane
	fairness        FairnessPolicy
	boost           BoostStrategy
	defaultDeadline int64
	defaultTimeout  int64
	maxConcurrent   int
	pressureAt      int
	warnAt, critAt  int // 0 when alerts are disabled
	bucket          *bucket
	rateWake        int64       // when the queue bucket wants a retry; 0 if none
	drain           *drainState // set while Config.Drain is
	dlqOn           bool

	// tickets holds every live (non-terminal) command by ID.
	tickets map[string]*Ticket
	// sessions holds every known session; see ForgetSession.
	sessions map[string]*session
	// external holds the running External attempts by command ID.
	external map[string]*Ticket
	// unconfirmed holds, by command ID, the External timeouts whose count
	// waits for ConfirmTimeout; nil without ConfirmExternalTimeouts.
	// deciding is the one whose consequences are being decided.
	unconfirmed map[string]*unconfirmedTimeout
	deciding    *unconfirmedTimeout
	// due orders the commands the timer must act on: running commands by
	// timeout, retrying commands by retry time, and runnable session heads
	// with a deadline by their next priority boost.
	due indexedHeap[*Ticket]

	// active counts running commands of lanes that are not Isolated,
	// draining ones included: what MaxConcurrent limits.
	active int
	seq    uint64 // last seq handed out
	starts uint64 // attempts started
	dlq    deadLetters
	wait   histogram
	runLat histogram

	timer   clock.Timer // nil with manualTimers
	armedAt int64       // when timer fires; 0 when not armed
	stop    chan struct{}
	closed  bool

	// Work to do once mu is released: granted Internal attempts to run,
	// events to deliver, external tasks to hand to the hook.
	grants, grantsTail *attemptCtx
	events             []Event
	hooks              []ExternalTask
	evseq              uint64
	subs               []*Subscription // replaced, never modified in place

	// emitMu serializes delivery (see flush) and guards the spare buffers.
	emitMu      sync.Mutex
	spareEvents []Event
	spareHooks  []ExternalTask
}

// New returns a queue running cfg, or the validation error. The queue owns
// one timer goroutine until Close.
func New(cfg Config, opts Options) (*Queue, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	var ownIDs *ULIDGenerator
	if opts.IDs == nil {
		ownIDs = NewULIDGenerator(opts.Clock, nil)
		opts.IDs = ownIDs
	}
	if opts.Metrics == nil {
		opts.Metrics = NoopMetricsProvider{}
	}
	q := &Queue{
		clock:      opts.Clock,
		ids:        opts.IDs,
		ownIDs:     ownIDs,
		provider:   opts.Metrics,
		onExternal: opts.OnExternalTask,
		defHandler: opts.Handler,
		spawnHook:  opts.spawn,
		checkStart: opts.checkStart,
		metrics:    make(map[string]*laneMetrics),
		byName:     make(map[string]*lane),
		tickets:    make(map[string]*Ticket),
		sessions:   make(map[string]*session),
		external:   make(map[string]*Ticket),
		due:        newIndexedHeap(dueLess, dueSlot),
		stop:       make(chan struct{}),
	}
	if opts.ConfirmExternalTimeouts {
		q.unconfirmed = make(map[string]*unconfirmedTimeout)
	}
	q.mu.Lock()
	q.applyConfigLocked(cfg.clone(), q.now())
	q.mu.Unlock()
	if !opts.manualTimers {
		q.timer = q.clock.NewTimer(time.Hour)
		q.timer.Stop()
		go q.timerLoop(q.timer.C())
	}
	return q, nil
}

func (q *Queue) now() int64 { return q.clock.Now().UnixNano() }

// Config returns a copy of the configuration in force.
func (q *Queue) Config() Config {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.cfg.clone()
}

// Submit queues a command and returns its ticket. It fails without side
// effects if the command is invalid, names an unknown lane, reuses a live
// ID, needs a handler it does not have, or the queue is closed.
func (q *Queue) Submit(cmd Command) (*Ticket, error) {
	t, err := q.newTicket(&cmd)
	if err != nil {
		return nil, err
	}
	q.mu.Lock()
	now := q.now()
	if err := q.admitLocked(t, &cmd, now, true); err != nil {
		q.mu.Unlock()
		return nil, err
	}
	q.addPendingLocked(t.ls, 1, now)
	q.enqueueLocked(t, now, false)
	q.dispatchLocked(now)
	q.unlock(now)
	return t, nil
}

// Adopt registers a command that is already running outside the queue, as
// attempt number attempt since startedAt, typically after a restart of the
// process that granted it. It occupies its lane, session and queue slots at
// once, even beyond the caps, and waits as an External task for Complete
// or its timeout counted from startedAt. OnExternalTask is not called for
// it: whoever runs it already has it.
func (q *Queue) Adopt(cmd Command, attempt int, startedAt time.Time) (*Ticket, error) {
	if attempt < 1 {
		return nil, fmt.Errorf("%w: attempt must be >= 1", ErrInvalidCommand)
	}
	cmd.PriorAttempts = attempt - 1
	t, err := q.newTicket(&cmd)
	if err != nil {
		return nil, err
	}
	q.mu.Lock()
	now := q.now()
	if err := q.admitLocked(t, &cmd, now, false); err != nil {
		q.mu.Unlock()
		return nil, err
	}
	t.ready = unixNanos(startedAt)
	q.beginAttemptLocked(t, now, unixNanos(startedAt), External, false)
	q.startTimerLocked(t.run, unixNanos(startedAt))
	q.adoptedBeatLocked(t.run, now)
	q.dispatchLocked(now)
	q.unlock(now)
	return t, nil
}

func (q *Queue) newTicket(cmd *Command) (*Ticket, error) {
	switch {
	case cmd.PriorAttempts < 0:
		return nil, fmt.Errorf("%w: priorAttempts must be >= 0", ErrInvalidCommand)
	case cmd.PriorNotStarted < 0 || cmd.PriorNotStarted > cmd.PriorAttempts:
		return nil, fmt.Errorf("%w: priorNotStarted must be between 0 and priorAttempts", ErrInvalidCommand)
	case cmd.Priority != nil && *cmd.Priority < 0:
		return nil, fmt.Errorf("%w: priority must be >= 0", ErrInvalidCommand)
	case cmd.Timeout < 0:
		return nil, fmt.Errorf("%w: timeout must be >= 0", ErrInvalidCommand)
	case cmd.InHandler && (cmd.Handler == nil || cmd.External):
		return nil, fmt.Errorf("%w: inHandler needs a handler and excludes external", ErrInvalidCommand)
	}
	id := cmd.ID
	if id == "" && q.ownIDs == nil {
		id = q.ids.NewID()
	} // else admitLocked names it
	t := &Ticket{
		q:        q,
		id:       id,
		typ:      cmd.Type,
		runID:    cmd.RunID,
		payload:  cmd.Payload,
		labels:   cmd.Labels,
		handler:  cmd.Handler,
		prio:     -1,
		timeout:  int64(cmd.Timeout),
		attempts: int32(cmd.PriorAttempts),
		// Never more free attempts than the bound, whatever the caller says.
		notStarted: int32(min(cmd.PriorNotStarted, MaxUncountedNotStarted)),
		external:   cmd.External,
		dueIdx:     -1,

		awaitStart: cmd.External && cmd.AwaitStart,
		inHandler:  cmd.InHandler,
	}
	if cmd.Priority != nil {
		t.prio = int32(*cmd.Priority)
	}
	if cmd.TimeoutSource != "" {
		source := cmd.TimeoutSource
		t.timeoutSource = &source
	}
	if !cmd.Deadline.IsZero() {
		t.deadline = unixNanos(cmd.Deadline)
	}
	return t, nil
}

// admitLocked binds t to its lane and session and registers it.
func (q *Queue) admitLocked(t *Ticket, cmd *Command, now int64, needHandler bool) error {
	if q.closed {
		return ErrClosed
	}
	ln, err := q.resolveLaneLocked(cmd.Lane, cmd.Type)
	if err != nil {
		return err
	}
	if needHandler {
		// A new submission; an adopted command already runs and keeps
		// running whatever the lane accepts now.
		if q.drain != nil && !cmd.Durable {
			return q.drain.refusal()
		}
		if err := acceptLocked(ln, cmd.Type); err != nil {
			return err
		}
	}
	if t.id == "" {
		t.id = q.ownIDs.newIDAt(ulid.Timestamp(unixTime(now)))
	}
	if _, dup := q.tickets[t.id]; dup {
		return fmt.Errorf("%w: %s", ErrDuplicateID, t.id)
	}
	ls := ln.sessions[cmd.SessionKey]
	sess := (*session)(nil)
	if ls != nil {
		sess = ls.sess
	} else {
		sess = q.sessions[cmd.SessionKey]
	}
	if needHandler && !t.external && t.handler == nil && q.defHandler == nil {
		mode := ln.cfg.Mode
		if sess != nil {
			mode = sess.modeFor(ln)
		}
		if mode != External {
			return fmt.Errorf("%w: lane %q runs %s commands", ErrNoHandler, ln.name, mode)
		}
	}
	if ls == nil {
		if sess == nil {
			sess = q.sessionLocked(cmd.SessionKey)
		}
		ls = &laneSession{lane: ln, sess: sess, heapIdx: -1}
		ln.sessions[cmd.SessionKey] = ls
	}
	ls.refs++
	t.ls = ls
	q.seq++
	t.seq = q.seq
	t.submit = now
	if t.deadline == 0 && q.defaultDeadline > 0 {
		t.deadline = after(now, q.defaultDeadline)
	}
	if q.fairness == FairWeightedTenant {
		t.tag = q.nextTagLocked(ln, t.labels.TenantID)
	}
	q.tickets[t.id] = t
	ln.counts.submitted++
	ln.m.submitted.Inc()
	q.cmdEventLocked(EventSubmitted, t, now, nil)
	return nil
}

// enqueueLocked puts t in its session's queue, in submit order, or by seq
// when it returns from a retry delay, and refreshes the session's position.
func (q *Queue) enqueueLocked(t *Ticket, now int64, retry bool) {
	ls := t.ls
	t.state = stQueued
	t.ready = now
	if retry {
		ls.queue.insertBySeq(t)
	} else {
		ls.queue.pushBack(t)
	}
	if ls.queue.front() == t {
		q.refreshLocked(ls, now, false)
	}
}

// dispatchLocked starts commands while the queue has room: each round picks,
// among lanes with room, a runnable head and tokens, the best lane head.
// Isolated lanes ignore the queue-wide cap and rate limit.
func (q *Queue) dispatchLocked(now int64) {
	for !q.closed {
		shared := (q.maxConcurrent == 0 || q.active < q.maxConcurrent) && q.bucket.ready(now)
		var best *laneSession
		blocked := false // a shared lane had work but the queue had no room
		for _, ln := range q.lanes {
			if ln.runnable.Len() == 0 || ln.cfg.Paused || (ln.cfg.MaxConcurrency > 0 && ln.active >= ln.cfg.MaxConcurrency) {
				continue
			}
			if !shared && !ln.cfg.Isolated {
				blocked = true
				continue
			}
			if !ln.bucket.ready(now) {
				ln.rateWake = ln.bucket.nextAt(now)
				continue
			}
			if ls := ln.runnable.Peek(); best == nil || headBefore(ls, best) {
				best = ls
			}
		}
		if blocked && q.bucket != nil && !q.bucket.ready(now) {
			q.rateWake = q.bucket.nextAt(now)
		}
		if best == nil {
			return
		}
		q.startLocked(best, now)
	}
}

// startLocked starts the head of ls, which dispatch found runnable.
func (q *Queue) startLocked(ls *laneSession, now int64) {
	ln := ls.lane
	if q.checkStart != nil {
		q.checkStart(ls)
	}
	t := ls.queue.popFront()
	if !ln.cfg.Isolated {
		q.bucket.take(now)
	}
	ln.bucket.take(now)
	q.addPendingLocked(ls, -1, now)
	switch q.fairness {
	case FairRoundRobin:
		ln.turn++
		ls.turn = ln.turn
	case FairWeightedTenant:
		ln.vtime = max(ln.vtime, t.tag)
	}
	w := now - t.ready
	ln.wait.observe(w)
	q.wait.observe(w)
	ln.m.waitSeconds.Observe(float64(w) / 1e9)
	mode := ls.sess.modeFor(ln)
	switch {
	case t.external:
		mode = External
	case t.inHandler:
		mode = Internal
	}
	q.beginAttemptLocked(t, now, now, mode, true)
}

// unlock finishes a locked operation: it arms the timer, releases mu, then
// delivers events and hands granted Internal attempts to runners.
func (q *Queue) unlock(now int64) {
	q.noteDrainedLocked(now)
	q.armLocked(now)
	g := q.grants
	q.grants, q.grantsTail = nil, nil
	flush := len(q.events) > 0 || len(q.hooks) > 0
	q.mu.Unlock()
	if flush {
		q.flush()
	}
	for g != nil {
		next := g.next
		g.next = nil
		q.spawn(g)
		g = next
	}
}

func (q *Queue) allLanesLocked() []*lane {
	if len(q.draining) == 0 {
		return q.lanes
	}
	return append(slices.Clip(q.lanes), q.draining...)
}

// Close stops the queue. Every live command ends Cancelled with ErrClosed
// (running ones have their contexts cancelled), the timer stops, pending
// events are delivered and every subscription is closed. Later calls that
// add work fail with ErrClosed.
func (q *Queue) Close() {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	now := q.now()
	live := make([]*Ticket, 0, len(q.tickets))
	for _, t := range q.tickets {
		live = append(live, t)
	}
	slices.SortFunc(live, func(a, b *Ticket) int { return compareUint(a.seq, b.seq) })
	for _, t := range live {
		q.cancelLocked(t, ErrClosed, now)
	}
	q.closed = true
	if q.timer != nil {
		q.timer.Stop()
	}
	close(q.stop)
	q.unlock(now)

	q.emitMu.Lock()
	q.mu.Lock()
	subs := q.subs
	q.subs = nil
	q.mu.Unlock()
	for _, s := range subs {
		s.end(true)
	}
	q.emitMu.Unlock()
}
