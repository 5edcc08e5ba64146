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
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// An idle queue never spends tokens: after an hour of nothing the bucket is
// still full, and a burst of work starts at once up to the bucket size.
func TestRateLimitIdleQueueNeverSpends(t *testing.T) {
	cfg := oneLane(LaneConfig{RateLimit: &RateLimit{Window: PerSecond, MaxOperations: 2}})
	h := newHarness(t, cfg)
	h.step(time.Hour)
	for _, id := range []string{"a", "b", "c"} {
		h.submit(Command{ID: id, SessionKey: "s"})
	}
	if diff := cmp.Diff([]string{"a", "b"}, h.running()); diff != "" {
		t.Fatalf("running (-want,+got):\n%s", diff)
	}
	// The lane is blocked only by its bucket, so it wakes itself when the
	// next token is due (2/s: 500ms).
	h.step(499 * time.Millisecond)
	if got := len(h.running()); got != 2 {
		t.Fatalf("c started early")
	}
	h.step(time.Millisecond)
	if diff := cmp.Diff([]string{"a", "b", "c"}, h.running()); diff != "" {
		t.Errorf("running at 500ms (-want,+got):\n%s", diff)
	}
}

// Commands held back by a cap do not spend tokens while they wait.
func TestRateLimitSpentOnlyOnStart(t *testing.T) {
	cfg := oneLane(LaneConfig{MaxConcurrency: 1, RateLimit: &RateLimit{Window: PerMinute, MaxOperations: 2}})
	h := newHarness(t, cfg)
	for _, id := range []string{"a", "b", "c"} {
		h.submit(Command{ID: id, SessionKey: "s"})
	}
	h.step(5 * time.Second) // b and c wait on the cap, not on tokens
	// Burst 2, one spent by a, plus 5s of refill at 2/min.
	if got, want := tokens(h, "work"), 2-1+5.0/30; got < want-1e-6 || got > want+1e-6 {
		t.Fatalf("tokens while waiting on the cap = %.4f, want %.4f (only a's start spent one)", got, want)
	}
	h.succeed("a") // b starts with the saved token
	if diff := cmp.Diff([]string{"b"}, h.running()); diff != "" {
		t.Fatalf("running (-want,+got):\n%s", diff)
	}
	h.succeed("b") // bucket empty (refill 2/min): c waits about 30s from a's start
	if got := h.running(); len(got) != 0 {
		t.Fatalf("running = %v, want none", got)
	}
	h.step(24 * time.Second)
	if got := h.running(); len(got) != 0 {
		t.Fatalf("c started at 29s")
	}
	h.step(time.Second + time.Millisecond)
	if diff := cmp.Diff([]string{"c"}, h.running()); diff != "" {
		t.Errorf("running at 30s (-want,+got):\n%s", diff)
	}
}

func TestQueueWideRateLimit(t *testing.T) {
	cfg := Config{
		Lanes:       []LaneConfig{{Name: "a"}, {Name: "b"}},
		DefaultLane: "a",
		RateLimit:   &RateLimit{Window: PerHour, MaxOperations: 1},
		// Keep a1 running for the whole test.
		DefaultTimeout: 2 * time.Hour,
	}
	h := newHarness(t, cfg)
	h.submit(Command{ID: "a1", Lane: "a"})
	h.submit(Command{ID: "b1", Lane: "b"})
	h.step(time.Hour - time.Second)
	if diff := cmp.Diff([]string{"a1"}, h.running()); diff != "" {
		t.Fatalf("running (-want,+got):\n%s", diff)
	}
	h.step(time.Second)
	if diff := cmp.Diff([]string{"a1", "b1"}, h.running()); diff != "" {
		t.Errorf("running after an hour (-want,+got):\n%s", diff)
	}
}

func tokens(h *harness, lane string) float64 {
	h.q.mu.Lock()
	defer h.q.mu.Unlock()
	return h.q.byName[lane].bucket.lim.TokensAt(h.clk.Now())
}
