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
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// The property driver throws random submits, completions, failures,
// timeouts, cancellations, pauses, mode switches and reconfigurations at a
// queue under a fake clock, and after every step checks:
//
//   - no start ever exceeds the queue, lane or per-session cap, or starts a
//     paused session's command (checked at the moment of each start);
//   - the queue's bookkeeping matches its commands: every live command is
//     exactly where its state says (queued in its session's queue, backing
//     off, or running), and every count agrees;
//   - no attempt starts twice and attempt numbers only grow;
//   - first attempts start in submission order per session per lane;
//   - every command ends in exactly one terminal state, with exactly one
//     terminal event, and after Close nothing is left alive.
//
// The same driver runs from a seed (TestQueueProperties) or from fuzz input
// (FuzzQueue), so every run is deterministic and replayable.

// source yields the driver's choices.
type source interface {
	intn(n int) int
	done() bool
}

type randSource struct {
	r     *rand.Rand
	steps int
}

func (s *randSource) intn(n int) int { return s.r.IntN(n) }
func (s *randSource) done() bool     { s.steps--; return s.steps < 0 }

type byteSource struct {
	data []byte
	i    int
}

func (s *byteSource) intn(n int) int {
	if s.i >= len(s.data) {
		return 0
	}
	b := s.data[s.i]
	s.i++
	return int(b) % n
}
func (s *byteSource) done() bool { return s.i >= len(s.data) }

type attemptKey struct {
	id      string
	attempt int
}

type propDriver struct {
	t   testing.TB
	h   *harness
	src source

	tickets    []*Ticket
	seqs       map[string]uint64
	liveSet    map[string]*Ticket // submitted and not yet seen terminal
	started    map[attemptKey]bool
	lastTry    map[string]int    // highest attempt started per command
	firstTry   map[string]int    // number of each command's first attempt
	lastFirst  map[string]uint64 // per "lane/session": seq of the last first attempt started
	terminals  map[string]int    // terminal events per command
	violations []string
	laneNames  []string
	step       int
	log        []string
}

var propSessions = []string{"s1", "s2", "s3", "s4"}

func newPropDriver(t testing.TB, src source) *propDriver {
	d := &propDriver{
		t: t, src: src,
		seqs:      map[string]uint64{},
		liveSet:   map[string]*Ticket{},
		started:   map[attemptKey]bool{},
		lastTry:   map[string]int{},
		firstTry:  map[string]int{},
		lastFirst: map[string]uint64{},
		terminals: map[string]int{},
	}
	cfg := d.randomConfig()
	d.h = newHarness(t, cfg, func(o *Options) { o.checkStart = d.checkStart })
	return d
}

// checkStart runs under the queue lock just before ls's head starts.
func (d *propDriver) checkStart(ls *laneSession) {
	q, ln := d.h.q, ls.lane
	bad := func(format string, args ...any) {
		d.violations = append(d.violations, fmt.Sprintf("step %d: "+format, append([]any{d.step}, args...)...))
	}
	if q.maxConcurrent > 0 && q.active >= q.maxConcurrent && !ln.cfg.Isolated {
		bad("queue cap %d exceeded (active %d)", q.maxConcurrent, q.active)
	}
	if c := ln.cfg.MaxConcurrency; c > 0 && ln.active >= c {
		bad("lane %s cap %d exceeded (active %d)", ln.name, c, ln.active)
	}
	if c := ln.cfg.MaxConcurrencyPerSession; c > 0 && ls.active >= c {
		bad("lane %s session %s cap %d exceeded", ln.name, ls.sess.key, c)
	}
	if ls.sess.paused {
		bad("paused session %s started", ls.sess.key)
	}
	if ln.removed {
		bad("removed lane %s started", ln.name)
	}
}

func (d *propDriver) pick(n int) int { return d.src.intn(n) }

func (d *propDriver) randomConfig() Config {
	pool := []string{"a", "b", "c", "d"}
	n := 1 + d.pick(3)
	start := d.pick(len(pool))
	if len(d.laneNames) > 0 && d.pick(4) != 0 { // usually keep the lanes, change their settings
		n = len(d.laneNames)
		start = slices.Index(pool, d.laneNames[0])
	}
	cfg := Config{
		MaxConcurrent:     d.pick(5),
		Fairness:          []FairnessPolicy{FairFIFO, FairRoundRobin, FairWeightedTenant}[d.pick(3)],
		TenantWeights:     map[string]int{"t1": 1 + d.pick(3)},
		Boost:             BoostPolicy{Strategy: []BoostStrategy{BoostStandard, BoostAggressive, BoostDisabled}[d.pick(3)]},
		Retry:             RetryPolicy{MaxRetries: d.pick(3), InitialDelay: 50 * time.Millisecond},
		DeadLetter:        DeadLetterConfig{MaxSize: 1 + d.pick(5), Disabled: d.pick(4) == 0},
		DefaultTimeout:    time.Duration(1+d.pick(10)) * time.Second,
		PressureThreshold: d.pick(4),
		Alerts:            AlertThresholds{Warning: 1 + d.pick(3), Critical: 4 + d.pick(3)},
	}
	if d.pick(4) == 0 {
		cfg.RateLimit = &RateLimit{Window: PerSecond, MaxOperations: 1 + d.pick(5)}
	}
	d.laneNames = d.laneNames[:0]
	for i := range n {
		name := pool[(start+i)%len(pool)]
		d.laneNames = append(d.laneNames, name)
		lc := LaneConfig{
			Name:                     name,
			Priority:                 d.pick(4),
			Mode:                     []HandlerMode{Internal, External, Hybrid}[d.pick(3)],
			MaxConcurrency:           d.pick(4),
			MaxConcurrencyPerSession: d.pick(3),
			Isolated:                 d.pick(5) == 0,
		}
		if d.pick(3) == 0 {
			lc.Timeout = time.Duration(1+d.pick(5)) * time.Second
		}
		if d.pick(4) == 0 {
			lc.Retry = &RetryPolicy{Strategy: RetryFixed, FixedDelay: time.Duration(1+d.pick(3)) * 100 * time.Millisecond, MaxRetries: d.pick(3)}
		}
		if d.pick(5) == 0 {
			lc.RateLimit = &RateLimit{Window: PerSecond, MaxOperations: 1 + d.pick(3)}
		}
		cfg.Lanes = append(cfg.Lanes, lc)
	}
	cfg.DefaultLane = d.laneNames[0]
	return cfg
}

func (d *propDriver) live() []*Ticket {
	var out []*Ticket
	for _, t := range d.tickets {
		if d.liveSet[t.id] != nil {
			out = append(out, t)
		}
	}
	return out
}

func (d *propDriver) doStep() {
	h, q := d.h, d.h.q
	d.step++
	switch op := d.pick(20); {
	case op < 6: // submit
		cmd := Command{
			SessionKey: propSessions[d.pick(len(propSessions))],
			RunID:      []string{"r1", "r2"}[d.pick(2)],
			Labels:     Identity{TenantID: []string{"t1", "t2"}[d.pick(2)]},
		}
		switch d.pick(4) {
		case 0: // routed by type to the default lane
			cmd.Type = "bash"
		case 1: // a lane that may no longer exist
			cmd.Lane = []string{"a", "b", "c", "d"}[d.pick(4)]
		default:
			cmd.Lane = d.laneNames[d.pick(len(d.laneNames))]
		}
		if d.pick(4) == 0 {
			cmd.Priority = intp(d.pick(4))
		}
		if d.pick(3) == 0 {
			cmd.Deadline = h.clk.Now().Add(time.Duration(1+d.pick(20)) * time.Second)
		}
		if d.pick(4) == 0 {
			cmd.Timeout = time.Duration(1+d.pick(5)) * time.Second
		}
		if d.pick(6) == 0 {
			cmd.PriorAttempts = d.pick(3)
		}
		t, err := q.Submit(cmd)
		if err != nil {
			if !errors.Is(err, ErrUnknownLane) {
				d.t.Fatalf("step %d: Submit: %v", d.step, err)
			}
			return
		}
		d.tickets = append(d.tickets, t)
		d.seqs[t.id] = t.seq
		d.liveSet[t.id] = t
		d.firstTry[t.id] = cmd.PriorAttempts + 1
		d.log = append(d.log, "submit "+t.id)
	case op < 10: // run a parked Internal attempt (possibly an abandoned one)
		if len(h.grants) == 0 {
			return
		}
		i := d.pick(len(h.grants))
		a := h.grants[i]
		h.grants = slices.Delete(h.grants, i, i+1)
		switch d.pick(4) {
		case 0:
			h.results[a.t.id] = scripted{err: errBoom}
		case 1:
			h.results[a.t.id] = scripted{err: Permanent(errBoom)}
		case 2:
			h.results[a.t.id] = scripted{r: Result{Error: "exit 1", ExitCode: 1}}
		}
		d.log = append(d.log, fmt.Sprintf("run %s#%d", a.t.id, a.number))
		q.runAttempt(a)
		delete(h.results, a.t.id)
	case op < 13: // report an external task, sometimes with a stale attempt
		p := q.PendingExternal()
		if len(p) == 0 {
			return
		}
		x := p[d.pick(len(p))]
		d.log = append(d.log, fmt.Sprintf("report %s#%d", x.ID, x.Attempt))
		var err error
		switch d.pick(5) {
		case 0:
			err = q.CompleteAttempt(x.ID, x.Attempt+1, Result{Success: true})
			if !errors.Is(err, ErrStaleAttempt) {
				d.t.Fatalf("step %d: future attempt accepted: %v", d.step, err)
			}
			return
		case 1:
			err = q.FailAttempt(x.ID, x.Attempt, errBoom)
		case 2:
			err = q.CompleteAttempt(x.ID, x.Attempt, Result{Error: "no"})
		default:
			err = q.Complete(x.ID, Result{Success: true})
		}
		if err != nil {
			d.t.Fatalf("step %d: report %s: %v", d.step, x.ID, err)
		}
	case op < 16: // time passes: timeouts, retries, boosts, refills
		dt := []time.Duration{time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, time.Second, 5 * time.Second}[d.pick(5)]
		d.log = append(d.log, fmt.Sprintf("step %v", dt))
		h.step(dt)
	case op < 17: // cancel
		live := d.live()
		switch c := d.pick(3); {
		case c == 0 && len(live) > 0:
			t := live[d.pick(len(live))]
			d.log = append(d.log, "cancel "+t.id)
			if err := q.Cancel(t.id); err != nil {
				d.t.Fatalf("step %d: Cancel(%s): %v", d.step, t.id, err)
			}
		case c == 1:
			d.log = append(d.log, "cancelrun")
			q.CancelRun(propSessions[d.pick(len(propSessions))], []string{"r1", "r2"}[d.pick(2)])
		default:
			d.log = append(d.log, "cancelsession")
			q.CancelSession(propSessions[d.pick(len(propSessions))])
		}
	case op < 18: // pause or resume
		s := propSessions[d.pick(len(propSessions))]
		if d.pick(2) == 0 {
			d.log = append(d.log, "pause "+s)
			q.PauseSession(s)
		} else {
			d.log = append(d.log, "resume "+s)
			q.ResumeSession(s)
		}
	case op < 19: // per-session mode override
		s := propSessions[d.pick(len(propSessions))]
		ln := d.laneNames[d.pick(len(d.laneNames))]
		if d.pick(2) == 0 {
			d.log = append(d.log, "clearmode")
			q.ClearSessionLaneMode(s, ln)
		} else if err := q.SetSessionLaneMode(s, ln, []HandlerMode{Internal, External, Hybrid}[d.pick(3)]); err != nil {
			d.t.Fatalf("step %d: SetSessionLaneMode: %v", d.step, err)
		}
	default: // reconfigure
		cfg := d.randomConfig()
		d.log = append(d.log, fmt.Sprintf("reconfigure %v", d.laneNames))
		if err := q.Reconfigure(cfg); err != nil {
			d.t.Fatalf("step %d: Reconfigure: %v", d.step, err)
		}
	}
}

// observe drains events and checks the per-attempt and ordering properties.
func (d *propDriver) observe() {
	for _, e := range d.h.events() {
		if e.Terminal {
			d.terminals[e.CommandID]++
			if d.terminals[e.CommandID] > 1 {
				d.fail("command %s has %d terminal events", e.CommandID, d.terminals[e.CommandID])
			}
		}
		if e.Type != EventStarted {
			continue
		}
		k := attemptKey{e.CommandID, e.Attempt}
		if d.started[k] {
			d.fail("attempt %d of %s started twice", e.Attempt, e.CommandID)
		}
		d.started[k] = true
		if e.Attempt <= d.lastTry[e.CommandID] {
			d.fail("attempt %d of %s started after attempt %d", e.Attempt, e.CommandID, d.lastTry[e.CommandID])
		}
		d.lastTry[e.CommandID] = e.Attempt
		if e.Attempt == d.firstTry[e.CommandID] {
			seq := d.seqOf(e.CommandID)
			key := e.Lane + "/" + e.SessionKey
			if seq <= d.lastFirst[key] {
				d.fail("FIFO broken in %s: %s (seq %d) started after seq %d", key, e.CommandID, seq, d.lastFirst[key])
			}
			d.lastFirst[key] = seq
		}
	}
	if n := d.h.sub.Dropped(); n > 0 {
		d.fail("subscriber dropped %d events", n)
	}
}

func (d *propDriver) seqOf(id string) uint64 {
	seq, ok := d.seqs[id]
	if !ok {
		d.fail("event for unknown command %s", id)
	}
	return seq
}

func (d *propDriver) fail(format string, args ...any) {
	d.t.Helper()
	tail := d.log
	if len(tail) > 30 {
		tail = tail[len(tail)-30:]
	}
	d.t.Fatalf("step %d: "+format+"\nlast operations: %v", append(append([]any{d.step}, args...), tail)...)
}

func (d *propDriver) check() {
	d.t.Helper()
	d.observe()
	if len(d.violations) > 0 {
		d.fail("%v", d.violations)
	}
	if err := d.h.q.checkInvariants(); err != nil {
		d.fail("invariant: %v", err)
	}
	q := d.h.q
	for id, t := range d.liveSet {
		st := q.ticketStateLocked(t)
		if st.terminal() {
			delete(d.liveSet, id)
		}
		_, live := q.ticketLive(t.id)
		switch {
		case st.terminal() && live:
			d.fail("terminal %s still registered", t.id)
		case !st.terminal() && !live:
			d.fail("live %s (%s) lost", t.id, st.public())
		case st.terminal() && d.terminals[t.id] != 1:
			d.fail("%s ended %s with %d terminal events", t.id, st.public(), d.terminals[t.id])
		}
	}
}

// finish closes the queue and checks that every command ended exactly once.
func (d *propDriver) finish() {
	d.h.q.Close()
	d.check()
	for _, t := range d.tickets {
		select {
		case <-t.Done():
		default:
			d.fail("%s not done after Close", t.id)
		}
		o, final := t.Outcome()
		if !final || !o.State.Terminal() {
			d.fail("%s ended in %s", t.id, o.State)
		}
	}
}

func runProperties(t testing.TB, src source) {
	d := newPropDriver(t, src)
	d.check()
	for !src.done() {
		d.doStep()
		d.check()
	}
	d.finish()
}

func TestQueueProperties(t *testing.T) {
	seeds, steps := 200, 600
	if testing.Short() {
		seeds = 20
	}
	for seed := range seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			runProperties(t, &randSource{r: rand.New(rand.NewPCG(uint64(seed), 0x5eed)), steps: steps})
		})
	}
}

// ticketStateLocked reads a ticket's state under the queue lock.
func (q *Queue) ticketStateLocked(t *Ticket) state {
	q.mu.Lock()
	defer q.mu.Unlock()
	return t.state
}

func (q *Queue) ticketLive(id string) (*Ticket, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	t, ok := q.tickets[id]
	return t, ok
}

// checkInvariants verifies the queue's bookkeeping against its commands.
func (q *Queue) checkInvariants() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	type counts struct{ pending, active int }
	byLane := map[*lane]*counts{}
	byLS := map[*laneSession]*counts{}
	bySess := map[*session]*counts{}
	get := func(m any, k any) *counts {
		switch m := m.(type) {
		case map[*lane]*counts:
			k := k.(*lane)
			if m[k] == nil {
				m[k] = &counts{}
			}
			return m[k]
		case map[*laneSession]*counts:
			k := k.(*laneSession)
			if m[k] == nil {
				m[k] = &counts{}
			}
			return m[k]
		case map[*session]*counts:
			k := k.(*session)
			if m[k] == nil {
				m[k] = &counts{}
			}
			return m[k]
		}
		return nil
	}
	active := 0
	for id, t := range q.tickets {
		if t.id != id {
			bad("ticket %s registered as %s", t.id, id)
		}
		ls := t.ls
		if ls.lane.sessions[ls.sess.key] != ls {
			bad("%s: its lane-session entry is not registered", id)
		}
		switch t.state {
		case stQueued:
			found := false
			for i := 0; i < ls.queue.len(); i++ {
				found = found || ls.queue.at(i) == t
			}
			if !found {
				bad("%s queued but not in its session queue", id)
			}
			get(byLane, ls.lane).pending++
			get(bySess, ls.sess).pending++
		case stRetrying:
			if t.dueIdx < 0 || q.due.items[t.dueIdx] != t {
				bad("%s retrying without a timer", id)
			}
			get(byLane, ls.lane).pending++
			get(bySess, ls.sess).pending++
		case stRunning:
			if t.dueIdx < 0 || q.due.items[t.dueIdx] != t || t.run == nil {
				bad("%s running without a timeout or attempt", id)
			}
			if (t.run.mode == External) != (q.external[id] == t) {
				bad("%s: external registration does not match mode %s", id, t.run.mode)
			}
			if t.run.number != t.attempts {
				bad("%s: attempt %d running, %d counted", id, t.run.number, t.attempts)
			}
			if !ls.lane.cfg.Isolated {
				active++
			}
			get(byLane, ls.lane).active++
			get(byLS, ls).active++
			get(bySess, ls.sess).active++
		default:
			bad("%s is %s but still registered", id, t.state.public())
		}
		get(byLS, ls).pending += 0
	}
	if active != q.active {
		bad("queue active = %d, counted %d", q.active, active)
	}
	for id, t := range q.external {
		if q.tickets[id] != t || t.state != stRunning {
			bad("external %s is not a running command", id)
		}
	}
	retrying := map[*laneSession]int{}
	for _, t := range q.due.items {
		if t.state == stRetrying {
			retrying[t.ls]++
		}
	}
	for _, ln := range q.allLanesLocked() {
		c := get(byLane, ln)
		if ln.pending != c.pending || ln.active != c.active {
			bad("lane %s: pending/active = %d/%d, counted %d/%d", ln.name, ln.pending, ln.active, c.pending, c.active)
		}
		if ln.removed && (ln.active == 0 || ln.runnable.Len() > 0) {
			bad("removed lane %s: active %d, runnable %d", ln.name, ln.active, ln.runnable.Len())
		}
		for key, ls := range ln.sessions {
			if ls.sess.key != key || ls.lane != ln {
				bad("lane %s: entry %s misfiled", ln.name, key)
			}
			refs := ls.queue.len() + get(byLS, ls).active + retrying[ls]
			if ls.refs != refs || refs == 0 {
				bad("lane %s session %s: refs = %d, counted %d", ln.name, key, ls.refs, refs)
			}
			if ls.active != get(byLS, ls).active {
				bad("lane %s session %s: active = %d, counted %d", ln.name, key, ls.active, get(byLS, ls).active)
			}
			for i := 0; i < ls.queue.len(); i++ {
				t := ls.queue.at(i)
				if t.state != stQueued || t.ls != ls {
					bad("lane %s session %s: queue holds %s in %s", ln.name, key, t.id, t.state.public())
				}
				if i > 0 && ls.queue.at(i-1).seq >= t.seq {
					bad("lane %s session %s: queue out of submit order", ln.name, key)
				}
			}
			want := ls.queue.len() > 0 && !ls.sess.paused && !ln.removed &&
				(ln.cfg.MaxConcurrencyPerSession == 0 || ls.active < ln.cfg.MaxConcurrencyPerSession)
			if in := ln.runnable.Contains(ls); in != want {
				bad("lane %s session %s: runnable = %v, want %v", ln.name, key, in, want)
			} else if in && ls.kSeq != ls.queue.front().seq {
				bad("lane %s session %s: keyed by a stale head", ln.name, key)
			}
		}
		for i, ls := range ln.runnable.items {
			if int(ls.heapIdx) != i || (i > 0 && lsLess(ls, ln.runnable.items[(i-1)/2])) {
				bad("lane %s: runnable heap broken at %d", ln.name, i)
			}
		}
	}
	for i, t := range q.due.items {
		if int(t.dueIdx) != i || (i > 0 && dueLess(t, q.due.items[(i-1)/2])) {
			bad("timer heap broken at %d", i)
		}
		if t.state.terminal() {
			bad("timer holds finished %s", t.id)
		}
	}
	for _, s := range q.sessions {
		c := get(bySess, s)
		if s.pending != c.pending || s.active != c.active {
			bad("session %s: pending/active = %d/%d, counted %d/%d", s.key, s.pending, s.active, c.pending, c.active)
		}
	}
	return errors.Join(errs...)
}
