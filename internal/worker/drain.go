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
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// drain stops taking work and empties the worker: the Lease is marked
// draining, Dispatched tasks are handed back, running ones get the grace
// period and are then stopped and handed back.
func (w *Worker) drain(ctx context.Context) {
	w.log.Info("Draining", "gracePeriod", w.opts.GracePeriod)
	w.mu.Lock()
	w.draining = true
	w.mu.Unlock()
	if err := w.lease.drain(ctx); err != nil {
		w.log.Error(err, "Could not mark the Lease draining")
	}
	// Look at every task again: Dispatched ones are now handed back.
	w.requeueAll(ctx)

	grace := w.opts.Clock.NewTimer(w.opts.GracePeriod)
	defer grace.Stop()
	if w.waitForRuns(grace.C()) {
		return
	}
	w.mu.Lock()
	w.log.Info("Grace period over; stopping and handing back running tasks", "running", len(w.runs))
	for _, r := range w.runs {
		r.cancel(errShuttingDown)
	}
	w.mu.Unlock()
	w.waitForRuns(nil)
}

// requeueAll queues every task the worker holds for another sync.
func (w *Worker) requeueAll(ctx context.Context) {
	var list agentlanev1alpha1.ExternalTaskList
	if err := w.cache.List(ctx, &list, client.InNamespace(w.opts.Namespace)); err != nil {
		w.log.Error(err, "Could not list the worker's tasks")
		return
	}
	for i := range list.Items {
		w.queue.Add(client.ObjectKeyFromObject(&list.Items[i]))
	}
}

// waitForRuns waits until no run is left, or until timeout fires; it tells
// whether the runs are over.
func (w *Worker) waitForRuns(timeout <-chan time.Time) bool {
	for {
		w.mu.Lock()
		n := len(w.runs)
		w.mu.Unlock()
		if n == 0 {
			return true
		}
		select {
		case <-w.runEnded:
		case <-timeout:
			return false
		}
	}
}
