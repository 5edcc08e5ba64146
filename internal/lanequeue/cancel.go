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
	"fmt"
	"slices"
)

// Cancel cancels one command. A queued or retrying command ends Cancelled at
// once; a running one ends Cancelled too, its slots are released and its
// handler's context is cancelled (a late result is ignored).
func (q *Queue) Cancel(id string) error {
	q.mu.Lock()
	now := q.now()
	t := q.tickets[id]
	if t == nil {
		if u := q.unconfirmed[id]; u != nil {
			// Its task is gone: the record of its timeout stands.
			q.countTimeoutLocked(u)
		}
		q.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	q.cancelLocked(t, ErrCancelled, now)
	q.dispatchLocked(now)
	q.unlock(now)
	return nil
}

// CancelRun cancels the queued and retrying commands of one run of a
// session and returns how many it cancelled. Commands of the run that have
// already started keep running.
func (q *Queue) CancelRun(sessionKey, runID string) int {
	return q.cancelWhere(sessionKey, func(t *Ticket) bool { return t.runID == runID && t.state != stRunning })
}

// CancelSession cancels every command of a session: queued and retrying ones,
// and running ones (their contexts are cancelled). It returns how many.
func (q *Queue) CancelSession(sessionKey string) int {
	return q.cancelWhere(sessionKey, func(*Ticket) bool { return true })
}

func (q *Queue) cancelWhere(sessionKey string, match func(*Ticket) bool) int {
	q.mu.Lock()
	now := q.now()
	var victims []*Ticket
	for _, ln := range q.allLanesLocked() {
		ls := ln.sessions[sessionKey]
		if ls == nil || ls.queue.len() == 0 {
			continue
		}
		// Take the queued victims out in one pass so cancelling a long
		// queue stays linear.
		n := len(victims)
		victims = ls.queue.extract(match, victims)
		for _, t := range victims[n:] {
			t.state = stDetached
		}
		if len(victims) > n {
			q.refreshLocked(ls, now, true)
		}
	}
	for _, t := range q.due.items {
		if (t.state == stRunning || t.state == stRetrying) && t.ls.sess.key == sessionKey && match(t) {
			victims = append(victims, t)
		}
	}
	slices.SortFunc(victims, func(a, b *Ticket) int { return compareUint(a.seq, b.seq) })
	for _, t := range victims {
		q.cancelLocked(t, ErrCancelled, now)
	}
	q.dispatchLocked(now)
	q.unlock(now)
	return len(victims)
}

func compareUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (q *Queue) cancelLocked(t *Ticket, err error, now int64) {
	if u := q.unconfirmed[t.id]; u != nil {
		q.countTimeoutLocked(u)
	}
	if t.state == stRunning {
		q.endAttemptLocked(t, endCancel, Result{}, err, now)
		return
	}
	if !q.dropLiveLocked(t, now) {
		return
	}
	q.terminalLocked(t, stCancelled, Result{}, err, now)
	q.cmdEventLocked(EventCancelled, t, now, err).setTerminal()
}

// dropLiveLocked takes t, which is not running, out of its session queue or
// its retry wait, before it ends; false when t is in no such state.
func (q *Queue) dropLiveLocked(t *Ticket, now int64) bool {
	switch t.state {
	case stDetached: // already taken out of its session queue
		q.due.Delete(t)
		q.addPendingLocked(t.ls, -1, now)
	case stQueued:
		ls := t.ls
		wasHead := ls.queue.front() == t
		ls.queue.remove(t)
		q.due.Delete(t)
		q.addPendingLocked(ls, -1, now)
		if wasHead {
			q.refreshLocked(ls, now, true)
		}
	case stRetrying:
		q.due.Delete(t)
		q.addPendingLocked(t.ls, -1, now)
	default:
		return false
	}
	return true
}
