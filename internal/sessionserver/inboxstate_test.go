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
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/sessionstore"
)

// An inbox record round-trips the state, and one that would be too large
// leaves out the oldest messages and counts them.
func TestInboxRecord(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	st := lanequeue.InboxState{
		Queued:  []lanequeue.Message{{ID: "m2", Text: "second", Channel: "slack", Thread: "t1", ReceivedAt: at}},
		Dropped: []lanequeue.Message{{ID: "m1", Text: "first", ReceivedAt: at}},
		Override: &lanequeue.MessageOptions{Mode: lanequeue.ModeFollowup, Debounce: 2 * time.Second, Cap: 5, Drop: lanequeue.DropOld,
			ByChannel: map[string]lanequeue.MessageMode{"discord": lanequeue.ModeCollect}},
	}
	var rec inboxRecord
	if err := json.Unmarshal(recordOf(st), &rec); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(st, rec.state()); diff != "" || rec.Lost != 0 {
		t.Errorf("round trip (-want,+got), lost %d:\n%s", rec.Lost, diff)
	}
	if got := recordOf(lanequeue.InboxState{}); got != nil {
		t.Errorf("the record of nothing = %q, want none", got)
	}

	big := lanequeue.InboxState{}
	for i := range 10 {
		big.Queued = append(big.Queued, lanequeue.Message{Text: fmt.Sprintf("%d %s", i, strings.Repeat("x", sessionstore.MaxInboxBytes/4))})
	}
	data := recordOf(big)
	if len(data) > sessionstore.MaxInboxBytes {
		t.Fatalf("record of %d bytes, over %d", len(data), sessionstore.MaxInboxBytes)
	}
	rec = inboxRecord{}
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	if n := len(rec.Queued); n == 0 || rec.Lost != 10-n || !strings.HasPrefix(rec.Queued[n-1].Text, "9 ") {
		t.Errorf("kept %d messages, lost %d; want the newest kept and the others counted", n, rec.Lost)
	}
}
