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
	"cmp"
	"context"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/scheduling"
)

// rebuild puts back into a scheduler that just started the tasks of its
// queue that were admitted before (they carry the queue's label) and have
// not finished: those left by the manager before a restart, or by the
// leader before a failover. Attempts that workers hold are adopted first,
// so that they take their lane slots before any queued task is granted
// one, then the queued tasks are submitted oldest first. It runs before the
// scheduler is published (scheduling.Schedulers.Rebuild): no reconcile can
// admit a task twice, and nothing is dispatched from a half-built queue. A
// task it cannot admit is left to its own reconcile.
func (r *ExternalTaskReconciler) rebuild(key types.NamespacedName, q *lanequeue.Queue, tasks *scheduling.TaskSet) {
	ctx := context.Background()
	log := logf.Log.WithName("externaltask").WithValues("laneQueue", key)
	list := &agentlanev1alpha1.ExternalTaskList{}
	if err := r.List(ctx, list, client.InNamespace(key.Namespace), client.MatchingLabels{agentlanev1alpha1.QueueLabel: key.Name}); err != nil {
		log.Error(err, "List the queue's tasks to rebuild its scheduler; each task is admitted by its reconcile instead")
		return
	}
	live := slices.DeleteFunc(list.Items, func(t agentlanev1alpha1.ExternalTask) bool {
		return t.Status.Phase.IsTerminal() || !t.DeletionTimestamp.IsZero()
	})
	slices.SortStableFunc(live, func(a, b agentlanev1alpha1.ExternalTask) int {
		ha, hb := held(&a.Status), held(&b.Status)
		if ha != hb {
			if ha {
				return -1
			}
			return 1
		}
		// Creation times have one-second resolution; names break ties.
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})
	adopted, queued := 0, 0
	for i := range live {
		task := &live[i]
		b, ok := r.rebuildBinding(ctx, key, q, tasks, task)
		if !ok {
			continue
		}
		if _, err := r.admit(b, task); err != nil {
			log.V(1).Info("Task left to its reconcile", "externalTask", task.Name, "reason", err.Error())
			continue
		}
		if held(&task.Status) {
			adopted++
		} else {
			queued++
		}
	}
	if adopted+queued > 0 {
		log.Info("Scheduler rebuilt from the cluster's tasks", "adopted", adopted, "queued", queued)
	}
}

// rebuildBinding is bind for a scheduler that is not published yet: false
// when the task's session is missing or names another queue, which its
// reconcile reports.
func (r *ExternalTaskReconciler) rebuildBinding(ctx context.Context, key types.NamespacedName, q *lanequeue.Queue,
	tasks *scheduling.TaskSet, task *agentlanev1alpha1.ExternalTask) (binding, bool) {
	b := binding{queueKey: key, queue: q, tasks: tasks}
	ref := task.Spec.SessionRef
	if ref == nil {
		return b, true
	}
	s := &agentlanev1alpha1.AgentSession{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: task.Namespace, Name: ref.Name}, s); err != nil {
		if !apierrors.IsNotFound(err) || task.Spec.QueueRef == nil {
			return b, false
		}
		return b, true
	}
	if s.Spec.QueueRef.Name != key.Name {
		return b, false
	}
	b.session = s
	return b, true
}
