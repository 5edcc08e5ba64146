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
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestStats(t *testing.T) {
	cfg := oneLane(LaneConfig{Name: "work", Priority: 2, MaxConcurrency: 1, Retry: &RetryPolicy{Strategy: RetryNone}})
	h := newHarness(t, cfg)
	h.submit(Command{ID: "a", SessionKey: "s"})
	h.submit(Command{ID: "b", SessionKey: "s"})
	h.submit(Command{ID: "c", SessionKey: "t"})
	h.submit(Command{ID: "d", SessionKey: "t"})
	h.step(10 * time.Millisecond)
	h.succeed("a") // waited 0, ran 10ms
	h.step(30 * time.Millisecond)
	h.fail("b", errBoom) // waited 10ms, ran 30ms
	if err := h.q.Cancel("d"); err != nil {
		t.Fatal(err)
	}
	got := h.q.Stats()
	want := Stats{
		Pending:     0,
		Active:      1,
		DeadLetters: 1,
		Sessions:    2,
		Lanes: []LaneStats{{
			Name: "work", Priority: 2, Mode: Internal,
			Active: 1, Submitted: 4, Completed: 1, DeadLettered: 1, Cancelled: 1,
		}},
	}
	ignore := cmpopts.IgnoreFields(Stats{}, "Wait", "Run")
	ignoreLane := cmpopts.IgnoreFields(LaneStats{}, "Wait", "Run")
	if diff := cmp.Diff(want, got, ignore, ignoreLane); diff != "" {
		t.Errorf("stats (-want,+got):\n%s", diff)
	}
	lane := got.Lanes[0]
	if lane.Wait.Count != 3 || lane.Run.Count != 2 {
		t.Errorf("latency counts wait=%d run=%d, want 3 and 2", lane.Wait.Count, lane.Run.Count)
	}
	within := func(got, want time.Duration) bool { return got >= want*15/16 && got <= want*17/16 }
	if !within(lane.Run.P99, 30*time.Millisecond) || !within(lane.Run.P50, 10*time.Millisecond) {
		t.Errorf("run percentiles = %+v, want p50 ~10ms, p99 ~30ms", lane.Run)
	}
	if !within(got.Wait.P99, 40*time.Millisecond) || got.Wait.P50 > 10*time.Millisecond*17/16 {
		t.Errorf("wait percentiles = %+v", got.Wait)
	}
	if diff := cmp.Diff(SessionStats{Key: "t", Active: 1, Cancelled: 1}, h.q.SessionStats("t")); diff != "" {
		t.Errorf("session t (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(SessionStats{Key: "s", Completed: 1, DeadLettered: 1}, h.q.SessionStats("s")); diff != "" {
		t.Errorf("session s (-want,+got):\n%s", diff)
	}
}

// The histogram's percentiles stay within the documented 6.25% of the
// exact ones.
func TestHistogramError(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var h histogram
	var vals []int64
	for range 100_000 {
		v := int64(r.ExpFloat64() * float64(time.Millisecond))
		h.observe(v)
		vals = append(vals, v)
	}
	slices.Sort(vals)
	p := h.percentiles()
	for _, c := range []struct {
		q   float64
		got time.Duration
	}{{0.50, p.P50}, {0.90, p.P90}, {0.95, p.P95}, {0.99, p.P99}} {
		exact := float64(vals[int(c.q*float64(len(vals)))-1])
		if rel := (float64(c.got) - exact) / exact; rel > 0.0625 || rel < -0.0625 {
			t.Errorf("p%v = %v, exact %v (%.2f%% off)", c.q*100, c.got, time.Duration(exact), rel*100)
		}
	}
	for v := int64(0); v < 1<<20; v = v*5/4 + 1 {
		mid := histValue(histIndex(v))
		if d := float64(mid-v) / float64(max(v, 1)); d > 0.0625 || d < -0.0625 {
			t.Fatalf("bucket of %d reports %d", v, mid)
		}
	}
	if histIndex(1<<62) >= histBuckets || histIndex(-5) != 0 {
		t.Error("index out of range")
	}
	var empty histogram
	if empty.percentiles() != (Percentiles{}) {
		t.Error("empty histogram reports values")
	}
}
