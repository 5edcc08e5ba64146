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
	"math/rand/v2"
	"slices"
	"testing"
)

type heapItem struct {
	key int
	idx int32
}

func TestIndexedHeap(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	h := newIndexedHeap(func(a, b *heapItem) bool { return a.key < b.key }, func(x *heapItem) *int32 { return &x.idx })
	var in []*heapItem
	check := func() {
		t.Helper()
		if h.Len() != len(in) {
			t.Fatalf("Len = %d, want %d", h.Len(), len(in))
		}
		for i, x := range h.items {
			if int(x.idx) != i {
				t.Fatalf("item at %d records %d", i, x.idx)
			}
			if i > 0 && h.less(x, h.items[(i-1)/2]) {
				t.Fatalf("heap order broken at %d", i)
			}
		}
	}
	for range 20_000 {
		switch op := r.IntN(10); {
		case op < 4:
			x := &heapItem{key: r.IntN(1000), idx: -1}
			h.PushOrUpdate(x)
			in = append(in, x)
		case op < 6 && len(in) > 0: // re-key in place
			x := in[r.IntN(len(in))]
			x.key = r.IntN(1000)
			h.PushOrUpdate(x)
		case op < 8 && len(in) > 0:
			x := in[r.IntN(len(in))]
			h.Delete(x)
			h.Delete(x) // deleting an absent item is a no-op
			if h.Contains(x) {
				t.Fatal("deleted item still contained")
			}
			in = slices.DeleteFunc(in, func(y *heapItem) bool { return y == x })
		case len(in) > 0:
			minKey := slices.MinFunc(in, func(a, b *heapItem) int { return a.key - b.key }).key
			if h.Peek().key != minKey {
				t.Fatalf("Peek = %d, want %d", h.Peek().key, minKey)
			}
			x := h.Pop()
			in = slices.DeleteFunc(in, func(y *heapItem) bool { return y == x })
		}
		check()
	}
	h.Clear()
	for _, x := range in {
		if x.idx != -1 {
			t.Fatal("Clear left an index")
		}
	}
}
