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

func externalConfig() Config {
	return oneLane(LaneConfig{Name: "execute", Mode: External, MaxConcurrency: 2, Timeout: 10 * time.Second})
}

func TestExternalComplete(t *testing.T) {
	var hooked []ExternalTask
	h := newHarness(t, externalConfig(), func(o *Options) {
		o.OnExternalTask = func(x ExternalTask) { hooked = append(hooked, x) }
		o.Handler = nil // External commands need no handler
	})
	labels := Identity{TenantID: "acme"}
	tk := h.submit(Command{ID: "x1", SessionKey: "s", Type: "bash", Payload: []byte(`{"command":"make"}`), Labels: labels, RunID: "r"})
	h.submit(Command{ID: "x2", SessionKey: "s", Type: "bash"})
	h.submit(Command{ID: "x3", SessionKey: "s", Type: "bash"})

	want := ExternalTask{ID: "x1", Attempt: 1, SessionKey: "s", Lane: "execute", CommandType: "bash",
		Payload: []byte(`{"command":"make"}`), Labels: labels, RunID: "r",
		CreatedAt: t0, StartedAt: t0, Deadline: t0.Add(10 * time.Second), Timeout: 10 * time.Second}
	pending := h.q.PendingExternal()
	if diff := cmp.Diff([]string{"x1", "x2"}, taskIDs(pending)); diff != "" {
		t.Fatalf("pending (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(want, pending[0]); diff != "" {
		t.Errorf("task (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(pending, hooked); diff != "" {
		t.Errorf("hook saw (-want,+got):\n%s", diff)
	}
	if got := pending[0].Remaining(t0.Add(4 * time.Second)); got != 6*time.Second {
		t.Errorf("Remaining = %v, want 6s", got)
	}

	res := Result{Success: true, Output: []byte(`{"exit":0}`)}
	if err := h.q.Complete("x1", res); err != nil {
		t.Fatal(err)
	}
	if o := h.outcome(tk); o.State != StateSucceeded || string(o.Result.Output) != `{"exit":0}` {
		t.Errorf("outcome = %+v", o)
	}
	if diff := cmp.Diff([]string{"x2", "x3"}, taskIDs(h.q.PendingExternal())); diff != "" {
		t.Errorf("pending after complete (-want,+got):\n%s", diff)
	}
	if err := h.q.Complete("x1", res); !errors.Is(err, ErrNotFound) {
		t.Errorf("second Complete = %v, want ErrNotFound", err)
	}
	log := h.eventLog(EventExternalTaskPending, EventExternalTaskCompleted)
	wantLog := []string{"external_task_pending x1", "external_task_pending x2", "external_task_completed x1", "external_task_pending x3"}
	if diff := cmp.Diff(wantLog, log); diff != "" {
		t.Errorf("events (-want,+got):\n%s", diff)
	}
}

func TestExternalTimeoutAndStaleAttempt(t *testing.T) {
	cfg := externalConfig()
	cfg.Retry = RetryPolicy{Strategy: RetryFixed, FixedDelay: time.Second, MaxRetries: 1}
	h := newHarness(t, cfg)
	tk := h.submit(Command{ID: "x", SessionKey: "s"})
	h.step(10 * time.Second) // attempt 1 times out, retry in 1s
	if got := h.q.PendingExternal(); len(got) != 0 {
		t.Fatalf("pending after timeout = %v", got)
	}
	if err := h.q.CompleteAttempt("x", 1, Result{Success: true}); !errors.Is(err, ErrStaleAttempt) {
		t.Errorf("late completion while retrying = %v, want ErrStaleAttempt", err)
	}
	if err := h.q.Complete("x", Result{Success: true}); !errors.Is(err, ErrNotPending) {
		t.Errorf("unfenced completion while retrying = %v, want ErrNotPending", err)
	}
	h.step(time.Second)
	if got := h.q.PendingExternal(); len(got) != 1 || got[0].Attempt != 2 {
		t.Fatalf("pending = %+v, want attempt 2", got)
	}
	if err := h.q.CompleteAttempt("x", 1, Result{Success: true}); !errors.Is(err, ErrStaleAttempt) {
		t.Errorf("stale completion = %v, want ErrStaleAttempt", err)
	}
	h.step(10 * time.Second) // attempt 2 times out: out of retries
	o := h.outcome(tk)
	if o.State != StateDeadLettered || !errors.Is(o.Err, ErrTimeout) || o.Attempts != 2 {
		t.Errorf("outcome = %+v, want DeadLettered by timeout after 2 attempts", o)
	}
	want := []string{"started x", "timeout x", "retry x", "started x", "timeout x", "dead_lettered x"}
	if diff := cmp.Diff(want, h.eventLog(EventStarted, EventTimeout, EventRetry, EventDeadLettered)); diff != "" {
		t.Errorf("events (-want,+got):\n%s", diff)
	}
}

func TestExternalFailAttempt(t *testing.T) {
	tests := map[string]struct {
		err       error
		wantState State
	}{
		"retryable failure retries": {err: errBoom, wantState: StateRetrying},
		"permanent failure ends":    {err: Permanent(errBoom), wantState: StateFailed},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, externalConfig())
			tk := h.submit(Command{ID: "x", SessionKey: "s"})
			if err := h.q.FailAttempt("x", 1, tc.err); err != nil {
				t.Fatal(err)
			}
			if got := tk.State(); got != tc.wantState {
				t.Errorf("state = %s, want %s", got, tc.wantState)
			}
		})
	}
}

func TestExternalCompleteUnsuccessfulResultRetries(t *testing.T) {
	h := newHarness(t, externalConfig())
	tk := h.submit(Command{ID: "x", SessionKey: "s"})
	if err := h.q.CompleteAttempt("x", 1, Result{Error: "exit 2", ExitCode: 2}); err != nil {
		t.Fatal(err)
	}
	if tk.State() != StateRetrying {
		t.Errorf("state = %s, want Retrying", tk.State())
	}
	if got := h.eventLog(EventFailed); len(got) != 1 {
		t.Errorf("failed events = %v", got)
	}
}

func TestCompleteErrors(t *testing.T) {
	h := newHarness(t, oneLane(LaneConfig{MaxConcurrency: 1}))
	h.submit(Command{ID: "internal", SessionKey: "s"})
	h.submit(Command{ID: "queued", SessionKey: "s"})
	tests := map[string]struct {
		id      string
		attempt int
		want    error
	}{
		"unknown":            {id: "nope", want: ErrNotFound},
		"internal command":   {id: "internal", want: ErrNotPending},
		"queued command":     {id: "queued", want: ErrNotPending},
		"bad attempt number": {id: "internal", attempt: -1, want: ErrInvalidCommand},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var err error
			if tc.attempt != 0 {
				err = h.q.CompleteAttempt(tc.id, tc.attempt, Result{})
			} else {
				err = h.q.Complete(tc.id, Result{})
			}
			if !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestAdopt(t *testing.T) {
	cfg := externalConfig()
	cfg.Lanes[0].MaxConcurrency = 1
	h := newHarness(t, cfg)
	adopted, err := h.q.Adopt(Command{ID: "old", SessionKey: "s", Type: "bash"}, 2, t0.Add(-4*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	h.submit(Command{ID: "new", SessionKey: "s"})
	want := []ExternalTask{{ID: "old", Attempt: 2, SessionKey: "s", Lane: "execute", CommandType: "bash",
		CreatedAt: t0.Add(-4 * time.Second), StartedAt: t0.Add(-4 * time.Second), Deadline: t0.Add(6 * time.Second),
		Timeout: 10 * time.Second}}
	if diff := cmp.Diff(want, h.q.PendingExternal()); diff != "" {
		t.Fatalf("pending (-want,+got):\n%s", diff)
	}
	if err := h.q.CompleteAttempt("old", 1, Result{Success: true}); !errors.Is(err, ErrStaleAttempt) {
		t.Errorf("attempt 1 = %v, want ErrStaleAttempt", err)
	}
	if err := h.q.CompleteAttempt("old", 2, Result{Success: true}); err != nil {
		t.Fatal(err)
	}
	if o := h.outcome(adopted); o.State != StateSucceeded || o.Attempts != 2 {
		t.Errorf("outcome = %+v", o)
	}
	if diff := cmp.Diff([]string{"new"}, taskIDs(h.q.PendingExternal())); diff != "" {
		t.Errorf("pending (-want,+got):\n%s", diff)
	}
	if _, err := h.q.Adopt(Command{ID: "bad"}, 0, t0); !errors.Is(err, ErrInvalidCommand) {
		t.Errorf("Adopt attempt 0 = %v, want ErrInvalidCommand", err)
	}
}

// An adopted command whose time ran out while the process was down times out
// at the next timer tick and goes through retry.
func TestAdoptExpired(t *testing.T) {
	h := newHarness(t, externalConfig())
	tk, err := h.q.Adopt(Command{ID: "old", SessionKey: "s"}, 1, t0.Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	h.step(0)
	if got := tk.State(); got != StateRetrying {
		t.Errorf("state = %s, want Retrying", got)
	}
}

func TestHybridRunsInternallyAndEmitsExternalEvents(t *testing.T) {
	h := newHarness(t, oneLane(LaneConfig{Mode: Hybrid}))
	tk := h.submit(Command{ID: "h", SessionKey: "s"})
	if len(h.q.PendingExternal()) != 0 {
		t.Error("a Hybrid attempt is listed as an external task")
	}
	if err := h.q.Complete("h", Result{Success: true}); !errors.Is(err, ErrNotPending) {
		t.Errorf("Complete on Hybrid = %v, want ErrNotPending", err)
	}
	h.succeed("h")
	if h.outcome(tk).State != StateSucceeded {
		t.Error("not succeeded")
	}
	want := []string{"external_task_pending h", "external_task_completed h"}
	if diff := cmp.Diff(want, h.eventLog(EventExternalTaskPending, EventExternalTaskCompleted)); diff != "" {
		t.Errorf("events (-want,+got):\n%s", diff)
	}
}

func taskIDs(ts []ExternalTask) []string {
	var ids []string
	for _, x := range ts {
		ids = append(ids, x.ID)
	}
	return ids
}

// The hook may call back into the queue: here it completes every task as it
// appears, which in turn starts the next one.
func TestExternalHookMayCompleteInline(t *testing.T) {
	var q *Queue
	var seen []string
	h := newHarness(t, externalConfig(), func(o *Options) {
		o.OnExternalTask = func(x ExternalTask) {
			seen = append(seen, x.ID)
			if err := q.CompleteAttempt(x.ID, x.Attempt, Result{Success: true}); err != nil {
				t.Errorf("Complete from hook: %v", err)
			}
		}
	})
	q = h.q
	var tickets []*Ticket
	for _, id := range []string{"x1", "x2", "x3", "x4"} {
		tickets = append(tickets, h.submit(Command{ID: id, SessionKey: "s"}))
	}
	for _, tk := range tickets {
		if o := h.outcome(tk); o.State != StateSucceeded {
			t.Errorf("%s: %+v", tk.ID(), o)
		}
	}
	if diff := cmp.Diff([]string{"x1", "x2", "x3", "x4"}, seen); diff != "" {
		t.Errorf("hook order (-want,+got):\n%s", diff)
	}
	var last uint64
	for _, e := range h.events() {
		if e.Seq != last+1 {
			t.Fatalf("event seq %d after %d", e.Seq, last)
		}
		last = e.Seq
	}
}

// A command marked External runs as an external task in an Internal lane,
// with no handler, while the lane's other commands still go to the handler.
func TestCommandExternalOverridesLaneMode(t *testing.T) {
	var hooked []string
	h := newHarness(t, oneLane(LaneConfig{Name: "execute", Mode: Internal, MaxConcurrency: 2}), func(o *Options) {
		o.OnExternalTask = func(x ExternalTask) { hooked = append(hooked, x.ID) }
		o.Handler = nil
	})
	if _, err := h.q.Submit(Command{ID: "plain", SessionKey: "s", Type: "bash"}); !errors.Is(err, ErrNoHandler) {
		t.Fatalf("Submit without handler = %v, want ErrNoHandler", err)
	}
	tk := h.submit(Command{ID: "x1", SessionKey: "s", Type: "bash", External: true})
	if diff := cmp.Diff([]string{"x1"}, hooked); diff != "" {
		t.Fatalf("hooked (-want,+got):\n%s", diff)
	}
	if err := h.q.CompleteAttempt("x1", 1, Result{Success: true}); err != nil {
		t.Fatal(err)
	}
	if o := h.outcome(tk); o.State != StateSucceeded {
		t.Errorf("outcome = %+v, want Succeeded", o)
	}
}

// TestExternalSettle: a result the durable record kept after the queue's
// timeout won the race ends the command as that result, counted once.
func TestExternalSettle(t *testing.T) {
	tests := map[string]struct {
		// before moves the command to where Settle finds it.
		before    func(h *harness)
		result    Result
		wantState State
		// completed, failed, cancelled are the lane's counts after Settle.
		wantCounts [3]uint64
	}{
		"success while waiting for a retry": {
			before:    func(h *harness) { h.step(10 * time.Second) },
			result:    Result{Success: true},
			wantState: StateSucceeded, wantCounts: [3]uint64{1, 0, 0},
		},
		"success while the next attempt is pending": {
			before:    func(h *harness) { h.step(11 * time.Second) },
			result:    Result{Success: true},
			wantState: StateSucceeded, wantCounts: [3]uint64{1, 0, 0},
		},
		"failure while waiting for a retry ends without retries": {
			before:    func(h *harness) { h.step(10 * time.Second) },
			result:    Result{Error: "exit 2", ExitCode: 2},
			wantState: StateFailed, wantCounts: [3]uint64{0, 1, 0},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := externalConfig()
			cfg.Retry = RetryPolicy{Strategy: RetryFixed, FixedDelay: time.Second, MaxRetries: 3}
			h := newHarness(t, cfg)
			tk := h.submit(Command{ID: "x", SessionKey: "s"})
			tc.before(h)
			if err := h.q.Settle("x", tc.result); err != nil {
				t.Fatal(err)
			}
			if o := h.outcome(tk); o.State != tc.wantState {
				t.Errorf("outcome = %+v, want %s", o, tc.wantState)
			}
			h.step(time.Minute)
			st := h.q.Stats()
			lane := st.Lanes[0]
			if got := [3]uint64{lane.Completed, lane.Failed, lane.Cancelled}; got != tc.wantCounts {
				t.Errorf("completed, failed, cancelled = %v, want %v", got, tc.wantCounts)
			}
			if st.Active != 0 || st.Pending != 0 || len(h.q.PendingExternal()) != 0 {
				t.Errorf("after Settle: active %d, pending %d, pending external %v", st.Active, st.Pending, h.q.PendingExternal())
			}
			if err := h.q.Settle("x", tc.result); !errors.Is(err, ErrNotFound) {
				t.Errorf("second Settle = %v, want ErrNotFound", err)
			}
		})
	}
}
