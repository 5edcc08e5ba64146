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
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// DefaultRetainedEvents is how many events each session's log keeps for
// clients that reconnect.
const DefaultRetainedEvents = 1024

// eventHub keeps a bounded log of every session's events and wakes the
// streams that follow it. It implements controller.SessionObserver.
type eventHub struct {
	retain int
	clock  clock.PassiveClock

	mu       sync.Mutex
	sessions map[types.NamespacedName]*sessionLog
}

// sessionLog is one session's retained events, oldest first, numbered from 1.
type sessionLog struct {
	mu     sync.Mutex
	events []sessionapi.Event // ring of at most retain events
	start  int                // index of the oldest event in events
	lastID uint64
	// wake is closed, and replaced, when an event is appended.
	wake chan struct{}
	// runtimes counts the streams connected as the session's runtime.
	runtimes int
}

func newEventHub(retain int, c clock.PassiveClock) *eventHub {
	if retain <= 0 {
		retain = DefaultRetainedEvents
	}
	return &eventHub{retain: retain, clock: c, sessions: map[types.NamespacedName]*sessionLog{}}
}

// log returns the session's log, creating it.
func (h *eventHub) log(key types.NamespacedName) *sessionLog {
	h.mu.Lock()
	defer h.mu.Unlock()
	l := h.sessions[key]
	if l == nil {
		l = &sessionLog{wake: make(chan struct{})}
		h.sessions[key] = l
	}
	return l
}

// CommandEvent implements controller.SessionObserver.
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
	h.append(types.NamespacedName{Namespace: queue.Namespace, Name: ev.SessionKey}, out)
}

// InboxEvent implements controller.SessionObserver.
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
	case lanequeue.InboxSteer:
		out.Type = sessionapi.EventSteer
	case lanequeue.InboxAbort:
		out.Type = sessionapi.EventAbort
	case lanequeue.InboxDropped:
		out.Type = sessionapi.EventMessageDropped
	default:
		out.Type = string(ev.Type)
	}
	for _, m := range ev.Messages {
		out.Messages = append(out.Messages, messageOf(m))
	}
	h.append(types.NamespacedName{Namespace: queue.Namespace, Name: ev.Session}, out)
}

// ClusterEvent implements controller.SessionObserver.
func (h *eventHub) ClusterEvent(session types.NamespacedName, ev sessionapi.Event) {
	if ev.Time.IsZero() {
		ev.Time = h.clock.Now().UTC()
	}
	h.append(session, ev)
}

// SessionReleased implements controller.SessionObserver: the deleted
// session's log goes, and its streams end.
func (h *eventHub) SessionReleased(namespace, name string) {
	key := types.NamespacedName{Namespace: namespace, Name: name}
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
	defer l.mu.Unlock()
	if l.wake == nil {
		return // released
	}
	l.lastID++
	ev.ID = l.lastID
	if len(l.events) < h.retain {
		l.events = append(l.events, ev)
	} else {
		l.events[l.start] = ev
		l.start = (l.start + 1) % len(l.events)
	}
	close(l.wake)
	l.wake = make(chan struct{})
}

// after returns the retained events after id, how many events after id are
// no longer retained, and a channel closed when the next event arrives (nil
// once the session was released).
func (l *sessionLog) after(id uint64) (evs []sessionapi.Event, lost uint64, wake <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := uint64(len(l.events))
	if id >= l.lastID || n == 0 {
		return nil, 0, l.wake
	}
	oldest := l.lastID - n + 1
	if id+1 < oldest {
		lost = oldest - id - 1
		id = oldest - 1
	}
	skip := int(id + 1 - oldest)
	evs = make([]sessionapi.Event, 0, int(n)-skip)
	for i := skip; i < int(n); i++ {
		evs = append(evs, l.events[(l.start+i)%int(n)])
	}
	return evs, lost, l.wake
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
