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

func TestBoostedPriority(t *testing.T) {
	const s = int64(time.Second)
	type got struct {
		Prio int
		Next int64
	}
	tests := map[string]struct {
		strategy BoostStrategy
		base     int
		deadline int64 // submit is 0
		now      int64
		want     got
	}{
		"standard, fresh":               {BoostStandard, 5, 100 * s, 0, got{5, 25 * s}},
		"standard, just before 75%":     {BoostStandard, 5, 100 * s, 25*s - 1, got{5, 25 * s}},
		"standard, 75% left":            {BoostStandard, 5, 100 * s, 25 * s, got{4, 50 * s}},
		"standard, 50% left":            {BoostStandard, 5, 100 * s, 50 * s, got{3, 75 * s}},
		"standard, 25% left":            {BoostStandard, 5, 100 * s, 75 * s, got{2, 90 * s}},
		"standard, 10% left":            {BoostStandard, 5, 100 * s, 90 * s, got{1, 100 * s}},
		"standard, at deadline":         {BoostStandard, 5, 100 * s, 100 * s, got{0, 0}},
		"standard, past deadline":       {BoostStandard, 5, 100 * s, 500 * s, got{0, 0}},
		"standard, never below 0":       {BoostStandard, 2, 100 * s, 90 * s, got{0, 0}},
		"aggressive, fresh":             {BoostAggressive, 9, 100 * s, 0, got{9, 20 * s}},
		"aggressive, 80% left":          {BoostAggressive, 9, 100 * s, 20 * s, got{7, 40 * s}},
		"aggressive, 60% left":          {BoostAggressive, 9, 100 * s, 40 * s, got{5, 60 * s}},
		"aggressive, 40% left":          {BoostAggressive, 9, 100 * s, 60 * s, got{3, 80 * s}},
		"aggressive, 20% left":          {BoostAggressive, 9, 100 * s, 80 * s, got{1, 100 * s}},
		"aggressive, past deadline":     {BoostAggressive, 9, 100 * s, 101 * s, got{0, 0}},
		"aggressive, never below 0":     {BoostAggressive, 3, 100 * s, 40 * s, got{0, 0}},
		"disabled":                      {BoostDisabled, 5, 100 * s, 99 * s, got{5, 0}},
		"no deadline":                   {BoostStandard, 5, 0, 99 * s, got{5, 0}},
		"priority 0 has nothing to win": {BoostStandard, 0, 100 * s, 0, got{0, 0}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p, next := boostedPriority(tc.strategy, tc.base, 0, tc.deadline, tc.now)
			if diff := cmp.Diff(tc.want, got{p, next}); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

// A command in a low-priority lane overtakes queued work of a higher lane
// once its deadline is close, driven by the queue's timer.
func TestBoostOvertakesHigherLane(t *testing.T) {
	cfg := Config{
		Lanes:         []LaneConfig{{Name: "fast", Priority: 1}, {Name: "slow", Priority: 4}},
		DefaultLane:   "fast",
		MaxConcurrent: 1,
	}
	h := newHarness(t, cfg)
	h.submit(Command{ID: "blocker", SessionKey: "x", Lane: "fast"})
	h.submit(Command{ID: "f1", SessionKey: "x", Lane: "fast"})
	h.submit(Command{ID: "f2", SessionKey: "x", Lane: "fast"})
	h.submit(Command{ID: "s1", SessionKey: "y", Lane: "slow", Deadline: t0.Add(100 * time.Second)})

	h.step(50 * time.Second) // s1 at priority 2: still behind the fast lane
	h.succeed("blocker")
	if diff := cmp.Diff([]string{"f1"}, h.running()); diff != "" {
		t.Fatalf("running at 50s (-want,+got):\n%s", diff)
	}
	h.step(41 * time.Second) // 9% left: priority 0
	h.succeed("f1")
	if diff := cmp.Diff([]string{"s1"}, h.running()); diff != "" {
		t.Errorf("running at 91s (-want,+got):\n%s", diff)
	}
}

// A command's own Priority replaces its lane's, and the default deadline of
// the boost policy applies to commands without one.
func TestPriorityOverrideAndDefaultDeadline(t *testing.T) {
	cfg := Config{
		Lanes:         []LaneConfig{{Name: "a", Priority: 1}, {Name: "b", Priority: 3}},
		DefaultLane:   "a",
		MaxConcurrent: 1,
		Boost:         BoostPolicy{Strategy: BoostAggressive, DefaultDeadline: 10 * time.Second},
	}
	h := newHarness(t, cfg)
	h.submit(Command{ID: "blocker", SessionKey: "x", Lane: "a", Priority: intp(0)})
	h.submit(Command{ID: "a1", SessionKey: "x", Lane: "a"})
	h.submit(Command{ID: "b1", SessionKey: "y", Lane: "b", Priority: intp(0)})
	h.succeed("blocker")
	if diff := cmp.Diff([]string{"b1"}, h.running()); diff != "" {
		t.Fatalf("override: running (-want,+got):\n%s", diff)
	}
	h.submit(Command{ID: "b2", SessionKey: "z", Lane: "b"})
	h.step(4 * time.Second) // both boosted 2 levels twice: a1 -> 0, b2 -> 0; a1 submitted first
	h.succeed("b1")
	if diff := cmp.Diff([]string{"a1"}, h.running()); diff != "" {
		t.Errorf("default deadline: running (-want,+got):\n%s", diff)
	}
}
