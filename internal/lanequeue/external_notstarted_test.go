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
	"testing"
	"time"
)

// notStartedConfig is one External lane with a fixed retry delay and the
// default retries.
func notStartedConfig() Config {
	return oneLane(LaneConfig{Name: "execute", Mode: External, MaxConcurrency: 2, Timeout: 10 * time.Second,
		Retry: &RetryPolicy{Strategy: RetryFixed, FixedDelay: time.Second}})
}

// lostBeforeStart is the error a runner lost before it reported a start
// fails an attempt with.
func lostBeforeStart(n int) error {
	return fmt.Errorf("attempt %d: worker lost: %w", n, ErrNotStarted)
}

// noRetryConfig is one External lane that never retries a counted failure
// (MaxRetries 0 means the default in a RetryPolicy; None means none).
func noRetryConfig() Config {
	return oneLane(LaneConfig{Name: "execute", Mode: External, MaxConcurrency: 2, Timeout: 10 * time.Second,
		Retry: &RetryPolicy{Strategy: RetryNone}})
}

// TestNotStartedFailureIsNotCounted: with no retries at all, an attempt
// failed with ErrNotStarted runs again as the next attempt number (the
// fencing token moves on), and the command succeeds on it; an ordinary
// failure of the next attempt ends it.
func TestNotStartedFailureIsNotCounted(t *testing.T) {
	h := newHarness(t, noRetryConfig(), func(o *Options) { o.Handler = nil })
	a := h.submit(Command{ID: "a", SessionKey: "s", External: true, AwaitStart: true})
	b := h.submit(Command{ID: "b", SessionKey: "s", External: true, AwaitStart: true})

	for _, id := range []string{"a", "b"} {
		if err := h.q.FailAttempt(id, 1, lostBeforeStart(1)); err != nil {
			t.Fatal(err)
		}
	}
	h.step(0)
	for _, tk := range []*Ticket{a, b} {
		if o, _ := tk.Outcome(); o.State != StateRunning || o.Attempts != 2 {
			t.Fatalf("%s after a loss before start: %+v, want running attempt 2", tk.ID(), o)
		}
	}
	if err := h.q.CompleteAttempt("a", 1, Result{Success: true}); !errors.Is(err, ErrStaleAttempt) {
		t.Errorf("completing the lost attempt 1: %v, want ErrStaleAttempt", err)
	}
	if err := h.q.CompleteAttempt("a", 2, Result{Success: true}); err != nil {
		t.Fatal(err)
	}
	if o := h.outcome(a); o.State != StateSucceeded || o.Attempts != 2 {
		t.Errorf("a: %+v, want succeeded after 2 attempts", o)
	}
	if err := h.q.FailAttempt("b", 2, errBoom); err != nil {
		t.Fatal(err)
	}
	if o := h.outcome(b); o.State != StateDeadLettered || o.Attempts != 2 {
		t.Errorf("b: %+v, want dead-lettered after its one counted attempt", o)
	}
}

// TestNotStartedFailuresAreBounded: a command lost before it starts on
// every attempt (a poison pill) is retried for free MaxUncountedNotStarted
// times; then the losses count, and with one retry allowed it ends after
// the second counted one.
func TestNotStartedFailuresAreBounded(t *testing.T) {
	cfg := notStartedConfig()
	cfg.Lanes[0].Retry = &RetryPolicy{Strategy: RetryFixed, FixedDelay: time.Second, MaxRetries: 1}
	h := newHarness(t, cfg, func(o *Options) { o.Handler = nil })
	p := h.submit(Command{ID: "p", SessionKey: "s", External: true, AwaitStart: true})

	last := MaxUncountedNotStarted + 2 // the free ones, then 1 + MaxRetries counted
	for n := 1; n <= last; n++ {
		if o, _ := p.Outcome(); o.State != StateRunning || o.Attempts != n {
			t.Fatalf("before loss %d: %+v, want running attempt %d", n, o, n)
		}
		if err := h.q.FailAttempt("p", n, lostBeforeStart(n)); err != nil {
			t.Fatal(err)
		}
		h.step(time.Second) // the retry delay
	}
	o := h.outcome(p)
	if o.State != StateDeadLettered || o.Attempts != last || !errors.Is(o.Err, ErrNotStarted) {
		t.Errorf("poison pill: %+v, want dead-lettered after %d attempts with ErrNotStarted", o, last)
	}
	dl := h.q.DeadLetters()
	if len(dl) != 1 || dl[0].Attempts != last {
		t.Errorf("dead letters: %+v, want p after %d attempts", dl, last)
	}
}

// TestPriorNotStartedCarriesOver: a command resubmitted after a restart
// with attempts that did not count keeps them free, and the bound holds
// across the restart.
func TestPriorNotStartedCarriesOver(t *testing.T) {
	h := newHarness(t, noRetryConfig(), func(o *Options) { o.Handler = nil })
	free := h.submit(Command{ID: "free", SessionKey: "s", External: true, AwaitStart: true, PriorAttempts: 2, PriorNotStarted: 2})
	spent := h.submit(Command{ID: "spent", SessionKey: "s", External: true, AwaitStart: true,
		PriorAttempts: MaxUncountedNotStarted, PriorNotStarted: MaxUncountedNotStarted})

	// free has one free loss left; spent has none.
	for id, n := range map[string]int{"free": 3, "spent": MaxUncountedNotStarted + 1} {
		if err := h.q.FailAttempt(id, n, lostBeforeStart(n)); err != nil {
			t.Fatal(err)
		}
	}
	h.step(0)
	if o, _ := free.Outcome(); o.State != StateRunning || o.Attempts != 4 {
		t.Errorf("free: %+v, want running attempt 4", o)
	}
	if o := h.outcome(spent); o.State != StateDeadLettered {
		t.Errorf("spent: %+v, want dead-lettered: its free losses were used before the restart", o)
	}

	for _, bad := range []Command{
		{ID: "neg", SessionKey: "s", External: true, PriorNotStarted: -1},
		{ID: "more", SessionKey: "s", External: true, PriorAttempts: 1, PriorNotStarted: 2},
	} {
		if _, err := h.q.Submit(bad); !errors.Is(err, ErrInvalidCommand) {
			t.Errorf("Submit(%s): %v, want ErrInvalidCommand", bad.ID, err)
		}
	}
}

// TestNotStartedPermanentIsNotRetried: a permanent failure stays final even
// when it wraps ErrNotStarted.
func TestNotStartedPermanentIsNotRetried(t *testing.T) {
	h := newHarness(t, notStartedConfig(), func(o *Options) { o.Handler = nil })
	tk := h.submit(Command{ID: "x", SessionKey: "s", External: true, AwaitStart: true})
	if err := h.q.FailAttempt("x", 1, Permanent(lostBeforeStart(1))); err != nil {
		t.Fatal(err)
	}
	if o := h.outcome(tk); o.State != StateFailed || o.Attempts != 1 {
		t.Errorf("x: %+v, want failed after 1 attempt", o)
	}
}
