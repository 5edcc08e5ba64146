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

package taskstate

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// TestHandlerHeartbeatCoalesced: a handler posting heartbeats in a loop
// changes the status at most once per quarter of the heartbeatTimeout.
func TestHandlerHeartbeatCoalesced(t *testing.T) {
	st := status(dispatched, 1, heldByHandlers, func(st *Status) {
		st.HeartbeatTimeout = &metav1.Duration{Duration: 4 * time.Second}
	})
	writes := 0
	for i := range 1000 { // one every 10ms for 10s
		now := metav1.NewTime(t0.Add(time.Duration(i) * 10 * time.Millisecond))
		changed, err := HandlerHeartbeat(st, now, 1, "step")
		if err != nil {
			t.Fatal(err)
		}
		if changed {
			writes++
		}
	}
	if writes != 10 { // t0, t0+1s, ..., t0+9s
		t.Errorf("%d heartbeats recorded in 10s with heartbeatTimeout 4s, want 10", writes)
	}
	if st.Progress != "step" || st.LastHeartbeatAt == nil || !st.LastHeartbeatAt.Time.Equal(t0.Add(9*time.Second)) {
		t.Errorf("status: progress %q, last heartbeat %v", st.Progress, st.LastHeartbeatAt)
	}
}

// TestHandlerHeartbeatFenced: a heartbeat is refused as a completion
// would be.
func TestHandlerHeartbeatFenced(t *testing.T) {
	cases := map[string]struct {
		from *Status
		n    int32
		want error
	}{
		"another attempt":        {status(dispatched, 2, heldByHandlers), 1, ErrStaleAttempt},
		"a worker's attempt":     {status(running, 1, heldByWorker("w1")), 1, ErrNotHolder},
		"a finished task":        {status(timedOut, 1, heldByHandlers), 1, ErrFinished},
		"an attempt with result": {status(dispatched, 1, heldByHandlers, func(st *Status) { st.Result = &agentlanev1alpha1.TaskResult{} }), 1, ErrHasResult},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := tc.from.DeepCopy()
			_, err := HandlerHeartbeat(tc.from, t1, tc.n, "x")
			if !errors.Is(err, tc.want) {
				t.Errorf("err %v, want %v", err, tc.want)
			}
			if tc.from.LastHeartbeatAt != before.LastHeartbeatAt {
				t.Errorf("a refused heartbeat changed the status")
			}
		})
	}
}

// TestProgressNoteBounded: a progress note is cut to 256 characters.
func TestProgressNoteBounded(t *testing.T) {
	st := status(dispatched, 1, heldByHandlers)
	if _, err := HandlerHeartbeat(st, t1, 1, strings.Repeat("é", 10000)); err != nil {
		t.Fatal(err)
	}
	if n := len([]rune(st.Progress)); n > 256 {
		t.Errorf("progress note of %d characters", n)
	}
}

// TestNewAttemptClearsTiming: a new attempt starts without the last one's
// heartbeat and extended deadline; a dispatch records the lane's
// heartbeatTimeout.
func TestNewAttemptClearsTiming(t *testing.T) {
	st := status(running, 1, heldByWorker("w1"), func(st *Status) {
		beat := metav1.NewMicroTime(t0.Time)
		st.LastHeartbeatAt, st.Progress, st.Extensions = &beat, "x", 2
		st.Deadline = &t1
	})
	if err := Grant(st, 1, t1, "execute", 2); err != nil {
		t.Fatal(err)
	}
	if st.LastHeartbeatAt != nil || st.Progress != "" || st.Deadline != nil || st.Extensions != 0 {
		t.Errorf("after the grant of attempt 2: %+v", st)
	}
	if err := Dispatch(st, 1, t1, Dispatched{Attempt: 2, Holder: agentlanev1alpha1.HolderHandler, HeartbeatTimeout: 3 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if st.HeartbeatTimeout == nil || st.HeartbeatTimeout.Duration != 3*time.Second {
		t.Errorf("heartbeatTimeout after the dispatch: %v", st.HeartbeatTimeout)
	}
	if err := Extend(st, 1, t0.Add(time.Minute), 1); !errors.Is(err, ErrStaleAttempt) {
		t.Errorf("extending attempt 1: %v", err)
	}
	if err := Extend(st, 2, t0.Add(time.Minute), 1); err != nil || st.Deadline == nil || st.Extensions != 1 {
		t.Errorf("extending attempt 2: %v, %+v", err, st)
	}
}
