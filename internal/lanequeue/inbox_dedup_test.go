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
	"strings"
	"testing"
	"time"
)

func (h *inboxHarness) postID(id, text string) PostResult {
	h.t.Helper()
	r, err := h.in.Post("s", Message{ID: id, Text: text})
	if err != nil {
		h.t.Fatalf("Post(%q): %v", id, err)
	}
	return r
}

// A re-delivered message (same ID) that is still queued, or was taken for
// a turn, is reported as a duplicate and not queued again; messages
// without an ID are never duplicates.
func TestInboxIgnoresARedeliveredMessage(t *testing.T) {
	h := newInboxHarness(t, nil)
	h.configure(MessageOptions{Mode: ModeFollowup, Debounce: time.Second, Cap: 20, Drop: DropSummarize}, false)
	h.postID("m1", "start")
	run := h.next()
	h.notice()
	if res := h.postID("m2", "and the lint"); !res.Queued || res.Duplicate {
		t.Fatalf("first delivery = %+v, want queued", res)
	}
	h.notice()
	for _, id := range []string{"m2", "m1"} {
		if res := h.postID(id, "again"); !res.Duplicate || res.Queued || res.Steered || res.Dropped {
			t.Errorf("re-delivery of %s = %+v, want only duplicate", id, res)
		}
	}
	h.noNotice()
	if n := h.in.Queued("s"); n != 1 {
		t.Errorf("queued = %d, want 1", n)
	}
	for range 2 {
		if res := h.postID("", "no id"); !res.Queued || res.Duplicate {
			t.Errorf("a message without an id = %+v, want queued", res)
		}
	}
	if n := h.in.Queued("s"); n != 3 {
		t.Errorf("queued = %d, want 3", n)
	}

	// m2 was taken for a turn: still a duplicate.
	h.in.RunFinished("s", run.RunID)
	h.step(time.Second)
	if turn := h.next(); turn.Type != InboxTurn || turn.Messages[0].ID != "m2" {
		t.Fatalf("turn = %+v, want m2's", turn)
	}
	if res := h.postID("m2", "and the lint"); !res.Duplicate {
		t.Errorf("re-delivery of a message taken for a turn = %+v, want duplicate", res)
	}
}

// Each session remembers the last MaxRememberedIDs IDs it took (here
// steered, so not queued), of at most MaxRememberedIDLength bytes; older
// ones are forgotten and a re-delivery of them is taken again.
func TestInboxRemembersABoundedNumberOfIDs(t *testing.T) {
	h := newInboxHarness(t, nil)
	h.in = NewInbox(InboxOptions{Clock: h.clock, IDs: &SequentialIDs{Prefix: "run"}, OnEvent: h.record, MaxRememberedIDs: 2})
	h.configure(MessageOptions{Mode: ModeSteer, Debounce: time.Second, Cap: 20, Drop: DropSummarize}, true)
	h.postID("s0", "start")
	h.next()
	long := strings.Repeat("x", MaxRememberedIDLength+1)
	for _, id := range []string{"s1", "s2", "s3", long} {
		if res := h.postID(id, "steer "+id); !res.Steered {
			t.Fatalf("post %s = %+v, want steered", id, res)
		}
		h.next()
	}
	// The duplicates first: a message taken again is remembered again.
	for _, c := range []struct {
		id  string
		dup bool
	}{{"s3", true}, {"s2", true}, {"s1", false}, {"s0", false}, {long, false}} {
		if res := h.postID(c.id, "again"); res.Duplicate != c.dup {
			t.Errorf("re-delivery of %.10s = %+v, want duplicate %v", c.id, res, c.dup)
		}
	}
}
