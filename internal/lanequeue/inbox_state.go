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

import "slices"

// InboxState is what a session's inbox holds that outlives a run: the
// messages waiting for a turn and the /queue override. The binary keeps it
// where a restarted process finds it again (Inbox.State, Inbox.Restore).
// The active run is not part of it: the run a restart interrupted cannot
// be finished by its runtime in the new process, and would hold the
// restored messages back forever.
type InboxState struct {
	// Queued are the messages waiting for a turn, oldest first.
	Queued []Message
	// Dropped are the summary lines of the messages dropped under
	// DropSummarize, waiting for their summary turn; DroppedMore counts the
	// messages dropped past Inbox's MaxSummaryLines.
	Dropped     []Message
	DroppedMore int
	// Override is the /queue override in force, nil when the session's
	// defaults apply.
	Override *MessageOptions
	// Recent are the IDs of the last messages the session took (queued or
	// steered), oldest first, at most the inbox's MaxRememberedIDs: a
	// message re-delivered under one of them after a restart is still a
	// duplicate.
	Recent []string
}

// Empty tells whether the state holds nothing.
func (st InboxState) Empty() bool {
	return len(st.Queued) == 0 && len(st.Dropped) == 0 && st.DroppedMore == 0 && st.Override == nil && len(st.Recent) == 0
}

// State returns a copy of what the session's inbox holds.
func (in *Inbox) State(key string) InboxState {
	in.mu.Lock()
	defer in.mu.Unlock()
	s := in.sessions[key]
	if s == nil {
		return InboxState{}
	}
	st := InboxState{Queued: slices.Clone(s.queued), Dropped: slices.Clone(s.dropped), DroppedMore: s.droppedMore}
	if s.override != nil {
		o := *s.override
		st.Override = &o
	}
	st.Recent = s.recent.ordered()
	return st
}

// Restore puts back what a session's inbox held in an earlier process: the
// override, unless one was set since, the remembered message IDs, older
// than any taken since, and the messages, before any queued since. The
// messages then wait for their turn as if just posted: the
// debounce runs from now, and the session's cap applies at the next post.
// An override the inbox cannot use is ignored.
func (in *Inbox) Restore(key string, st InboxState) {
	in.mu.Lock()
	defer in.unlock()
	s := in.sessionLocked(key)
	if o := st.Override; o != nil && s.override == nil && o.Validate() == nil {
		restored := *o
		s.override = &restored
	}
	if len(st.Recent) > 0 {
		s.recent.restore(st.Recent, in.maxIDs)
	}
	if len(st.Queued) == 0 && len(st.Dropped) == 0 && st.DroppedMore == 0 {
		return
	}
	s.queued = append(slices.Clone(st.Queued), s.queued...)
	s.dropped = append(slices.Clone(st.Dropped), s.dropped...)
	if extra := len(s.dropped) - in.maxLines; extra > 0 {
		s.dropped, s.droppedMore = s.dropped[:in.maxLines], s.droppedMore+extra
	}
	s.droppedMore += max(st.DroppedMore, 0)
	s.recount()
	s.quietSince = in.clock.Now()
	in.drainLocked(s)
}
