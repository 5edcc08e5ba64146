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
	"math"
	"testing"
	"time"
)

func TestAfterSaturates(t *testing.T) {
	now := t0.UnixNano()
	cases := map[string]struct {
		t, d, want int64
	}{
		"an ordinary timeout":         {now, int64(time.Minute), now + int64(time.Minute)},
		"zero":                        {now, 0, now},
		"the largest duration":        {now, math.MaxInt64, dueNever - 1},
		"just past the clock's range": {math.MaxInt64 - 10, 11, dueNever - 1},
		"at the edge":                 {dueNever - 2, 1, dueNever - 1},
	}
	for name, tc := range cases {
		if got := after(tc.t, tc.d); got != tc.want {
			t.Errorf("%s: after(%d, %d) = %d, want %d", name, tc.t, tc.d, got, tc.want)
		}
	}
}

// A timeout of math.MaxInt64 (about 292 years) does not wrap the attempt's
// due time into the past, where it would time out at once and retry in a
// loop: the attempt runs until it finishes.
func TestLargestTimeoutDoesNotOverflow(t *testing.T) {
	h := newHarness(t, oneLane(LaneConfig{Retry: &RetryPolicy{Strategy: RetryFixed, FixedDelay: time.Duration(math.MaxInt64), MaxRetries: 3}}))
	h.submit(Command{ID: "long", SessionKey: "s", Type: "bash", Timeout: time.Duration(math.MaxInt64)})
	h.q.advance()
	if got := h.running(); len(got) != 1 {
		t.Fatalf("running = %v, want [long]", got)
	}
	h.step(24 * time.Hour)
	if got := h.running(); len(got) != 1 || got[0] != "long" {
		t.Fatalf("after a day running = %v: the attempt timed out", got)
	}
	if d, _ := h.grants[0].Deadline(); !d.After(t0.Add(100 * 365 * 24 * time.Hour)) {
		t.Errorf("the attempt's deadline is %s, want centuries ahead", d)
	}

	// A failed attempt whose retry delay is math.MaxInt64 waits; it is not
	// retried at once.
	h.fail("long", errBoom)
	h.step(time.Hour)
	if got := h.running(); len(got) != 0 {
		t.Errorf("the retry started after an hour: running = %v", got)
	}
	for _, e := range h.events() {
		if e.Type == EventStarted && e.Attempt > 1 {
			t.Errorf("attempt %d started", e.Attempt)
		}
	}
}

// Exponential doubling stops at the cap, also when the cap is so large that
// doubling would overflow before reaching it.
func TestExponentialDelayDoesNotOverflow(t *testing.T) {
	p := RetryPolicy{Strategy: RetryExponential, InitialDelay: time.Nanosecond, MaxDelay: time.Duration(math.MaxInt64), MaxRetries: 100}
	prev := time.Duration(0)
	for retry := 1; retry <= 100; retry++ {
		d := p.Delay(retry)
		if d < prev || d <= 0 {
			t.Fatalf("Delay(%d) = %d after %d: it wrapped", retry, d, prev)
		}
		prev = d
	}
	if prev != time.Duration(math.MaxInt64) {
		t.Errorf("Delay(100) = %d, want the cap %d", prev, time.Duration(math.MaxInt64))
	}
}

// A deadline past the years an int64 of nanoseconds can hold (after 2262)
// is far ahead, not wrapped into the past: it gives no boost, and a command
// with a deadline does not overtake one of a better priority.
func TestFarDeadlineDoesNotWrap(t *testing.T) {
	for _, year := range []int{2300, 9999} {
		h := newHarness(t, oneLane(LaneConfig{Priority: 4, MaxConcurrency: 1}))
		h.submit(Command{ID: "blocker", SessionKey: "x"})
		h.submit(Command{ID: "first", SessionKey: "s1"})
		h.submit(Command{ID: "far", SessionKey: "s2", Deadline: time.Date(year, 12, 31, 0, 0, 0, 0, time.UTC)})
		h.succeed("blocker")
		if got := h.running(); len(got) != 1 || got[0] != "first" {
			t.Errorf("deadline in %d: running = %v, want [first]: the far deadline boosted its command", year, got)
		}
	}
}

func TestUnixNanosSaturates(t *testing.T) {
	cases := map[string]struct {
		t    time.Time
		want int64
	}{
		"now":          {t0, t0.UnixNano()},
		"after 2262":   {time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), dueNever - 1},
		"before 1678":  {time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC), math.MinInt64 + 1},
		"the max time": {time.Unix(0, dueNever-1), dueNever - 1},
	}
	for name, tc := range cases {
		if got := unixNanos(tc.t); got != tc.want {
			t.Errorf("%s: unixNanos = %d, want %d", name, got, tc.want)
		}
	}
}
