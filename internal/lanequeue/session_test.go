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

	"github.com/google/go-cmp/cmp"
)

// Switching a lane's mode changes how commands that have not started yet
// run; commands in flight keep the mode they started with.
func TestModeSwitchAffectsNewCommandsOnly(t *testing.T) {
	cfg := oneLane(LaneConfig{Name: "execute", MaxConcurrencyPerSession: 1})
	h := newHarness(t, cfg)
	first := h.submit(Command{ID: "c1", SessionKey: "s"})
	second := h.submit(Command{ID: "c2", SessionKey: "s"})

	cfg.Lanes[0].Mode = External
	if err := h.q.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	if err := h.q.Complete("c1", Result{Success: true}); !errors.Is(err, ErrNotPending) {
		t.Errorf("c1 became external: Complete = %v", err)
	}
	h.succeed("c1") // still runs its Internal handler
	if h.outcome(first).State != StateSucceeded {
		t.Fatal("c1 did not finish internally")
	}
	if diff := cmp.Diff([]string{"c2"}, taskIDs(h.q.PendingExternal())); diff != "" {
		t.Fatalf("c2 should start External (-want,+got):\n%s", diff)
	}

	cfg.Lanes[0].Mode = Internal
	if err := h.q.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"c2"}, taskIDs(h.q.PendingExternal())); diff != "" {
		t.Errorf("c2 lost its External attempt (-want,+got):\n%s", diff)
	}
	if err := h.q.Complete("c2", Result{Success: true}); err != nil {
		t.Fatal(err)
	}
	if h.outcome(second).State != StateSucceeded {
		t.Error("c2 did not succeed")
	}
}

func TestSessionLaneModeOverride(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	if err := h.q.SetSessionLaneMode("remote", "execute", External); err != nil {
		t.Fatal(err)
	}
	h.submit(Command{ID: "r1", SessionKey: "remote", Type: "bash"})
	h.submit(Command{ID: "r2", SessionKey: "remote", Type: "read"}) // other lane: not overridden
	h.submit(Command{ID: "l1", SessionKey: "local", Type: "bash"})
	if diff := cmp.Diff([]string{"r1"}, taskIDs(h.q.PendingExternal())); diff != "" {
		t.Errorf("external (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"r2", "l1"}, h.granted()); diff != "" {
		t.Errorf("internal (-want,+got):\n%s", diff)
	}
	if got := h.q.SessionStats("remote").LaneModes; !cmp.Equal(got, map[string]HandlerMode{"execute": External}) {
		t.Errorf("LaneModes = %v", got)
	}
	h.q.ClearSessionLaneMode("remote", "execute")
	h.submit(Command{ID: "r3", SessionKey: "remote", Type: "bash"})
	if diff := cmp.Diff([]string{"r2", "l1", "r3"}, h.granted()); diff != "" {
		t.Errorf("after clear (-want,+got):\n%s", diff)
	}

	if err := h.q.SetSessionLaneMode("s", "nope", External); !errors.Is(err, ErrUnknownLane) {
		t.Errorf("unknown lane = %v", err)
	}
	if err := h.q.SetSessionLaneMode("s", "execute", "Sideways"); !errors.Is(err, ErrInvalidCommand) {
		t.Errorf("unknown mode = %v", err)
	}
}

func TestForgetSession(t *testing.T) {
	h := newHarness(t, oneLane(LaneConfig{}))
	h.submit(Command{ID: "a", SessionKey: "s"})
	if err := h.q.ForgetSession("s"); !errors.Is(err, ErrSessionBusy) {
		t.Fatalf("ForgetSession busy = %v", err)
	}
	h.succeed("a")
	if got := h.q.SessionStats("s").Completed; got != 1 {
		t.Fatalf("completed = %d", got)
	}
	if err := h.q.ForgetSession("s"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(SessionStats{Key: "s"}, h.q.SessionStats("s")); diff != "" {
		t.Errorf("after forget (-want,+got):\n%s", diff)
	}
}
