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

package direct

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/agentlane/agentlane/internal/workerproto"
)

// Default bounds of Options.
const (
	DefaultMaxWorkers             = 4096
	DefaultMaxWorkersPerNamespace = 256
)

var (
	// ErrWorkerLost: the stream that held the attempt ended before its
	// Result arrived (the lane's retry policy takes the attempt).
	ErrWorkerLost = errors.New("direct: the worker's stream was lost while it held the attempt")
	// ErrInterrupted: the hub stopped leading (Close) while the attempt
	// waited or ran; another leader may run the command again.
	ErrInterrupted = errors.New("direct: the manager stopped leading while the attempt waited or ran")
	// ErrPayloadTooLarge: the task's frame would exceed
	// workerproto.MaxDirectFrameBytes, which a worker refuses; the attempt
	// is not sent. Run returns it marked lanequeue.Permanent.
	ErrPayloadTooLarge = fmt.Errorf("direct: the task's payload is over %d bytes, the most a Direct frame carries", MaxPayloadBytes)
	// ErrInvalidPayload: the task's payload is not valid JSON; the attempt
	// is failed without reaching the worker. Run returns it marked
	// lanequeue.Permanent.
	ErrInvalidPayload = errors.New("direct: the task's payload is not valid JSON")
	// errDuplicateAttempt: Run was called twice for one attempt.
	errDuplicateAttempt = errors.New("direct: this attempt of the task already waits or runs in the hub")
)

// MaxPayloadBytes is the largest payload Run sends: the frame around it
// (the task's names, each at most 253 bytes) fits in the rest of
// workerproto.MaxDirectFrameBytes.
const MaxPayloadBytes = workerproto.MaxDirectFrameBytes - 4<<10

// Options configure a Hub. Admit is required; zero values of the others
// take their defaults.
type Options struct {
	Admit Admitter
	// Refresh checks the rotated token of a Token frame; nil ends a stream
	// that sends one, as a protocol violation.
	Refresh Refresher
	Manager string
	Clock   clock.WithTicker
	Log     logr.Logger
	// PingInterval and DeadAfter default to workerproto.DirectPingInterval
	// and workerproto.DirectDeadAfter.
	PingInterval, DeadAfter time.Duration
	// MaxWorkers bounds the streams of the hub, MaxWorkersPerNamespace those
	// of one namespace (so that one tenant cannot take every stream).
	MaxWorkers, MaxWorkersPerNamespace int
}

// WorkerInfo describes a connected worker.
type WorkerInfo struct {
	Namespace, Name, Node, Incarnation string
	Capacity, Busy                     int
	Draining                           bool
	// Since is when its stream was admitted.
	Since time.Time
}

// Hub holds the Direct streams of the leading manager and runs attempts on
// them. Its zero value is not usable: call NewHub.
type Hub struct {
	o     Options
	clock clock.WithTicker
	after func(time.Duration, func()) stopper

	mu sync.Mutex
	// leading is true between Lead and Close; runID is the run's name.
	leading bool
	runID   string
	// namespaces has an entry while a namespace has a worker or a waiter.
	namespaces map[string]*namespace
	// streams counts the admitted streams that are not gone.
	streams int
	// attempts has every attempt whose Run is waiting or running, and every
	// attempt still held by a stream after its Run returned (until its
	// Result or the stream's end); held counts them per task.
	attempts map[attemptKey]*call
	held     map[taskKey]int
}

type taskKey struct{ ns, id string }

type attemptKey struct {
	taskKey
	attempt int
}

// namespace is the workers and waiters of one namespace.
type namespace struct {
	name string
	// workers indexes list by worker name; list is what Run scans.
	workers map[string]*stream
	list    []*stream
	// waiters, oldest first, linked through call.prev/next.
	waiters callList
	g       nsGauges
}

// NewHub returns a hub that refuses streams and runs until Lead is called.
func NewHub(o Options) *Hub {
	if o.Admit == nil {
		panic("direct: Options.Admit is required")
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.PingInterval <= 0 {
		o.PingInterval = workerproto.DirectPingInterval
	}
	if o.DeadAfter <= 0 {
		o.DeadAfter = workerproto.DirectDeadAfter
	}
	if o.MaxWorkers <= 0 {
		o.MaxWorkers = DefaultMaxWorkers
	}
	if o.MaxWorkersPerNamespace <= 0 {
		o.MaxWorkersPerNamespace = DefaultMaxWorkersPerNamespace
	}
	if o.Log.GetSink() == nil {
		o.Log = logr.Discard()
	}
	h := &Hub{
		o:          o,
		clock:      o.Clock,
		namespaces: map[string]*namespace{},
		attempts:   map[attemptKey]*call{},
		held:       map[taskKey]int{},
	}
	h.after = afterFunc(o.Clock)
	return h
}

// Lead starts a run as leader: runID goes in every Welcome, and the hub
// admits streams and runs attempts until Close.
func (h *Hub) Lead(runID string) {
	if h.isLeading(runID) {
		return
	}
	// A new run without Close: what the earlier run sent is gone for the
	// workers (their Welcome named it).
	h.Close()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.leading = true
	h.runID = runID
}

// isLeading tells whether the hub leads run runID.
func (h *Hub) isLeading(runID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.leading && h.runID == runID
}

// Close ends every stream and makes every Run that waits or runs return
// ErrInterrupted; until Lead is called again the hub refuses streams (503
// NotLeader) and Run returns ErrInterrupted.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.leading = false
	for _, ns := range h.namespaces {
		for len(ns.list) > 0 {
			h.loseLocked(ns.list[0], EndClosed, ErrInterrupted)
		}
		for c := ns.waiters.head; c != nil; c = ns.waiters.head {
			ns.waiters.remove(c)
			h.forgetLocked(c)
			c.finishLocked(ErrInterrupted)
		}
		h.gcNamespaceLocked(ns)
	}
}

// Holds tells whether an attempt of task id of namespace waits or runs in
// the hub. An attempt whose Run returned (timeout, cancel) still counts
// while its worker holds it, until its Result or the end of the stream.
func (h *Hub) Holds(namespace, id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held[taskKey{namespace, id}] > 0
}

// Workers lists the connected workers.
func (h *Hub) Workers() []WorkerInfo {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []WorkerInfo
	for _, ns := range h.namespaces {
		for _, s := range ns.list {
			out = append(out, WorkerInfo{
				Namespace:   s.hello.Namespace,
				Name:        s.hello.Worker,
				Node:        s.hello.Node,
				Incarnation: s.hello.Incarnation,
				Capacity:    s.hello.Capacity,
				Busy:        s.busy,
				Draining:    s.draining,
				Since:       s.since,
			})
		}
	}
	return out
}

// namespaceLocked returns the state of namespace name, made if missing.
func (h *Hub) namespaceLocked(name string) *namespace {
	ns := h.namespaces[name]
	if ns == nil {
		ns = &namespace{name: name, workers: map[string]*stream{}, g: newNSGauges(name)}
		h.namespaces[name] = ns
	}
	return ns
}

// gcNamespaceLocked drops a namespace with no worker and no waiter, and its
// series.
func (h *Hub) gcNamespaceLocked(ns *namespace) {
	if len(ns.list) > 0 || ns.waiters.head != nil || h.namespaces[ns.name] != ns {
		return
	}
	delete(h.namespaces, ns.name)
	deleteNSGauges(ns.name)
}

// forgetLocked removes c from the hub's index of attempts.
func (h *Hub) forgetLocked(c *call) {
	if h.attempts[c.key] != c {
		return
	}
	delete(h.attempts, c.key)
	if n := h.held[c.key.taskKey]; n > 1 {
		h.held[c.key.taskKey] = n - 1
	} else {
		delete(h.held, c.key.taskKey)
	}
	c.stopTimerLocked()
}

// loseLocked ends stream s for reason: every attempt it held and whose Run
// still waits returns callErr, its slots vanish, and its writer stops.
func (h *Hub) loseLocked(s *stream, reason string, callErr error) {
	if s.gone {
		return
	}
	s.gone = true
	s.endReason = reason
	h.streams--
	ns := s.ns
	if ns.workers[s.hello.Worker] == s {
		delete(ns.workers, s.hello.Worker)
	}
	for i, o := range ns.list {
		if o == s {
			last := len(ns.list) - 1
			ns.list[i] = ns.list[last]
			ns.list[last] = nil
			ns.list = ns.list[:last]
			break
		}
	}
	ns.g.workers.Dec()
	ns.g.busy.Sub(float64(s.busy))
	if !s.draining {
		ns.g.free.Sub(float64(s.hello.Capacity - s.busy))
	}
	for c := s.held.head; c != nil; c = s.held.head {
		s.held.remove(c)
		h.forgetLocked(c)
		if c.state == callRunning {
			c.finishLocked(callErr)
		}
		c.state = callDone
	}
	s.busy = 0
	close(s.quit)
	StreamsEnded.WithLabelValues(reason).Inc()
	h.gcNamespaceLocked(ns)
	h.o.Log.V(1).Info("Direct stream ended", "namespace", s.hello.Namespace, "worker", s.hello.Worker, "reason", reason)
}

// lose ends stream s for reason (see loseLocked); the attempts it held
// return ErrWorkerLost.
func (h *Hub) lose(s *stream, reason string) {
	h.mu.Lock()
	h.loseLocked(s, reason, ErrWorkerLost)
	h.mu.Unlock()
}

// stopper is the part of a timer the hub uses.
type stopper interface{ Stop() bool }

// afterFunc returns c's AfterFunc, or one built on its timers when c has
// none. f runs in its own goroutine, or, with a fake clock, inside Step: it
// must not call the clock nor wait for anything.
func afterFunc(c clock.WithTicker) func(time.Duration, func()) stopper {
	if d, ok := c.(clock.WithDelayedExecution); ok {
		return func(after time.Duration, f func()) stopper { return d.AfterFunc(after, f) }
	}
	return func(after time.Duration, f func()) stopper {
		t := &chanTimer{t: c.NewTimer(after), stop: make(chan struct{})}
		go func() {
			select {
			case <-t.t.C():
				f()
			case <-t.stop:
			}
		}()
		return t
	}
}

type chanTimer struct {
	t    clock.Timer
	once sync.Once
	stop chan struct{}
}

func (t *chanTimer) Stop() bool {
	t.once.Do(func() { close(t.stop) })
	return t.t.Stop()
}
