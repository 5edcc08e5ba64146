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

package taskstate

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// Scope is one pass over a task: the task as read and as the pass's
// transitions change it in memory, and what to do once the change is
// written. Write writes the whole change once, at the end of the pass, as
// one merge patch of the status fenced on the resourceVersion read: a
// write based on a stale read (a worker or another writer wrote in
// between) fails with a conflict, which Write returns, and the caller
// reads the task again.
type Scope struct {
	// Task is the task as the pass changes it.
	Task *agentlanev1alpha1.ExternalTask
	// orig is the task the status change is computed from.
	orig *agentlanev1alpha1.ExternalTask
	// Deleted is set when the pass deleted the task: nothing is written.
	Deleted bool
	// Deferred is set when the pass's status is not worth a write yet:
	// nothing is written, and what waited for the write runs.
	Deferred bool
	// written run once the status is written (or needed no write);
	// failed, when the write fails.
	written, failed []func()
}

// NewScope starts a pass over task, as read.
func NewScope(task *agentlanev1alpha1.ExternalTask) *Scope {
	return &Scope{Task: task, orig: task.DeepCopy()}
}

// Original is the task as read, before the pass changed it.
func (s *Scope) Original() *agentlanev1alpha1.ExternalTask { return s.orig }

// Reset drops the pass's status change: the status is as read.
func (s *Scope) Reset() { s.Task.Status = *s.orig.Status.DeepCopy() }

// AfterWrite runs f once the pass's status is written.
func (s *Scope) AfterWrite(f func()) { s.written = append(s.written, f) }

// IfWriteFails runs f if the pass's status write fails.
func (s *Scope) IfWriteFails(f func()) { s.failed = append(s.failed, f) }

// MetadataWritten takes in a metadata write made during the pass: the
// status write that follows is based on its resourceVersion.
func (s *Scope) MetadataWritten() {
	s.Task.ObjectMeta.DeepCopyInto(&s.orig.ObjectMeta)
}

// Changed tells whether the pass changed the status.
func (s *Scope) Changed() bool {
	return !equality.Semantic.DeepEqual(s.orig.Status, s.Task.Status)
}

// Write writes the pass's status change, only if there is one, and runs
// what waited on it. With observed, observedGeneration moves to the task's
// generation (only a pass that succeeded observed it). versions, when not
// nil, learns the resourceVersion the write replaced. Only the status is
// sent: what the pass read into the spec (a payload the cache does not
// keep) is not part of the patch.
func (s *Scope) Write(ctx context.Context, c client.StatusClient, versions *Versions, observed bool) error {
	if s.Deleted {
		return nil
	}
	if s.Deferred {
		s.run(s.written)
		return nil
	}
	task := s.Task
	if observed {
		task.Status.ObservedGeneration = task.Generation
	}
	if s.Changed() {
		obj := s.orig.DeepCopy()
		task.Status.DeepCopyInto(&obj.Status)
		if err := c.Status().Patch(ctx, obj, client.MergeFromWithOptions(s.orig, client.MergeFromWithOptimisticLock{})); err != nil {
			s.run(s.failed)
			return fmt.Errorf("write status: %w", err)
		}
		if versions != nil {
			versions.Wrote(client.ObjectKeyFromObject(task), s.orig.ResourceVersion)
		}
		task.ResourceVersion = obj.ResourceVersion
		s.orig = obj
	}
	s.run(s.written)
	return nil
}

func (s *Scope) run(fs []func()) {
	for _, f := range fs {
		f()
	}
}

// Versions tracks the versions of tasks made stale by a controller's own
// writes, so that it never acts on a cache that has not caught up with
// them.
type Versions struct {
	mu       sync.Mutex
	replaced map[types.NamespacedName]map[string]bool
}

// Wrote records that a write replaced version rv of the task.
func (w *Versions) Wrote(key types.NamespacedName, rv string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.replaced == nil {
		w.replaced = make(map[types.NamespacedName]map[string]bool)
	}
	if w.replaced[key] == nil {
		w.replaced[key] = make(map[string]bool)
	}
	w.replaced[key][rv] = true
}

// Stale tells whether rv is a version the controller has already replaced.
// The cache only moves forward, so once it shows any other version the
// record is dropped.
func (w *Versions) Stale(key types.NamespacedName, rv string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.replaced[key][rv] {
		return true
	}
	delete(w.replaced, key)
	return false
}

// Forget drops what is known of the task.
func (w *Versions) Forget(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.replaced, key)
}
