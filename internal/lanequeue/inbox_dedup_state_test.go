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
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The remembered IDs are part of the inbox's state, oldest first, so that
// a restarted process refuses a message it took before; restored, they are
// older than the IDs taken since, and only the newest MaxRememberedIDs of
// both are kept.
func TestInboxStateKeepsTheRememberedIDs(t *testing.T) {
	h := newInboxHarness(t, nil)
	h.in = NewInbox(InboxOptions{Clock: h.clock, IDs: &SequentialIDs{Prefix: "run"}, OnEvent: h.record, MaxRememberedIDs: 3})
	h.configure(MessageOptions{Mode: ModeSteer, Debounce: time.Second, Cap: 20, Drop: DropSummarize}, true)
	h.postID("m0", "start")
	h.next()
	for _, id := range []string{"m1", "m2", "m3"} {
		if res := h.postID(id, "steer "+id); !res.Steered {
			t.Fatalf("post %s = %+v, want steered", id, res)
		}
		h.next()
	}
	st := h.in.State("s")
	if diff := cmp.Diff([]string{"m1", "m2", "m3"}, st.Recent); diff != "" {
		t.Fatalf("State().Recent (-want,+got):\n%s", diff)
	}
	if st.Empty() {
		t.Error("a state that remembers IDs is not empty")
	}

	// A new process: its inbox knows nothing until the state is restored.
	h2 := newInboxHarness(t, nil)
	h2.in = NewInbox(InboxOptions{Clock: h2.clock, IDs: &SequentialIDs{Prefix: "run"}, OnEvent: h2.record, MaxRememberedIDs: 3})
	h2.configure(MessageOptions{Mode: ModeSteer, Debounce: time.Second, Cap: 20, Drop: DropSummarize}, true)
	h2.postID("n0", "start")
	h2.next()
	h2.in.Restore("s", InboxState{Recent: st.Recent})
	if diff := cmp.Diff([]string{"m2", "m3", "n0"}, h2.in.State("s").Recent); diff != "" {
		t.Errorf("restored Recent (-want,+got):\n%s", diff)
	}
	for _, c := range []struct {
		id  string
		dup bool
	}{{"m3", true}, {"m2", true}, {"n0", true}, {"m1", false}} {
		if res := h2.postID(c.id, "again"); res.Duplicate != c.dup {
			t.Errorf("re-delivery of %s after the restore = %+v, want duplicate %v", c.id, res, c.dup)
		}
	}
}
