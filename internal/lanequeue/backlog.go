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

import "sync"

// backlog is the delivery of a subscription made with SubscribeBacklog:
// events wait in a slice that grows with need, up to limit, instead of a
// channel buffer allocated whole up front. A Subscribe(4096) costs about a
// megabyte per queue whether or not events ever pile up; a backlog costs
// what is waiting. A goroutine hands the events over on an unbuffered
// channel, so delivery is asynchronous: a reader sees an event some time
// after the queue produced it, in order.
type backlog struct {
	limit int
	mu    sync.Mutex
	// events wait oldest first; the first is the one being handed over.
	events []Event
	// wake tells the pump that events arrived or the subscription ends.
	wake chan struct{}
	// ending is set when the queue closes: the pump hands over what waits,
	// then closes the channel. stopped is set when the subscription closes:
	// the pump closes the channel at once.
	ending, stopped bool
}

// SubscribeBacklog is Subscribe with a backlog in place of a buffer: up to
// limit events wait for the reader (beyond that they are dropped and
// counted in Dropped), and memory is taken only for those that wait. After
// the queue closes, the events still waiting are delivered before the
// channel closes; after Close they are not.
func (q *Queue) SubscribeBacklog(limit int) *Subscription {
	b := &backlog{limit: max(limit, 1), wake: make(chan struct{}, 1)}
	s := &Subscription{q: q, ch: make(chan Event), backlog: b}
	q.emitMu.Lock()
	defer q.emitMu.Unlock()
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		s.closed = true
		close(s.ch)
		return s
	}
	go b.pump(s.ch)
	q.subs = append(q.subs[:len(q.subs):len(q.subs)], s)
	return s
}

// push adds ev, or reports that the backlog is full.
func (b *backlog) push(ev Event) bool {
	b.mu.Lock()
	if len(b.events) >= b.limit {
		b.mu.Unlock()
		return false
	}
	b.events = append(b.events, ev)
	b.mu.Unlock()
	b.signal()
	return true
}

// end makes the pump finish: after delivering what waits when drain is
// set (the queue closed), at once otherwise (the subscription closed).
func (b *backlog) end(drain bool) {
	b.mu.Lock()
	if drain {
		b.ending = true
	} else {
		b.stopped = true
	}
	b.mu.Unlock()
	b.signal()
}

func (b *backlog) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// pump hands the events over to ch in order until the backlog ends.
func (b *backlog) pump(ch chan<- Event) {
	defer close(ch)
	for {
		b.mu.Lock()
		stopped, ending, n := b.stopped, b.ending, len(b.events)
		var next Event
		if n > 0 {
			next = b.events[0]
		}
		b.mu.Unlock()
		switch {
		case stopped || (ending && n == 0):
			return
		case n == 0:
			<-b.wake
			continue
		}
		select {
		case ch <- next:
			b.mu.Lock()
			b.events[0] = Event{}
			if b.events = b.events[1:]; len(b.events) == 0 {
				b.events = nil // give the grown slice back
			}
			b.mu.Unlock()
		case <-b.wake:
			// More events, or the end: look again.
		}
	}
}
