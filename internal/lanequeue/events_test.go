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
	"bytes"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/clock"
)

func TestEventsOfOneCommand(t *testing.T) {
	h := newHarness(t, oneLane(LaneConfig{Mode: Hybrid}))
	labels := Identity{TenantID: "acme", Principal: "user:42", AgentTemplateID: "tpl", CorrelationID: "corr"}
	h.submit(Command{ID: "c", SessionKey: "s", Type: "bash", RunID: "run-1", Labels: labels})
	h.step(time.Second)
	h.fail("c", errBoom)
	h.step(100 * time.Millisecond)
	h.succeed("c")

	ev := func(seq uint64, typ EventType, at time.Duration, attempt int, errMsg string) Event {
		return Event{Seq: seq, Type: typ, Time: t0.Add(at), CommandID: "c", SessionKey: "s", Lane: "work",
			CommandType: "bash", RunID: "run-1", Attempt: attempt, Labels: labels, Error: errMsg}
	}
	retry := ev(6, EventRetry, time.Second, 1, "boom")
	retry.Delay = 100 * time.Millisecond
	done := ev(10, EventCompleted, 1100*time.Millisecond, 2, "")
	done.Terminal = true
	want := []Event{
		ev(1, EventSubmitted, 0, 0, ""),
		ev(2, EventStarted, 0, 1, ""),
		ev(3, EventExternalTaskPending, 0, 1, ""),
		ev(4, EventExternalTaskCompleted, time.Second, 1, "boom"),
		ev(5, EventFailed, time.Second, 1, "boom"),
		retry,
		ev(7, EventStarted, 1100*time.Millisecond, 2, ""),
		ev(8, EventExternalTaskPending, 1100*time.Millisecond, 2, ""),
		ev(9, EventExternalTaskCompleted, 1100*time.Millisecond, 2, ""),
		done,
	}
	if diff := cmp.Diff(want, h.events()); diff != "" {
		t.Errorf("events (-want,+got):\n%s", diff)
	}
}

func TestPressureAndIdle(t *testing.T) {
	cfg := oneLane(LaneConfig{Mode: External, MaxConcurrency: 1})
	cfg.PressureThreshold = 3
	cfg.Alerts.Disabled = true
	h := newHarness(t, cfg)
	var ids []string
	submit := func(n int) {
		for range n {
			ids = append(ids, h.submit(Command{SessionKey: "s"}).ID())
		}
	}
	completeAll := func() {
		for len(h.q.PendingExternal()) > 0 {
			if err := h.q.Complete(h.q.PendingExternal()[0].ID, Result{Success: true}); err != nil {
				t.Fatal(err)
			}
		}
	}
	submit(6) // one runs, five pending: pressure once at 3
	completeAll()
	submit(4) // one runs, three pending: pressure again after the idle
	want := []string{"queue.lane.pressure work", "queue.lane.idle work", "queue.lane.pressure work"}
	if diff := cmp.Diff(want, h.eventLog(EventLanePressure, EventLaneIdle)); diff != "" {
		t.Errorf("lane events (-want,+got):\n%s", diff)
	}
}

func TestDepthAlerts(t *testing.T) {
	cfg := oneLane(LaneConfig{Mode: External, MaxConcurrency: 1})
	cfg.Alerts = AlertThresholds{Warning: 2, Critical: 4}
	h := newHarness(t, cfg)
	h.submit(Command{SessionKey: "s"}) // runs
	var queued []*Ticket
	for range 5 { // pending 1..5: warning at 2, critical at 4
		queued = append(queued, h.submit(Command{SessionKey: "s"}))
	}
	if err := h.q.Cancel(queued[4].ID()); err != nil { // 4: still critical
		t.Fatal(err)
	}
	if err := h.q.Cancel(queued[3].ID()); err != nil { // 3: critical re-armed
		t.Fatal(err)
	}
	h.submit(Command{SessionKey: "s"}) // 4: critical again, warning not
	want := []string{"alert work warning", "alert work critical", "alert work critical"}
	if diff := cmp.Diff(want, h.eventLog(EventAlert)); diff != "" {
		t.Errorf("alerts (-want,+got):\n%s", diff)
	}
}

func TestDefaultAlertLevels(t *testing.T) {
	h := newHarness(t, oneLane(LaneConfig{MaxConcurrency: 1}))
	for range 101 {
		h.submit(Command{SessionKey: "s"})
	}
	want := []string{"alert work warning", "alert work critical"}
	if diff := cmp.Diff(want, h.eventLog(EventAlert)); diff != "" {
		t.Errorf("alerts (-want,+got):\n%s", diff)
	}
}

func TestSlowSubscriberDropsAndNeverBlocks(t *testing.T) {
	h := newHarness(t, oneLane(LaneConfig{}))
	slow := h.q.Subscribe(2)
	for range 5 {
		h.submit(Command{SessionKey: "s"}) // submitted + started each
	}
	if got := slow.Dropped(); got != 8 {
		t.Errorf("Dropped = %d, want 8", got)
	}
	first := <-slow.Events()
	if first.Seq != 1 || first.Type != EventSubmitted {
		t.Errorf("first kept event = %+v, want seq 1 submitted", first)
	}
	slow.Close()
	if _, ok := <-slow.Events(); !ok {
		t.Log("closed")
	}
	for range slow.Events() {
	}
	if got := len(h.events()); got != 10 {
		t.Errorf("big subscriber got %d events, want 10", got)
	}
}

func TestNoSubscriberBuildsNoEvents(t *testing.T) {
	h := newHarness(t, oneLane(LaneConfig{}))
	h.sub.Close()
	h.submit(Command{ID: "a", SessionKey: "s"})
	h.succeed("a")
	h.q.mu.Lock()
	defer h.q.mu.Unlock()
	if h.q.evseq != 0 || len(h.q.events) != 0 {
		t.Errorf("built %d events with nobody listening", h.q.evseq)
	}
}

// The same calls under a fake clock replay to identical IDs, timestamps and
// events, with either generator given fixed entropy.
func TestReplayIsDeterministic(t *testing.T) {
	script := func(ids func(clock.PassiveClock) IDGenerator) []Event {
		cfg := DefaultConfig()
		cfg.MaxConcurrent = 2
		cfg.PressureThreshold = 2
		h := newHarness(t, cfg, func(o *Options) { o.IDs = ids(o.Clock) })
		for i, typ := range []string{"bash", "read", "llm", "bash", "grep", "write"} {
			h.submit(Command{SessionKey: []string{"a", "b"}[i%2], Type: typ, RunID: "r"})
			h.step(10 * time.Millisecond)
		}
		h.fail(h.grants[0].t.id, errBoom)
		h.step(time.Second)
		h.q.CancelRun("b", "r")
		for len(h.grants) > 0 {
			h.step(time.Millisecond)
			h.succeed(h.grants[0].t.id)
		}
		return h.events()
	}
	for name, gen := range map[string]func(clock.PassiveClock) IDGenerator{
		"sequential": func(clock.PassiveClock) IDGenerator { return &SequentialIDs{} },
		"ulid with fixed entropy": func(c clock.PassiveClock) IDGenerator {
			return NewULIDGenerator(c, bytes.NewReader(bytes.Repeat([]byte{7}, 1<<12)))
		},
	} {
		t.Run(name, func(t *testing.T) {
			first, second := script(gen), script(gen)
			if len(first) < 20 {
				t.Fatalf("script produced only %d events", len(first))
			}
			if diff := cmp.Diff(first, second); diff != "" {
				t.Errorf("replay differs (-first,+second):\n%s", diff)
			}
		})
	}
}
