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
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	testingclock "k8s.io/utils/clock/testing"
)

// inboxHarness drives an Inbox on a fake clock and collects its events:
// the queued and waiting notices apart from the others.
type inboxHarness struct {
	t       *testing.T
	clock   *testingclock.FakeClock
	in      *Inbox
	evs     chan InboxEvent
	notices chan InboxEvent
}

func newInboxHarness(t *testing.T, q *Queue) *inboxHarness {
	h := &inboxHarness{t: t, clock: testingclock.NewFakeClock(t0), evs: make(chan InboxEvent, 100),
		notices: make(chan InboxEvent, 100)}
	h.in = NewInbox(InboxOptions{Clock: h.clock, IDs: &SequentialIDs{Prefix: "run"}, Queue: q, OnEvent: h.record})
	return h
}

func (h *inboxHarness) record(ev InboxEvent) {
	if ev.Type == InboxQueued || ev.Type == InboxWaiting {
		h.notices <- ev
		return
	}
	h.evs <- ev
}

// notice returns the next queued or waiting event.
func (h *inboxHarness) notice() InboxEvent {
	h.t.Helper()
	select {
	case ev := <-h.notices:
		return ev
	case <-time.After(5 * time.Second):
		h.t.Fatal("no inbox notice")
		return InboxEvent{}
	}
}

// noNotice checks that no queued or waiting event arrives for a moment.
func (h *inboxHarness) noNotice() {
	h.t.Helper()
	select {
	case ev := <-h.notices:
		h.t.Fatalf("unexpected notice %+v", ev)
	case <-time.After(50 * time.Millisecond):
	}
}

func (h *inboxHarness) configure(o MessageOptions, steers bool) {
	h.t.Helper()
	if err := h.in.ConfigureSession("s", o, steers); err != nil {
		h.t.Fatal(err)
	}
}

func (h *inboxHarness) post(text string) PostResult {
	h.t.Helper()
	return h.postTo(text, "", "")
}

func (h *inboxHarness) postTo(text, channel, thread string) PostResult {
	h.t.Helper()
	r, err := h.in.Post("s", Message{Text: text, Channel: channel, Thread: thread})
	if err != nil {
		h.t.Fatalf("Post(%q): %v", text, err)
	}
	return r
}

// next returns the next event; timers fire on their own goroutine.
func (h *inboxHarness) next() InboxEvent {
	h.t.Helper()
	select {
	case ev := <-h.evs:
		return ev
	case <-time.After(5 * time.Second):
		h.t.Fatal("no inbox event")
		return InboxEvent{}
	}
}

// none checks that no event arrives for a moment.
func (h *inboxHarness) none() {
	h.t.Helper()
	select {
	case ev := <-h.evs:
		h.t.Fatalf("unexpected event %+v", ev)
	case <-time.After(50 * time.Millisecond):
	}
}

// step moves the fake clock.
func (h *inboxHarness) step(d time.Duration) { h.clock.Step(d) }

func texts(ev InboxEvent) []string {
	out := make([]string, len(ev.Messages))
	for i, m := range ev.Messages {
		out[i] = m.Text
	}
	return out
}

func TestInboxCollectStartsAnIdleSessionAtOnce(t *testing.T) {
	h := newInboxHarness(t, nil)
	res := h.post("fix the test")
	if !res.Queued {
		t.Errorf("result = %+v, want queued", res)
	}
	ev := h.next() // no clock step: the debounce does not delay an idle session
	if ev.Type != InboxTurn || !cmp.Equal(texts(ev), []string{"fix the test"}) || ev.Waited != 0 {
		t.Fatalf("event = %+v, want a turn with the message, not waited", ev)
	}
	if run, ok := h.in.ActiveRun("s"); !ok || run != ev.RunID {
		t.Errorf("active run = %q %v, want %q", run, ok, ev.RunID)
	}
}

// Whatever the mode, a message to an idle session with nothing waiting
// starts its turn at once; the debounce only coalesces what arrives while a
// run is active or other messages wait.
func TestInboxEveryModeStartsAnIdleSessionAtOnce(t *testing.T) {
	for _, mode := range []MessageMode{ModeFollowup, ModeSteer, ModeSteerBacklog, ModeCollect, ModeInterrupt} {
		for _, steers := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s steers=%v", mode, steers), func(t *testing.T) {
				h := newInboxHarness(t, nil)
				h.configure(MessageOptions{Mode: mode, Debounce: time.Second, Cap: 20, Drop: DropSummarize}, steers)
				if res := h.post("fix the test"); !res.Queued {
					t.Errorf("result = %+v, want queued", res)
				}
				ev := h.next() // no clock step
				if ev.Type != InboxTurn || !cmp.Equal(texts(ev), []string{"fix the test"}) || ev.Waited != 0 {
					t.Fatalf("event = %+v, want a turn with the message at once", ev)
				}
				// A second message while the run is active waits for it
				// and then for the debounce.
				h.post("and the lint")
				if steers && (mode == ModeSteer || mode == ModeSteerBacklog) {
					if ev := h.next(); ev.Type != InboxSteer {
						t.Fatalf("event = %+v, want the steer", ev)
					}
					if mode == ModeSteer {
						return // steered only
					}
				}
				h.in.RunFinished("s", ev.RunID)
				if mode == ModeInterrupt {
					return // it aborted the run and started its own turn
				}
				h.step(999 * time.Millisecond)
				h.none()
				h.step(time.Millisecond)
				if ev := h.next(); ev.Type != InboxTurn || !cmp.Equal(texts(ev), []string{"and the lint"}) {
					t.Fatalf("event = %+v, want the second message's turn after the debounce", ev)
				}
			})
		}
	}
}

func TestInboxCollectMergesWhatArrivesDuringARun(t *testing.T) {
	h := newInboxHarness(t, nil)
	h.post("start")
	run := h.next()
	burst := []string{"fix the test", "also the lint", "and rebase", "then push", "thanks"}
	for _, m := range burst {
		h.post(m)
		h.step(200 * time.Millisecond)
	}
	h.none() // the run is active
	h.in.RunFinished("s", run.RunID)
	h.step(599 * time.Millisecond)
	h.none() // 799ms since the last message
	// A message to an idle session that has messages waiting joins them and
	// restarts the quiet.
	h.post("and tag it")
	h.step(999 * time.Millisecond)
	h.none()
	h.step(time.Millisecond)
	ev := h.next()
	if ev.Type != InboxTurn || ev.RunID == "" || ev.RunID == run.RunID {
		t.Fatalf("event = %+v, want a new turn", ev)
	}
	want := append(slices.Clone(burst), "and tag it")
	if diff := cmp.Diff(want, texts(ev)); diff != "" {
		t.Errorf("merged messages (-want,+got):\n%s", diff)
	}
	if ev.Text != strings.Join(want, "\n") {
		t.Errorf("text = %q", ev.Text)
	}
	if ev.Waited != 2599*time.Millisecond || !ev.Slow {
		t.Errorf("waited %v slow %v, want 2.599s and slow", ev.Waited, ev.Slow)
	}
	if run, ok := h.in.ActiveRun("s"); !ok || run != ev.RunID {
		t.Errorf("active run = %q %v", run, ok)
	}
}

func TestInboxCollectDeliversEachChannelAndThreadSeparately(t *testing.T) {
	h := newInboxHarness(t, nil)
	h.postTo("start", "slack", "t1")
	run := h.next()
	h.postTo("a1", "slack", "t1")
	h.postTo("b1", "discord", "")
	h.postTo("a2", "slack", "t1")
	h.postTo("c1", "slack", "t2")
	h.in.RunFinished("s", run.RunID)
	h.step(time.Second)
	first := h.next()
	if diff := cmp.Diff([]string{"a1", "a2"}, texts(first)); diff != "" || first.Channel != "slack" || first.Thread != "t1" {
		t.Fatalf("first turn %v on %s/%s (-want,+got):\n%s", texts(first), first.Channel, first.Thread, diff)
	}
	h.none() // one run at a time
	h.in.RunFinished("s", first.RunID)
	second := h.next()
	if got := texts(second); !cmp.Equal(got, []string{"b1"}) {
		t.Errorf("second turn = %v, want [b1]", got)
	}
	h.in.RunFinished("s", second.RunID)
	if got := texts(h.next()); !cmp.Equal(got, []string{"c1"}) {
		t.Errorf("third turn = %v, want [c1]", got)
	}
}

func TestInboxFollowupRunsEachMessageAfterTheCurrentRun(t *testing.T) {
	h := newInboxHarness(t, nil)
	h.configure(MessageOptions{Mode: ModeFollowup, Debounce: 0, Cap: 20, Drop: DropSummarize}, false)
	h.post("one")
	h.post("two")
	h.post("three")
	var got []string
	var last string
	for range 3 {
		ev := h.next()
		got = append(got, texts(ev)...)
		h.none()
		h.in.RunFinished("s", ev.RunID)
		last = ev.RunID
	}
	if diff := cmp.Diff([]string{"one", "two", "three"}, got); diff != "" {
		t.Errorf("turns (-want,+got):\n%s", diff)
	}
	h.in.RunFinished("s", last) // already ended: ignored
	h.none()
}

func TestInboxSteerCancelsTheRunsQueuedCommandsOnly(t *testing.T) {
	qh := newHarness(t, oneLane(LaneConfig{Name: "execute", Mode: Internal, MaxConcurrencyPerSession: 1}))
	h := newInboxHarness(t, qh.q)
	h.configure(MessageOptions{Mode: ModeSteer, Debounce: 0, Cap: 20, Drop: DropSummarize}, true)
	h.post("build the thing")
	turn := h.next()

	started := qh.submit(Command{ID: "c1", SessionKey: "s", Type: "bash", RunID: turn.RunID})
	queued := []*Ticket{
		qh.submit(Command{ID: "c2", SessionKey: "s", Type: "bash", RunID: turn.RunID}),
		qh.submit(Command{ID: "c3", SessionKey: "s", Type: "bash", RunID: turn.RunID}),
	}
	other := qh.submit(Command{ID: "c4", SessionKey: "s", Type: "bash", RunID: "another-run"})
	if diff := cmp.Diff([]string{"c1"}, qh.running()); diff != "" {
		t.Fatalf("running (-want,+got):\n%s", diff)
	}

	res := h.post("no, build the other thing")
	if !res.Steered || res.Queued {
		t.Errorf("result = %+v, want steered only", res)
	}
	ev := h.next()
	if ev.Type != InboxSteer || ev.RunID != turn.RunID || ev.Text != "no, build the other thing" {
		t.Fatalf("event = %+v, want a steer of %s", ev, turn.RunID)
	}
	for _, tk := range queued {
		if s := tk.State(); s != StateCancelled {
			t.Errorf("%s = %s, want Cancelled", tk.ID(), s)
		}
	}
	if s := started.State(); s != StateRunning {
		t.Errorf("started command = %s, want still Running", s)
	}
	if s := other.State(); s != StateQueued {
		t.Errorf("another run's command = %s, want Queued", s)
	}
	qh.succeed("c1")
	if s := started.State(); s != StateSucceeded {
		t.Errorf("started command = %s, want Succeeded", s)
	}
	h.none() // a steer starts no turn
}

func TestInboxSteerFallsBackToFollowup(t *testing.T) {
	h := newInboxHarness(t, nil)
	h.configure(MessageOptions{Mode: ModeSteer, Debounce: 0, Cap: 20, Drop: DropSummarize}, false)
	first := h.post("first")
	if !first.Queued {
		t.Errorf("with no run a steer is queued: %+v", first)
	}
	run := h.next()
	if res := h.post("steer me"); res.Steered || !res.Queued {
		t.Errorf("a runtime that takes no steers gets a followup: %+v", res)
	}
	h.none()
	h.in.RunFinished("s", run.RunID)
	if ev := h.next(); ev.Type != InboxTurn || ev.Text != "steer me" {
		t.Errorf("event = %+v, want a followup turn", ev)
	}
}

func TestInboxSteerBacklogSteersAndKeepsAFollowup(t *testing.T) {
	h := newInboxHarness(t, nil)
	h.configure(MessageOptions{Mode: ModeSteerBacklog, Debounce: 0, Cap: 20, Drop: DropSummarize}, true)
	h.post("start")
	run := h.next()
	if res := h.post("redirect to B"); !res.Steered || !res.Queued {
		t.Errorf("result = %+v, want steered and queued", res)
	}
	if ev := h.next(); ev.Type != InboxSteer || ev.RunID != run.RunID {
		t.Fatalf("event = %+v, want steer", ev)
	}
	h.none()
	h.in.RunFinished("s", run.RunID)
	if ev := h.next(); ev.Type != InboxTurn || ev.Text != "redirect to B" {
		t.Errorf("event = %+v, want the backlog turn", ev)
	}
}

func TestInboxInterruptAbortsAndRunsTheNewest(t *testing.T) {
	h := newInboxHarness(t, nil)
	h.configure(MessageOptions{Mode: ModeFollowup, Debounce: time.Second, Cap: 20, Drop: DropSummarize}, false)
	h.post("long job")
	h.step(time.Second)
	run := h.next()
	h.post("queued 1")
	h.post("queued 2")
	if _, err := h.in.Post("s", Message{Text: "/queue interrupt"}); err != nil {
		t.Fatal(err)
	}
	res := h.post("stop, do this instead")
	if res.Aborted != run.RunID {
		t.Errorf("aborted %q, want %q", res.Aborted, run.RunID)
	}
	if ev := h.next(); ev.Type != InboxAbort || ev.RunID != run.RunID {
		t.Fatalf("event = %+v, want abort of %s", ev, run.RunID)
	}
	if ev := h.next(); ev.Type != InboxDropped || !ev.Superseded || ev.Count != 2 || !cmp.Equal(texts(ev), []string{"queued 1", "queued 2"}) {
		t.Fatalf("event = %+v, want the two waiting messages dropped, superseded", ev)
	}
	ev := h.next() // at once: no debounce
	if ev.Type != InboxTurn || !cmp.Equal(texts(ev), []string{"stop, do this instead"}) {
		t.Fatalf("event = %+v, want a turn with the newest message only", ev)
	}
	h.in.RunFinished("s", run.RunID) // the aborted run reporting late changes nothing
	h.none()
	if n := h.in.Queued("s"); n != 0 {
		t.Errorf("queued = %d, want 0: the newest message superseded the others", n)
	}
}

// An interrupt that drops the messages waiting for a turn says so: one
// dropped event, superseded, with their ids, the summary lines of those
// dropped earlier, and the count of all of them, also those past the
// summary's lines. An interrupt with nothing waiting drops nothing.
func TestInboxInterruptReportsTheMessagesItDrops(t *testing.T) {
	h := newInboxHarness(t, nil)
	h.in.maxLines = 1
	h.configure(MessageOptions{Mode: ModeFollowup, Debounce: time.Second, Cap: 1, Drop: DropSummarize}, false)
	h.post("long job")
	run := h.next()
	for _, id := range []string{"m1", "m2", "m3", "m4"} {
		if _, err := h.in.Post("s", Message{ID: id, Text: "text of " + id}); err != nil {
			t.Fatal(err)
		}
	}
	// Cap 1 with summarize and one summary line: m1 is a summary line, m2
	// is counted past it, m3 too, m4 is queued.
	if _, err := h.in.Post("s", Message{Text: "/queue interrupt"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.in.Post("s", Message{ID: "new", Text: "do this instead"}); err != nil {
		t.Fatal(err)
	}
	if ev := h.next(); ev.Type != InboxAbort {
		t.Fatalf("event = %+v, want the abort", ev)
	}
	ev := h.next()
	ids := make([]string, len(ev.Messages))
	for i, m := range ev.Messages {
		ids[i] = m.ID
	}
	if ev.Type != InboxDropped || !ev.Superseded || ev.RunID != run.RunID || ev.Count != 4 || !cmp.Equal(ids, []string{"m1", "m4"}) {
		t.Fatalf("event = %+v (ids %v), want m1 and m4 listed, 4 dropped, superseded by the interrupt of %s", ev, ids, run.RunID)
	}
	turn := h.next()
	if turn.Type != InboxTurn || !cmp.Equal(texts(turn), []string{"do this instead"}) {
		t.Fatalf("event = %+v, want the newest message's turn", turn)
	}
	// Nothing waits now: the next interrupt drops nothing and says nothing
	// of it.
	if _, err := h.in.Post("s", Message{ID: "newer", Text: "no, this"}); err != nil {
		t.Fatal(err)
	}
	if ev := h.next(); ev.Type != InboxAbort {
		t.Fatalf("event = %+v, want the abort", ev)
	}
	if ev := h.next(); ev.Type != InboxTurn {
		t.Fatalf("event = %+v, want the turn, no dropped event", ev)
	}
}

func TestInboxCapSummarizesDroppedMessages(t *testing.T) {
	h := newInboxHarness(t, nil)
	h.configure(MessageOptions{Mode: ModeCollect, Debounce: 0, Cap: 2, Drop: DropSummarize}, false)
	h.post("busy")
	run := h.next()
	long := strings.Repeat("word ", 60) // 300 characters
	for _, m := range []string{"m1", long, "m3", "m4", "m5"} {
		h.post(m)
	}
	if n := h.in.Queued("s"); n != 3 {
		t.Errorf("queued = %d, want 2 messages and the summary", n)
	}
	h.step(3 * time.Second)
	h.in.RunFinished("s", run.RunID)
	summary := h.next()
	// The inbox keeps only the summary line of a dropped message.
	if !summary.Summary || !cmp.Equal(texts(summary), []string{"m1", summaryLine(long), "m3"}) {
		t.Fatalf("first turn = %+v, want the summary of m1, the long one and m3", summary)
	}
	lines := strings.Split(summary.Text, "\n")
	if len(lines) != 4 || !strings.Contains(lines[0], "3 queued messages were dropped") || lines[1] != "- m1" || lines[3] != "- m3" {
		t.Errorf("summary text:\n%s", summary.Text)
	}
	if n := utf8.RuneCountInString(strings.TrimPrefix(lines[2], "- ")); n != SummaryLineLength || !strings.HasSuffix(lines[2], "…") {
		t.Errorf("long line has %d characters, want %d ending in …: %q", n, SummaryLineLength, lines[2])
	}
	if !summary.Slow || summary.Waited != 3*time.Second {
		t.Errorf("summary waited %v slow %v, want 3s and slow", summary.Waited, summary.Slow)
	}
	h.in.RunFinished("s", summary.RunID)
	if rest := h.next(); !cmp.Equal(texts(rest), []string{"m4", "m5"}) {
		t.Errorf("next turn = %v, want the kept messages merged", texts(rest))
	}
}

func TestInboxCapDropsOldOrNew(t *testing.T) {
	for _, tc := range []struct {
		drop        DropPolicy
		wantDropped string
		wantKept    []string
	}{
		{DropOld, "m1", []string{"m2", "m3"}},
		{DropNew, "m3", []string{"m1", "m2"}},
	} {
		t.Run(string(tc.drop), func(t *testing.T) {
			h := newInboxHarness(t, nil)
			h.configure(MessageOptions{Mode: ModeCollect, Debounce: 0, Cap: 2, Drop: tc.drop}, false)
			h.post("busy")
			run := h.next()
			h.post("m1")
			h.post("m2")
			if res := h.post("m3"); !res.Dropped {
				t.Errorf("result = %+v, want dropped", res)
			}
			if ev := h.next(); ev.Type != InboxDropped || ev.Messages[0].Text != tc.wantDropped {
				t.Errorf("event = %+v, want %s dropped", ev, tc.wantDropped)
			}
			h.in.RunFinished("s", run.RunID)
			if got := texts(h.next()); !cmp.Equal(got, tc.wantKept) {
				t.Errorf("turn = %v, want %v", got, tc.wantKept)
			}
		})
	}
}

// Every message taken for a turn is reported at once (a channel shows its
// typing indicator), and one that waits more than SlowWait while a run is
// active is reported once more, with its wait.
func TestInboxReportsQueuedAtOnceAndWaitingPastSlowWait(t *testing.T) {
	h := newInboxHarness(t, nil)
	h.postTo("start", "slack", "t1")
	if n := h.notice(); n.Type != InboxQueued || n.RunID != "" || !cmp.Equal(texts(n), []string{"start"}) || n.Channel != "slack" || n.Thread != "t1" {
		t.Errorf("notice = %+v, want start queued on slack/t1", n)
	}
	run := h.next()
	h.step(500 * time.Millisecond)
	h.post("a")
	if n := h.notice(); n.Type != InboxQueued || n.RunID != run.RunID || !cmp.Equal(texts(n), []string{"a"}) {
		t.Errorf("notice = %+v, want a queued behind %s", n, run.RunID)
	}
	h.step(time.Second)
	h.post("b")
	if n := h.notice(); n.Type != InboxQueued || !cmp.Equal(texts(n), []string{"b"}) {
		t.Errorf("notice = %+v, want b queued", n)
	}
	h.step(999 * time.Millisecond)
	h.noNotice() // a waited 1.999s
	h.step(time.Millisecond)
	if n := h.notice(); n.Type != InboxWaiting || n.RunID != run.RunID || !cmp.Equal(texts(n), []string{"a"}) || n.Waited != SlowWait {
		t.Errorf("notice = %+v, want a waiting 2s for %s", n, run.RunID)
	}
	h.step(time.Second)
	if n := h.notice(); n.Type != InboxWaiting || !cmp.Equal(texts(n), []string{"b"}) || n.Waited != SlowWait {
		t.Errorf("notice = %+v, want b waiting 2s", n)
	}
	h.step(10 * time.Second)
	h.noNotice() // each message is reported waiting once
	h.in.RunFinished("s", run.RunID)
	h.step(time.Second)
	if turn := h.next(); !cmp.Equal(texts(turn), []string{"a", "b"}) || !turn.Slow {
		t.Errorf("turn = %+v, want a and b, slow", turn)
	}
	h.noNotice()
}

// Messages that wait for the debounce on an idle session wait for no run:
// they are not reported waiting.
func TestInboxReportsNoWaitWithoutARun(t *testing.T) {
	h := newInboxHarness(t, nil)
	h.configure(MessageOptions{Mode: ModeFollowup, Debounce: 5 * time.Second, Cap: 20, Drop: DropSummarize}, false)
	h.post("start")
	run := h.next()
	h.notice() // start queued
	h.post("x")
	if n := h.notice(); n.Type != InboxQueued {
		t.Errorf("notice = %+v, want queued", n)
	}
	// The run ends at once: x now waits out the debounce with no run.
	h.in.RunFinished("s", run.RunID)
	h.step(3 * time.Second)
	h.noNotice()
	h.step(2 * time.Second)
	if turn := h.next(); turn.Type != InboxTurn || turn.Waited != 5*time.Second {
		t.Errorf("turn = %+v, want x after 5s", turn)
	}
	h.noNotice()
}

// queue, OpenClaw's legacy name of steer, is accepted in the session's
// options and in a /queue directive, and behaves and reads as steer.
func TestInboxQueueIsTheLegacyNameOfSteer(t *testing.T) {
	steer := MessageOptions{Mode: ModeSteer, Debounce: 0, Cap: 20, Drop: DropSummarize}
	tests := map[string]struct {
		defaults  MessageOptions
		directive string
	}{
		"session options": {defaults: MessageOptions{Mode: ModeQueue, Debounce: 0, Cap: 20, Drop: DropSummarize}},
		"directive":       {defaults: MessageOptions{Mode: ModeCollect, Debounce: 0, Cap: 20, Drop: DropSummarize}, directive: "/queue queue"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newInboxHarness(t, nil)
			h.configure(tc.defaults, true)
			if tc.directive != "" {
				if res := h.post(tc.directive); !res.Directive || !cmp.Equal(res.Options, steer) {
					t.Errorf("directive result = %+v, want options %+v", res, steer)
				}
			}
			if got := h.in.Options("s"); !cmp.Equal(got, steer) {
				t.Errorf("options = %+v, want %+v", got, steer)
			}
			h.post("start")
			run := h.next()
			if run.Type != InboxTurn {
				t.Fatalf("event = %+v, want a turn", run)
			}
			if res := h.post("go left instead"); !res.Steered || res.Queued {
				t.Errorf("result = %+v, want steered only", res)
			}
			if ev := h.next(); ev.Type != InboxSteer || ev.RunID != run.RunID || ev.Text != "go left instead" {
				t.Errorf("event = %+v, want a steer of %s", ev, run.RunID)
			}
			if n := h.in.Queued("s"); n != 0 {
				t.Errorf("queued = %d, want 0", n)
			}
		})
	}
}

func TestInboxQueueDirectives(t *testing.T) {
	h := newInboxHarness(t, nil)
	res := h.post("/queue steer-backlog debounce:2s cap:25 drop:old")
	want := MessageOptions{Mode: ModeSteerBacklog, Debounce: 2 * time.Second, Cap: 25, Drop: DropOld}
	if !res.Directive || !cmp.Equal(res.Options, want) {
		t.Errorf("result = %+v, want options %+v", res, want)
	}
	if got := h.post("/queue followup").Options; !cmp.Equal(got, MessageOptions{Mode: ModeFollowup, Debounce: 2 * time.Second, Cap: 25, Drop: DropOld}) {
		t.Errorf("a mode alone keeps the other options: %+v", got)
	}
	for _, bad := range []string{"/queue", "/queue bogus", "/queue collect cap:0", "/queue collect debounce:soon", "/queue collect drop:all", "/queue collect color:red", "/queue reset now"} {
		if _, err := h.in.Post("s", Message{Text: bad}); !errors.Is(err, ErrInvalidDirective) {
			t.Errorf("Post(%q) = %v, want ErrInvalidDirective", bad, err)
		}
	}
	if got := h.in.Options("s"); got.Mode != ModeFollowup {
		t.Errorf("invalid directives changed the options: %+v", got)
	}
	for _, reset := range []string{"/queue default", "/queue reset"} {
		h.post("/queue interrupt")
		if got := h.post(reset).Options; !cmp.Equal(got, DefaultMessageOptions()) {
			t.Errorf("%s: options = %+v, want the defaults", reset, got)
		}
	}
	h.none() // directives are not messages
	if h.in.Queued("s") != 0 {
		t.Error("a directive was queued as a message")
	}
	if res := h.post("please /queue this"); res.Directive {
		t.Error("only a standalone /queue command is a directive")
	}
}

func TestMessageOptionsValidate(t *testing.T) {
	if err := DefaultMessageOptions().Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	err := MessageOptions{Mode: "loud", Drop: "all", Debounce: -1}.Validate()
	for _, want := range []string{`mode "loud"`, `drop policy "all"`, "debounce", "cap"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not mention %s", err, want)
		}
	}
}

// A session's messages and commands replayed under the same fake clock and
// sequential ids give the same turns, run ids, timestamps and command
// events, bit for bit.
func TestInboxAndQueueReplayIsDeterministic(t *testing.T) {
	type record struct {
		Inbox []InboxEvent
		Queue []Event
	}
	script := func() record {
		h := newHarness(t, DefaultConfig(), func(o *Options) { o.IDs = &SequentialIDs{} })
		in := newInboxHarness(t, h.q)
		fc := h.clk
		in.in = NewInbox(InboxOptions{Clock: fc, IDs: &SequentialIDs{Prefix: "run"}, Queue: h.q, OnEvent: in.record})
		in.configure(MessageOptions{Mode: ModeCollect, Debounce: 100 * time.Millisecond, Cap: 2, Drop: DropSummarize}, true)
		var rec record
		for _, text := range []string{"fix the test", "and the lint"} {
			in.post(text)
			h.step(10 * time.Millisecond)
		}
		h.step(100 * time.Millisecond)
		turn := in.next()
		rec.Inbox = append(rec.Inbox, turn)
		for _, typ := range []string{"read", "read", "bash"} {
			h.submit(Command{SessionKey: "s", Type: typ, RunID: turn.RunID})
			h.step(5 * time.Millisecond)
		}
		for len(h.grants) > 0 {
			h.step(time.Millisecond)
			h.succeed(h.grants[0].t.id)
		}
		for _, text := range []string{"one", "two", "three"} {
			in.post(text)
		}
		in.in.RunFinished("s", turn.RunID)
		h.step(200 * time.Millisecond)
		rec.Inbox = append(rec.Inbox, in.next())
		rec.Queue = h.events()
		return rec
	}
	first, second := script(), script()
	if first.Inbox[0].RunID != "run-0000000001" || !first.Inbox[1].Summary {
		t.Fatalf("unexpected turns: %+v", first.Inbox)
	}
	if len(first.Queue) < 9 {
		t.Fatalf("only %d command events", len(first.Queue))
	}
	if diff := cmp.Diff(first, second); diff != "" {
		t.Errorf("replay differs (-first,+second):\n%s", diff)
	}
}
