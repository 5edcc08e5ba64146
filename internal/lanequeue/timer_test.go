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
	"testing"
	"time"
)

func TestTimeouts(t *testing.T) {
	tests := map[string]struct {
		defaultTimeout, laneTimeout, cmdTimeout time.Duration
		want                                    time.Duration
	}{
		"queue default is 60s":       {want: 60 * time.Second},
		"configured default":         {defaultTimeout: 10 * time.Second, want: 10 * time.Second},
		"lane overrides the default": {defaultTimeout: 10 * time.Second, laneTimeout: 5 * time.Second, want: 5 * time.Second},
		"command overrides the lane": {laneTimeout: 5 * time.Second, cmdTimeout: 2 * time.Second, want: 2 * time.Second},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := oneLane(LaneConfig{Timeout: tc.laneTimeout, Retry: &RetryPolicy{Strategy: RetryNone}})
			cfg.DefaultTimeout = tc.defaultTimeout
			cfg.DeadLetter.Disabled = true
			h := newHarness(t, cfg)
			tk := h.submit(Command{ID: "c", SessionKey: "s", Timeout: tc.cmdTimeout})
			attempt := h.grants[0]
			if dl, _ := attempt.Deadline(); !dl.Equal(t0.Add(tc.want)) {
				t.Errorf("ctx deadline = %v, want %v", dl, t0.Add(tc.want))
			}
			h.step(tc.want - time.Nanosecond)
			if tk.State() != StateRunning {
				t.Fatalf("timed out early: %s", tk.State())
			}
			h.step(time.Nanosecond)
			o := h.outcome(tk)
			if o.State != StateTimedOut || !errors.Is(o.Err, ErrTimeout) {
				t.Errorf("outcome = %+v, want TimedOut", o)
			}
			if !errors.Is(attempt.Err(), context.DeadlineExceeded) {
				t.Errorf("ctx err = %v, want DeadlineExceeded", attempt.Err())
			}
			h.succeed("c") // a late result changes nothing
			if got := h.outcome(tk).State; got != StateTimedOut {
				t.Errorf("late result changed state to %s", got)
			}
		})
	}
}

func TestTimeoutGoesThroughRetry(t *testing.T) {
	h := newHarness(t, oneLane(LaneConfig{Timeout: time.Second, Retry: &RetryPolicy{Strategy: RetryFixed, FixedDelay: time.Second}}))
	tk := h.submit(Command{ID: "c", SessionKey: "s"})
	h.step(time.Second) // timeout
	h.step(time.Second) // retry delay
	if got := h.granted(); len(got) != 2 {
		t.Fatalf("grants = %v, want the abandoned first and the retry", got)
	}
	h.grants = h.grants[1:]
	h.succeed("c")
	if o := h.outcome(tk); o.State != StateSucceeded || o.Attempts != 2 {
		t.Errorf("outcome = %+v, want Succeeded on attempt 2", o)
	}
	if st := h.q.Stats().Lanes[0]; st.Timeouts != 1 || st.Retried != 1 || st.Completed != 1 {
		t.Errorf("lane stats = %+v", st)
	}
}

// A timeout's error says how long the attempt ran and which budget ran out:
// the command's own timeout, its lane's, or the queue's default.
func TestTimeoutErrorNamesTheBudget(t *testing.T) {
	tests := map[string]struct {
		defaultTimeout, laneTimeout, cmdTimeout time.Duration
		late                                    time.Duration // how late the timer fires
		source                                  string
		want                                    string
	}{
		"the queue's default, the timer late": {defaultTimeout: 40 * time.Millisecond, late: 3 * time.Millisecond,
			want: "lanequeue: attempt timed out after 43ms (queue default timeout 40ms)"},
		"the queue's default": {defaultTimeout: 40 * time.Millisecond,
			want: "lanequeue: attempt timed out after 40ms (queue default timeout 40ms)"},
		"the lane's": {defaultTimeout: time.Second, laneTimeout: 25 * time.Millisecond,
			want: "lanequeue: attempt timed out after 25ms (lane work timeout 25ms)"},
		"the command's": {laneTimeout: time.Second, cmdTimeout: 10 * time.Millisecond,
			want: "lanequeue: attempt timed out after 10ms (command timeout 10ms)"},
		"the command's, from its host's setting": {laneTimeout: time.Second, cmdTimeout: 10 * time.Millisecond,
			source: "session lane work",
			want:   "lanequeue: attempt timed out after 10ms (session lane work timeout 10ms)"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := oneLane(LaneConfig{Timeout: tc.laneTimeout, Retry: &RetryPolicy{Strategy: RetryNone}})
			cfg.DefaultTimeout = tc.defaultTimeout
			cfg.DeadLetter.Disabled = true
			h := newHarness(t, cfg)
			tk := h.submit(Command{ID: "c", SessionKey: "s", Timeout: tc.cmdTimeout, TimeoutSource: tc.source})
			budget := h.grants[0].timeout
			h.clk.Step(time.Duration(budget) + tc.late)
			h.q.advance()
			o := h.outcome(tk)
			if o.State != StateTimedOut || !errors.Is(o.Err, ErrTimeout) {
				t.Fatalf("outcome = %+v, want TimedOut with ErrTimeout", o)
			}
			if got := o.Err.Error(); got != tc.want {
				t.Errorf("error = %q, want %q", got, tc.want)
			}
			var ev *Event
			for _, e := range h.events() {
				if e.Type == EventTimeout {
					ev = &e
				}
			}
			if ev == nil || ev.Error != tc.want {
				t.Errorf("timed-out event = %+v, want error %q", ev, tc.want)
			}
		})
	}
}
