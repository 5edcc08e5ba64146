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
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/scheduling"
	"github.com/agentlane/agentlane/internal/taskstate"
)

// settleFinished reconciles the scheduler with a task whose phase is
// already final, usually a worker's successful completion: the result is
// reported. The API server decides: the write that reached it first counts.
// A success the scheduler no longer expects (the attempt's timeout fired
// before the manager saw the worker's write, and the command waits for a
// retry or its next attempt) still ends the command Succeeded, so the lane
// counts the outcome status records; any other final phase cancels it. So
// does a success that won over the record of a timeout that ended the
// command (its last attempt): the scheduler counts a timeout only once its
// record is written (confirmRecordedTimeout).
func (r *ExternalTaskReconciler) settleFinished(ctx context.Context, b binding, task *agentlanev1alpha1.ExternalTask) {
	defer b.tasks.Forget(task.Name)
	tt, ok := b.tasks.Get(task.Name)
	if !ok {
		return
	}
	st := &task.Status
	succeeded := st.Phase == agentlanev1alpha1.ExternalTaskSucceeded && st.Result != nil
	if _, final := tt.Ticket.Outcome(); final {
		if succeeded {
			// ErrNotFound unless the timeout's count is still held.
			_ = b.queue.Settle(task.Name, schedulerResult(st.Result))
		}
		return
	}
	if succeeded {
		tp, taken := traceTask(task), time.Time{}
		if tp != "" {
			taken = r.Clock.Now()
		}
		err := b.queue.CompleteAttempt(task.Name, int(st.Attempt), schedulerResult(st.Result))
		if errors.Is(err, lanequeue.ErrStaleAttempt) || errors.Is(err, lanequeue.ErrNotPending) {
			err = b.queue.Settle(task.Name, schedulerResult(st.Result))
		}
		if err == nil || errors.Is(err, lanequeue.ErrNotFound) {
			if tp != "" {
				traceResult(tp, task, st.Attempt, agentlanev1alpha1.AttemptSucceeded, taken, r.Clock.Now())
			}
			return
		}
	}
	if err := b.queue.Cancel(task.Name); err != nil && !errors.Is(err, lanequeue.ErrNotFound) {
		logf.FromContext(ctx).Error(err, "Cancel the scheduler's command of a finished task")
	}
}

// confirmRecordedTimeout tells the scheduler that the task's status, as
// written, records the end of its last attempt, not as a success: the
// record won over any late result of that attempt, so a timeout of it
// counts (lanequeue.Options.ConfirmExternalTimeouts).
func confirmRecordedTimeout(b binding, s *taskScope) {
	st := &s.Task.Status
	if n := len(st.Attempts); n > 0 && !s.Deferred && st.Attempts[n-1].Outcome != agentlanev1alpha1.AttemptSucceeded {
		b.queue.ConfirmTimeout(s.Task.Name, int(st.Attempts[n-1].Attempt))
	}
}

// reconcileFinished completes the record of a finished task and deletes it
// once its queue's ttlAfterFinished has passed. Dead letters are kept, up to
// the queue's deadLetter.maxSize (see the LaneQueue's retention sweep).
func (r *ExternalTaskReconciler) reconcileFinished(ctx context.Context, s *taskScope, lq *agentlanev1alpha1.LaneQueue) (ctrl.Result, error) {
	task := s.Task
	r.release(client.ObjectKeyFromObject(task))
	st := &task.Status
	// A worker without the condition to update finished it: complete it.
	if err := taskstate.MarkFinished(st, task.Generation, metav1.NewTime(r.Clock.Now())); err != nil {
		return ctrl.Result{}, err
	}
	if lq != nil {
		// The queue's next status refresh runs its retention sweep (the
		// session's maxFinishedTasks, the queue's maxFinished and
		// dead-letter size), which now sees this task finished.
		r.Schedulers.MarkDirty(client.ObjectKeyFromObject(lq))
	}
	if st.Phase == agentlanev1alpha1.ExternalTaskDeadLettered {
		return ctrl.Result{}, nil
	}
	ttl := retentionOf(lq).ttl
	left := finishedAt(task).Add(ttl).Sub(r.Clock.Now())
	if left > 0 {
		return ctrl.Result{RequeueAfter: left}, nil
	}
	if err := r.Delete(ctx, task, client.Preconditions{UID: &task.UID}); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("delete the finished task: %w", err)
	}
	s.Deleted = true
	logf.FromContext(ctx).V(1).Info("Finished task deleted after its TTL", "ttl", ttl)
	return ctrl.Result{}, nil
}

// finishedAt is when a finished task ended.
func finishedAt(task *agentlanev1alpha1.ExternalTask) time.Time {
	if c := meta.FindStatusCondition(task.Status.Conditions, agentlanev1alpha1.ExternalTaskFinishedCondition); c != nil && c.Status == metav1.ConditionTrue {
		return c.LastTransitionTime.Time
	}
	if t := task.Status.FinishedAt; t != nil {
		return t.Time
	}
	return task.CreationTimestamp.Time
}

// release drops what the controller keeps about a task that no longer
// waits or holds a worker.
func (r *ExternalTaskReconciler) release(key types.NamespacedName) {
	if r.workers.release(key) {
		// Its worker has a free slot now.
		r.wakeAwaiting(key.Namespace, 1)
	}
	r.awaiting.remove(key)
	r.unbound.remove(key)
	r.heartbeats.forget(key)
}

// stillExists tells whether a task the cache does not have is one the
// scheduler holds whose object is being created, or was created after the
// cache last heard of it: only an uncached read can tell it from a deleted
// one.
func (r *ExternalTaskReconciler) stillExists(ctx context.Context, key types.NamespacedName) bool {
	tracked, creating := false, false
	r.Schedulers.ForEachTasks(key.Namespace, func(_ *lanequeue.Queue, ts *scheduling.TaskSet) {
		if t, ok := ts.Get(key.Name); ok {
			tracked, creating = true, creating || t.Creating
		}
	})
	if creating {
		return true
	}
	if !tracked || r.APIReader == nil {
		return false
	}
	err := r.APIReader.Get(ctx, key, &agentlanev1alpha1.ExternalTask{})
	return err == nil
}

// forgetDeleted cancels the scheduler's command of a task that was deleted:
// deleting a task cancels it.
func (r *ExternalTaskReconciler) forgetDeleted(key types.NamespacedName) {
	r.written.Forget(key)
	r.release(key)
	r.Schedulers.ForEachTasks(key.Namespace, func(q *lanequeue.Queue, ts *scheduling.TaskSet) {
		if ts.Has(key.Name) {
			_ = q.Cancel(key.Name)
			ts.Forget(key.Name)
		}
	})
}
