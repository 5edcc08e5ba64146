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

package controller

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// A passivation waits for a checkpoint saved at or after its request. Status
// keeps whole seconds; what the Session API told the controller orders a
// checkpoint and a request of the same second.
func TestPassivationClockCheckpointed(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "s"}
	requested := time.Date(2026, 5, 1, 12, 0, 0, 700_000_000, time.UTC)
	second := func(t time.Time) metav1.Time { return metav1.NewTime(t.Truncate(time.Second)) }
	status := func(at time.Time) *agentlanev1alpha1.Checkpoint {
		return &agentlanev1alpha1.Checkpoint{RunID: "run", Time: second(at)}
	}
	cases := map[string]struct {
		// remember is whether this manager saw the request; saved are the
		// checkpoints the Session API reported.
		remember bool
		saved    []time.Time
		status   *agentlanev1alpha1.Checkpoint
		want     bool
	}{
		"a checkpoint just before the request, in the same second": {
			remember: true,
			saved:    []time.Time{requested.Add(-500 * time.Millisecond)},
			status:   status(requested.Add(-500 * time.Millisecond)),
		},
		"a checkpoint just after the request, in the same second": {
			remember: true,
			saved:    []time.Time{requested.Add(-500 * time.Millisecond), requested.Add(200 * time.Millisecond)},
			status:   status(requested.Add(200 * time.Millisecond)),
			want:     true,
		},
		"no checkpoint at all": {
			remember: true,
		},
		"a checkpoint written to status only, a second later": {
			remember: true,
			status:   status(requested.Add(time.Second)),
			want:     true,
		},
		"after a manager restart, whole seconds decide": {
			status: status(requested.Add(-500 * time.Millisecond)),
			want:   true,
		},
		"after a manager restart, an older second is older": {
			status: status(requested.Add(-time.Second)),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var c PassivationClock
			if tc.remember {
				c.request(key, requested)
			}
			for _, at := range tc.saved {
				c.CheckpointSaved(key, at)
			}
			p := &agentlanev1alpha1.PassivationStatus{Reason: agentlanev1alpha1.PassivationNodeDrain, RequestedAt: second(requested)}
			if got := c.checkpointed(key, p, tc.status); got != tc.want {
				t.Errorf("checkpointed = %t, want %t", got, tc.want)
			}
			c.forget(key)
			if c.checkpointed(key, p, nil) {
				t.Error("a forgotten session is still checkpointed")
			}
		})
	}
}
