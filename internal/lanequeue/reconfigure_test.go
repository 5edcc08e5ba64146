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

func TestReconfigureCaps(t *testing.T) {
	cfg := oneLane(LaneConfig{MaxConcurrency: 1})
	h := newHarness(t, cfg)
	for _, id := range []string{"a", "b", "c", "d"} {
		h.submit(Command{ID: id, SessionKey: id})
	}
	cfg.Lanes[0].MaxConcurrency = 3
	if err := h.q.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, h.running()); diff != "" {
		t.Fatalf("after raising the cap (-want,+got):\n%s", diff)
	}
	cfg.Lanes[0].MaxConcurrency = 1
	if err := h.q.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	if got := len(h.running()); got != 3 {
		t.Fatalf("lowering the cap stopped work: %d running", got)
	}
	h.succeed("a")
	h.succeed("b")
	if diff := cmp.Diff([]string{"c"}, h.running()); diff != "" {
		t.Fatalf("d started above the new cap (-want,+got):\n%s", diff)
	}
	h.succeed("c")
	if diff := cmp.Diff([]string{"d"}, h.running()); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
}

func TestReconfigureRemovesLane(t *testing.T) {
	cfg := Config{
		Lanes: []LaneConfig{
			{Name: "keep"},
			{Name: "old", MaxConcurrency: 2, Retry: &RetryPolicy{Strategy: RetryFixed, FixedDelay: time.Minute}},
		},
		DefaultLane: "keep",
	}
	h := newHarness(t, cfg)
	retrying := h.submit(Command{ID: "retrying", SessionKey: "s", Lane: "old"})
	h.fail("retrying", errBoom)
	ok := h.submit(Command{ID: "run-ok", SessionKey: "s", Lane: "old"})
	bad := h.submit(Command{ID: "run-bad", SessionKey: "s", Lane: "old"})
	queued := h.submit(Command{ID: "queued", SessionKey: "s", Lane: "old"})
	h.submit(Command{ID: "k", SessionKey: "s", Lane: "keep"})
	h.events()

	cfg.Lanes = cfg.Lanes[:1]
	if err := h.q.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	for _, tk := range []*Ticket{retrying, queued} {
		o := h.outcome(tk)
		if o.State != StateFailed || !errors.Is(o.Err, ErrLaneRemoved) {
			t.Errorf("%s: %+v, want Failed with ErrLaneRemoved", tk.ID(), o)
		}
	}
	if got := h.q.Stats().Lanes; len(got) != 2 || !got[1].Draining || got[1].Active != 2 {
		t.Fatalf("lanes = %+v, want old draining with 2 active", got)
	}
	if _, err := h.q.Submit(Command{SessionKey: "s", Lane: "old"}); !errors.Is(err, ErrUnknownLane) {
		t.Errorf("submit to removed lane = %v", err)
	}
	h.succeed("run-ok")
	h.fail("run-bad", errBoom) // would retry, but the lane is gone
	if o := h.outcome(ok); o.State != StateSucceeded {
		t.Errorf("run-ok: %+v", o)
	}
	if o := h.outcome(bad); o.State != StateFailed || !errors.Is(o.Err, ErrLaneRemoved) || !errors.Is(o.Err, errBoom) {
		t.Errorf("run-bad: %+v", o)
	}
	if got := h.q.Stats().Lanes; len(got) != 1 {
		t.Errorf("drained lane still listed: %+v", got)
	}
	want := []string{"failed retrying", "failed queued"}
	if diff := cmp.Diff(want, h.eventLog(EventFailed)[:2]); diff != "" {
		t.Errorf("events (-want,+got):\n%s", diff)
	}
}

func TestReconfigureRenameAndRevive(t *testing.T) {
	cfg := oneLane(LaneConfig{Name: "a"})
	h := newHarness(t, cfg)
	running := h.submit(Command{ID: "r", SessionKey: "s", Lane: "a"})
	cfg = Config{Lanes: []LaneConfig{{Name: "b"}}, DefaultLane: "b"}
	if err := h.q.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	h.submit(Command{ID: "new", SessionKey: "s", Lane: "b"})
	cfg = Config{Lanes: []LaneConfig{{Name: "b"}, {Name: "a", MaxConcurrency: 1}}, DefaultLane: "b"}
	if err := h.q.Reconfigure(cfg); err != nil { // a comes back while r still runs in it
		t.Fatal(err)
	}
	h.submit(Command{ID: "next", SessionKey: "s", Lane: "a"})
	if diff := cmp.Diff([]string{"r", "new"}, h.running()); diff != "" {
		t.Fatalf("running (-want,+got):\n%s", diff)
	}
	h.succeed("r")
	if h.outcome(running).State != StateSucceeded {
		t.Error("r did not succeed")
	}
	if diff := cmp.Diff([]string{"new", "next"}, h.running()); diff != "" {
		t.Errorf("revived lane respects its cap (-want,+got):\n%s", diff)
	}
}

func TestReconfigurePrioritiesAndFairness(t *testing.T) {
	cfg := Config{
		Lanes:         []LaneConfig{{Name: "a", Priority: 1}, {Name: "b", Priority: 2}},
		DefaultLane:   "a",
		MaxConcurrent: 1,
	}
	h := newHarness(t, cfg)
	h.submit(Command{ID: "blocker", SessionKey: "x", Lane: "a"})
	h.submit(Command{ID: "a1", SessionKey: "x", Lane: "a"})
	h.submit(Command{ID: "b1", SessionKey: "y", Lane: "b"})
	h.submit(Command{ID: "b2", SessionKey: "y", Lane: "b"})
	h.submit(Command{ID: "b3", SessionKey: "z", Lane: "b"})
	cfg.Lanes[0].Priority, cfg.Lanes[1].Priority = 2, 1
	cfg.Fairness = FairRoundRobin
	if err := h.q.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	var order []string
	for len(h.grants) > 0 {
		id := h.grants[0].t.id
		order = append(order, id)
		h.succeed(id)
	}
	if diff := cmp.Diff([]string{"blocker", "b1", "b3", "b2", "a1"}, order); diff != "" {
		t.Errorf("start order (-want,+got):\n%s", diff)
	}
}

func TestReconfigureRejectsInvalid(t *testing.T) {
	cfg := oneLane(LaneConfig{MaxConcurrency: 1})
	h := newHarness(t, cfg)
	bad := cfg
	bad.Lanes = []LaneConfig{{Name: "work", MaxConcurrency: -1}}
	if err := h.q.Reconfigure(bad); err == nil {
		t.Fatal("accepted an invalid config")
	}
	if got := h.q.Config().Lanes[0].MaxConcurrency; got != 1 {
		t.Errorf("config changed to cap %d", got)
	}
	h.q.Close()
	if err := h.q.Reconfigure(cfg); !errors.Is(err, ErrClosed) {
		t.Errorf("Reconfigure after Close = %v", err)
	}
}
