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
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentlane/agentlane/internal/scheduling"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// logStep is one thing that happens to an eventLog: an event, the inbox's
// run finishing, or new caps.
type logStep struct {
	ev     *sessionapi.Event
	finish string
	limits func(*scheduling.RetentionLimits)
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// event is a non-terminal command event of run.
func event(run string) logStep {
	return logStep{ev: &sessionapi.Event{Type: "started", Time: t0, CommandID: "c", RunID: run}}
}

// text is an event of run whose JSON is about n bytes larger than event's.
func text(run string, n int) logStep {
	return logStep{ev: &sessionapi.Event{Type: "started", Time: t0, CommandID: "c", RunID: run, Text: strings.Repeat("x", n)}}
}

func submitted(run, cmd string) logStep {
	return logStep{ev: &sessionapi.Event{Type: "submitted", Time: t0, CommandID: cmd, RunID: run}}
}

func completed(run, cmd string) logStep {
	return logStep{ev: &sessionapi.Event{Type: "completed", Time: t0, CommandID: cmd, RunID: run, Terminal: true}}
}

func turn(run string) logStep {
	return logStep{ev: &sessionapi.Event{Type: sessionapi.EventTurn, Time: t0, RunID: run}}
}

func abort(run string) logStep {
	return logStep{ev: &sessionapi.Event{Type: sessionapi.EventAbort, Time: t0, RunID: run}}
}

// cluster is an event of no run.
func cluster() logStep {
	return logStep{ev: &sessionapi.Event{Type: sessionapi.EventPeerInvocation, Time: t0}}
}

func finish(run string) logStep { return logStep{finish: run} }

func caps(f func(*scheduling.RetentionLimits)) logStep { return logStep{limits: f} }

// command is a command of run that was submitted and ended.
func command(run, cmd string) []logStep { return []logStep{submitted(run, cmd), completed(run, cmd)} }

func steps(groups ...any) []logStep {
	var out []logStep
	for _, g := range groups {
		switch g := g.(type) {
		case logStep:
			out = append(out, g)
		case []logStep:
			out = append(out, g...)
		default:
			panic(fmt.Sprintf("steps: %T", g))
		}
	}
	return out
}

// eventSize is the JSON size of event(run) numbered id.
func eventSize(run string, id uint64) int64 {
	ev := *event(run).ev
	ev.ID = id
	data, _ := json.Marshal(ev)
	return int64(len(data))
}

// replay is what a reader at cursor is sent: "lost N" for an events_lost
// event, "<id> <run>" for a retained event.
func replay(l *eventLog, cursor uint64) ([]string, uint64) {
	items, next := l.after(cursor)
	var out []string
	for _, it := range items {
		if it.Lost > 0 {
			out = append(out, fmt.Sprintf("lost %d", it.Lost))
		}
		if e := it.Entry; e != nil {
			out = append(out, fmt.Sprintf("%d %s", e.id, e.run.id))
		}
	}
	return out, next
}

func run(t *testing.T, l *eventLog, s logStep) {
	t.Helper()
	switch {
	case s.ev != nil:
		l.append(*s.ev)
	case s.limits != nil:
		limits := l.limits
		s.limits(&limits)
		l.setLimits(limits)
	default:
		l.runFinished(s.finish)
	}
	checkLog(t, l)
}

// checkLog checks the log's invariants: the counts agree with the entries,
// every run is within its caps or holds only its newest event, the trace
// cap holds, and the newest event is retained.
func checkLog(t *testing.T, l *eventLog) {
	t.Helper()
	retained := 0
	var prev uint64
	for i, e := range l.entries {
		if e.id <= prev {
			t.Fatalf("entries out of order at %d: %d after %d", i, e.id, prev)
		}
		prev = e.id
		if !e.evicted {
			retained++
		}
	}
	if retained != l.retained || len(l.entries)-retained != l.evicted {
		t.Fatalf("counts: %d retained and %d evicted, the log says %d and %d", retained, len(l.entries)-retained, l.retained, l.evicted)
	}
	var bytes, evictedBytes int64
	for _, e := range l.entries {
		if e.evicted {
			evictedBytes += int64(len(e.data))
		} else {
			bytes += int64(len(e.data))
		}
	}
	if bytes != l.bytes || evictedBytes != l.evictedBytes {
		t.Fatalf("bytes: %d retained and %d evicted, the log says %d and %d", bytes, evictedBytes, l.bytes, l.evictedBytes)
	}
	if l.evictedBytes > l.bytes {
		t.Fatalf("%d bytes of evicted entries kept beside %d retained", l.evictedBytes, l.bytes)
	}
	if len(l.entries) > 0 && l.entries[0].evicted {
		t.Fatalf("the first entry is evicted")
	}
	inRuns := 0
	for id, r := range l.runs {
		var bytes int64
		for _, e := range r.entries {
			if e.evicted || e.run != r {
				t.Fatalf("run %q holds entry %d evicted=%v of run %q", id, e.id, e.evicted, e.run.id)
			}
			bytes += int64(len(e.data))
		}
		if bytes != r.bytes {
			t.Fatalf("run %q counts %d bytes, holds %d", id, r.bytes, bytes)
		}
		if len(r.entries) > 1 && (len(r.entries) > l.limits.MaxEventsPerRun || r.bytes > l.limits.MaxEventBytesPerRun) {
			t.Fatalf("run %q keeps %d events, %d bytes, beyond its caps", id, len(r.entries), r.bytes)
		}
		inRuns += len(r.entries)
	}
	if inRuns != l.retained {
		t.Fatalf("runs hold %d events, the log retains %d", inRuns, l.retained)
	}
	if l.retained > max(l.limits.MaxTraceEvents, 1) {
		t.Fatalf("%d events retained beyond maxTraceEvents %d", l.retained, l.limits.MaxTraceEvents)
	}
	if n := len(l.entries); l.lastID > 0 && (n == 0 || l.entries[n-1].id != l.lastID) {
		t.Fatalf("the newest event %d is not retained", l.lastID)
	}
}

func TestEventLog(t *testing.T) {
	cases := map[string]struct {
		limits func(*scheduling.RetentionLimits)
		steps  []logStep
		// cursor is the reader's Last-Event-ID.
		cursor uint64
		want   []string
	}{
		"everything is kept within the caps": {
			steps: steps(command("a", "1"), command("b", "2"), cluster()),
			want:  []string{"1 a", "2 a", "3 b", "4 b", "5 "},
		},
		"a run's oldest events go first beyond maxEventsPerRun": {
			limits: func(r *scheduling.RetentionLimits) { r.MaxEventsPerRun = 3 },
			steps:  steps(event("a"), event("a"), event("a"), event("a"), event("a")),
			want:   []string{"lost 2", "3 a", "4 a", "5 a"},
		},
		"maxEventsPerRun evicts within the run only, and each gap is counted": {
			limits: func(r *scheduling.RetentionLimits) { r.MaxEventsPerRun = 2 },
			steps:  steps(event("a"), event("b"), event("a"), event("b"), event("a"), event("a")),
			want:   []string{"lost 1", "2 b", "lost 1", "4 b", "5 a", "6 a"},
		},
		"a reader inside the retained range misses nothing before its first gap": {
			limits: func(r *scheduling.RetentionLimits) { r.MaxEventsPerRun = 2 },
			steps:  steps(event("a"), event("b"), event("a"), event("b"), event("a"), event("a")),
			cursor: 4,
			want:   []string{"5 a", "6 a"},
		},
		"a reader at a cursor before a gap is told of that gap only": {
			limits: func(r *scheduling.RetentionLimits) { r.MaxEventsPerRun = 2 },
			steps:  steps(event("a"), event("b"), event("a"), event("b"), event("a"), event("a")),
			cursor: 2,
			want:   []string{"lost 1", "4 b", "5 a", "6 a"},
		},
		"maxEventBytesPerRun evicts a run's oldest events, measured on their JSON": {
			limits: func(r *scheduling.RetentionLimits) { r.MaxEventBytesPerRun = 3*eventSize("a", 1) - 1 },
			steps:  steps(event("a"), event("a"), event("a"), event("a"), event("b")),
			want:   []string{"lost 2", "3 a", "4 a", "5 b"},
		},
		"a run keeps its newest event even when it alone is beyond maxEventBytesPerRun": {
			limits: func(r *scheduling.RetentionLimits) { r.MaxEventBytesPerRun = 1024 },
			steps:  steps(event("a"), text("a", 2000)),
			want:   []string{"lost 1", "2 a"},
		},
		"maxTraceEvents evicts the session's oldest events whatever their run": {
			limits: func(r *scheduling.RetentionLimits) { r.MaxTraceEvents = 3 },
			steps:  steps(event("a"), event("b"), event("a"), event("b"), cluster()),
			want:   []string{"lost 2", "3 a", "4 b", "5 "},
		},
		"maxRuns evicts the run that began first": {
			limits: func(r *scheduling.RetentionLimits) { r.MaxRuns = 2 },
			steps:  steps(command("a", "1"), command("b", "2"), command("c", "3")),
			want:   []string{"lost 2", "3 b", "4 b", "5 c", "6 c"},
		},
		"maxRuns never evicts the inbox's active run": {
			limits: func(r *scheduling.RetentionLimits) { r.MaxRuns = 1 },
			steps:  steps(turn("a"), command("a", "1"), command("b", "2"), command("c", "3")),
			want:   []string{"1 a", "2 a", "3 a", "lost 2", "6 c", "7 c"},
		},
		"an active run can be evicted once the runtime finishes it": {
			limits: func(r *scheduling.RetentionLimits) { r.MaxRuns = 1 },
			steps:  steps(turn("a"), command("a", "1"), command("b", "2"), finish("a")),
			want:   []string{"lost 3", "4 b", "5 b"},
		},
		"an aborted run can be evicted": {
			limits: func(r *scheduling.RetentionLimits) { r.MaxRuns = 1 },
			steps:  steps(turn("a"), abort("a"), command("b", "2")),
			want:   []string{"lost 2", "3 b", "4 b"},
		},
		"a new turn ends the previous run": {
			limits: func(r *scheduling.RetentionLimits) { r.MaxRuns = 1 },
			steps:  steps(turn("a"), command("a", "1"), turn("b")),
			want:   []string{"lost 3", "4 b"},
		},
		"maxRuns never evicts a run with a command in flight": {
			limits: func(r *scheduling.RetentionLimits) { r.MaxRuns = 1 },
			steps:  steps(submitted("a", "1"), command("b", "2"), command("c", "3")),
			want:   []string{"1 a", "lost 2", "4 c", "5 c"},
		},
		"a run whose commands all ended can be evicted": {
			limits: func(r *scheduling.RetentionLimits) { r.MaxRuns = 1 },
			steps:  steps(submitted("a", "1"), submitted("a", "2"), completed("a", "1"), command("b", "3"), completed("a", "2"), command("c", "4")),
			want:   []string{"lost 6", "7 c", "8 c"},
		},
		"the events of no run are not a run": {
			limits: func(r *scheduling.RetentionLimits) { r.MaxRuns = 1 },
			steps:  steps(cluster(), command("a", "1"), cluster(), command("b", "2")),
			want:   []string{"1 ", "lost 2", "4 ", "5 b", "6 b"},
		},
		"the events of no run are bounded like a run's": {
			limits: func(r *scheduling.RetentionLimits) { r.MaxEventsPerRun = 2 },
			steps:  steps(cluster(), cluster(), event("a"), cluster()),
			want:   []string{"lost 1", "2 ", "3 a", "4 "},
		},
		"lowering the caps trims at once": {
			steps: steps(event("a"), event("a"), event("b"), event("b"), event("c"),
				caps(func(r *scheduling.RetentionLimits) { r.MaxEventsPerRun, r.MaxRuns = 1, 2 })),
			want: []string{"lost 3", "4 b", "5 c"},
		},
		"raising the caps brings nothing back": {
			limits: func(r *scheduling.RetentionLimits) { r.MaxTraceEvents = 1 },
			steps:  steps(event("a"), event("a"), caps(func(r *scheduling.RetentionLimits) { r.MaxTraceEvents = 10 }), event("a")),
			want:   []string{"lost 1", "2 a", "3 a"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			limits := scheduling.RetentionLimitsOf(nil)
			if tc.limits != nil {
				tc.limits(&limits)
			}
			l := newEventLog(limits, 0)
			for _, s := range tc.steps {
				run(t, l, s)
			}
			got, next := replay(l, tc.cursor)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("replay after %d (-want,+got):\n%s", tc.cursor, diff)
			}
			if next != l.lastID {
				t.Errorf("cursor after the replay = %d, want the last id %d", next, l.lastID)
			}
			if again, _ := replay(l, next); len(again) != 0 {
				t.Errorf("a reader at the last id is sent %v", again)
			}
		})
	}
}

// A long session under small caps: after every step the invariants hold and
// a reader from any cursor is sent each id after it exactly once, as an
// event or counted in an events_lost.
func TestEventLogAccountsForEveryID(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	limits := scheduling.RetentionLimits{MaxRuns: 3, MaxEventsPerRun: 7, MaxEventBytesPerRun: 6 * eventSize("r0", 1000),
		MaxTraceEvents: 15, MaxFinishedTasks: 1}
	l := newEventLog(limits, 0)
	inFlight := map[string]string{}
	for i := range 3000 {
		runID := fmt.Sprintf("r%d", i/40+rng.IntN(3))
		var s logStep
		switch k := rng.IntN(10); {
		case k == 0:
			s = turn(runID)
		case k == 1:
			s = finish(runID)
		case k == 2:
			s = cluster()
		case k < 6:
			cmd := fmt.Sprint(i)
			inFlight[cmd] = runID
			s = submitted(runID, cmd)
		case k < 8:
			for cmd, r := range inFlight {
				delete(inFlight, cmd)
				s = completed(r, cmd)
				break
			}
			if s.ev == nil {
				s = event(runID)
			}
		default:
			s = text(runID, rng.IntN(200))
		}
		run(t, l, s)
		if i%100 != 0 {
			continue
		}
		for cursor := uint64(0); cursor <= l.lastID; cursor += uint64(1 + rng.IntN(20)) {
			items, next := l.after(cursor)
			seen := cursor
			for _, it := range items {
				seen += it.Lost
				if e := it.Entry; e != nil {
					if e.id != seen+1 {
						t.Fatalf("step %d, cursor %d: event %d after %d ids accounted for", i, cursor, e.id, seen)
					}
					seen = e.id
				}
			}
			if seen != l.lastID || next != l.lastID {
				t.Fatalf("step %d, cursor %d: %d ids accounted for, cursor %d, last id %d", i, cursor, seen, next, l.lastID)
			}
		}
	}
	if len(l.order) > limits.MaxRuns+len(inFlight)+2 {
		t.Errorf("%d runs kept with %d commands in flight", len(l.order), len(inFlight))
	}
}
