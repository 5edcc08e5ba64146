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

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/taskstate"
)

// taskScope is one reconcile of a task: the task as read and as the pass
// changes it through the transitions of package taskstate, and what to do
// once the change is written. The reconciler computes the whole status in
// memory and writes it once, at the end of the pass (writeStatus).
type taskScope struct {
	*taskstate.Scope
	// workersBusy is set when the pass found live workers that serve the
	// task, every one of them with no free slot.
	workersBusy bool
}

func newTaskScope(task *agentlanev1alpha1.ExternalTask) *taskScope {
	return &taskScope{Scope: taskstate.NewScope(task)}
}

// writeStatus writes the pass's status change, only if there is one, and
// runs what waited on it. observedGeneration moves only when the pass
// succeeded. The patch carries the resourceVersion it was computed from, so
// a write based on a stale read (a worker wrote in between) fails with a
// conflict and the task is reconciled again from fresh state.
func (r *ExternalTaskReconciler) writeStatus(ctx context.Context, s *taskScope, succeeded bool) error {
	return s.Write(ctx, r.Client, &r.written, succeeded)
}
