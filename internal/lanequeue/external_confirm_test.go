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

// confirmHarness runs one External lane whose timeouts wait for
// ConfirmTimeout, with maxRetries retries an hour apart (none for 0), and submits "x",
// whose attempt 1 the runner starts.
func confirmHarness(t *testing.T, maxRetries int) (*harness, *recordingProvider, *Ticket) {
	t.Helper()
	p := &recordingProvider{values: map[string]float64{}}
	cfg := externalConfig()
	cfg.Retry = RetryPolicy{Strategy: RetryFixed, FixedDelay: time.Hour, MaxRetries: maxRetries}
	if maxRetries == 0 {
		cfg.Retry.Strategy = RetryNone
	}
	h := newHarness(t, cfg, func(o *Options) {
		o.Metrics = p
		o.Handler = nil
		o.ConfirmExternalTimeouts = true
	})
	tk := h.submit(Command{ID: "x", SessionKey: "s", External: true})
	return h, p, tk
}

// outcomeCounts is what the lane counted of command "x": its stats and the
// metrics that depend on how its attempt ended.
type outcomeCounts struct {
	Completed, Failed, DeadLettered, Cancelled, Retried, Timeouts uint64
	DeadLetters                                                   int
	Metrics                                                       map[string]float64
}

func countsOf(h *harness, p *recordingProvider) outcomeCounts {
	st := h.q.Stats()
	ln := st.Lanes[0]
	m := map[string]float64{}
	for _, k := range []string{"commands_succeeded", "commands_failed", "commands_dead_lettered", "commands_cancelled",
		"attempts_succeeded", "attempts_failed", "attempts_timed_out", "attempts_cancelled", "retries"} {
		m[k] = p.values["execute/"+k]
	}
	return outcomeCounts{Completed: ln.Completed, Failed: ln.Failed, DeadLettered: ln.DeadLettered,
		Cancelled: ln.Cancelled, Retried: ln.Retried, Timeouts: ln.Timeouts, DeadLetters: st.DeadLetters, Metrics: m}
}

// counted builds the expected counts: every metric 0 but those named.
func counted(c outcomeCounts, metrics map[string]float64) outcomeCounts {
	c.Metrics = map[string]float64{"commands_succeeded": 0, "commands_failed": 0, "commands_dead_lettered": 0,
		"commands_cancelled": 0, "attempts_succeeded": 0, "attempts_failed": 0, "attempts_timed_out": 0,
		"attempts_cancelled": 0, "retries": 0}
	for k, v := range metrics {
		c.Metrics[k] = v
	}
	return c
}

// TestExternalTimeoutCountedWhenConfirmed: the timeout of an External
// attempt decides at once (the command is dead-lettered or waits for a
// retry, its slot is free) but is counted only once the runner's record
// of it stood (ConfirmTimeout), and only once.
func TestExternalTimeoutCountedWhenConfirmed(t *testing.T) {
	tests := map[string]struct {
		maxRetries int
		wantState  State
		want       outcomeCounts
	}{
		"on the last attempt: dead-lettered": {
			maxRetries: 0, wantState: StateDeadLettered,
			want: counted(outcomeCounts{DeadLettered: 1, Timeouts: 1, DeadLetters: 1},
				map[string]float64{"commands_dead_lettered": 1, "attempts_timed_out": 1}),
		},
		"with retries left: retried": {
			maxRetries: 2, wantState: StateRetrying,
			want: counted(outcomeCounts{Retried: 1, Timeouts: 1},
				map[string]float64{"attempts_timed_out": 1, "retries": 1}),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h, p, tk := confirmHarness(t, tc.maxRetries)
			h.step(10 * time.Second) // attempt 1 times out
			if o, _ := tk.Outcome(); o.State != tc.wantState {
				t.Fatalf("outcome after the timeout = %+v, want %s", o, tc.wantState)
			}
			if st := h.q.Stats(); st.Active != 0 || len(h.q.PendingExternal()) != 0 {
				t.Errorf("the timed-out attempt still holds its slot: active %d", st.Active)
			}
			if diff := cmp.Diff(counted(outcomeCounts{}, nil), countsOf(h, p)); diff != "" {
				t.Errorf("counted before the timeout was confirmed (-want,+got):\n%s", diff)
			}
			h.q.ConfirmTimeout("x", 2) // not the attempt that timed out: nothing
			h.q.ConfirmTimeout("x", 1)
			h.q.ConfirmTimeout("x", 1)
			if diff := cmp.Diff(tc.want, countsOf(h, p)); diff != "" {
				t.Errorf("counts once confirmed (-want,+got):\n%s", diff)
			}
			if err := h.q.Settle("x", Result{Success: true}); tc.wantState == StateDeadLettered && !errors.Is(err, ErrNotFound) {
				t.Errorf("Settle after the confirmed dead letter = %v, want ErrNotFound", err)
			}
		})
	}
}

// TestExternalSuccessThatBeatTheTimeoutsRecord: the runner's success won
// at the API server over the record of the queue's timeout (Settle comes
// after the timeout fired, before any ConfirmTimeout). The command ends
// Succeeded and is counted once as that: no dead letter, no retry, no
// timed-out attempt, on the last attempt or not.
func TestExternalSuccessThatBeatTheTimeoutsRecord(t *testing.T) {
	want := counted(outcomeCounts{Completed: 1},
		map[string]float64{"commands_succeeded": 1, "attempts_succeeded": 1})
	for name, maxRetries := range map[string]int{"on the last attempt": 0, "with retries left": 2} {
		t.Run(name, func(t *testing.T) {
			h, p, tk := confirmHarness(t, maxRetries)
			h.step(10 * time.Second) // attempt 1 times out
			if err := h.q.Settle("x", Result{Success: true, Output: []byte(`"ok"`)}); err != nil {
				t.Fatalf("Settle: %v", err)
			}
			if o, final := tk.Outcome(); !final || o.State != StateSucceeded || string(o.Result.Output) != `"ok"` {
				t.Errorf("outcome = %+v (final %v), want Succeeded with the runner's result", o, final)
			}
			h.q.ConfirmTimeout("x", 1) // a late confirmation changes nothing
			h.step(2 * time.Hour)      // no retry runs
			if diff := cmp.Diff(want, countsOf(h, p)); diff != "" {
				t.Errorf("counts (-want,+got):\n%s", diff)
			}
			if len(h.q.DeadLetters()) != 0 || len(h.q.PendingExternal()) != 0 {
				t.Errorf("dead letters %v, pending %v; want none", h.q.DeadLetters(), h.q.PendingExternal())
			}
			if err := h.q.Settle("x", Result{Success: true}); !errors.Is(err, ErrNotFound) {
				t.Errorf("second Settle = %v, want ErrNotFound", err)
			}
		})
	}
}

// TestExternalUnconfirmedTimeoutCountedOnCancel: a command cancelled (its
// task deleted) before its timeout's record was confirmed still counts
// the timeout, so nothing is left uncounted.
func TestExternalUnconfirmedTimeoutCountedOnCancel(t *testing.T) {
	h, p, _ := confirmHarness(t, 2)
	h.step(10 * time.Second)
	if err := h.q.Cancel("x"); err != nil {
		t.Fatal(err)
	}
	want := counted(outcomeCounts{Cancelled: 1, Retried: 1, Timeouts: 1},
		map[string]float64{"commands_cancelled": 1, "attempts_timed_out": 1, "retries": 1})
	if diff := cmp.Diff(want, countsOf(h, p)); diff != "" {
		t.Errorf("counts (-want,+got):\n%s", diff)
	}
}

// TestExternalUnconfirmedDeadLetterCountedOnCancel: the same for a
// command the timeout already ended: Cancel finds it gone (ErrNotFound) but
// counts its dead letter.
func TestExternalUnconfirmedDeadLetterCountedOnCancel(t *testing.T) {
	h, p, _ := confirmHarness(t, 0)
	h.step(10 * time.Second)
	if err := h.q.Cancel("x"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Cancel = %v, want ErrNotFound", err)
	}
	want := counted(outcomeCounts{DeadLettered: 1, Timeouts: 1, DeadLetters: 1},
		map[string]float64{"commands_dead_lettered": 1, "attempts_timed_out": 1})
	if diff := cmp.Diff(want, countsOf(h, p)); diff != "" {
		t.Errorf("counts (-want,+got):\n%s", diff)
	}
}

// TestExternalUnconfirmedTimeoutCountedWhenItsLaneGoes: a command waiting
// for the retry its unconfirmed timeout caused ends Failed when its lane is
// removed; the timeout and the retry are counted then (the lane's metrics
// outlive it), and a late Settle finds the command gone.
func TestExternalUnconfirmedTimeoutCountedWhenItsLaneGoes(t *testing.T) {
	h, p, tk := confirmHarness(t, 2)
	h.step(10 * time.Second)
	cfg := h.q.Config()
	cfg.Lanes = []LaneConfig{{Name: "other", Mode: External}}
	cfg.DefaultLane = "other"
	if err := h.q.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	if o, _ := tk.Outcome(); o.State != StateFailed {
		t.Fatalf("outcome = %+v, want Failed (lane removed)", o)
	}
	if err := h.q.Settle("x", Result{Success: true}); !errors.Is(err, ErrNotFound) {
		t.Errorf("Settle = %v, want ErrNotFound", err)
	}
	got := [3]float64{p.values["execute/attempts_timed_out"], p.values["execute/retries"], p.values["execute/commands_failed"]}
	if got != [3]float64{1, 1, 1} {
		t.Errorf("the removed lane's attempts timed out, retries, commands failed = %v, want [1 1 1]", got)
	}
}
