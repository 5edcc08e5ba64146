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

	"github.com/google/go-cmp/cmp"
)

// startOrder runs one External lane with a single slot held by a blocker,
// submits cmds, then completes one command at a time and returns the order
// in which they started.
func startOrder(t *testing.T, cfg Config, cmds []Command) []string {
	t.Helper()
	h := newHarness(t, cfg)
	h.submit(Command{ID: "blocker", SessionKey: "blocker"})
	for _, c := range cmds {
		h.submit(c)
	}
	var order []string
	for {
		p := h.q.PendingExternal()
		if len(p) == 0 {
			return order
		}
		if p[0].ID != "blocker" {
			order = append(order, p[0].ID)
		}
		if err := h.q.Complete(p[0].ID, Result{Success: true}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFairness(t *testing.T) {
	cmd := func(id, session, tenant string) Command {
		return Command{ID: id, SessionKey: session, Labels: Identity{TenantID: tenant}}
	}
	threeSessions := []Command{
		cmd("a1", "A", ""), cmd("a2", "A", ""), cmd("a3", "A", ""),
		cmd("b1", "B", ""), cmd("b2", "B", ""),
		cmd("c1", "C", ""),
	}
	tenants := []Command{
		cmd("s1", "small", "small"), cmd("s2", "small", "small"), cmd("s3", "small", "small"), cmd("s4", "small", "small"),
		cmd("b1", "big-1", "big"), cmd("b2", "big-1", "big"), cmd("b3", "big-2", "big"), cmd("b4", "big-2", "big"),
	}
	tests := map[string]struct {
		policy  FairnessPolicy
		weights map[string]int
		cmds    []Command
		want    []string
	}{
		"FIFO by submit time": {
			policy: FairFIFO, cmds: threeSessions,
			want: []string{"a1", "a2", "a3", "b1", "b2", "c1"},
		},
		"default is FIFO": {
			cmds: threeSessions,
			want: []string{"a1", "a2", "a3", "b1", "b2", "c1"},
		},
		"RoundRobin by session": {
			policy: FairRoundRobin, cmds: threeSessions,
			want: []string{"a1", "b1", "c1", "a2", "b2", "a3"},
		},
		"WeightedTenant, equal weights alternate tenants": {
			policy: FairWeightedTenant, cmds: tenants,
			want: []string{"s1", "b1", "s2", "b2", "s3", "b3", "s4", "b4"},
		},
		"WeightedTenant, big weighs 3": {
			policy: FairWeightedTenant, weights: map[string]int{"big": 3}, cmds: tenants,
			want: []string{"b1", "b2", "b3", "s1", "b4", "s2", "s3", "s4"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := oneLane(LaneConfig{Mode: External, MaxConcurrency: 1})
			cfg.Fairness, cfg.TenantWeights = tc.policy, tc.weights
			if diff := cmp.Diff(tc.want, startOrder(t, cfg, tc.cmds)); diff != "" {
				t.Errorf("start order (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestDeque(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var d deque
	var ref []*Ticket
	next := uint64(0)
	for i := 0; i < 5000; i++ {
		switch op := r.IntN(10); {
		case op < 4:
			next++
			tk := &Ticket{seq: next * 10}
			d.pushBack(tk)
			ref = append(ref, tk)
		case op < 6 && len(ref) > 0:
			if got := d.popFront(); got != ref[0] {
				t.Fatalf("popFront = %d, want %d", got.seq, ref[0].seq)
			}
			ref = ref[1:]
		case op < 8 && len(ref) > 0:
			victim := ref[r.IntN(len(ref))]
			if !d.remove(victim) {
				t.Fatal("remove missed")
			}
			ref = slices.DeleteFunc(ref, func(x *Ticket) bool { return x == victim })
		default:
			tk := &Ticket{seq: uint64(r.IntN(int(next*10 + 1)))}
			d.insertBySeq(tk)
			i := 0
			for i < len(ref) && ref[i].seq < tk.seq {
				i++
			}
			ref = slices.Insert(ref, i, tk)
		}
		if d.len() != len(ref) {
			t.Fatalf("len = %d, want %d", d.len(), len(ref))
		}
		for i, tk := range ref {
			if d.at(i) != tk {
				t.Fatalf("step %d: at(%d) differs", i, i)
			}
		}
	}
}
