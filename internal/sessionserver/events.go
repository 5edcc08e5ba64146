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
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/scheduling"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// DefaultRetainedEvents is the default ceiling on the events each session's
// log keeps (Server.RetainedEvents): the AgentSession default of
// spec.retention.maxTraceEvents, so that by default every session keeps
// what its spec asks for.
const DefaultRetainedEvents = scheduling.DefaultMaxTraceEvents

// eventHub keeps a bounded log of every session's events and wakes the
// streams that follow it. It implements scheduling.SessionObserver.
type eventHub struct {
	// ceiling caps every session's maxTraceEvents.
	ceiling int
	// base is the id before every session's first event in this manager
	// run (eventIDBase).
	base  uint64
	clock clock.PassiveClock
	// calls learns of each command that ended, and forgets the ended
	// commands beyond the session's maxFinishedTasks.
	calls *calls
	// pending learns of each command that ended, and of each session
	// released, to give back what they held of the bounds.
	pending *pendingLedger
	// inboxes learn of each turn, which takes messages from the inbox, and
	// of each session released.
	inboxes *inboxKeeper

	mu       sync.Mutex
	sessions map[types.NamespacedName]*sessionLog
}

// sessionLog is one session's retained events, and its streams.
type sessionLog struct {
	mu     sync.Mutex
	events *eventLog
	// wake is closed, and replaced, when an event is appended.
	wake chan struct{}
	// runtimes counts the streams connected as the session's runtime.
	runtimes int
}

func newEventHub(ceiling int, base uint64, c clock.PassiveClock, cs *calls, p *pendingLedger) *eventHub {
	if ceiling <= 0 {
		ceiling = DefaultRetainedEvents
	}
	return &eventHub{ceiling: ceiling, base: base, clock: c, calls: cs, pending: p, sessions: map[types.NamespacedName]*sessionLog{}}
}

// limits are a session's retention caps, with maxTraceEvents within the
// hub's ceiling.
func (h *eventHub) limits(r scheduling.RetentionLimits) scheduling.RetentionLimits {
	r.MaxTraceEvents = min(r.MaxTraceEvents, h.ceiling)
	return r
}

// setBase makes base the id before the first event of the sessions whose
// log is created from now on.
func (h *eventHub) setBase(base uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.base = base
}

// log returns the session's log, creating it.
func (h *eventHub) log(key types.NamespacedName) *sessionLog {
	h.mu.Lock()
	defer h.mu.Unlock()
	l := h.sessions[key]
	if l == nil {
		// Until the AgentSession controller reports the session's caps,
		// the defaults apply.
		l = &sessionLog{wake: make(chan struct{}), events: newEventLog(h.limits(scheduling.RetentionLimitsOf(nil)), h.base)}
		h.sessions[key] = l
	}
	return l
}

// CommandEvent implements scheduling.SessionObserver.
func (h *eventHub) CommandEvent(queue types.NamespacedName, ev lanequeue.Event) {
	out := sessionapi.Event{
		Type:        string(ev.Type),
		Time:        ev.Time,
		CommandID:   ev.CommandID,
		CommandType: ev.CommandType,
		Lane:        ev.Lane,
		RunID:       ev.RunID,
		Attempt:     ev.Attempt,
		Error:       ev.Error,
		Terminal:    ev.Terminal,
		Labels:      identityOf(ev.Labels),
	}
	if ev.Delay > 0 {
		out.Delay = &metav1.Duration{Duration: ev.Delay}
	}
	session := types.NamespacedName{Namespace: queue.Namespace, Name: ev.SessionKey}
	if ev.Terminal && ev.CommandID != "" {
		h.pending.ended(session, ev.CommandID)
	}
	h.append(session, out)
}

// InboxEvent implements scheduling.SessionObserver.
func (h *eventHub) InboxEvent(queue types.NamespacedName, ev lanequeue.InboxEvent) {
	out := sessionapi.Event{
		Time:    h.clock.Now().UTC(),
		RunID:   ev.RunID,
		Text:    ev.Text,
		Summary: ev.Summary,
		Channel: ev.Channel,
		Thread:  ev.Thread,
	}
	switch ev.Type {
	case lanequeue.InboxTurn:
		out.Type = sessionapi.EventTurn
		out.Waited = &metav1.Duration{Duration: ev.Waited}
		if h.inboxes != nil {
			h.inboxes.turnTaken(queue, ev.Session)
		}
	case lanequeue.InboxSteer:
		out.Type = sessionapi.EventSteer
	case lanequeue.InboxAbort:
		out.Type = sessionapi.EventAbort
	case lanequeue.InboxDropped:
		out.Type = sessionapi.EventMessageDropped
		out.Superseded, out.DroppedCount = ev.Superseded, ev.Count
	case lanequeue.InboxQueued:
		out.Type = sessionapi.EventMessageQueued
	case lanequeue.InboxWaiting:
		out.Type = sessionapi.EventMessageWaiting
		out.Waited = &metav1.Duration{Duration: ev.Waited}
	default:
		out.Type = string(ev.Type)
	}
	for _, m := range ev.Messages {
		out.Messages = append(out.Messages, messageOf(m))
	}
	h.append(types.NamespacedName{Namespace: queue.Namespace, Name: ev.Session}, out)
}

// ClusterEvent implements scheduling.SessionObserver.
func (h *eventHub) ClusterEvent(session types.NamespacedName, ev sessionapi.Event) {
	if ev.Time.IsZero() {
		ev.Time = h.clock.Now().UTC()
	}
	h.append(session, ev)
}

// SessionRetention implements scheduling.SessionObserver: the session's
// log, and its ended commands, are trimmed to the caps at once.
func (h *eventHub) SessionRetention(session types.NamespacedName, limits scheduling.RetentionLimits) {
	l := h.log(session)
	l.mu.Lock()
	l.events.setLimits(h.limits(limits))
	l.mu.Unlock()
	h.calls.trim(session, limits.MaxFinishedTasks)
}

// SessionReleased implements scheduling.SessionObserver: the deleted
// session's log goes, and its streams end.
func (h *eventHub) SessionReleased(namespace, name string) {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	h.pending.sessionReleased(key)
	if h.inboxes != nil {
		h.inboxes.forget(key)
	}
	h.mu.Lock()
	l := h.sessions[key]
	delete(h.sessions, key)
	h.mu.Unlock()
	if l != nil {
		l.mu.Lock()
		close(l.wake)
		l.wake = nil
		l.mu.Unlock()
	}
}

func (h *eventHub) append(key types.NamespacedName, ev sessionapi.Event) {
	l := h.log(key)
	l.mu.Lock()
	if l.wake == nil {
		l.mu.Unlock()
		return // released
	}
	l.events.append(ev)
	keep := l.events.limits.MaxFinishedTasks
	close(l.wake)
	l.wake = make(chan struct{})
	l.mu.Unlock()
	if ev.Terminal && ev.CommandID != "" {
		h.calls.ended(key, ev.CommandID, keep)
	}
}

// runFinished tells the session's log that the inbox's run ended.
func (h *eventHub) runFinished(key types.NamespacedName, runID string) {
	l := h.log(key)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events.runFinished(runID)
}

// after returns what a stream that has seen every event up to cursor has
// not seen, the cursor after it, and a channel closed when the next event
// arrives (nil once the session was released).
func (l *sessionLog) after(cursor uint64) ([]logItem, uint64, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	items, next := l.events.after(cursor)
	return items, next, l.wake
}

// attachRuntime counts a runtime stream in or out and returns how many are
// connected.
func (l *sessionLog) attachRuntime(delta int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runtimes += delta
	return l.runtimes
}

func (l *sessionLog) hasRuntime() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.runtimes > 0
}

func identityOf(id lanequeue.Identity) sessionapi.Identity {
	return sessionapi.Identity{TenantID: id.TenantID, Principal: id.Principal,
		AgentTemplateID: id.AgentTemplateID, CorrelationID: id.CorrelationID}
}

func messageOf(m lanequeue.Message) sessionapi.Message {
	return sessionapi.Message{ID: m.ID, Text: m.Text, Channel: m.Channel, Thread: m.Thread, ReceivedAt: m.ReceivedAt}
}
