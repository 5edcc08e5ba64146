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

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/lanequeue"
)

// trackedTask is what the manager remembers about an ExternalTask its
// scheduler holds: the scheduler's ticket, and how the last attempt the
// manager itself closed ended, so that the attempt is recorded with the
// right outcome even if the status write has to be retried.
type trackedTask struct {
	ticket *lanequeue.Ticket
	// closed is the attempt the manager reported to the scheduler (a
	// worker's result, a lost worker, a failed Job), and closedAs how it
	// ended.
	closed   int32
	closedAs attemptEnd
	// creating is set while the task's object is being created for a
	// command submitted through the Session API: its absence from the cache
	// then does not mean it was deleted.
	creating bool
}

// attemptEnd is how an attempt ended, as the manager saw it.
type attemptEnd struct {
	outcome agentlanev1alpha1.AttemptOutcome
	msg     string
}

// taskSet holds the tracked tasks of one scheduler, keyed by task name (a
// task's command ID is its name).
type taskSet struct {
	mu    sync.Mutex
	tasks map[string]*trackedTask
}

func (ts *taskSet) get(name string) (trackedTask, bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t, ok := ts.tasks[name]
	if !ok {
		return trackedTask{}, false
	}
	return *t, true
}

func (ts *taskSet) has(name string) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	_, ok := ts.tasks[name]
	return ok
}

// put tracks the command of task name; creating says that its object is
// still being created.
func (ts *taskSet) put(name string, tk *lanequeue.Ticket, creating bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.tasks == nil {
		ts.tasks = make(map[string]*trackedTask)
	}
	ts.tasks[name] = &trackedTask{ticket: tk, creating: creating}
}

// created marks the object of task name as created.
func (ts *taskSet) created(name string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if t, ok := ts.tasks[name]; ok {
		t.creating = false
	}
}

// markClosed remembers how the manager closed attempt of task name.
func (ts *taskSet) markClosed(name string, attempt int32, end attemptEnd) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if t, ok := ts.tasks[name]; ok {
		t.closed, t.closedAs = attempt, end
	}
}

func (ts *taskSet) forget(name string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	delete(ts.tasks, name)
}

// requestSink feeds reconcile requests from outside the cache (scheduler
// hooks and events) straight into a controller's work queue. Requests that
// arrive before the controller starts are kept until it does. Adding never
// blocks, so a scheduler hook that adds a request returns at once.
type requestSink struct {
	mu      sync.Mutex
	queue   workqueue.TypedRateLimitingInterface[reconcile.Request]
	pending []reconcile.Request
}

func (s *requestSink) add(req reconcile.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.queue == nil {
		s.pending = append(s.pending, req)
		return
	}
	s.queue.Add(req)
}

// source returns the controller source that connects the sink to the
// controller's queue.
func (s *requestSink) source() source.Source {
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

// taskRequest is the reconcile request of the ExternalTask name in namespace.
func taskRequest(namespace, name string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: namespace, Name: name}}
}
