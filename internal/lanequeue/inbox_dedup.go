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

// A channel that re-delivers a message (a webhook retried after a timeout,
// a reconnecting bot) posts it again under the same ID. The inbox reports
// such a message as a duplicate and does nothing with it when a message of
// that ID is still queued, or is among the last MaxRememberedIDs messages
// the session took (queued or steered), whatever became of them since.

// Defaults of the de-duplication bounds.
const (
	// DefaultMaxRememberedIDs is how many recent message IDs each session
	// remembers.
	DefaultMaxRememberedIDs = 128
	// MaxRememberedIDLength is the longest ID remembered: a longer one is
	// still found among the queued messages, but not once it was taken.
	MaxRememberedIDLength = 128
)

// recentIDs remembers the last n message IDs of a session: a ring and a
// set of what it holds. Its memory is at most n IDs of at most
// MaxRememberedIDLength bytes each.
type recentIDs struct {
	ring []string
	next int
	set  map[string]struct{}
}

func (r *recentIDs) has(id string) bool {
	_, ok := r.set[id]
	return ok
}

// add remembers id, forgetting the oldest once n are remembered.
func (r *recentIDs) add(id string, n int) {
	if id == "" || len(id) > MaxRememberedIDLength || n <= 0 || r.has(id) {
		return
	}
	if r.set == nil {
		r.set = make(map[string]struct{}, min(n, 16))
	}
	if len(r.ring) < n {
		r.ring = append(r.ring, id)
	} else {
		delete(r.set, r.ring[r.next])
		r.ring[r.next] = id
		r.next = (r.next + 1) % n
	}
	r.set[id] = struct{}{}
}

// duplicateLocked tells whether a message of this ID is queued in s or was
// taken recently.
func (s *inboxSession) duplicateLocked(id string) bool {
	if id == "" {
		return false
	}
	if s.recent.has(id) {
		return true
	}
	for _, m := range s.queued {
		if m.ID == id {
			return true
		}
	}
	return false
}

// ordered returns the remembered IDs, oldest first.
func (r *recentIDs) ordered() []string {
	if len(r.ring) == 0 {
		return nil
	}
	out := make([]string, 0, len(r.ring))
	out = append(out, r.ring[r.next:]...)
	return append(out, r.ring[:r.next]...)
}

// restore remembers ids (oldest first) as older than those remembered
// now, keeping the newest n of both.
func (r *recentIDs) restore(ids []string, n int) {
	since := r.ordered()
	*r = recentIDs{}
	for _, id := range ids {
		r.add(id, n)
	}
	for _, id := range since {
		r.add(id, n)
	}
}
