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
	"errors"
	"fmt"
	"reflect"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/scheduling"
	"github.com/agentlane/agentlane/internal/taskstate"
	"github.com/agentlane/agentlane/internal/workerproto"
)

// checkHeld looks at the holder of a task's current attempt. A non-nil end
// reports that the attempt is over (a result arrived, the worker or Job was
// lost); otherwise requeue says when to look again.
func (r *ExternalTaskReconciler) checkHeld(ctx context.Context, task *agentlanev1alpha1.ExternalTask) (*scheduling.AttemptEnd, time.Duration, error) {
	ended := func(outcome agentlanev1alpha1.AttemptOutcome, format string, args ...any) (*scheduling.AttemptEnd, time.Duration, error) {
		return &scheduling.AttemptEnd{Outcome: outcome, Msg: fmt.Sprintf(format, args...)}, 0, nil
	}
	st := &task.Status
	if res := st.Result; res != nil {
		if res.Success {
			return &scheduling.AttemptEnd{Outcome: agentlanev1alpha1.AttemptSucceeded}, 0, nil
		}
		return &scheduling.AttemptEnd{Outcome: agentlanev1alpha1.AttemptFailed, Msg: res.Error}, 0, nil
	}
	now := r.Clock.Now()
	switch taskstate.HolderOf(task) {
	case agentlanev1alpha1.HolderHandler:
		// Nobody to watch: a handler's completion through the Session API
		// (which writes status.result) or the timeout ends it.
		return nil, maxHeldCheck, nil
	case agentlanev1alpha1.HolderJob:
		job := &batchv1.Job{}
		err := r.Get(ctx, types.NamespacedName{Namespace: task.Namespace, Name: st.JobName}, job)
		switch {
		case apierrors.IsNotFound(err):
			if st.DispatchedAt != nil && now.Sub(st.DispatchedAt.Time) < jobGrace {
				return nil, time.Second, nil // the cache may not have the new Job yet
			}
			return ended(agentlanev1alpha1.AttemptFailed, "Job %s no longer exists", st.JobName)
		case err != nil:
			return nil, 0, err
		}
		if why, failed := jobFailure(job); failed {
			return ended(agentlanev1alpha1.AttemptFailed, "%s", why)
		}
		if at, done := jobCompleted(job); done {
			if wait := at.Add(jobGrace).Sub(now); wait > 0 {
				return nil, wait, nil
			}
			return ended(agentlanev1alpha1.AttemptFailed, "Job %s completed without reporting a result", job.Name)
		}
		return nil, maxHeldCheck, nil
	}

	// A pool worker: its heartbeat Lease tells whether it still runs.
	lease := &coordinationv1.Lease{}
	err := r.Get(ctx, types.NamespacedName{Namespace: task.Namespace, Name: workerproto.LeaseName(st.Worker)}, lease)
	switch {
	case apierrors.IsNotFound(err):
		return ended(agentlanev1alpha1.AttemptWorkerLost, "worker %s has no heartbeat Lease", st.Worker)
	case err != nil:
		return nil, 0, err
	}
	w, ok := parseWorkerLease(lease)
	if !ok {
		return ended(agentlanev1alpha1.AttemptWorkerLost, "worker %s has no heartbeat Lease", st.Worker)
	}
	if restarted(st, w) {
		return ended(agentlanev1alpha1.AttemptWorkerLost, "worker %s restarted: the attempt was dispatched to its process %s, its Lease now names %s",
			st.Worker, st.WorkerIncarnation, cmp.Or(w.incarnation, "none"))
	}
	fresh, lost, expires := r.sightings.state(lease, now)
	switch {
	case lost:
		return ended(agentlanev1alpha1.AttemptWorkerLost, "the heartbeat of worker %s expired at %s: the manager saw other workers renew but not it",
			st.Worker, expires.UTC().Format(time.RFC3339))
	case !fresh:
		// The manager sees no worker renew: it cannot tell a lost worker
		// from its own lost view of them. Look again later; when Leases
		// change again every worker gets a full lease duration anyway.
		return nil, blindInterval, nil
	}
	// Look again just after the Lease would lapse unless seen renewed.
	return nil, min(expires.Sub(now)+100*time.Millisecond, maxHeldCheck), nil
}

// restarted tells whether the worker holding the task's attempt restarted
// since the dispatch: the attempt names the worker process it was
// dispatched to, and the worker's Lease now names another. An attempt that
// names none (dispatched before workers advertised incarnations) cannot
// tell.
func restarted(st *agentlanev1alpha1.ExternalTaskStatus, w workerInfo) bool {
	return st.WorkerIncarnation != "" && st.WorkerIncarnation != w.incarnation
}

// dispatch gives the granted attempt of the task to a worker, or creates its
// Job; the pass's status write also records the previous attempt if the
// status still shows it.
func (r *ExternalTaskReconciler) dispatch(ctx context.Context, b binding, s *taskScope, tt scheduling.TrackedTask, o lanequeue.Outcome) (ctrl.Result, error) {
	task := s.Task
	key := client.ObjectKeyFromObject(task)
	st := &task.Status
	n := int32(o.Attempts)
	now := metav1.NewTime(r.Clock.Now())
	if st.Attempt > 0 && st.Attempt < n && !taskstate.Recorded(st, st.Attempt) {
		if _, err := r.recordEnded(st, tt, o, now); err != nil {
			return ctrl.Result{}, err
		}
	}
	lane := tt.Ticket.Lane()
	target := laneTarget(b.lq, lane)
	if err := taskstate.Grant(st, task.Generation, now, lane, n); err != nil {
		return ctrl.Result{}, err
	}

	if target != nil && target.Type == agentlanev1alpha1.ExternalTargetJob {
		job, err := r.laneJob(task, target, lane, n)
		if err == nil {
			err = r.Create(ctx, job)
			if apierrors.IsAlreadyExists(err) {
				err = nil
			}
		}
		if err != nil {
			if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || errors.Is(err, errNoJobTemplate) {
				// The template cannot make a Job: fail the attempt so
				// that the retry policy, not a hot loop, deals with it.
				end := scheduling.AttemptEnd{Outcome: agentlanev1alpha1.AttemptFailed,
					Msg: fmt.Sprintf("cannot create the Job for attempt %d: %v", n, err)}
				return ctrl.Result{RequeueAfter: retrySoon}, closeAttempt(b, task, n, end, nil)
			}
			return ctrl.Result{}, fmt.Errorf("create the Job: %w", err)
		}
		if err := taskstate.Dispatch(st, task.Generation, now, taskstate.Dispatched{Attempt: n, HeartbeatTimeout: laneHeartbeatTimeout(b.lq, lane), Holder: agentlanev1alpha1.HolderJob, Job: job.Name}); err != nil {
			return ctrl.Result{}, err
		}
		s.AfterWrite(func() {
			markStarted(ctx, b, task.Name, n, now.Time)
			if tp := traceTask(task); tp != "" {
				traceDispatched(tp, task, lane, n, now.Time, r.Clock.Now(), agentlanev1alpha1.HolderJob, "")
			}
		})
		return ctrl.Result{}, nil
	}

	if target != nil && target.Type == agentlanev1alpha1.ExternalTargetHandler {
		// No worker and no Job: the attempt waits Dispatched, held by the
		// Session API's handlers, until one completes it (a write fenced by
		// the attempt and the task's resourceVersion) or its timeout ends
		// it.
		r.awaiting.remove(key)
		if err := taskstate.Dispatch(st, task.Generation, now, taskstate.Dispatched{Attempt: n, HeartbeatTimeout: laneHeartbeatTimeout(b.lq, lane), Holder: agentlanev1alpha1.HolderHandler}); err != nil {
			return ctrl.Result{}, err
		}
		s.AfterWrite(func() {
			markStarted(ctx, b, task.Name, n, now.Time)
			if tp := traceTask(task); tp != "" {
				traceDispatched(tp, task, lane, n, now.Time, r.Clock.Now(), agentlanev1alpha1.HolderHandler, "")
			}
		})
		return ctrl.Result{}, nil
	}

	w, ok, busy := r.pickWorker(ctx, task, b, lane, target)
	if !ok {
		r.awaiting.add(key)
		// Handed back, or never started: its timeout waits for a worker.
		if err := b.queue.MarkWaiting(task.Name, int(n)); err != nil {
			logf.FromContext(ctx).V(1).Info("Attempt no longer pending", "attempt", n, "reason", err.Error())
		}
		why := "no live worker serves it"
		if busy {
			s.workersBusy = true
			why = "every live worker serving it is busy"
		}
		if err := taskstate.AwaitWorker(st, task.Generation, now, n, why); err != nil {
			return ctrl.Result{}, err
		}
		// No periodic look: a new or changed worker Lease, a renewal of a
		// worker with free slots and a task giving its worker's slot back
		// wake the tasks that waited longest (awaiting is oldest first).
		return ctrl.Result{}, nil
	}
	r.awaiting.remove(key)
	if err := taskstate.Dispatch(st, task.Generation, now, taskstate.Dispatched{Attempt: n, HeartbeatTimeout: laneHeartbeatTimeout(b.lq, lane), Holder: agentlanev1alpha1.HolderWorkers,
		Worker: w.name, Incarnation: w.incarnation, Node: w.node}); err != nil {
		r.workers.release(key)
		return ctrl.Result{}, err
	}
	s.IfWriteFails(func() { r.workers.release(key) })
	s.AfterWrite(func() {
		markStarted(ctx, b, task.Name, n, now.Time)
		logf.FromContext(ctx).V(1).Info("Dispatched", "attempt", n, "worker", w.name, "node", w.node)
		if tp := traceTask(task); tp != "" {
			traceDispatched(tp, task, lane, n, now.Time, r.Clock.Now(), agentlanev1alpha1.HolderWorkers, w.name)
		}
	})
	return ctrl.Result{RequeueAfter: min(w.expires.Sub(r.Clock.Now())+100*time.Millisecond, maxHeldCheck)}, nil
}

// markStarted tells the scheduler that attempt n of the task started at
// at: the attempt's timeout runs from then. An attempt starts when the
// write that hands it to a worker (or records its Job) succeeds; until then
// it holds its lane slot without its timeout running. An attempt the
// scheduler has meanwhile closed (cancelled) is no longer pending; that is
// not an error.
func markStarted(ctx context.Context, b binding, name string, n int32, at time.Time) {
	if err := b.queue.MarkStarted(name, int(n), at); err != nil {
		logf.FromContext(ctx).V(1).Info("Attempt no longer pending", "attempt", n, "reason", err.Error())
	}
}

// laneTarget returns the external target of lane in lq, nil for the worker
// pool.
func laneTarget(lq *agentlanev1alpha1.LaneQueue, lane string) *agentlanev1alpha1.ExternalTarget {
	if lq == nil {
		return nil
	}
	for i := range lq.Spec.Lanes {
		if string(lq.Spec.Lanes[i].Name) == lane {
			return lq.Spec.Lanes[i].ExternalTarget
		}
	}
	return nil
}

// pickWorker chooses a live worker with a free slot that serves the task's
// queue, lane and command type and matches the lane's workerSelector. busy
// tells, when there is none, that live workers serve the task but have no
// free slot.
func (r *ExternalTaskReconciler) pickWorker(ctx context.Context, task *agentlanev1alpha1.ExternalTask, b binding, lane string, target *agentlanev1alpha1.ExternalTarget) (_ workerInfo, ok, busy bool) {
	var selector labels.Selector
	if target != nil && target.WorkerSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(target.WorkerSelector.LabelSelector())
		if err != nil {
			logf.FromContext(ctx).Error(err, "Invalid workerSelector; no worker matches", "lane", lane)
			return workerInfo{}, false, false
		}
		selector = s
	}
	leases := &coordinationv1.LeaseList{}
	if err := r.List(ctx, leases, client.InNamespace(task.Namespace), client.MatchingLabels{workerproto.WorkerLabel: "true"}); err != nil {
		logf.FromContext(ctx).Error(err, "List worker Leases")
		return workerInfo{}, false, false
	}
	now := r.Clock.Now()
	var candidates []workerInfo
	for i := range leases.Items {
		w, ok := parseWorkerLease(&leases.Items[i])
		if !ok {
			continue
		}
		fresh, _, expires := r.sightings.state(&leases.Items[i], now)
		if fresh && !w.draining && w.serves(b.queueKey.Name, lane, string(task.Spec.CommandType), selector) {
			w.expires = expires // as the manager judges it
			candidates = append(candidates, w)
		}
	}
	w, ok := r.workers.pick(client.ObjectKeyFromObject(task), candidates)
	return w, ok, !ok && len(candidates) > 0
}

// laneJob builds the Job of attempt n of the task from its lane's template,
// unless the stored template does not decode.
func (r *ExternalTaskReconciler) laneJob(task *agentlanev1alpha1.ExternalTask, target *agentlanev1alpha1.ExternalTarget, lane string, n int32) (*batchv1.Job, error) {
	if u := target.UndecodableJobTemplate; u != nil {
		return nil, fmt.Errorf("%w: %s", errNoJobTemplate, u.Error(fmt.Sprintf("spec.lanes[%s].externalTarget.jobTemplate", lane)))
	}
	return buildJob(task, target.JobTemplate, n, r.Scheme())
}

// renewalWakes is how many waiting tasks a worker Lease update wakes: every
// one (-1) unless the update is a mere renewal of the same advertisement,
// then the worker's free slots.
func (r *ExternalTaskReconciler) renewalWakes(oldObj, newObj client.Object) int {
	oldLease, ok1 := oldObj.(*coordinationv1.Lease)
	newLease, ok2 := newObj.(*coordinationv1.Lease)
	if !ok1 || !ok2 {
		return -1
	}
	was, ok1 := parseWorkerLease(oldLease)
	now, ok2 := parseWorkerLease(newLease)
	if !ok1 || !ok2 {
		return -1
	}
	was.expires, now.expires = time.Time{}, time.Time{}
	if !reflect.DeepEqual(was, now) {
		return -1
	}
	if now.draining {
		return 0
	}
	return r.workers.free(workerKey{newLease.Namespace, now.name}, now.capacity)
}

// restartedWorkerTasks queues the tasks assigned to a worker whose Lease
// update names a new process of it (a restart under the same name), so that
// their attempts, dispatched to the old process, are closed at once.
func (r *ExternalTaskReconciler) restartedWorkerTasks(oldObj, newObj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	oldLease, ok1 := oldObj.(*coordinationv1.Lease)
	newLease, ok2 := newObj.(*coordinationv1.Lease)
	if !ok1 || !ok2 {
		return
	}
	was, ok1 := parseWorkerLease(oldLease)
	now, ok2 := parseWorkerLease(newLease)
	if !ok2 || (ok1 && was.incarnation == now.incarnation) {
		return
	}
	for _, t := range r.workers.tasksOf(workerKey{newLease.Namespace, now.name}) {
		q.Add(reconcile.Request{NamespacedName: t})
	}
}

// wakeAwaiting wakes the n tasks of namespace ns that have waited longest
// for a worker, every one when n is negative: one when a task gave its
// worker's slot back, all when a worker was lost.
func (r *ExternalTaskReconciler) wakeAwaiting(ns string, n int) {
	for _, req := range r.awaiting.first(ns, n) {
		r.Schedulers.TaskEvents().Add(req)
	}
}
