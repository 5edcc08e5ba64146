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
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// t0 is the fake clock's start in every deterministic test.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// harness runs a queue deterministically: a fake clock the test moves with
// step, no timer goroutine, and Internal attempts parked until the test
// finishes them with succeed/fail. Everything runs on the test goroutine,
// so events are delivered by the time a call returns.
type harness struct {
	t      testing.TB
	q      *Queue
	clk    *clocktesting.FakeClock
	sub    *Subscription
	grants []*attemptCtx // granted Internal attempts not yet run, in grant order
	// results scripts what the next run of a command returns; default success.
	results map[string]scripted
}

type scripted struct {
	r   Result
	err error
}

type harnessOption func(*Options)

func newHarness(t testing.TB, cfg Config, opts ...harnessOption) *harness {
	t.Helper()
	h := &harness{t: t, clk: clocktesting.NewFakeClock(t0), results: map[string]scripted{}}
	o := Options{
		Clock:        h.clk,
		IDs:          &SequentialIDs{},
		manualTimers: true,
		spawn:        func(a *attemptCtx) { h.grants = append(h.grants, a) },
		Handler:      HandlerFunc(h.handle),
	}
	for _, f := range opts {
		f(&o)
	}
	q, err := New(cfg, o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h.q = q
	h.sub = q.Subscribe(1 << 16)
	t.Cleanup(q.Close)
	return h
}

func (h *harness) handle(_ context.Context, a Attempt) (Result, error) {
	if s, ok := h.results[a.ID]; ok {
		delete(h.results, a.ID)
		return s.r, s.err
	}
	return Result{Success: true}, nil
}

func (h *harness) submit(cmd Command) *Ticket {
	h.t.Helper()
	tk, err := h.q.Submit(cmd)
	if err != nil {
		h.t.Fatalf("Submit(%+v): %v", cmd, err)
	}
	return tk
}

// step moves the clock and processes whatever became due.
func (h *harness) step(d time.Duration) {
	h.clk.Step(d)
	h.q.advance()
}

// granted returns the IDs of parked Internal attempts, in grant order.
func (h *harness) granted() []string {
	var ids []string
	for _, a := range h.grants {
		ids = append(ids, a.t.id)
	}
	return ids
}

// running returns the IDs of running commands (any mode) in start order.
func (h *harness) running() []string {
	h.q.mu.Lock()
	defer h.q.mu.Unlock()
	var ts []*Ticket
	for _, t := range h.q.tickets {
		if t.state == stRunning {
			ts = append(ts, t)
		}
	}
	slices.SortFunc(ts, func(a, b *Ticket) int {
		if a.started != b.started {
			return compareInt(a.started, b.started)
		}
		return compareUint(a.run.seqStart, b.run.seqStart)
	})
	ids := []string{}
	for _, t := range ts {
		ids = append(ids, t.id)
	}
	return ids
}

func compareInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// finish runs the parked attempt of id with the given result.
func (h *harness) finish(id string, r Result, err error) {
	h.t.Helper()
	for i, a := range h.grants {
		if a.t.id == id {
			h.grants = slices.Delete(h.grants, i, i+1)
			h.results[id] = scripted{r, err}
			h.q.runAttempt(a)
			return
		}
	}
	h.t.Fatalf("no granted attempt for %s; granted: %v", id, h.granted())
}

func (h *harness) succeed(id string) { h.t.Helper(); h.finish(id, Result{Success: true}, nil) }

func (h *harness) fail(id string, err error) { h.t.Helper(); h.finish(id, Result{}, err) }

// events drains the subscription.
func (h *harness) events() []Event {
	var out []Event
	for {
		select {
		case e, ok := <-h.sub.Events():
			if !ok {
				return out
			}
			out = append(out, e)
		default:
			return out
		}
	}
}

// eventTypes drains the subscription and keeps only the given types
// (all when none are given), as "type id" strings.
func (h *harness) eventLog(types ...EventType) []string {
	var out []string
	for _, e := range h.events() {
		if len(types) > 0 && !slices.Contains(types, e.Type) {
			continue
		}
		s := string(e.Type)
		if e.CommandID != "" {
			s += " " + e.CommandID
		}
		if e.Lane != "" && e.CommandID == "" {
			s += " " + e.Lane
		}
		if e.Level != "" {
			s += " " + string(e.Level)
		}
		out = append(out, s)
	}
	return out
}

func (h *harness) outcome(tk *Ticket) Outcome {
	h.t.Helper()
	o, done := tk.Outcome()
	if !done {
		h.t.Fatalf("command %s not finished: %s", tk.ID(), o.State)
	}
	return o
}

func intp(v int) *int { return &v }

var errBoom = errors.New("boom")

// oneLane is a config with one lane and the given settings.
func oneLane(l LaneConfig) Config {
	if l.Name == "" {
		l.Name = "work"
	}
	return Config{Lanes: []LaneConfig{l}, DefaultLane: l.Name}
}
