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

	"github.com/google/go-cmp/cmp"
)

func TestCancelRunLeavesStartedRunning(t *testing.T) {
	h := newHarness(t, oneLane(LaneConfig{MaxConcurrencyPerSession: 1, Retry: &RetryPolicy{Strategy: RetryFixed, FixedDelay: time.Minute}}))
	h.submit(Command{ID: "retrying", SessionKey: "s", RunID: "r1"})
	h.fail("retrying", errBoom)
	started := h.submit(Command{ID: "started", SessionKey: "s", RunID: "r1"})
	b := h.submit(Command{ID: "b", SessionKey: "s", RunID: "r1"})
	c := h.submit(Command{ID: "c", SessionKey: "s", RunID: "r1"})
	other := h.submit(Command{ID: "other", SessionKey: "s", RunID: "r2"})
	h.submit(Command{ID: "elsewhere", SessionKey: "t", RunID: "r1"})

	if got := h.q.CancelRun("s", "r1"); got != 3 {
		t.Errorf("CancelRun = %d, want 3 (retrying, b, c)", got)
	}
	for _, tk := range []*Ticket{b, c} {
		if o := h.outcome(tk); o.State != StateCancelled || !errors.Is(o.Err, ErrCancelled) {
			t.Errorf("%s: %+v", tk.ID(), o)
		}
	}
	if started.State() != StateRunning || other.State() != StateQueued {
		t.Errorf("started = %s, other = %s", started.State(), other.State())
	}
	h.succeed("started")
	if diff := cmp.Diff([]string{"elsewhere", "other"}, h.running()); diff != "" {
		t.Errorf("running (-want,+got):\n%s", diff)
	}
	want := []string{"cancelled retrying", "cancelled b", "cancelled c"}
	if diff := cmp.Diff(want, h.eventLog(EventCancelled)); diff != "" {
		t.Errorf("events (-want,+got):\n%s", diff)
	}
}

func TestCancelSession(t *testing.T) {
	h := newHarness(t, oneLane(LaneConfig{MaxConcurrencyPerSession: 1}))
	run := h.submit(Command{ID: "run", SessionKey: "s"})
	queued := h.submit(Command{ID: "queued", SessionKey: "s"})
	keep := h.submit(Command{ID: "keep", SessionKey: "t"})
	attempt := h.grants[0]
	if got := h.q.CancelSession("s"); got != 2 {
		t.Errorf("CancelSession = %d, want 2", got)
	}
	if !errors.Is(attempt.Err(), context.Canceled) {
		t.Errorf("running attempt ctx err = %v, want Canceled", attempt.Err())
	}
	select {
	case <-attempt.Done():
	default:
		t.Error("running attempt ctx not done")
	}
	h.succeed("run") // the late result is ignored
	for _, tk := range []*Ticket{run, queued} {
		if o := h.outcome(tk); o.State != StateCancelled {
			t.Errorf("%s: %+v", tk.ID(), o)
		}
	}
	if keep.State() != StateRunning {
		t.Errorf("other session: %s", keep.State())
	}
	if st := h.q.SessionStats("s"); st.Cancelled != 2 || st.Pending != 0 || st.Active != 0 {
		t.Errorf("session stats = %+v", st)
	}
}

func TestCancelOne(t *testing.T) {
	h := newHarness(t, oneLane(LaneConfig{MaxConcurrency: 1}))
	h.submit(Command{ID: "a", SessionKey: "s"})
	h.submit(Command{ID: "b", SessionKey: "s"})
	h.submit(Command{ID: "c", SessionKey: "s"})
	for _, id := range []string{"b", "a"} { // a queued head-to-be, then the running one
		if err := h.q.Cancel(id); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff([]string{"c"}, h.running()); diff != "" {
		t.Errorf("running (-want,+got):\n%s", diff)
	}
	if err := h.q.Cancel("a"); !errors.Is(err, ErrNotFound) {
		t.Errorf("cancel twice = %v, want ErrNotFound", err)
	}
}
