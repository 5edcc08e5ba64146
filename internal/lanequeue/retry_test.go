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

	"github.com/google/go-cmp/cmp"
)

func TestRetryDelay(t *testing.T) {
	tests := map[string]struct {
		policy RetryPolicy
		want   []time.Duration // retries 1..n
	}{
		"exponential defaults double and cap at 30s": {
			policy: RetryPolicy{},
			want: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond,
				800 * time.Millisecond, 1600 * time.Millisecond, 3200 * time.Millisecond, 6400 * time.Millisecond,
				12800 * time.Millisecond, 25600 * time.Millisecond, 30 * time.Second, 30 * time.Second},
		},
		"exponential custom": {
			policy: RetryPolicy{Strategy: RetryExponential, InitialDelay: time.Second, MaxDelay: 5 * time.Second},
			want:   []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second},
		},
		"fixed": {
			policy: RetryPolicy{Strategy: RetryFixed, FixedDelay: 250 * time.Millisecond},
			want:   []time.Duration{250 * time.Millisecond, 250 * time.Millisecond, 250 * time.Millisecond},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got []time.Duration
			for i := range tc.want {
				got = append(got, tc.policy.Delay(i+1))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
	if d := (RetryPolicy{}).withDefaults(); d.MaxRetries != 3 || d.Strategy != RetryExponential {
		t.Errorf("defaults = %+v, want Exponential with 3 retries", d)
	}
	if d := (RetryPolicy{Strategy: RetryNone, MaxRetries: 5}).withDefaults(); d.MaxRetries != 0 {
		t.Errorf("None keeps %d retries", d.MaxRetries)
	}
}

// retryTimeline fails a command on every attempt and records when each
// attempt started, relative to t0.
func retryTimeline(t *testing.T, cfg Config) ([]time.Duration, Outcome, *harness) {
	t.Helper()
	h := newHarness(t, cfg)
	tk := h.submit(Command{ID: "c", SessionKey: "s"})
	var starts []time.Duration
	for i := 0; i < 20; i++ {
		if len(h.grants) == 1 {
			starts = append(starts, h.clk.Now().Sub(t0))
			h.fail("c", errBoom)
		}
		if _, done := tk.Outcome(); done {
			break
		}
		h.step(50 * time.Millisecond)
	}
	out := h.outcome(tk)
	return starts, out, h
}

func TestRetryTimeline(t *testing.T) {
	ms := time.Millisecond
	tests := map[string]struct {
		cfg        Config
		wantStarts []time.Duration
		wantState  State
	}{
		"exponential, 3 retries then dead letter": {
			cfg:        oneLane(LaneConfig{}),
			wantStarts: []time.Duration{0, 100 * ms, 300 * ms, 700 * ms},
			wantState:  StateDeadLettered,
		},
		"lane override: fixed 200ms, 2 retries": {
			cfg:        oneLane(LaneConfig{Retry: &RetryPolicy{Strategy: RetryFixed, FixedDelay: 200 * ms, MaxRetries: 2}}),
			wantStarts: []time.Duration{0, 200 * ms, 400 * ms},
			wantState:  StateDeadLettered,
		},
		"none": {
			cfg:        Config{Lanes: []LaneConfig{{Name: "work"}}, DefaultLane: "work", Retry: RetryPolicy{Strategy: RetryNone}},
			wantStarts: []time.Duration{0},
			wantState:  StateDeadLettered,
		},
		"dead letters disabled": {
			cfg:        Config{Lanes: []LaneConfig{{Name: "work"}}, DefaultLane: "work", Retry: RetryPolicy{MaxRetries: 1}, DeadLetter: DeadLetterConfig{Disabled: true}},
			wantStarts: []time.Duration{0, 100 * ms},
			wantState:  StateFailed,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			starts, o, h := retryTimeline(t, tc.cfg)
			if diff := cmp.Diff(tc.wantStarts, starts); diff != "" {
				t.Errorf("attempt starts (-want,+got):\n%s", diff)
			}
			if o.State != tc.wantState || o.Attempts != len(tc.wantStarts) || !errors.Is(o.Err, errBoom) {
				t.Errorf("outcome = %+v, want %s after %d attempts with errBoom", o, tc.wantState, len(tc.wantStarts))
			}
			dl := h.q.DeadLetters()
			if tc.wantState == StateDeadLettered && (len(dl) != 1 || dl[0].Attempts != len(tc.wantStarts)) {
				t.Errorf("dead letters = %+v", dl)
			}
		})
	}
}

func TestPermanentFailureSkipsRetry(t *testing.T) {
	tests := map[string]error{
		"Permanent":         Permanent(errBoom),
		"wrapped Permanent": fmt.Errorf("budget: %w", Permanent(errBoom)),
		"invalid input":     fmt.Errorf("%w: bad payload", ErrInvalidCommand),
	}
	for name, err := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, oneLane(LaneConfig{}))
			tk := h.submit(Command{ID: "c"})
			h.fail("c", err)
			o := h.outcome(tk)
			if o.State != StateFailed || o.Attempts != 1 {
				t.Errorf("outcome = %+v, want Failed after 1 attempt", o)
			}
			if len(h.q.DeadLetters()) != 0 {
				t.Error("a permanent failure was dead-lettered")
			}
		})
	}
	if Permanent(nil) != nil || IsPermanent(nil) || IsPermanent(errBoom) {
		t.Error("Permanent/IsPermanent mishandle nil or plain errors")
	}
}

// A command back from a retry delay takes its original place in its
// session's queue, ahead of commands submitted after it.
func TestRetryReentersAtOriginalPlace(t *testing.T) {
	h := newHarness(t, oneLane(LaneConfig{MaxConcurrencyPerSession: 1}))
	for _, id := range []string{"a1", "a2", "a3"} {
		h.submit(Command{ID: id, SessionKey: "a"})
	}
	h.fail("a1", errBoom) // a1 waits 100ms; the session's slot goes to a2
	if diff := cmp.Diff([]string{"a2"}, h.running()); diff != "" {
		t.Fatalf("running (-want,+got):\n%s", diff)
	}
	h.step(100 * time.Millisecond)
	h.succeed("a2")
	if diff := cmp.Diff([]string{"a1"}, h.running()); diff != "" {
		t.Errorf("after a2: running (-want,+got):\n%s", diff)
	}
	h.succeed("a1")
	h.succeed("a3")
	if got := h.q.SessionStats("a"); got.Completed != 3 {
		t.Errorf("completed = %d, want 3", got.Completed)
	}
}

// A command resubmitted after a restart counts its earlier attempts.
func TestPriorAttemptsCountAgainstRetries(t *testing.T) {
	h := newHarness(t, oneLane(LaneConfig{}))
	tk := h.submit(Command{ID: "c", PriorAttempts: 3})
	if a := h.grants[0].number; a != 4 {
		t.Fatalf("attempt number = %d, want 4", a)
	}
	h.fail("c", errBoom)
	if o := h.outcome(tk); o.State != StateDeadLettered || o.Attempts != 4 {
		t.Errorf("outcome = %+v, want DeadLettered after 4 attempts", o)
	}
}
