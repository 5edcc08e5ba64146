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

package sessionserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/agentlane/agentlane/internal/lanequeue"
)

// A flood of messages that a session takes at once (steered into its run)
// changes only its remembered ids: they are written together, once per
// recentWriteDelay, never one write a message, and at most the last
// DefaultMaxRememberedIDs of them; a queued message is still written at
// once, remembered ids with it.
func TestInboxKeeperBatchesRememberedIDs(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	key := types.NamespacedName{Namespace: "tenant-a", Name: "s1"}
	inbox := lanequeue.NewInbox(lanequeue.InboxOptions{Clock: clk, IDs: &lanequeue.SequentialIDs{Prefix: "run"}})
	if err := inbox.ConfigureSession(key.Name, lanequeue.MessageOptions{Mode: lanequeue.ModeSteer, Cap: 20, Drop: lanequeue.DropOld}, true); err != nil {
		t.Fatal(err)
	}
	store := &refusingInboxStore{}
	k := &inboxKeeper{store: store, log: logr.Discard(), clock: clk, sessions: map[types.NamespacedName]*keptInbox{}}
	ctx := context.Background()
	post := func(id string) {
		t.Helper()
		if _, err := inbox.Post(key.Name, lanequeue.Message{ID: id, Text: "text of " + id}); err != nil {
			t.Fatal(err)
		}
		k.save(ctx, key, inbox)
	}

	const flood = 1000
	for i := range flood {
		post(fmt.Sprintf("m%04d", i)) // the first starts a turn, the others steer it
	}
	if n := len(store.saved()); n != 0 {
		t.Fatalf("%d records saved for %d messages taken at once before recentWriteDelay, want 0", n, flood)
	}
	clk.Step(recentWriteDelay)
	got := awaitSaves(t, store, 1)
	var rec inboxRecord
	if err := json.Unmarshal([]byte(got[0]), &rec); err != nil {
		t.Fatal(err)
	}
	if len(rec.Recent) != lanequeue.DefaultMaxRememberedIDs || rec.Recent[len(rec.Recent)-1] != fmt.Sprintf("m%04d", flood-1) {
		t.Fatalf("record keeps %d ids ending %q, want the last %d", len(rec.Recent), rec.Recent[len(rec.Recent)-1], lanequeue.DefaultMaxRememberedIDs)
	}
	if len(got[0]) > 20<<10 {
		t.Errorf("record of remembered ids is %d bytes, want at most 20 KiB", len(got[0]))
	}

	// More steers wait again; a message that is queued is written at once.
	post("s1")
	if err := inbox.ConfigureSession(key.Name, lanequeue.MessageOptions{Mode: lanequeue.ModeFollowup, Cap: 20, Drop: lanequeue.DropOld}, true); err != nil {
		t.Fatal(err)
	}
	post("q1")
	got = awaitSaves(t, store, 2)
	if len(got) != 2 || !strings.Contains(got[1], `"q1"`) || !strings.Contains(got[1], `"s1"`) {
		t.Fatalf("records = %d, want a second one with the queued q1 and the remembered s1", len(got))
	}
	if strings.Count(got[1], `"q1"`) != 1 {
		t.Errorf("the queued message's id is written once, with its message: %s", got[1])
	}
}

// A runtime that toggles a lane's handler in a loop makes the manager write
// no more than the namespace's write budget lets it: once the budget
// refuses a write, the toggles that follow are written together, once,
// with the switch in force at the end.
func TestInboxKeeperCoalescesLaneHandlerToggles(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	key := types.NamespacedName{Namespace: "tenant-a", Name: "s1"}
	inbox := lanequeue.NewInbox(lanequeue.InboxOptions{Clock: clk, IDs: &lanequeue.SequentialIDs{Prefix: "run"}})
	store := &refusingInboxStore{refuse: 1}
	k := &inboxKeeper{store: store, log: logr.Discard(), clock: clk, sessions: map[types.NamespacedName]*keptInbox{}}
	ctx := context.Background()
	for i := range 1000 {
		mode := laneHandlerExternal
		if i%2 == 1 {
			mode = ""
		}
		k.session(key).setLaneHandler("execute", mode)
		k.save(ctx, key, inbox)
	}
	k.session(key).setLaneHandler("execute", laneHandlerInternal)
	k.save(ctx, key, inbox)
	if n := len(store.saved()); n != 0 {
		t.Fatalf("%d records saved while the budget refused them, want 0", n)
	}
	clk.Step(2 * time.Second)
	got := awaitSaves(t, store, 1)
	if len(got) != 1 || got[0] != `{"laneHandlers":{"execute":"Internal"}}` {
		t.Fatalf("records saved = %q, want one with the last switch", got)
	}
}
