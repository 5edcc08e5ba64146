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
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
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
		Incarnation: "01KAQ3V4W5X6Y7Z8ABCDEFGHJK",
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

// A new process of the same worker (a new incarnation) acquires the Lease
// anew; the same process renewing it keeps its acquire time.
func TestLeaseIncarnation(t *testing.T) {
	t0 := metav1.NewMicroTime(time.Date(2026, 5, 21, 14, 30, 0, 0, time.UTC))
	t1 := metav1.NewMicroTime(t0.Add(time.Second))
	t2 := metav1.NewMicroTime(t0.Add(2 * time.Second))
	first := Advertisement{Name: "w1", NodeName: "node-a", Capacity: 1, Incarnation: "AAAA"}
	lease := &coordinationv1.Lease{}
	Encode(lease, "agents", first, time.Second, false, t0)
	Encode(lease, "agents", first, time.Second, false, t1)
	if !lease.Spec.AcquireTime.Equal(&t0) {
		t.Errorf("a renewal by the same process moved the acquire time to %s", lease.Spec.AcquireTime)
	}
	second := first
	second.Incarnation = "BBBB"
	Encode(lease, "agents", second, time.Second, false, t2)
	if !lease.Spec.AcquireTime.Equal(&t2) {
		t.Errorf("a new process of the worker kept the acquire time %s, want %s", lease.Spec.AcquireTime, t2)
	}
	if got, ok := Parse(lease); !ok || got.Incarnation != "BBBB" {
		t.Errorf("Parse = %+v, %t; want incarnation BBBB", got, ok)
	}

	for _, bad := range []string{"has space", "semi;colon", "é", strings.Repeat("A", MaxIncarnationLength+1)} {
		l := lease.DeepCopy()
		l.Annotations[IncarnationAnnotation] = bad
		if _, ok := Parse(l); ok {
			t.Errorf("a Lease advertising incarnation %q was parsed as a worker Lease", bad)
		}
	}
	delete(lease.Annotations, IncarnationAnnotation)
	if got, ok := Parse(lease); !ok || got.Incarnation != "" {
		t.Errorf("a Lease without an incarnation (an older worker): Parse = %+v, %t", got, ok)
	}
}

// The worker is the one a Lease is named after: a Lease that carries the
// worker label under another name, or whose holder is not the worker of its
// name, is no worker's heartbeat, whatever capacity it advertises.
func TestParseTrustsTheLeaseName(t *testing.T) {
	now := metav1.NewMicroTime(time.Date(2026, 5, 21, 14, 30, 0, 0, time.UTC))
	genuine := &coordinationv1.Lease{}
	Encode(genuine, "agents", Advertisement{Name: "w1", NodeName: "node-a", Capacity: 10000, Incarnation: "AAAA"}, time.Second, false, now)

	cases := map[string]func(l *coordinationv1.Lease){
		"another application's Lease with the worker label": func(l *coordinationv1.Lease) { l.Name = "my-app-leader" },
		"the bare prefix":                      func(l *coordinationv1.Lease) { l.Name = LeaseName("") },
		"a holder other than the named worker": func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = ptr.To("w2") },
		"a holder naming the Lease itself":     func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = ptr.To(LeaseName("w1")) },
		"no holder":                            func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = nil },
		"a worker's name whose holder is another Lease's worker": func(l *coordinationv1.Lease) {
			l.Name = LeaseName("w2")
		},
	}
	for name, forge := range cases {
		t.Run(name, func(t *testing.T) {
			l := genuine.DeepCopy()
			forge(l)
			if got, ok := Parse(l); ok {
				t.Errorf("Lease %q held by %q was parsed as worker %q", l.Name, ptr.Deref(l.Spec.HolderIdentity, ""), got.Name)
			}
		})
	}
	if got, ok := Parse(genuine); !ok || got.Name != "w1" {
		t.Errorf("the worker's own Lease: Parse = %q, %t; want w1", got.Name, ok)
	}
}

func TestWorkerOfLease(t *testing.T) {
	cases := map[string]struct {
		name string
		ok   bool
	}{
		LeaseName("w1"):           {"w1", true},
		LeaseName("pool-abc-123"): {"pool-abc-123", true},
		LeaseName(""):             {"", false},
		"my-app-leader":           {"", false},
		"agentlane-worker":        {"", false},
	}
	for lease, want := range cases {
		if name, ok := WorkerOfLease(lease); name != want.name || ok != want.ok {
			t.Errorf("WorkerOfLease(%q) = %q, %t; want %q, %t", lease, name, ok, want.name, want.ok)
		}
	}
}
