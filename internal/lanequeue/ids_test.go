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
	"regexp"
	"slices"
	"sync"
	"testing"

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
