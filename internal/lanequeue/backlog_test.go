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
)

func TestBacklogSubscriberKeepsOrderDropsPastLimitAndNeverBlocks(t *testing.T) {
	h := newHarness(t, oneLane(LaneConfig{}))
	slow := h.q.SubscribeBacklog(3)
	for range 5 {
		h.submit(Command{SessionKey: "s"}) // submitted + started each
	}
	if got := slow.Dropped(); got != 7 {
		t.Errorf("Dropped = %d, want 7", got)
	}
	for want := uint64(1); want <= 3; want++ {
		if ev := <-slow.Events(); ev.Seq != want {
			t.Errorf("event %d has seq %d", want, ev.Seq)
		}
	}
	// Read, the backlog takes events again.
	h.submit(Command{SessionKey: "s"})
	if ev := <-slow.Events(); ev.Seq != 11 || ev.Type != EventSubmitted {
		t.Errorf("after the reader caught up: %+v, want seq 11 submitted", ev)
	}
	slow.Close()
	for range slow.Events() { // closes without handing over what waits
	}
}

func TestBacklogSubscriberGetsWhatWaitsWhenTheQueueCloses(t *testing.T) {
	h := newHarness(t, oneLane(LaneConfig{MaxConcurrency: 1}))
	sub := h.q.SubscribeBacklog(100)
	for range 3 {
		h.submit(Command{SessionKey: "s"})
	}
	h.q.Close() // cancels the three: each ends with an event
	sub.Close() // after the queue's close: what waits is still delivered
	var last Event
	n := 0
	for ev := range sub.Events() {
		if ev.Seq != last.Seq+1 {
			t.Errorf("seq %d after %d", ev.Seq, last.Seq)
		}
		last = ev
		n++
	}
	if n != int(last.Seq) || last.Type != EventCancelled {
		t.Errorf("got %d events ending with %+v, want every event up to the last cancellation", n, last)
	}
}
