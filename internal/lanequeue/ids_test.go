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
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestULIDGenerator(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	g := NewULIDGenerator(clk, nil)
	valid := regexp.MustCompile(`^[0-9a-hjkmnp-tv-z]{26}$`) // lowercase Crockford base32
	var ids []string
	for range 1000 {
		ids = append(ids, g.NewID())
	}
	for _, id := range ids {
		if !valid.MatchString(id) {
			t.Fatalf("id %q is not a lowercase ULID", id)
		}
	}
	if !slices.IsSorted(ids) {
		t.Error("ids within one millisecond are not monotonic")
	}
	parsed, err := ulid.Parse(ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if !parsed.Timestamp().Equal(t0) {
		t.Errorf("timestamp = %v, want the clock's %v", parsed.Timestamp(), t0)
	}
}

func TestULIDGeneratorConcurrent(t *testing.T) {
	g := NewULIDGenerator(nil, nil)
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 1000 {
				id := g.NewID()
				mu.Lock()
				if seen[id] {
					t.Errorf("duplicate %s", id)
				}
				seen[id] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}

func TestSequentialIDs(t *testing.T) {
	var s SequentialIDs
	if got := s.NewID(); got != "cmd-0000000001" {
		t.Errorf("first = %q", got)
	}
	p := SequentialIDs{Prefix: "replay"}
	p.NewID()
	if got := p.NewID(); got != "replay-0000000002" {
		t.Errorf("second = %q", got)
	}
}

// The generator's own encoding is the ULID text encoding, lowercased, for
// any time and random part, and the monotonic increment carries into the
// top bits of the random part.
func TestULIDEncodingMatchesULID(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		var u ulid.ULID
		for i := range u {
			u[i] = byte(r.Uint32())
		}
		hi := binary.BigEndian.Uint64(u[:8])
		lo := binary.BigEndian.Uint64(u[8:])
		if got, want := encodeULID(hi, lo), strings.ToLower(u.String()); got != want {
			t.Fatalf("encodeULID(%x, %x) = %s, want %s", hi, lo, got, want)
		}
	}
	g := NewULIDGenerator(clocktesting.NewFakeClock(t0), nil)
	g.mu.Lock()
	g.last, g.issued, g.hi, g.lo = ulid.Timestamp(t0), true, 5, 1<<64-1
	g.mu.Unlock()
	id := g.NewID()
	u, err := ulid.Parse(id)
	if err != nil {
		t.Fatal(err)
	}
	if e := u.Entropy(); e[0] != 0 || e[1] != 6 {
		t.Errorf("entropy after a carry = %x, want the top 16 bits 0x0006", e)
	}
	g.mu.Lock()
	g.hi, g.lo = 1<<16-1, 1<<64-1 // the next increment overflows
	g.mu.Unlock()
	if u, err := ulid.Parse(g.NewID()); err != nil || u.Time() != ulid.Timestamp(t0) {
		t.Errorf("after an overflow: %v, %v; want a fresh ID at the same time", u, err)
	}
}

// A queue with its own generator names a command at Submit from its clock:
// a lowercase ULID of the submit time, in submit order, and a caller cannot
// take the ID of a live generated one.
func TestQueueNamesCommandsAtSubmit(t *testing.T) {
	h := newHarness(t, Config{Lanes: []LaneConfig{{Name: "work", MaxConcurrency: 1}}, DefaultLane: "work"},
		func(o *Options) { o.IDs = nil })
	var ids []string
	for i := range 50 {
		if i == 25 {
			h.clk.Step(time.Millisecond)
		}
		ids = append(ids, h.submit(Command{SessionKey: "s", Type: "work"}).ID())
	}
	if !slices.IsSorted(ids) {
		t.Errorf("ids are not in submit order: %v", ids)
	}
	for i, id := range ids {
		u, err := ulid.Parse(id)
		if err != nil || strings.ToLower(id) != id {
			t.Fatalf("id %q is not a lowercase ULID: %v", id, err)
		}
		want := t0
		if i >= 25 {
			want = t0.Add(time.Millisecond)
		}
		if !u.Timestamp().Equal(want) {
			t.Errorf("id %d time = %v, want %v", i, u.Timestamp(), want)
		}
	}
	if _, err := h.q.Submit(Command{ID: ids[10], SessionKey: "other", Type: "work"}); !errors.Is(err, ErrDuplicateID) {
		t.Errorf("submitting a live generated ID: err = %v, want ErrDuplicateID", err)
	}
}
