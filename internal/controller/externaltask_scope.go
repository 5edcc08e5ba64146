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
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// taskScope is one reconcile of a task: the task as read and as the pass
// changes it, and what to do once the change is written. The reconciler
// computes the whole status in memory and writes it once, at the end of the
// pass (writeStatus).
type taskScope struct {
	task *agentlanev1alpha1.ExternalTask
	// orig is the task the status change is computed from.
	orig *agentlanev1alpha1.ExternalTask
	// deleted is set when the pass deleted the task: nothing is written.
	deleted bool
	// deferred is set when the pass's status is not worth a write yet
	// (deferQueuedWrite): nothing is written.
	deferred bool
	// workersBusy is set when the pass found live workers that serve the
	// task, every one of them with no free slot.
	workersBusy bool
	// written run once the status is written (or needed no write);
	// failed, when the write fails.
	written, failed []func()
}

func newTaskScope(task *agentlanev1alpha1.ExternalTask) *taskScope {
	return &taskScope{task: task, orig: task.DeepCopy()}
}

// afterWrite runs f once the pass's status is written.
func (s *taskScope) afterWrite(f func()) { s.written = append(s.written, f) }

// ifWriteFails runs f if the pass's status write fails.
func (s *taskScope) ifWriteFails(f func()) { s.failed = append(s.failed, f) }

// metadataWritten takes in a metadata write made during the pass: the
// status write that follows is based on its resourceVersion.
func (s *taskScope) metadataWritten() {
	s.task.ObjectMeta.DeepCopyInto(&s.orig.ObjectMeta)
}

// writeStatus writes the pass's status change, only if there is one, and
// runs what waited on it. observedGeneration moves only when the pass
// succeeded. The patch carries the resourceVersion it was computed from, so
// a write based on a stale read (a worker wrote in between) fails with a
// conflict and the task is reconciled again from fresh state.
func (r *ExternalTaskReconciler) writeStatus(ctx context.Context, s *taskScope, succeeded bool) error {
	if s.deleted {
		return nil
	}
	task := s.task
	if s.deferred {
		for _, f := range s.written {
			f()
		}
		return nil
	}
	if succeeded {
		task.Status.ObservedGeneration = task.Generation
	}
	if !equality.Semantic.DeepEqual(s.orig.Status, task.Status) {
		if err := r.Status().Patch(ctx, task, client.MergeFromWithOptions(s.orig, client.MergeFromWithOptimisticLock{})); err != nil {
			for _, f := range s.failed {
				f()
			}
			return fmt.Errorf("write status: %w", err)
		}
		r.written.wrote(client.ObjectKeyFromObject(task), s.orig.ResourceVersion)
	}
	for _, f := range s.written {
		f()
	}
	return nil
}

// writtenVersions tracks the versions of tasks made stale by the
// controller's own writes.
type writtenVersions struct {
	mu       sync.Mutex
	replaced map[types.NamespacedName]map[string]bool
}

// wrote records that a write replaced version rv of the task.
func (w *writtenVersions) wrote(key types.NamespacedName, rv string) {
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

// stale tells whether rv is a version the controller has already replaced.
// The cache only moves forward, so once it shows any other version the
// record is dropped.
func (w *writtenVersions) stale(key types.NamespacedName, rv string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.replaced[key][rv] {
		return true
	}
	delete(w.replaced, key)
	return false
}

func (w *writtenVersions) forget(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.replaced, key)
}
