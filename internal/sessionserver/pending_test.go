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
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/agentlane/agentlane/pkg/sessionapi"
)

func TestPendingLedger(t *testing.T) {
	s1 := types.NamespacedName{Namespace: "ns", Name: "s1"}
	s2 := types.NamespacedName{Namespace: "ns", Name: "s2"}
	p := newPendingLedger(pendingLimits{perSession: 2, perSessionBytes: 100, totalBytes: 150})
	check := func(session types.NamespacedName, count, bytes, total int64) {
		t.Helper()
		c, b, tot := p.usage(session)
		if c != count || b != bytes || tot != total {
			t.Fatalf("%s: pending (count, bytes, total) = (%d, %d, %d), want (%d, %d, %d)", session, c, b, tot, count, bytes, total)
		}
	}
	mustReserve := func(session types.NamespacedName, id string, n int64) *pendingEntry {
		t.Helper()
		e, err := p.reserve(session, id, n, queueBounds{})
		if err != nil {
			t.Fatalf("reserve %s/%s of %d bytes: %v", session, id, n, err)
		}
		return e
	}
	mustRefuse := func(session types.NamespacedName, id string, n int64) {
		t.Helper()
		if _, err := p.reserve(session, id, n, queueBounds{}); !sessionapi.IsCode(err, sessionapi.CodeQueueFull) {
			t.Fatalf("reserve %s/%s of %d bytes: %v, want QueueFull", session, id, n, err)
		}
	}

	a := mustReserve(s1, "a", 60)
	mustRefuse(s1, "b", 41) // per-session bytes
	mustReserve(s1, "b", 40)
	mustRefuse(s1, "c", 0)  // per-session count
	mustRefuse(s2, "x", 51) // server bytes
	mustReserve(s2, "x", 50)
	check(s1, 2, 100, 150)

	// An id reused before the first command's end is seen: the terminal
	// event ends the older, a failed submission gives back its own.
	p.ended(s1, "a")
	check(s1, 1, 40, 90)
	p.release(a) // already ended: nothing
	check(s1, 1, 40, 90)
	a2 := mustReserve(s1, "b", 10)
	p.release(a2)
	check(s1, 1, 40, 90)
	p.ended(s1, "b")
	check(s1, 0, 0, 50)
	p.ended(s1, "b") // a second terminal event changes nothing
	check(s1, 0, 0, 50)

	// A released session gives back everything it held, and only that.
	mustReserve(s1, "a", 10)
	mustReserve(s1, "b", 10)
	p.sessionReleased(s1)
	check(s1, 0, 0, 50)
	check(s2, 1, 50, 50)
	p.ended(types.NamespacedName{Namespace: "ns", Name: "other"}, "x") // another session's command of the same id
	check(s2, 1, 50, 50)
}

// A namespace may hold at most its share of the server-wide bytes; another
// namespace still has the rest.
func TestPendingLedgerNamespaceShare(t *testing.T) {
	p := newPendingLedger(pendingLimits{perSession: 100, perSessionBytes: 1000, totalBytes: 1000})
	p.setShare(0.25)
	a1 := types.NamespacedName{Namespace: "a", Name: "s1"}
	a2 := types.NamespacedName{Namespace: "a", Name: "s2"}
	b1 := types.NamespacedName{Namespace: "b", Name: "s1"}
	if _, err := p.reserve(a1, "c1", 150, queueBounds{}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.reserve(a2, "c2", 100, queueBounds{}); err != nil {
		t.Fatal(err)
	}
	_, err := p.reserve(a2, "c3", 1, queueBounds{})
	if !sessionapi.IsCode(err, sessionapi.CodeQueueFull) || !strings.Contains(err.Error(), "its share of the server, 250 bytes") {
		t.Fatalf("namespace a past its share: %v, want QueueFull naming the share", err)
	}
	e, err := p.reserve(b1, "c1", 250, queueBounds{})
	if err != nil {
		t.Fatalf("namespace b: %v", err)
	}
	p.release(e)
	if _, err := p.reserve(b1, "c1", 250, queueBounds{}); err != nil {
		t.Fatalf("namespace b after a release: %v", err)
	}
}
