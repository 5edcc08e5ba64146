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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/sessionstore"
)

// refusingInboxStore records the inbox records saved, refusing the first
// refuse saves as over the write budget.
type refusingInboxStore struct {
	mu     sync.Mutex
	refuse int
	saves  []string
}

func (s *refusingInboxStore) SaveInbox(_ context.Context, session types.NamespacedName, record []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refuse > 0 {
		s.refuse--
		return &sessionstore.RateLimitedError{Namespace: session.Namespace, Bytes: len(record), RetryAfter: 2 * time.Second}
	}
	s.saves = append(s.saves, string(record))
	return nil
}

func (s *refusingInboxStore) LoadInbox(context.Context, types.NamespacedName) ([]byte, error) {
	return nil, nil
}

func (s *refusingInboxStore) saved() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.saves...)
}

// awaitSaves waits for the keeper's deferred write (a goroutine woken by
// the fake clock) to have saved n records.
func awaitSaves(t *testing.T, s *refusingInboxStore, n int) []string {
	t.Helper()
	for range 500 {
		if got := s.saved(); len(got) >= n {
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%d records saved, want %d", len(s.saved()), n)
	return nil
}

// A record the write budget refuses is written later with the changes
// made meanwhile, once; with an interval, changes closer than it are
// written together.
func TestInboxKeeperDefersAndCoalescesWrites(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	key := types.NamespacedName{Namespace: "tenant-a", Name: "s1"}
	inbox := lanequeue.NewInbox(lanequeue.InboxOptions{Clock: clk, IDs: &lanequeue.SequentialIDs{Prefix: "run"}})
	if err := inbox.ConfigureSession(key.Name, lanequeue.MessageOptions{Mode: lanequeue.ModeFollowup, Cap: 20, Drop: lanequeue.DropOld}, false); err != nil {
		t.Fatal(err)
	}
	post := func(text string) {
		t.Helper()
		if _, err := inbox.Post(key.Name, lanequeue.Message{ID: text, Text: text}); err != nil {
			t.Fatal(err)
		}
	}
	store := &refusingInboxStore{refuse: 1}
	k := &inboxKeeper{store: store, log: logr.Discard(), clock: clk, sessions: map[types.NamespacedName]*keptInbox{}}
	ctx := context.Background()

	post("first") // starts a turn
	post("second")
	k.save(ctx, key, inbox) // refused by the budget: deferred
	post("third")
	k.save(ctx, key, inbox) // joins the deferred write
	if got := store.saved(); len(got) != 0 {
		t.Fatalf("saved %d records before the budget had room", len(got))
	}
	clk.Step(2 * time.Second)
	got := awaitSaves(t, store, 1)
	if len(got) != 1 || !strings.Contains(got[0], "second") || !strings.Contains(got[0], "third") {
		t.Fatalf("records saved = %q, want one with second and third", got)
	}

	k.interval = time.Second
	post("fourth")
	k.save(ctx, key, inbox) // the last write was 0s ago: deferred by the interval
	post("fifth")
	k.save(ctx, key, inbox)
	if n := len(store.saved()); n != 1 {
		t.Fatalf("%d records saved within the interval, want the first only", n)
	}
	clk.Step(time.Second)
	got = awaitSaves(t, store, 2)
	if len(got) != 2 || !strings.Contains(got[1], "fifth") {
		t.Fatalf("records saved = %d, want a second one with fifth", len(got))
	}
}
