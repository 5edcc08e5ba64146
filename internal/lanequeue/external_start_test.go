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
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestAwaitStartTimeoutRunsFromStart: a granted attempt that nobody runs
// holds its lane slot but never times out; its timeout runs from
// MarkStarted, stops at MarkWaiting and starts again at the next
// MarkStarted.
func TestAwaitStartTimeoutRunsFromStart(t *testing.T) {
	h := newHarness(t, externalConfig()) // cap 2, timeout 10s
	a := h.submit(Command{ID: "a", SessionKey: "s", External: true, AwaitStart: true})
	b := h.submit(Command{ID: "b", SessionKey: "s", External: true, AwaitStart: true})
	h.submit(Command{ID: "c", SessionKey: "s", External: true, AwaitStart: true})

	h.step(time.Hour) // nobody runs a or b
	if diff := cmp.Diff([]string{"a", "b"}, h.running()); diff != "" {
		t.Fatalf("running after waiting an hour to start (-want,+got):\n%s", diff)
	}
	for _, x := range h.q.PendingExternal() {
		if !x.StartedAt.IsZero() || !x.Deadline.IsZero() || x.Remaining(h.clk.Now()) != 10*time.Second {
			t.Errorf("unstarted %s: started %v, deadline %v, remaining %v", x.ID, x.StartedAt, x.Deadline, x.Remaining(h.clk.Now()))
		}
	}

	start := h.clk.Now()
	if err := h.q.MarkStarted("a", 1, start); err != nil {
		t.Fatal(err)
	}
	h.step(9 * time.Second)
	if o, _ := a.Outcome(); o.State != StateRunning {
		t.Fatalf("a 9s after its start: %+v, want running", o)
	}
	h.step(time.Second)
	if o, _ := a.Outcome(); o.State != StateRetrying || o.Attempts != 1 {
		t.Errorf("a 10s after its start: %+v, want retrying after 1 attempt", o)
	}

	// b starts, is handed back after 5s, waits, then starts again.
	if err := h.q.MarkStarted("b", 1, h.clk.Now()); err != nil {
		t.Fatal(err)
	}
	h.step(5 * time.Second)
	if err := h.q.MarkWaiting("b", 1); err != nil {
		t.Fatal(err)
	}
	h.step(time.Hour)
	if err := h.q.MarkStarted("b", 1, h.clk.Now()); err != nil {
		t.Fatal(err)
	}
	h.step(9 * time.Second)
	if o, _ := b.Outcome(); o.State != StateRunning || o.Attempts != 1 {
		t.Errorf("b 9s after its second start: %+v, want running attempt 1", o)
	}
	want := []string{"timeout a", "retry a"}
	if diff := cmp.Diff(want, h.eventLog(EventTimeout, EventRetry)); diff != "" {
		t.Errorf("events (-want,+got):\n%s", diff)
	}
}

func TestMarkStartedErrors(t *testing.T) {
	h := newHarness(t, externalConfig())
	h.submit(Command{ID: "x", SessionKey: "s", External: true, AwaitStart: true})
	tests := map[string]struct {
		id      string
		attempt int
		want    error
	}{
		"unknown":     {id: "nope", attempt: 1, want: ErrNotFound},
		"stale":       {id: "x", attempt: 2, want: ErrStaleAttempt},
		"no attempt":  {id: "x", attempt: 0, want: ErrInvalidCommand},
		"pending one": {id: "x", attempt: 1, want: nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if err := h.q.MarkStarted(tc.id, tc.attempt, t0); !errors.Is(err, tc.want) {
				t.Errorf("MarkStarted = %v, want %v", err, tc.want)
			}
			if err := h.q.MarkWaiting(tc.id, tc.attempt); !errors.Is(err, tc.want) {
				t.Errorf("MarkWaiting = %v, want %v", err, tc.want)
			}
		})
	}
}

// TestAwaitStartCancelSession: cancelling a session reaches its granted
// attempts that have not started.
func TestAwaitStartCancelSession(t *testing.T) {
	h := newHarness(t, externalConfig())
	tk := h.submit(Command{ID: "x", SessionKey: "s", External: true, AwaitStart: true})
	if n := h.q.CancelSession("s"); n != 1 {
		t.Errorf("CancelSession cancelled %d commands, want 1", n)
	}
	if o := h.outcome(tk); o.State != StateCancelled {
		t.Errorf("outcome = %+v, want cancelled", o)
	}
}

// TestStartTimeout: a lane's StartTimeout ends a command whose attempt
// waited too long to start, without retries and without counting the
// attempt; repeated MarkWaiting does not extend the wait, and a wait after a
// hand-back counts from the hand-back.
func TestStartTimeout(t *testing.T) {
	cfg := externalConfig()
	cfg.Lanes[0].StartTimeout = 30 * time.Second
	h := newHarness(t, cfg)
	never := h.submit(Command{ID: "never", SessionKey: "s", External: true, AwaitStart: true})
	back := h.submit(Command{ID: "back", SessionKey: "s", External: true, AwaitStart: true})
	if err := h.q.MarkStarted("back", 1, h.clk.Now()); err != nil {
		t.Fatal(err)
	}
	h.step(5 * time.Second)
	if err := h.q.MarkWaiting("back", 1); err != nil { // handed back at +5s
		t.Fatal(err)
	}
	for range 24 {
		h.step(time.Second)
		if err := h.q.MarkWaiting("never", 1); err != nil { // a controller asking again
			t.Fatal(err)
		}
	}
	if o, _ := never.Outcome(); o.State != StateRunning {
		t.Fatalf("never at +29s: %+v, want still waiting", o)
	}
	h.step(time.Second)
	o := h.outcome(never)
	if o.State != StateFailed || !errors.Is(o.Err, ErrStartTimeout) || o.Attempts != 0 {
		t.Errorf("never at +30s: %+v, want Failed by ErrStartTimeout after 0 attempts", o)
	}
	h.step(4 * time.Second)
	if o, _ := back.Outcome(); o.State != StateRunning {
		t.Fatalf("back 29s after its hand-back: %+v, want still waiting", o)
	}
	h.step(time.Second)
	if o := h.outcome(back); o.State != StateFailed || !errors.Is(o.Err, ErrStartTimeout) {
		t.Errorf("back 30s after its hand-back: %+v, want Failed by ErrStartTimeout", o)
	}
	if n := len(h.q.DeadLetters()); n != 0 {
		t.Errorf("%d dead letters, want none: a start timeout is not retried or dead-lettered", n)
	}
}
