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

package workerproto

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestLeaseDuration(t *testing.T) {
	cases := map[time.Duration]int32{
		5 * time.Second:         15,
		200 * time.Millisecond:  1,
		time.Millisecond:        1,
		1500 * time.Millisecond: 5,
	}
	for heartbeat, want := range cases {
		if got := LeaseDuration(heartbeat); got != want {
			t.Errorf("LeaseDuration(%s) = %d, want %d", heartbeat, got, want)
		}
	}
}

// What a worker encodes on its Lease, the manager parses back unchanged, with
// the two labels the protocol adds, the draining mark and the expiry.
func TestLeaseRoundTrip(t *testing.T) {
	now := metav1.NewMicroTime(time.Date(2026, 5, 21, 14, 30, 0, 0, time.UTC))
	ad := Advertisement{
		Name: "w1", NodeName: "node-a", Labels: map[string]string{"gpu": "a100"}, Capacity: 3,
		Queues: []string{"q1", "q2"}, Lanes: []string{"tools"}, CommandTypes: []string{"bash", "exec"},
	}
	for _, draining := range []bool{false, true} {
		lease := &coordinationv1.Lease{}
		Encode(lease, "agents", ad, 5*time.Second, draining, now)
		if lease.Namespace != "agents" || lease.Name != LeaseName("w1") {
			t.Errorf("Lease %s/%s, want agents/%s", lease.Namespace, lease.Name, LeaseName("w1"))
		}
		got, ok := Parse(lease)
		if !ok {
			t.Fatal("an encoded Lease was not parsed as a worker Lease")
		}
		want := WorkerLease{Advertisement: ad, Draining: draining, Expires: now.Add(15 * time.Second)}
		want.Labels = map[string]string{"gpu": "a100", WorkerLabel: "true", NodeLabel: "node-a"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("draining=%t: parsed Lease (-want,+got):\n%s", draining, diff)
		}
	}
	if _, ok := Parse(&coordinationv1.Lease{}); ok {
		t.Error("a Lease without the worker label was parsed as a worker Lease")
	}
}
