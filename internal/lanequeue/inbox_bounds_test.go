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
	"strings"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// While a run is active, drop: summarize keeps at most MaxSummaryLines
// short lines and counts the messages dropped past them; the summary turn
// says how many more there were.
func TestInboxSummaryIsBounded(t *testing.T) {
	h := newInboxHarness(t, nil)
	h.in = NewInbox(InboxOptions{Clock: h.clock, IDs: &SequentialIDs{Prefix: "run"}, OnEvent: h.record, MaxSummaryLines: 3})
	h.configure(MessageOptions{Mode: ModeCollect, Debounce: 0, Cap: 1, Drop: DropSummarize}, false)
	h.post("busy")
	run := h.next()
	long := strings.Repeat("x", 10<<10)
	for i := range 60 {
		h.post(fmt.Sprintf("m%d %s", i, long))
	}
	st := h.in.State("s")
	if len(st.Dropped) != 3 || st.DroppedMore != 56 {
		t.Fatalf("kept %d summary lines and counted %d more, want 3 and 56", len(st.Dropped), st.DroppedMore)
	}
	held := 0
	for _, m := range append(st.Dropped, st.Queued...) {
		held += len(m.Text)
	}
	if held > 3*(SummaryLineLength*3)+len(long)+10 {
		t.Errorf("the inbox holds %d bytes of text after 60 posts of 10 KiB", held)
	}
	h.step(time.Second)
	h.in.RunFinished("s", run.RunID)
	summary := h.next()
	lines := strings.Split(summary.Text, "\n")
	if !summary.Summary || len(lines) != 5 || !strings.Contains(lines[0], "59 queued messages were dropped") ||
		lines[4] != "- … and 56 more dropped" {
		t.Errorf("summary text:\n%s", summary.Text)
	}
}

// Past MaxSessionBytes a message is refused with ErrInboxFull and nothing
// changes; once a turn took the queued messages, it fits again.
func TestInboxRefusesPastItsBytes(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	var evs []InboxEvent
	in := NewInbox(InboxOptions{Clock: clk, IDs: &SequentialIDs{Prefix: "run"}, MaxSessionBytes: 1000,
		OnEvent: func(ev InboxEvent) { evs = append(evs, ev) }})
	if err := in.ConfigureSession("s", MessageOptions{Mode: ModeFollowup, Cap: 100, Drop: DropOld}, false); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := in.Post("s", Message{Text: strings.Repeat("a", 400)}); err != nil {
			t.Fatal(err)
		}
	}
	before := in.State("s")
	if _, err := in.Post("s", Message{Text: strings.Repeat("b", 400)}); !errors.Is(err, ErrInboxFull) {
		t.Fatalf("a post past the bound: %v, want ErrInboxFull", err)
	}
	if after := in.State("s"); len(after.Queued) != len(before.Queued) {
		t.Errorf("the refused post changed the inbox: %d queued, was %d", len(after.Queued), len(before.Queued))
	}
	var run string
	for _, ev := range evs {
		if ev.Type == InboxTurn {
			run = ev.RunID
		}
	}
	in.RunFinished("s", run) // the next turn takes one queued message
	if _, err := in.Post("s", Message{Text: strings.Repeat("b", 400)}); err != nil {
		t.Errorf("after a turn took a message: %v", err)
	}
}
