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

package controller

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// What wakes an AgentSession. A session is reconciled when something about
// it changed: its own spec or metadata (not the status writes of its own
// reconciles), its queue's spec or readiness, its runtime pod's node being
// cordoned, its budget, or its commands and inbox (coalesced to one
// reconcile per session per sessionRefreshInterval). Nothing is requeued
// periodically while it is idle.

// sessionRefresh coalesces the activity of sessions (command and inbox
// events from the schedulers) into at most one reconcile per session per
// interval. A session with no activity is not reconciled at all. Each
// session waits on its own timer from its first activity, so the
// reconciles of many busy sessions, and their status writes, spread over
// the interval instead of reaching the API server together on one tick.
type sessionRefresh struct {
	interval time.Duration
	events   chan event.GenericEvent
	// stopped is closed when the manager stops: announcements still
	// waiting give up.
	stopped chan struct{}

	mu      sync.Mutex
	pending map[types.NamespacedName]struct{}
}

func newSessionRefresh(interval time.Duration) *sessionRefresh {
	return &sessionRefresh{interval: interval, events: make(chan event.GenericEvent, 1024),
		stopped: make(chan struct{}), pending: map[types.NamespacedName]struct{}{}}
}

// mark asks for the session to be reconciled one interval after its first
// activity since its last announcement. It is called from the queues'
// goroutines and returns at once.
func (s *sessionRefresh) mark(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, waiting := s.pending[key]; waiting {
		return
	}
	s.pending[key] = struct{}{}
	time.AfterFunc(s.interval, func() { s.announce(key) })
}

// announce sends the session's reconcile; activity from now on waits for
// the next one.
func (s *sessionRefresh) announce(key types.NamespacedName) {
	s.mu.Lock()
	delete(s.pending, key)
	s.mu.Unlock()
	o := &agentlanev1alpha1.AgentSession{}
	o.Namespace, o.Name = key.Namespace, key.Name
	select {
	case s.events <- event.GenericEvent{Object: o}:
	case <-s.stopped:
	}
}

// Start waits until ctx ends, then lets waiting announcements go. It
// implements manager.Runnable.
func (s *sessionRefresh) Start(ctx context.Context) error {
	<-ctx.Done()
	close(s.stopped)
	return nil
}

// ownWrites remembers the resourceVersion each of the controller's own
// status writes produced, so that the watch event of that write does not
// reconcile the object again: the reconcile that wrote it already saw it.
type ownWrites struct {
	m sync.Map // types.NamespacedName -> resourceVersion
}

func (w *ownWrites) wrote(o client.Object) {
	w.m.Store(client.ObjectKeyFromObject(o), o.GetResourceVersion())
}

// echo tells whether o is exactly what the controller last wrote.
func (w *ownWrites) echo(o client.Object) bool {
	key := client.ObjectKeyFromObject(o)
	rv, ok := w.m.Load(key)
	if ok && rv == o.GetResourceVersion() {
		w.m.CompareAndDelete(key, rv)
		return true
	}
	return false
}

func (w *ownWrites) forget(key types.NamespacedName) { w.m.Delete(key) }

// skipOwnWrites drops the update events of the controller's own writes.
func skipOwnWrites(w *ownWrites) predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool { return !w.echo(e.ObjectNew) }}
}

// specOrLifeChanged passes creations, deletions and the updates that change
// an object's generation (its spec) or start its deletion: what others need
// from a session, and what a session needs from its queue besides its
// readiness.
func specOrLifeChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() ||
			e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero()
	}}
}

// queueChangedForSessions passes the LaneQueue events a session depends on:
// the queue appearing or going away, its spec (lanes for the session's
// lane overrides) and its Ready condition (its scheduler started or
// stopped). The counts its status refreshes carry are not among them.
func queueChangedForSessions() predicate.Predicate {
	return predicate.Or(specOrLifeChanged(), predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return readyOf(e.ObjectOld) != readyOf(e.ObjectNew)
		},
	})
}

// readyOf is the LaneQueue's Ready condition status and reason.
func readyOf(o client.Object) string {
	lq, ok := o.(*agentlanev1alpha1.LaneQueue)
	if !ok {
		return ""
	}
	c := meta.FindStatusCondition(lq.Status.Conditions, agentlanev1alpha1.LaneQueueReadyCondition)
	if c == nil {
		return ""
	}
	return string(c.Status) + "/" + c.Reason
}

// nodeCordonChanged passes the Node events passivation reacts to: a node
// appearing, going away, or its spec (unschedulable, taints) changing; not
// its kubelet's status heartbeats.
func nodeCordonChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*corev1.Node)
		n, ok2 := e.ObjectNew.(*corev1.Node)
		return !ok1 || !ok2 || !equality.Semantic.DeepEqual(o.Spec, n.Spec) ||
			o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero()
	}}
}
