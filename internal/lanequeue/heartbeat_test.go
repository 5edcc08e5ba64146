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
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// heartbeatConfig: an External lane with a 60s timeout and a 3s
// heartbeatTimeout.
func heartbeatConfig() Config {
	return oneLane(LaneConfig{Name: "execute", Mode: External, MaxConcurrency: 2, Timeout: time.Minute, HeartbeatTimeout: 3 * time.Second})
}

// timeoutErrors lists the errors of the timeout events so far.
func (h *harness) timeoutErrors() []string {
	var out []string
	for _, e := range h.events() {
		if e.Type == EventTimeout {
			out = append(out, e.Error)
		}
	}
	return out
}

// outcomeOf returns tk's outcome so far.
func outcomeOf(tk *Ticket) Outcome {
	o, _ := tk.Outcome()
	return o
}

// TestHeartbeatKeepsAttemptAlive: an attempt that heartbeats more often
// than its lane's heartbeatTimeout runs past it; once silent for the
// heartbeatTimeout it times out, naming the budget, and is retried; the
// retry starts with a fresh heartbeat window.
func TestHeartbeatKeepsAttemptAlive(t *testing.T) {
	h := newHarness(t, heartbeatConfig())
	tk := h.submit(Command{ID: "a", SessionKey: "s", External: true})

	for range 10 { // 20s of heartbeats every 2s
		h.step(2 * time.Second)
		if err := h.q.Heartbeat("a", 1); err != nil {
			t.Fatal(err)
		}
	}
	if o := outcomeOf(tk); o.State != StateRunning || o.Attempts != 1 {
		t.Fatalf("after 20s of heartbeats: %+v, want attempt 1 running", o)
	}
	h.events() // drop
	h.step(2999 * time.Millisecond)
	if o := outcomeOf(tk); o.State != StateRunning {
		t.Fatalf("2.999s after the last heartbeat: %+v, want running", o)
	}
	h.step(time.Millisecond)
	if o := outcomeOf(tk); o.State != StateRetrying || o.Attempts != 1 {
		t.Fatalf("3s after the last heartbeat: %+v, want retrying after attempt 1", o)
	}
	want := []string{"lanequeue: attempt timed out: no heartbeat for 3s (lane execute heartbeatTimeout 3s)"}
	if diff := cmp.Diff(want, h.timeoutErrors()); diff != "" {
		t.Errorf("timeout errors (-want,+got):\n%s", diff)
	}

	// The retry (after 100ms) runs attempt 2, whose heartbeats count from
	// its own start; attempt 1's are refused.
	h.step(100 * time.Millisecond)
	if o := outcomeOf(tk); o.State != StateRunning || o.Attempts != 2 {
		t.Fatalf("after the retry delay: %+v, want attempt 2 running", o)
	}
	h.step(2 * time.Second)
	if err := h.q.Heartbeat("a", 1); !errors.Is(err, ErrStaleAttempt) {
		t.Errorf("heartbeat for attempt 1: %v, want ErrStaleAttempt", err)
	}
	if err := h.q.Heartbeat("a", 2); err != nil {
		t.Fatal(err)
	}
	h.step(2 * time.Second)
	if o := outcomeOf(tk); o.State != StateRunning || o.Attempts != 2 {
		t.Fatalf("2s after attempt 2's heartbeat: %+v, want attempt 2 running", o)
	}
	h.step(time.Second)
	if o := outcomeOf(tk); o.State != StateRetrying || o.Attempts != 2 {
		t.Errorf("3s after attempt 2's heartbeat: %+v, want retrying after attempt 2", o)
	}
}

// TestHeartbeatTimeoutIsATimeout: the heartbeat's error is both
// ErrHeartbeatTimeout and ErrTimeout, and retries run out as for any
// timeout.
func TestHeartbeatTimeoutIsATimeout(t *testing.T) {
	cfg := heartbeatConfig()
	cfg.Retry = RetryPolicy{Strategy: RetryNone}
	h := newHarness(t, cfg)
	tk := h.submit(Command{ID: "a", SessionKey: "s", External: true})
	h.step(3 * time.Second)
	o, done := tk.Outcome()
	if !done || o.State == StateRunning {
		t.Fatalf("3s silent, no retries: %+v, want finished", o)
	}
	if !errors.Is(o.Err, ErrHeartbeatTimeout) || !errors.Is(o.Err, ErrTimeout) {
		t.Errorf("error %v: want ErrHeartbeatTimeout and ErrTimeout", o.Err)
	}
}

// TestHeartbeatFencedByAttempt: a heartbeat for another attempt, or for a
// command the queue does not hold, is refused and keeps nothing alive.
func TestHeartbeatFencedByAttempt(t *testing.T) {
	h := newHarness(t, heartbeatConfig())
	tk := h.submit(Command{ID: "a", SessionKey: "s", External: true})
	h.step(2 * time.Second)
	if err := h.q.Heartbeat("a", 2); !errors.Is(err, ErrStaleAttempt) {
		t.Errorf("heartbeat for attempt 2: %v, want ErrStaleAttempt", err)
	}
	if err := h.q.Heartbeat("nope", 0); !errors.Is(err, ErrNotFound) {
		t.Errorf("heartbeat for an unknown command: %v, want ErrNotFound", err)
	}
	h.step(time.Second)
	if o := outcomeOf(tk); o.State != StateRetrying {
		t.Errorf("3s after the start with only refused heartbeats: %+v, want retrying", o)
	}
}

// TestHeartbeatWaitsForStart: an AwaitStart attempt has no heartbeat
// window until MarkStarted, and none again after MarkWaiting.
func TestHeartbeatWaitsForStart(t *testing.T) {
	h := newHarness(t, heartbeatConfig())
	tk := h.submit(Command{ID: "a", SessionKey: "s", External: true, AwaitStart: true})
	h.step(time.Hour)
	if o := outcomeOf(tk); o.State != StateRunning {
		t.Fatalf("unstarted after an hour: %+v, want running (granted)", o)
	}
	if err := h.q.MarkStarted("a", 1, h.clk.Now()); err != nil {
		t.Fatal(err)
	}
	h.step(2 * time.Second)
	if err := h.q.MarkWaiting("a", 1); err != nil {
		t.Fatal(err)
	}
	h.step(time.Hour)
	if o := outcomeOf(tk); o.State != StateRunning || o.Attempts != 1 {
		t.Fatalf("waiting again for an hour: %+v, want attempt 1 still granted", o)
	}
	if err := h.q.MarkStarted("a", 1, h.clk.Now()); err != nil {
		t.Fatal(err)
	}
	h.step(3 * time.Second)
	if o := outcomeOf(tk); o.State != StateRetrying {
		t.Errorf("silent 3s after the second start: %+v, want retrying", o)
	}
}

// TestHeartbeatOnlyExternal: Internal attempts of a lane with a
// heartbeatTimeout are bounded by their timeout only.
func TestHeartbeatOnlyExternal(t *testing.T) {
	h := newHarness(t, oneLane(LaneConfig{Name: "execute", Timeout: time.Minute, HeartbeatTimeout: 3 * time.Second}))
	tk := h.submit(Command{ID: "a", SessionKey: "s"})
	h.step(59 * time.Second)
	if o := outcomeOf(tk); o.State != StateRunning {
		t.Errorf("internal attempt after 59s: %+v, want running", o)
	}
}

// TestHeartbeatAdoptedCountsFromAdoption: an attempt adopted long after its
// start (a new manager) gets a whole heartbeat window from the adoption.
func TestHeartbeatAdoptedCountsFromAdoption(t *testing.T) {
	h := newHarness(t, heartbeatConfig())
	tk, err := h.q.Adopt(Command{ID: "a", SessionKey: "s", External: true}, 1, h.clk.Now().Add(-30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	h.step(2 * time.Second)
	if o := outcomeOf(tk); o.State != StateRunning {
		t.Fatalf("2s after adoption: %+v, want running", o)
	}
	h.step(time.Second)
	if o := outcomeOf(tk); o.State != StateRetrying {
		t.Errorf("3s silent after adoption: %+v, want retrying", o)
	}
}

// TestExtendDeadline: the deadline moves and the timer with it; the
// bounds refuse a ninth extension and a deadline past ten times the
// timeout; a retry starts again from the lane's timeout.
func TestExtendDeadline(t *testing.T) {
	h := newHarness(t, externalConfig()) // timeout 10s
	tk := h.submit(Command{ID: "a", SessionKey: "s", External: true})
	start := h.clk.Now()
	h.step(9 * time.Second)
	x, err := h.q.ExtendDeadline("a", 1, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got := x.Deadline
	if want := (Extension{Attempt: 1, Deadline: start.Add(15 * time.Second), Extensions: 1}); !cmp.Equal(want, x) {
		t.Errorf("extension %+v, want %+v", x, want)
	}
	if x := h.q.PendingExternal()[0]; !x.Deadline.Equal(got) || x.Extensions != 1 {
		t.Errorf("pending task: deadline %v, extensions %d; want %v, 1", x.Deadline, x.Extensions, got)
	}
	h.step(5*time.Second + 999*time.Millisecond)
	if o := outcomeOf(tk); o.State != StateRunning {
		t.Fatalf("just before the extended deadline: %+v, want running", o)
	}
	h.step(time.Millisecond)
	if o := outcomeOf(tk); o.State != StateRetrying {
		t.Fatalf("at the extended deadline: %+v, want retrying", o)
	}
	if errs := h.timeoutErrors(); len(errs) != 1 || !strings.Contains(errs[0], "after 15s (lane execute timeout 10s)") {
		t.Errorf("timeout errors %q", errs)
	}

	// Attempt 2 (the retry): the bounds.
	h.step(time.Minute)
	if o := outcomeOf(tk); o.State != StateRunning || o.Attempts != 2 {
		t.Fatalf("retry: %+v", o)
	}
	if _, err := h.q.ExtendDeadline("a", 1, time.Second); !errors.Is(err, ErrStaleAttempt) {
		t.Errorf("extending attempt 1: %v, want ErrStaleAttempt", err)
	}
	if _, err := h.q.ExtendDeadline("a", 2, 0); !errors.Is(err, ErrExtendRefused) {
		t.Errorf("extending by 0: %v, want ErrExtendRefused", err)
	}
	if _, err := h.q.ExtendDeadline("a", 2, 91*time.Second); !errors.Is(err, ErrExtendRefused) {
		t.Errorf("extending past 10 times the timeout: %v, want ErrExtendRefused", err)
	}
	for i := range MaxExtensions {
		if _, err := h.q.ExtendDeadline("a", 2, time.Second); err != nil {
			t.Fatalf("extension %d: %v", i+1, err)
		}
	}
	if _, err := h.q.ExtendDeadline("a", 2, time.Second); !errors.Is(err, ErrExtendRefused) {
		t.Errorf("extension %d: %v, want ErrExtendRefused", MaxExtensions+1, err)
	}
	if _, err := h.q.ExtendDeadline("b", 0, time.Second); !errors.Is(err, ErrNotFound) {
		t.Errorf("extending an unknown command: %v, want ErrNotFound", err)
	}
}

// TestExtendDeadlineInternal: an Internal attempt's deadline moves too, and
// its context says so.
func TestExtendDeadlineInternal(t *testing.T) {
	h := newHarness(t, oneLane(LaneConfig{Name: "execute", Timeout: 10 * time.Second}))
	tk := h.submit(Command{ID: "a", SessionKey: "s"})
	start := h.clk.Now()
	if _, err := h.q.ExtendDeadline("a", 0, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if d, _ := h.grants[0].Deadline(); !d.Equal(start.Add(30 * time.Second)) {
		t.Errorf("context deadline %v, want %v", d, start.Add(30*time.Second))
	}
	h.step(29 * time.Second)
	if o := outcomeOf(tk); o.State != StateRunning {
		t.Errorf("after 29s: %+v, want running", o)
	}
	h.step(time.Second)
	if o := outcomeOf(tk); o.State != StateRetrying {
		t.Errorf("after 30s: %+v, want retrying", o)
	}
}

// TestExtendDeadlineNotStarted: an attempt waiting to start has no
// deadline to move.
func TestExtendDeadlineNotStarted(t *testing.T) {
	h := newHarness(t, externalConfig())
	h.submit(Command{ID: "a", SessionKey: "s", External: true, AwaitStart: true})
	if _, err := h.q.ExtendDeadline("a", 1, time.Second); !errors.Is(err, ErrExtendRefused) {
		t.Errorf("extending an unstarted attempt: %v, want ErrExtendRefused", err)
	}
}

// TestExtendDeadlineTo: an adopted attempt gets back the deadline recorded
// for it; an earlier one changes nothing.
func TestExtendDeadlineTo(t *testing.T) {
	h := newHarness(t, externalConfig()) // timeout 10s
	start := h.clk.Now()
	tk, err := h.q.Adopt(Command{ID: "a", SessionKey: "s", External: true}, 1, start)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := h.q.ExtendDeadlineTo("a", 1, start.Add(5*time.Second)); err != nil || !got.Deadline.Equal(start.Add(10*time.Second)) || got.Extensions != 0 {
		t.Errorf("ExtendDeadlineTo an earlier time: %v, %v; want the deadline unchanged", got, err)
	}
	if _, err := h.q.ExtendDeadlineTo("a", 1, start.Add(40*time.Second)); err != nil {
		t.Fatal(err)
	}
	h.step(39 * time.Second)
	if o := outcomeOf(tk); o.State != StateRunning {
		t.Fatalf("39s after the start: %+v, want running", o)
	}
	h.step(time.Second)
	if o := outcomeOf(tk); o.State != StateRetrying {
		t.Errorf("40s after the start: %+v, want retrying", o)
	}
	if _, err := h.q.ExtendDeadlineTo("b", 1, start); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown command: %v", err)
	}
}

// TestTimeoutErrorHeldUntilConfirmed: with ConfirmExternalTimeouts the
// error of an External attempt's timeout stays readable until its record
// is confirmed.
func TestTimeoutErrorHeldUntilConfirmed(t *testing.T) {
	h := newHarness(t, heartbeatConfig(), func(o *Options) { o.ConfirmExternalTimeouts = true })
	tk := h.submit(Command{ID: "a", SessionKey: "s", External: true})
	if err := tk.TimeoutError(1); err != nil {
		t.Errorf("before the timeout: %v", err)
	}
	h.step(3 * time.Second)
	err := tk.TimeoutError(1)
	if !errors.Is(err, ErrHeartbeatTimeout) || !strings.Contains(err.Error(), "no heartbeat for 3s") {
		t.Errorf("held timeout error: %v", err)
	}
	if err := tk.TimeoutError(2); err != nil {
		t.Errorf("attempt 2: %v", err)
	}
	h.q.ConfirmTimeout("a", 1)
	if err := tk.TimeoutError(1); err != nil {
		t.Errorf("after the confirmation: %v", err)
	}
}
