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

package agentscript

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// A passivation request is taken once, and only when it is this runtime's:
// the stream replays the request that moved the session off an earlier
// pod, which must not stop the runtime that resumed it.
func TestOfferPassivation(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	checkpointAt := now.Add(-10 * time.Second)
	request := func(at time.Time, deadline time.Duration, pod string) sessionapi.Event {
		return sessionapi.Event{Type: sessionapi.EventPassivationRequested, Time: at,
			Passivation: &sessionapi.PassivationRequest{Reason: "node_drain", Deadline: at.Add(deadline), Pod: pod}}
	}
	cases := map[string]struct {
		pod       string
		resumedAt time.Time
		ev        sessionapi.Event
		want      bool
	}{
		"a request for this pod": {
			pod: "p2", resumedAt: checkpointAt,
			ev:   request(now.Add(-time.Minute), 2*time.Minute, "p2"),
			want: true,
		},
		"a request for this pod, even past its deadline or older than the checkpoint (a restarted container)": {
			pod: "p2", resumedAt: checkpointAt,
			ev:   request(now.Add(-time.Hour), time.Minute, "p2"),
			want: true,
		},
		"a request for the pod before": {
			pod: "p2", resumedAt: checkpointAt,
			ev: request(checkpointAt.Add(time.Second), time.Hour, "p1"),
		},
		"a request answered by the checkpoint resumed from": {
			resumedAt: checkpointAt,
			ev:        request(checkpointAt.Add(-time.Millisecond), time.Hour, ""),
		},
		"a request after the checkpoint resumed from": {
			resumedAt: checkpointAt,
			ev:        request(checkpointAt.Add(time.Millisecond), time.Hour, ""),
			want:      true,
		},
		"a request whose deadline passed (the pod before was evicted at it)": {
			resumedAt: checkpointAt,
			ev:        request(now.Add(-time.Minute), 30*time.Second, ""),
		},
		"a request of a pod to a runtime outside any pod": {
			ev:   request(now, time.Minute, "p1"),
			want: true,
		},
		"a fresh runtime and a live request": {
			pod:  "p1",
			ev:   request(now, time.Minute, ""),
			want: true,
		},
		"an event without its body": {
			ev: sessionapi.Event{Type: sessionapi.EventPassivationRequested, Time: now},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := &Runtime{Pod: tc.pod, Clock: clocktesting.NewFakeClock(now)}
			if !tc.resumedAt.IsZero() {
				r.resumedFrom(tc.resumedAt)
			}
			if got := r.offerPassivation(tc.ev); got != tc.want {
				t.Fatalf("offerPassivation = %t, want %t", got, tc.want)
			}
			if r.passivating() != tc.want {
				t.Errorf("passivating = %t, want %t", r.passivating(), tc.want)
			}
			select {
			case <-r.passivationRequested():
				if !tc.want {
					t.Error("the wait for a request ended without one")
				}
			default:
				if tc.want {
					t.Error("the wait for a request did not end")
				}
			}
			if r.passivation() != nil {
				t.Error("a runtime that did not stop reports a passivation")
			}
			if tc.want && r.offerPassivation(request(now, time.Minute, tc.pod)) {
				t.Error("a second request was taken")
			}
		})
	}
}
