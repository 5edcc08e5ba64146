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
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestPausedLaneQueuesButStartsNothing(t *testing.T) {
	cfg := Config{Lanes: []LaneConfig{{Name: "work", MaxConcurrency: 2}, {Name: "other"}}, DefaultLane: "work"}
	h := newHarness(t, cfg)
	h.submit(Command{ID: "c1", SessionKey: "s"})
	if err := h.q.PauseLane("work"); err != nil {
		t.Fatal(err)
	}
	h.submit(Command{ID: "c2", SessionKey: "s"})
	h.submit(Command{ID: "c3", SessionKey: "s"})
	h.submit(Command{ID: "o1", SessionKey: "s", Lane: "other"})
	if diff := cmp.Diff([]string{"c1", "o1"}, h.running()); diff != "" {
		t.Errorf("running while paused (-want,+got):\n%s", diff)
	}
	// The running command finishes; its slot stays free while paused.
	h.succeed("c1")
	if diff := cmp.Diff([]string{"o1"}, h.running()); diff != "" {
		t.Errorf("running after c1 (-want,+got):\n%s", diff)
	}
	st := h.q.Stats()
	if !st.Lanes[0].Paused || st.Lanes[0].Pending != 2 || st.Lanes[1].Paused {
		t.Errorf("stats = %+v", st.Lanes)
	}
	if !h.q.Config().Lanes[0].Paused {
		t.Error("Config() does not show the lane paused")
	}
	if err := h.q.ResumeLane("work"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"o1", "c2", "c3"}, h.running()); diff != "" {
		t.Errorf("running after resume (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"queue.lane.paused work", "queue.lane.resumed work"},
		h.eventLog(EventLanePaused, EventLaneResumed)); diff != "" {
		t.Errorf("events (-want,+got):\n%s", diff)
	}
	if err := h.q.PauseLane("nope"); !errors.Is(err, ErrUnknownLane) {
		t.Errorf("PauseLane(nope) = %v, want ErrUnknownLane", err)
	}
}

func TestPausedLaneFromConfig(t *testing.T) {
	cfg := oneLane(LaneConfig{Paused: true})
	h := newHarness(t, cfg)
	h.submit(Command{ID: "c1", SessionKey: "s"})
	h.step(time.Hour)
	if got := h.running(); len(got) != 0 {
		t.Fatalf("running in a lane configured paused: %v", got)
	}
	cfg.Lanes[0].Paused = false
	if err := h.q.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"c1"}, h.running()); diff != "" {
		t.Errorf("running after reconfigure (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"queue.lane.resumed work"}, h.eventLog(EventLanePaused, EventLaneResumed)); diff != "" {
		t.Errorf("events (-want,+got):\n%s", diff)
	}
}

func TestClearLaneCancelsQueuedOnly(t *testing.T) {
	cfg := Config{
		Lanes:       []LaneConfig{{Name: "work", MaxConcurrencyPerSession: 1, Retry: &RetryPolicy{Strategy: RetryFixed, MaxRetries: 2, FixedDelay: time.Minute}}, {Name: "other"}},
		DefaultLane: "work",
	}
	h := newHarness(t, cfg)
	h.submit(Command{ID: "a1", SessionKey: "a"})
	h.submit(Command{ID: "r1", SessionKey: "r"})
	h.fail("r1", errBoom) // waits a minute for its retry
	a2 := h.submit(Command{ID: "a2", SessionKey: "a"})
	a3 := h.submit(Command{ID: "a3", SessionKey: "a"})
	b1 := h.submit(Command{ID: "b1", SessionKey: "b"})
	h.submit(Command{ID: "o1", SessionKey: "a", Lane: "other"})
	h.submit(Command{ID: "b2", SessionKey: "b"})

	n, err := h.q.ClearLane("work", "a")
	if err != nil || n != 2 {
		t.Fatalf("ClearLane(work, a) = %d, %v; want 2", n, err)
	}
	for _, tk := range []*Ticket{a2, a3} {
		if o := h.outcome(tk); o.State != StateCancelled || !errors.Is(o.Err, ErrLaneCleared) || !errors.Is(o.Err, ErrCancelled) {
			t.Errorf("%s: %s %v", tk.ID(), o.State, o.Err)
		}
	}
	if _, done := b1.Outcome(); done {
		t.Error("another session's command was cleared")
	}
	if diff := cmp.Diff([]string{"a1", "b1", "o1"}, h.running()); diff != "" {
		t.Errorf("running (-want,+got):\n%s", diff)
	}
	// Every session, the retrying command included; running ones stay.
	if n, err := h.q.ClearLane("work", ""); err != nil || n != 2 {
		t.Fatalf("ClearLane(work) = %d, %v; want 2 (b2, r1)", n, err)
	}
	if diff := cmp.Diff([]string{"a1", "b1", "o1"}, h.running()); diff != "" {
		t.Errorf("running after clearing all (-want,+got):\n%s", diff)
	}
	if st := h.q.Stats(); st.Lanes[0].Pending != 0 || st.Lanes[0].Cancelled != 4 {
		t.Errorf("lane stats = %+v", st.Lanes[0])
	}
	if _, err := h.q.ClearLane("nope", ""); !errors.Is(err, ErrUnknownLane) {
		t.Errorf("ClearLane(nope) = %v, want ErrUnknownLane", err)
	}
}

func TestDrainRefusesIntakeAndFinishesQueuedWork(t *testing.T) {
	cfg := oneLane(LaneConfig{MaxConcurrency: 1})
	h := newHarness(t, cfg)
	h.submit(Command{ID: "c1", SessionKey: "s"})
	c2 := h.submit(Command{ID: "c2", SessionKey: "s"})

	cfg.Drain = &DrainConfig{Timeout: time.Minute}
	if err := h.q.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := h.q.Submit(Command{ID: "c3", SessionKey: "s"}); !errors.Is(err, ErrDraining) {
		t.Fatalf("Submit while draining = %v, want ErrDraining", err)
	}
	d := h.q.Stats().Drain
	if d == nil || !d.Since.Equal(t0) || !d.Deadline.Equal(t0.Add(time.Minute)) || d.Drained || d.Live != 2 {
		t.Fatalf("drain stats = %+v", d)
	}
	// Reapplying the same drain keeps its start.
	h.step(10 * time.Second)
	if err := h.q.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	if d := h.q.Stats().Drain; !d.Deadline.Equal(t0.Add(time.Minute)) {
		t.Errorf("deadline moved to %s", d.Deadline)
	}
	h.succeed("c1")
	h.succeed("c2")
	if o := h.outcome(c2); o.State != StateSucceeded {
		t.Errorf("c2 = %s", o.State)
	}
	if d := h.q.Stats().Drain; !d.Drained || d.Live != 0 || d.Expired {
		t.Errorf("drain stats = %+v", d)
	}
	if diff := cmp.Diff([]string{"queue.draining", "queue.drained"}, h.eventLog(EventQueueDraining, EventQueueDrained)); diff != "" {
		t.Errorf("events (-want,+got):\n%s", diff)
	}

	// Ending the drain opens intake again.
	cfg.Drain = nil
	if err := h.q.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	h.submit(Command{ID: "c3", SessionKey: "s"})
	if h.q.Stats().Drain != nil {
		t.Error("drain stats after the drain ended")
	}
}

func TestDrainDeadlineCancelsWhatHasNotStarted(t *testing.T) {
	cfg := oneLane(LaneConfig{MaxConcurrency: 1, Timeout: time.Hour,
		Retry: &RetryPolicy{Strategy: RetryFixed, MaxRetries: 3, FixedDelay: time.Second}})
	cfg.Lanes = append(cfg.Lanes, LaneConfig{Name: "held", Paused: true})
	h := newHarness(t, cfg)
	h.submit(Command{ID: "run", SessionKey: "s"})
	queued := h.submit(Command{ID: "queued", SessionKey: "s"})
	held := h.submit(Command{ID: "held", SessionKey: "s", Lane: "held"})

	cfg.Drain = &DrainConfig{Timeout: 30 * time.Second}
	if err := h.q.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	h.step(29 * time.Second)
	if _, done := queued.Outcome(); done {
		t.Fatal("queued command ended before the deadline")
	}
	h.step(time.Second)
	for _, tk := range []*Ticket{queued, held} {
		if o := h.outcome(tk); o.State != StateCancelled || !errors.Is(o.Err, ErrDrainDeadline) {
			t.Errorf("%s: %s %v", tk.ID(), o.State, o.Err)
		}
	}
	if diff := cmp.Diff([]string{"run"}, h.running()); diff != "" {
		t.Errorf("running after the deadline (-want,+got):\n%s", diff)
	}
	if d := h.q.Stats().Drain; !d.Expired || d.Drained || d.Live != 1 {
		t.Errorf("drain stats = %+v", d)
	}
	// A running command that fails after the deadline is not retried.
	h.fail("run", errBoom)
	h.step(time.Second)
	if got := h.running(); len(got) != 0 {
		t.Errorf("running after the failure: %v", got)
	}
	if d := h.q.Stats().Drain; !d.Drained || d.Live != 0 {
		t.Errorf("drain stats = %+v", d)
	}
}

func TestDrainWithoutDeadlineWaits(t *testing.T) {
	cfg := oneLane(LaneConfig{Paused: true})
	cfg.Drain = &DrainConfig{}
	h := newHarness(t, cfg)
	if _, err := h.q.Submit(Command{ID: "c1", SessionKey: "s"}); !errors.Is(err, ErrDraining) {
		t.Fatalf("Submit = %v, want ErrDraining", err)
	}
	// Adopt still takes a command that already runs elsewhere.
	tk, err := h.q.Adopt(Command{ID: "ext", SessionKey: "s", External: true}, 1, t0)
	if err != nil {
		t.Fatal(err)
	}
	h.step(24 * time.Hour * 365)
	if d := h.q.Stats().Drain; d.Expired || !d.Deadline.IsZero() {
		t.Errorf("drain stats = %+v", d)
	}
	_ = tk
	if err := (Config{Lanes: []LaneConfig{{Name: "w"}}, Drain: &DrainConfig{Timeout: -1}}).Validate(); err == nil {
		t.Error("a negative drain timeout validated")
	}
}

// With the queue's own runners and timer: the drained event comes when the
// last runner reports, and the deadline fires on the queue's timer.
func TestRealRunnersDrain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		h := HandlerFunc(func(ctx context.Context, _ Attempt) (Result, error) {
			<-release
			return Result{Success: true}, nil
		})
		cfg := oneLane(LaneConfig{MaxConcurrency: 1, Timeout: time.Hour})
		q, err := New(cfg, Options{Handler: h})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		sub := q.Subscribe(64)
		first, _ := q.Submit(Command{SessionKey: "s"})
		second, _ := q.Submit(Command{SessionKey: "s"})
		third, _ := q.Submit(Command{SessionKey: "s"})
		cfg.Drain = &DrainConfig{Timeout: time.Minute}
		if err := q.Reconfigure(cfg); err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Second)
		release <- struct{}{} // first ends, second starts
		synctest.Wait()
		time.Sleep(time.Minute) // the deadline passes: third is cancelled
		synctest.Wait()
		if o, _ := third.Outcome(); o.State != StateCancelled || !errors.Is(o.Err, ErrDrainDeadline) {
			t.Errorf("third = %s %v", o.State, o.Err)
		}
		close(release)
		<-second.Done()
		synctest.Wait()
		for _, tk := range []*Ticket{first, second} {
			if o, _ := tk.Outcome(); o.State != StateSucceeded {
				t.Errorf("%s = %s %v", tk.ID(), o.State, o.Err)
			}
		}
		var got []EventType
		for len(sub.Events()) > 0 {
			if e := <-sub.Events(); e.Type == EventQueueDraining || e.Type == EventQueueDrained {
				got = append(got, e.Type)
			}
		}
		if diff := cmp.Diff([]EventType{EventQueueDraining, EventQueueDrained}, got); diff != "" {
			t.Errorf("events (-want,+got):\n%s", diff)
		}
	})
}

func TestDrainAdmitsDurableCommands(t *testing.T) {
	cfg := oneLane(LaneConfig{})
	cfg.Drain = &DrainConfig{Timeout: time.Minute}
	h := newHarness(t, cfg)
	if _, err := h.q.Submit(Command{ID: "new", SessionKey: "s", External: true}); !errors.Is(err, ErrDraining) {
		t.Fatalf("Submit = %v, want ErrDraining", err)
	}
	h.submit(Command{ID: "kept", SessionKey: "s", External: true, Durable: true})
	if diff := cmp.Diff([]string{"kept"}, h.running()); diff != "" {
		t.Errorf("running (-want,+got):\n%s", diff)
	}
}

func TestDrainDeadlineMovedLaterLetsRetriesRunAgain(t *testing.T) {
	cfg := oneLane(LaneConfig{Timeout: time.Hour,
		Retry: &RetryPolicy{Strategy: RetryFixed, MaxRetries: 3, FixedDelay: time.Second}})
	h := newHarness(t, cfg)
	h.submit(Command{ID: "c1", SessionKey: "s"})
	cfg.Drain = &DrainConfig{Timeout: time.Second}
	if err := h.q.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	h.step(time.Second)
	if d := h.q.Stats().Drain; !d.Expired {
		t.Fatalf("drain stats = %+v", d)
	}
	cfg.Drain.Timeout = time.Hour
	if err := h.q.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	h.fail("c1", errBoom)
	h.step(time.Second)
	if diff := cmp.Diff([]string{"c1"}, h.running()); diff != "" {
		t.Errorf("running after the retry delay (-want,+got):\n%s", diff)
	}
	if d := h.q.Stats().Drain; d.Expired || !d.Deadline.Equal(t0.Add(time.Hour)) {
		t.Errorf("drain stats = %+v", d)
	}
}
