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

package scheduling

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/lanequeue"
)

// TrackedTask is what the manager remembers about an ExternalTask its
// scheduler holds: the scheduler's ticket, and how the last attempt the
// manager itself closed ended, so that the attempt is recorded with the
// right outcome even if the status write has to be retried.
type TrackedTask struct {
	Ticket *lanequeue.Ticket
	// Closed is the attempt the manager reported to the scheduler (a
	// worker's result, a lost worker, a failed Job), and ClosedAs how it
	// ended.
	Closed   int32
	ClosedAs AttemptEnd
	// Creating is set while the task's object is being created for a
	// command submitted through the Session API: its absence from the cache
	// then does not mean it was deleted.
	Creating bool
}

// AttemptEnd is how an attempt ended, as the manager saw it.
type AttemptEnd struct {
	Outcome agentlanev1alpha1.AttemptOutcome
	Msg     string
	// NotStarted: the attempt was lost before its worker reported a start.
	NotStarted bool
}

// TaskSet holds the tracked tasks of one scheduler, keyed by task name (a
// task's command ID is its name).
type TaskSet struct {
	mu    sync.Mutex
	tasks map[string]*TrackedTask
}

// Get returns the tracked task name.
func (ts *TaskSet) Get(name string) (TrackedTask, bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t, ok := ts.tasks[name]
	if !ok {
		return TrackedTask{}, false
	}
	return *t, true
}

// Has tells whether task name is tracked.
func (ts *TaskSet) Has(name string) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	_, ok := ts.tasks[name]
	return ok
}

// Put tracks the command of task name; creating says that its object is
// still being created.
func (ts *TaskSet) Put(name string, tk *lanequeue.Ticket, creating bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.tasks == nil {
		ts.tasks = make(map[string]*TrackedTask)
	}
	ts.tasks[name] = &TrackedTask{Ticket: tk, Creating: creating}
}

// Created marks the object of task name as created.
func (ts *TaskSet) Created(name string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if t, ok := ts.tasks[name]; ok {
		t.Creating = false
	}
}

// MarkClosed remembers how the manager closed attempt of task name.
func (ts *TaskSet) MarkClosed(name string, attempt int32, end AttemptEnd) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if t, ok := ts.tasks[name]; ok {
		t.Closed, t.ClosedAs = attempt, end
	}
}

// Forget stops tracking task name.
func (ts *TaskSet) Forget(name string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	delete(ts.tasks, name)
}

// RequestSink feeds reconcile requests from outside the cache (scheduler
// hooks and events) straight into a controller's work queue. Requests that
// arrive before the controller starts are kept until it does. Adding never
// blocks, so a scheduler hook that adds a request returns at once.
type RequestSink struct {
	mu      sync.Mutex
	queue   workqueue.TypedRateLimitingInterface[reconcile.Request]
	pending []reconcile.Request
}

// Add queues req.
func (s *RequestSink) Add(req reconcile.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.queue == nil {
		s.pending = append(s.pending, req)
		return
	}
	s.queue.Add(req)
}

// Source returns the controller source that connects the sink to the
// controller's queue.
func (s *RequestSink) Source() source.Source {
	return source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.queue = q
		for _, req := range s.pending {
			q.Add(req)
		}
		s.pending = nil
		return nil
	})
}

// TaskRequest is the reconcile request of the ExternalTask name in namespace.
func TaskRequest(namespace, name string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: namespace, Name: name}}
}
