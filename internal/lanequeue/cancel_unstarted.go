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

// CancelUnstarted cancels the command id only if no attempt of it has been
// granted yet: it is queued and never started (a command waiting for a
// retry has started). The command ends Cancelled with err, which should
// wrap ErrCancelled. It reports whether it cancelled the command; a command
// that is unknown, final, running or was granted before stays as it is.
// The check and the cancellation are one step under the queue's lock, so a
// grant cannot slip in between.
func (q *Queue) CancelUnstarted(id string, err error) bool {
	q.mu.Lock()
	t := q.tickets[id]
	if t == nil || t.state != stQueued || t.attempts > 0 {
		q.mu.Unlock()
		return false
	}
	now := q.now()
	q.cancelLocked(t, err, now)
	q.dispatchLocked(now)
	q.unlock(now)
	return true
}
