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
	"encoding/json"
	"slices"
	"sort"

	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/scheduling"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// eventLog is one session's retained events, numbered from base+1 and
// grouped by run, bounded by the session's retention caps. Each append evicts, oldest
// first:
//
//   - the oldest events of the appended event's run beyond maxEventsPerRun
//     events or maxEventBytesPerRun bytes of JSON (a run keeps at least its
//     newest event, however large);
//   - the session's oldest events beyond maxTraceEvents, whatever their run;
//   - every event of the runs beyond maxRuns, the run that began first
//     first, skipping the runs still going: the run the inbox started last
//     (until it is finished or aborted), a run with a command in flight
//     (submitted and not yet ended), and the run of the newest event.
//
// The events of no run (cluster events, commands submitted without a run
// id) form one group, bounded like a run but not counted by maxRuns.
//
// Ids are never reused or renumbered: a reader at a cursor learns from the
// gaps in the ids after it exactly how many events it missed, and where.
// The newest event is always retained.
//
// Not safe for concurrent use; sessionLog guards it.
type eventLog struct {
	limits scheduling.RetentionLimits
	// base is the id before the first: the manager run's event id base.
	base   uint64
	lastID uint64
	// entries are the retained events in id order, among evicted ones not
	// yet compacted away; entries[0], if any, is retained.
	entries []*logEntry
	// evicted counts the evicted entries still in entries, evictedBytes
	// their size; retained and bytes count the others.
	evicted, retained   int
	evictedBytes, bytes int64
	// runs are the groups of events by run id; "" is the events of no run.
	runs map[string]*runLog
	// order lists the runs with an id, in the order they began.
	order []*runLog
	// active is the run the inbox started last, until it finished or was
	// aborted.
	active string
}

// logEntry is one event as the stream sends it.
type logEntry struct {
	id  uint64
	typ string
	// data is the event's JSON, which its size is measured on.
	data    []byte
	run     *runLog
	evicted bool
}

// runLog is one run's retained events.
type runLog struct {
	id string
	// entries are the run's retained events, oldest first.
	entries []*logEntry
	bytes   int64
	// inFlight are the run's commands submitted and not yet ended.
	inFlight map[string]bool
}

// logItem is what a reader has not seen yet: Lost ids no longer retained,
// then the retained event Entry (nil after a trailing gap).
type logItem struct {
	Lost  uint64
	Entry *logEntry
}

// newEventLog returns an empty log whose first event is base+1.
func newEventLog(limits scheduling.RetentionLimits, base uint64) *eventLog {
	return &eventLog{limits: limits, base: base, lastID: base, runs: map[string]*runLog{}}
}

// append numbers ev, keeps it and evicts what the caps no longer allow.
func (l *eventLog) append(ev sessionapi.Event) {
	l.lastID++
	ev.ID = l.lastID
	data, _ := json.Marshal(ev) // every field of Event encodes
	r := l.run(ev.RunID)
	switch {
	case ev.Type == sessionapi.EventTurn:
		l.active = ev.RunID
	case ev.Type == sessionapi.EventAbort && ev.RunID == l.active:
		l.active = ""
	}
	if ev.CommandID != "" && ev.RunID != "" {
		switch {
		case ev.Terminal:
			delete(r.inFlight, ev.CommandID)
		case ev.Type == string(lanequeue.EventSubmitted):
			r.inFlight[ev.CommandID] = true
		}
	}
	e := &logEntry{id: ev.ID, typ: ev.Type, data: data, run: r}
	l.entries = append(l.entries, e)
	l.retained++
	r.entries = append(r.entries, e)
	r.bytes += int64(len(data))
	l.bytes += int64(len(data))
	l.trimRun(r)
	l.trim()
}

// setLimits applies new caps to what is retained.
func (l *eventLog) setLimits(limits scheduling.RetentionLimits) {
	if limits == l.limits {
		return
	}
	l.limits = limits
	for _, r := range l.runs {
		l.trimRun(r)
	}
	l.trim()
}

// runFinished records that the inbox's run ended, so that maxRuns may
// evict it.
func (l *eventLog) runFinished(runID string) {
	if runID != "" && runID == l.active {
		l.active = ""
		l.trim()
	}
}

// after returns what a reader that has seen every id up to cursor has not
// seen, and the cursor after it. A cursor below base counts from base.
func (l *eventLog) after(cursor uint64) ([]logItem, uint64) {
	cursor = max(cursor, l.base)
	if cursor >= l.lastID {
		return nil, cursor
	}
	i := sort.Search(len(l.entries), func(i int) bool { return l.entries[i].id > cursor })
	var out []logItem
	for _, e := range l.entries[i:] {
		if e.evicted {
			continue
		}
		out = append(out, logItem{Lost: e.id - cursor - 1, Entry: e})
		cursor = e.id
	}
	if cursor < l.lastID {
		out = append(out, logItem{Lost: l.lastID - cursor})
	}
	return out, l.lastID
}

// run returns the group of runID, creating it.
func (l *eventLog) run(runID string) *runLog {
	r := l.runs[runID]
	if r == nil {
		r = &runLog{id: runID, inFlight: map[string]bool{}}
		l.runs[runID] = r
		if runID != "" {
			l.order = append(l.order, r)
		}
	}
	return r
}

// trimRun evicts r's oldest events beyond the per-run caps, keeping its
// newest.
func (l *eventLog) trimRun(r *runLog) {
	for len(r.entries) > 1 && (len(r.entries) > l.limits.MaxEventsPerRun || r.bytes > l.limits.MaxEventBytesPerRun) {
		l.evictOldest(r)
	}
}

// trim evicts the oldest events beyond maxTraceEvents and the runs beyond
// maxRuns, then drops what evictions left empty.
func (l *eventLog) trim() {
	for l.retained > max(l.limits.MaxTraceEvents, 1) {
		l.evictOldest(l.entries[0].run)
		l.dropEvictedHead()
	}
	for len(l.order) > l.limits.MaxRuns {
		i := slices.IndexFunc(l.order, func(r *runLog) bool { return !l.going(r) })
		if i < 0 {
			break // every run beyond the cap is still going
		}
		r := l.order[i]
		for len(r.entries) > 0 {
			l.evictOldest(r)
		}
		l.forget(r)
	}
	l.dropEvictedHead()
	l.order = slices.DeleteFunc(l.order, func(r *runLog) bool {
		if len(r.entries) > 0 || l.going(r) {
			return false
		}
		delete(l.runs, r.id)
		return true
	})
	// Evicted entries in the middle stay until they are as many, or as
	// large, as the retained ones (a stream may still be writing them).
	if (l.evicted > 64 && l.evicted > len(l.entries)/2) || l.evictedBytes > l.bytes {
		l.entries = slices.DeleteFunc(l.entries, func(e *logEntry) bool { return e.evicted })
		l.evicted, l.evictedBytes = 0, 0
	}
}

// going tells whether r may not be evicted by maxRuns.
func (l *eventLog) going(r *runLog) bool {
	if r.id == l.active || len(r.inFlight) > 0 {
		return true
	}
	n := len(l.entries)
	return n > 0 && l.entries[n-1].run == r
}

// evictOldest evicts r's oldest event.
func (l *eventLog) evictOldest(r *runLog) {
	e := r.entries[0]
	r.entries[0] = nil
	r.entries = r.entries[1:]
	r.bytes -= int64(len(e.data))
	l.bytes -= int64(len(e.data))
	e.evicted = true
	l.evicted++
	l.evictedBytes += int64(len(e.data))
	l.retained--
}

// dropEvictedHead removes the evicted entries before the oldest retained.
func (l *eventLog) dropEvictedHead() {
	n := 0
	for n < len(l.entries) && l.entries[n].evicted {
		l.evictedBytes -= int64(len(l.entries[n].data))
		l.entries[n] = nil
		n++
	}
	l.entries = l.entries[n:]
	l.evicted -= n
}

// forget drops the record of a run that holds no event.
func (l *eventLog) forget(r *runLog) {
	delete(l.runs, r.id)
	l.order = slices.DeleteFunc(l.order, func(o *runLog) bool { return o == r })
}
