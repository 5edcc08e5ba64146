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

package capacity

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestWorkers(t *testing.T) {
	cases := map[string]struct {
		work     int64
		capacity int32
		want     int32
	}{
		"idle":                     {work: 0, capacity: 4, want: 0},
		"one task":                 {work: 1, capacity: 4, want: 1},
		"exactly full":             {work: 8, capacity: 4, want: 2},
		"one over rounds up":       {work: 9, capacity: 4, want: 3},
		"capacity one":             {work: 5, capacity: 1, want: 5},
		"capacity zero counts one": {work: 3, capacity: 0, want: 3},
		"negative work":            {work: -2, capacity: 4, want: 0},
		"huge work is bounded":     {work: 1 << 50, capacity: 1, want: 1 << 30},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Workers(tc.work, tc.capacity); got != tc.want {
				t.Errorf("Workers(%d, %d) = %d, want %d", tc.work, tc.capacity, got, tc.want)
			}
		})
	}
}

func TestLaneWork(t *testing.T) {
	if got := LaneWork(10, 2, 0); got != 12 {
		t.Errorf("uncapped lane: %d, want 12", got)
	}
	if got := LaneWork(10, 2, 3); got != 3 {
		t.Errorf("lane capped at 3: %d, want 3", got)
	}
	if got := LaneWork(1, 1, 3); got != 2 {
		t.Errorf("lane under its cap: %d, want 2", got)
	}
}

func TestClamp(t *testing.T) {
	type out struct {
		Replicas int32
		Limit    Limit
	}
	cases := map[string]struct {
		b    Bounds
		in   int32
		want out
	}{
		"within":                     {b: Bounds{Min: 0, Max: 10}, in: 4, want: out{4, LimitNone}},
		"zero allowed":               {b: Bounds{Min: 0, Max: 10}, in: 0, want: out{0, LimitNone}},
		"above max":                  {b: Bounds{Min: 0, Max: 10}, in: 40, want: out{10, LimitMax}},
		"below min":                  {b: Bounds{Min: 2, Max: 10}, in: 0, want: out{2, LimitMin}},
		"manager bound below max":    {b: Bounds{Min: 0, Max: 1000, Manager: 100}, in: 500, want: out{100, LimitManager}},
		"manager bound above max":    {b: Bounds{Min: 0, Max: 5, Manager: 100}, in: 50, want: out{5, LimitMax}},
		"min above manager bound":    {b: Bounds{Min: 200, Max: 1000, Manager: 100}, in: 0, want: out{100, LimitManager}},
		"max zero keeps pool empty":  {b: Bounds{Min: 0, Max: 0}, in: 7, want: out{0, LimitMax}},
		"negative is raised to zero": {b: Bounds{Min: 0, Max: 3}, in: -1, want: out{0, LimitNone}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r, l := tc.b.Clamp(tc.in)
			if diff := cmp.Diff(tc.want, out{r, l}); diff != "" {
				t.Errorf("Clamp(%d) (-want,+got):\n%s", tc.in, diff)
			}
		})
	}
}

// step is one evaluation of a pool: after advancing the clock by after,
// work commands are queued or running on a pool of current replicas.
type step struct {
	after   time.Duration
	work    int64
	current int32
	// want is the replicas recommended; recheck the RecheckAfter.
	want    int32
	recheck time.Duration
}

func TestSizerStabilization(t *testing.T) {
	defaults := Windows{Up: DefaultScaleUpWindow, Down: DefaultScaleDownWindow}
	cases := map[string]struct {
		capacity int32
		bounds   Bounds
		windows  Windows
		steps    []step
	}{
		"scales up at once from zero and down after the window": {
			capacity: 4, bounds: Bounds{Min: 0, Max: 10}, windows: defaults,
			steps: []step{
				{work: 0, current: 0, want: 0},
				{after: time.Second, work: 9, current: 0, want: 3},
				{after: time.Second, work: 0, current: 3, want: 3, recheck: 299 * time.Second},
				{after: 298 * time.Second, work: 0, current: 3, want: 3, recheck: time.Second},
				{after: time.Second, work: 0, current: 3, want: 0},
			},
		},
		"a short lull moves nothing": {
			capacity: 1, bounds: Bounds{Min: 0, Max: 10}, windows: Windows{Down: 60 * time.Second},
			steps: []step{
				{work: 5, current: 0, want: 5},
				{after: 10 * time.Second, work: 1, current: 5, want: 5, recheck: 50 * time.Second},
				{after: 10 * time.Second, work: 5, current: 5, want: 5},
				{after: 59 * time.Second, work: 0, current: 5, want: 5, recheck: time.Second},
				{after: time.Second, work: 2, current: 5, want: 2},
			},
		},
		"scale down steps through the window's highest": {
			capacity: 1, bounds: Bounds{Min: 0, Max: 10}, windows: Windows{Down: 60 * time.Second},
			steps: []step{
				{work: 8, current: 0, want: 8},
				{after: 30 * time.Second, work: 4, current: 8, want: 8, recheck: 30 * time.Second},
				{after: 30 * time.Second, work: 0, current: 8, want: 4, recheck: 30 * time.Second},
				{after: 30 * time.Second, work: 0, current: 4, want: 0},
			},
		},
		"scale-up window takes the window's lowest": {
			capacity: 1, bounds: Bounds{Min: 0, Max: 10}, windows: Windows{Up: 30 * time.Second},
			steps: []step{
				{work: 0, current: 0, want: 0},
				{after: 10 * time.Second, work: 6, current: 0, want: 0, recheck: 20 * time.Second},
				{after: 20 * time.Second, work: 6, current: 0, want: 6},
			},
		},
		"a burst shorter than the scale-up window scales nothing": {
			capacity: 1, bounds: Bounds{Min: 0, Max: 10}, windows: Windows{Up: 30 * time.Second},
			steps: []step{
				{work: 0, current: 0, want: 0},
				{after: 10 * time.Second, work: 6, current: 0, want: 0, recheck: 20 * time.Second},
				{after: 10 * time.Second, work: 0, current: 0, want: 0},
				{after: 30 * time.Second, work: 0, current: 0, want: 0},
			},
		},
		"bounded by max": {
			capacity: 2, bounds: Bounds{Min: 0, Max: 5}, windows: defaults,
			steps: []step{
				{work: 500, current: 0, want: 5},
				{after: time.Second, work: 500, current: 5, want: 5},
			},
		},
		"bounded by the manager": {
			capacity: 1, bounds: Bounds{Min: 0, Max: 1000, Manager: 100}, windows: defaults,
			steps: []step{{work: 5000, current: 0, want: 100}},
		},
		"min kept when idle": {
			capacity: 4, bounds: Bounds{Min: 2, Max: 10}, windows: Windows{},
			steps: []step{
				{work: 0, current: 0, want: 2},
				{after: time.Second, work: 40, current: 2, want: 10},
				{after: time.Second, work: 0, current: 10, want: 2},
			},
		},
		"no window scales down at once": {
			capacity: 4, bounds: Bounds{Min: 0, Max: 10}, windows: Windows{},
			steps: []step{
				{work: 16, current: 0, want: 4},
				{after: time.Second, work: 0, current: 4, want: 0},
			},
		},
		"a replica count above max is brought down, then waits the window": {
			capacity: 1, bounds: Bounds{Min: 0, Max: 3}, windows: defaults,
			steps: []step{
				{work: 2, current: 8, want: 3, recheck: 300 * time.Second},
				{after: 300 * time.Second, work: 2, current: 3, want: 2},
			},
		},
		"a pool first seen keeps its size for the scale-down window": {
			capacity: 1, bounds: Bounds{Min: 0, Max: 10}, windows: Windows{Down: 60 * time.Second},
			steps: []step{
				{work: 0, current: 4, want: 4, recheck: 60 * time.Second},
				{after: 60 * time.Second, work: 0, current: 4, want: 0},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			s := NewSizer(clk)
			for i, st := range tc.steps {
				clk.SetTime(clk.Now().Add(st.after))
				d := s.Recommend(st.work, tc.capacity, st.current, tc.bounds, tc.windows)
				got := step{after: st.after, work: st.work, current: st.current, want: d.Replicas, recheck: d.RecheckAfter}
				if diff := cmp.Diff(st, got, cmp.AllowUnexported(step{})); diff != "" {
					t.Fatalf("step %d (reason %q) (-want,+got):\n%s", i, d.Reason, diff)
				}
			}
		})
	}
}

// TestSizerMemoryBounded: however many evaluations a window holds, the
// sizer keeps no more recommendations than distinct values could decide.
func TestSizerMemoryBounded(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := NewSizer(clk)
	w := Windows{Up: time.Hour, Down: time.Hour}
	b := Bounds{Max: 10}
	for i := range 100000 {
		clk.SetTime(clk.Now().Add(time.Millisecond))
		s.Recommend(int64(i*7919%50), 1, 5, b, w)
	}
	if n := len(s.recs); n > 2*(10+1) {
		t.Fatalf("%d recommendations kept, want at most %d", n, 2*(10+1))
	}
}

// TestExternal: a pool driven from outside gets what it asked for, only
// bounded, however large its backlog or windows.
func TestExternal(t *testing.T) {
	b := Bounds{Min: 1, Max: 20, Manager: 10}
	cases := map[string]struct {
		requested int32
		want      int32
		limit     Limit
	}{
		"as asked":             {requested: 7, want: 7},
		"zero raised to min":   {requested: 0, want: 1, limit: LimitMin},
		"cut to manager bound": {requested: 15, want: 10, limit: LimitManager},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := External(tc.requested, b)
			if d.Replicas != tc.want || d.Limit != tc.limit || d.RecheckAfter != 0 {
				t.Errorf("External(%d) = %+v, want %d (%q)", tc.requested, d, tc.want, tc.limit)
			}
		})
	}
}

// TestSizerLimit: a pool held at a bound says which one.
func TestSizerLimit(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := NewSizer(clk)
	w := Windows{Down: time.Minute}
	if d := s.Recommend(40, 4, 0, Bounds{Max: 3}, w); d.Replicas != 3 || d.Limit != LimitMax {
		t.Fatalf("first: %+v, want 3 at max", d)
	}
	clk.SetTime(clk.Now().Add(time.Second))
	if d := s.Recommend(40, 4, 3, Bounds{Max: 3}, w); d.Replicas != 3 || d.Limit != LimitMax {
		t.Fatalf("held at max: %+v, want 3 at max", d)
	}
	clk.SetTime(clk.Now().Add(time.Second))
	if d := s.Recommend(40, 4, 3, Bounds{Max: 30, Manager: 3}, w); d.Replicas != 3 || d.Limit != LimitManager {
		t.Fatalf("held by the manager: %+v, want 3 at the manager's bound", d)
	}
	clk.SetTime(clk.Now().Add(time.Second))
	if d := s.Recommend(12, 4, 3, Bounds{Max: 3}, w); d.Replicas != 3 || d.Limit != LimitNone {
		t.Fatalf("needs exactly max: %+v, want 3 within bounds", d)
	}
}
