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

package worker

import (
	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/workerproto"
)

// Each Worker is one incarnation of its worker: a process that a restart
// under the same name replaces. The manager copies the incarnation the
// worker's Lease advertises into each attempt it dispatches
// (status.workerIncarnation), so that a process never runs an attempt meant
// for the one it replaced: that one may have run it already, in its first
// RunningAfter, without a write to show it. The manager sees the Lease
// change incarnation and records such an attempt lost with its process.

// Incarnation returns the id of this process of the worker, which its Lease
// advertises.
func (w *Worker) Incarnation() string { return w.incarnation }

// dispatchedToMe tells whether the task's attempt was dispatched to this
// process of the worker. An attempt that names no incarnation was
// dispatched by a manager that did not record them; any process of the
// worker takes it.
func (w *Worker) dispatchedToMe(task *agentlanev1alpha1.ExternalTask) bool {
	inc := task.Status.WorkerIncarnation
	return inc == "" || inc == w.incarnation
}

// fence is what the worker's writes about the task's current attempt test:
// its name, the attempt, and the process the attempt was dispatched to.
func (w *Worker) fence(task *agentlanev1alpha1.ExternalTask) workerproto.Fence {
	return workerproto.WorkerFence(w.opts.Name, task.Status.Attempt).WithIncarnation(task.Status.WorkerIncarnation)
}
