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

// What a session's inbox held moves to a new inbox, as to a restarted
// manager: the override stays in force and the queued messages become the
// next turn once the debounce passed, before a message posted since.
func TestInboxStateRestores(t *testing.T) {
	old := newInboxHarness(t, nil)
	old.post("first")
	old.step(time.Second)
	if ev := old.next(); ev.Type != InboxTurn {
		t.Fatalf("event = %+v, want the first turn", ev)
	}
	if _, err := old.in.Post("s", Message{Text: "/queue followup debounce:2s"}); err != nil {
		t.Fatal(err)
	}
	old.post("second")
	old.post("third")
	st := old.in.State("s")
	if got := []string{st.Queued[0].Text, st.Queued[1].Text}; len(st.Queued) != 2 || got[1] != "third" {
		t.Fatalf("queued = %+v, want second and third", st.Queued)
	}
	if st.Override == nil || st.Override.Mode != ModeFollowup || st.Override.Debounce != 2*time.Second {
		t.Fatalf("override = %+v, want followup with a 2s debounce", st.Override)
	}

	restarted := newInboxHarness(t, nil)
	restarted.in.Restore("s", st)
	restarted.post("fourth")
	if o := restarted.in.Options("s"); o.Mode != ModeFollowup {
		t.Errorf("options = %+v, want the restored override", o)
	}
	restarted.step(1999 * time.Millisecond)
	restarted.none()
	restarted.step(time.Millisecond)
	var got []string
	for range 3 {
		ev := restarted.next()
		got = append(got, texts(ev)...)
		restarted.in.RunFinished("s", ev.RunID)
	}
	if diff := cmp.Diff([]string{"second", "third", "fourth"}, got); diff != "" {
		t.Errorf("turns (-want,+got):\n%s", diff)
	}
	if st := restarted.in.State("s"); len(st.Queued) != 0 || st.Override == nil {
		t.Errorf("state after the turns = %+v, want nothing queued and the override", st)
	}
}

// Restoring nothing changes nothing, and a set override is not replaced.
func TestInboxStateRestoreKeepsANewerOverride(t *testing.T) {
	h := newInboxHarness(t, nil)
	if !h.in.State("s").Empty() {
		t.Fatal("a new session's state is not empty")
	}
	if _, err := h.in.Post("s", Message{Text: "/queue steer"}); err != nil {
		t.Fatal(err)
	}
	h.in.Restore("s", InboxState{Override: &MessageOptions{Mode: ModeInterrupt, Cap: 1, Drop: DropOld}})
	if o := h.in.Options("s"); o.Mode != ModeSteer {
		t.Errorf("options = %+v, want the override set in this process", o)
	}
	h.none()
}
