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

// indexedHeap is a binary min-heap whose items record their own position.
// Because an item knows where it sits, PushOrUpdate and Delete are O(log n)
// without a search, which lets the scheduler re-key a session head or drop a
// timer the moment its command starts, finishes or is cancelled.
//
// The ordering and the position slot are supplied as functions so one
// implementation serves both the runnable-session heaps and the timer heap.
// An item whose slot holds -1 is not in the heap.
type indexedHeap[T comparable] struct {
	items []T
	less  func(a, b T) bool
	slot  func(T) *int32
}

func newIndexedHeap[T comparable](less func(a, b T) bool, slot func(T) *int32) indexedHeap[T] {
	return indexedHeap[T]{less: less, slot: slot}
}

// Len returns the number of items in the heap.
func (h *indexedHeap[T]) Len() int { return len(h.items) }

// Peek returns the smallest item without removing it. The heap must not be empty.
func (h *indexedHeap[T]) Peek() T { return h.items[0] }

// Contains reports whether x is in the heap.
func (h *indexedHeap[T]) Contains(x T) bool { return *h.slot(x) >= 0 }

// PushOrUpdate inserts x, or restores the heap order around x if it is
// already present and its key changed.
func (h *indexedHeap[T]) PushOrUpdate(x T) {
	i := *h.slot(x)
	if i >= 0 {
		if !h.up(int(i)) {
			h.down(int(i))
		}
		return
	}
	*h.slot(x) = int32(len(h.items))
	h.items = append(h.items, x)
	h.up(len(h.items) - 1)
}

// Delete removes x if present.
func (h *indexedHeap[T]) Delete(x T) {
	i := int(*h.slot(x))
	if i < 0 {
		return
	}
	last := len(h.items) - 1
	if i != last {
		h.swap(i, last)
	}
	var zero T
	h.items[last] = zero
	h.items = h.items[:last]
	*h.slot(x) = -1
	if i != last {
		if !h.up(i) {
			h.down(i)
		}
	}
}

// Pop removes and returns the smallest item. The heap must not be empty.
func (h *indexedHeap[T]) Pop() T {
	x := h.items[0]
	h.Delete(x)
	return x
}

// Clear empties the heap, marking every item as absent.
func (h *indexedHeap[T]) Clear() {
	var zero T
	for i, x := range h.items {
		*h.slot(x) = -1
		h.items[i] = zero
	}
	h.items = h.items[:0]
}

func (h *indexedHeap[T]) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	*h.slot(h.items[i]) = int32(i)
	*h.slot(h.items[j]) = int32(j)
}

// up moves item i towards the root and reports whether it moved.
func (h *indexedHeap[T]) up(i int) bool {
	moved := false
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(h.items[i], h.items[p]) {
			break
		}
		h.swap(i, p)
		i = p
		moved = true
	}
	return moved
}

func (h *indexedHeap[T]) down(i int) {
	n := len(h.items)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h.less(h.items[r], h.items[l]) {
			m = r
		}
		if !h.less(h.items[m], h.items[i]) {
			return
		}
		h.swap(i, m)
		i = m
	}
}
