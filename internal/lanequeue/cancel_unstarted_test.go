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
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestCancelUnstarted(t *testing.T) {
	h := newHarness(t, oneLane(LaneConfig{MaxConcurrencyPerSession: 1, Retry: &RetryPolicy{Strategy: RetryFixed, FixedDelay: time.Minute}}))
	retrying := h.submit(Command{ID: "retrying", SessionKey: "s"})
	h.fail("retrying", errBoom)
	running := h.submit(Command{ID: "running", SessionKey: "s"})
	queued := h.submit(Command{ID: "queued", SessionKey: "s"})
	gone := fmt.Errorf("%w: its client went away", ErrCancelled)

	for _, id := range []string{"running", "retrying", "nope"} {
		if h.q.CancelUnstarted(id, gone) {
			t.Errorf("CancelUnstarted(%s) = true, want false: it started, or is unknown", id)
		}
	}
	if !h.q.CancelUnstarted("queued", gone) {
		t.Fatal("CancelUnstarted(queued) = false, want true")
	}
	if o := h.outcome(queued); o.State != StateCancelled || !errors.Is(o.Err, ErrCancelled) || o.Err.Error() != gone.Error() {
		t.Errorf("queued: %+v, want Cancelled with %v", o, gone)
	}
	if h.q.CancelUnstarted("queued", gone) {
		t.Error("a cancelled command was cancelled again")
	}
	if running.State() != StateRunning || retrying.State() == StateCancelled {
		t.Errorf("running = %s, retrying = %s: they started and stay", running.State(), retrying.State())
	}
	if diff := cmp.Diff([]string{"cancelled queued"}, h.eventLog(EventCancelled)); diff != "" {
		t.Errorf("events (-want,+got):\n%s", diff)
	}
}
