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
)

// Submit order decides between commands of equal effective priority, also
// when the wall clock steps back between two submits (NTP on a node): the
// command submitted later still starts later.
func TestSubmitOrderSurvivesClockStepBack(t *testing.T) {
	tests := map[string]struct {
		cfg Config
		// lane of the first and of the second command
		first, second string
	}{
		"sessions of one lane, FIFO": {
			cfg:   oneLane(LaneConfig{MaxConcurrency: 1}),
			first: "work", second: "work",
		},
		"sessions of one lane, RoundRobin": {
			cfg: func() Config {
				c := oneLane(LaneConfig{MaxConcurrency: 1})
				c.Fairness = FairRoundRobin
				return c
			}(),
			first: "work", second: "work",
		},
		"lanes of equal priority": {
			cfg: Config{
				Lanes: []LaneConfig{
					{Name: "a", Priority: 2},
					{Name: "b", Priority: 2},
				},
				DefaultLane:   "a",
				MaxConcurrent: 1,
			},
			first: "b", second: "a",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, tc.cfg)
			h.submit(Command{ID: "blocker", SessionKey: "x", Lane: tc.first})
			h.submit(Command{ID: "earlier", SessionKey: "s1", Lane: tc.first})
			h.clk.Step(-time.Hour)
			h.submit(Command{ID: "later", SessionKey: "s2", Lane: tc.second})
			h.succeed("blocker")
			if got := h.running(); len(got) != 1 || got[0] != "earlier" {
				t.Fatalf("running = %v, want [earlier]: the later submit went first", got)
			}
		})
	}
}

// A deadline still moves a command ahead after the clock steps back: the
// boost is computed from the deadline, and only a tie falls to submit order.
func TestBoostStillOrdersAfterClockStepBack(t *testing.T) {
	h := newHarness(t, oneLane(LaneConfig{Priority: 4, MaxConcurrency: 1}))
	h.submit(Command{ID: "blocker", SessionKey: "x"})
	h.submit(Command{ID: "plain", SessionKey: "s1"})
	h.clk.Step(-time.Hour)
	h.submit(Command{ID: "urgent", SessionKey: "s2", Deadline: h.clk.Now().Add(time.Second)})
	h.step(900 * time.Millisecond) // 10% of its span left: boosted four levels
	h.succeed("blocker")
	if got := h.running(); len(got) != 1 || got[0] != "urgent" {
		t.Fatalf("running = %v, want [urgent]: the boost did not apply", got)
	}
}
