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
	"maps"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/identity"
	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/scheduling"
	"github.com/agentlane/agentlane/internal/taskstate"
)

// CancelAnnotation, set to "true" on an ExternalTask, cancels it: a queued
// task never runs, a running attempt is taken from its worker, and the task
// ends Cancelled.
const CancelAnnotation = "agentlane.io/cancel"

// Timing of the ExternalTask controller.
const (
	// unboundInterval is how often a task whose session or queue is missing
	// checks again.
	unboundInterval = 5 * time.Second
	// maxHeldCheck bounds how long a dispatched task goes without checking
	// its worker or Job.
	maxHeldCheck = 30 * time.Second
	// blindInterval is how often a dispatched task checks its worker again
	// while the manager sees no worker Lease change at all (an API server
	// outage): often enough to notice the end, rarely enough that every
	// held task's check does not load the manager meanwhile.
	blindInterval = 5 * time.Second
	// jobGrace is how long a Job that completed may take to show its pod's
	// result before the attempt counts as failed.
	jobGrace = 10 * time.Second
	// queuedWriteDelay is how long a new task may wait for a slot or a
	// worker before the manager writes it Queued.
	queuedWriteDelay = 2 * time.Second
	// retrySoon is when a task whose state moved during a reconcile is
	// looked at again, should no watch event bring it back first.
	retrySoon = 200 * time.Millisecond
)

// ExternalTaskReconciler carries ExternalTasks through their life: it hands
// each task to its LaneQueue's scheduler, dispatches the attempts the
// scheduler grants to a live worker (or a Job), feeds the results workers
// write back to the scheduler, closes attempts whose worker or Job was lost,
// records every attempt, and writes the final phase the scheduler decides:
// Succeeded, Failed, TimedOut, DeadLettered or Cancelled. Finished tasks are
// deleted after the queue's ttlAfterFinished.
//
// The scheduler keeps the order and the caps; the ExternalTask is the
// durable record. After a restart the scheduler is rebuilt from the tasks:
// queued tasks are queued again, and dispatched or running attempts are
// adopted where they run, so nothing is lost or run twice.
type ExternalTaskReconciler struct {
	client.Client
	Schedulers *scheduling.Schedulers
	// Recorder receives Kubernetes Events for tasks that fail for good.
	Recorder events.EventRecorder
	// APIReader reads around the cache, to tell a task that was just
	// created from one that was deleted.
	APIReader client.Reader
	// Clock is the manager's clock; the real clock when nil.
	Clock clock.PassiveClock

	workers workerLedger
	// sightings is when the manager last saw each worker Lease change.
	sightings workerSightings
	// awaiting holds the tasks that have a lane slot and wait for a worker.
	awaiting taskKeys
	// unbound holds the tasks whose queue or session is missing or whose
	// queue's scheduler has not started.
	unbound taskKeys
	// written remembers, per task, the resourceVersions the controller's own
	// writes replaced, until the cache shows a newer one: a read that
	// predates the controller's last write is not acted on.
	written taskstate.Versions
	// heartbeats is the last heartbeat of each held attempt passed to the
	// scheduler.
	heartbeats heartbeatsSeen
}

var _ reconcile.Reconciler = &ExternalTaskReconciler{}

// SetupWithManager registers the reconciler. It reacts to the tasks, to the
// Jobs it creates, to worker Leases (a new worker takes waiting tasks, a
// vanished one loses its tasks) and to the schedulers' grants and timeouts.
func (r *ExternalTaskReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil || r.Schedulers == nil {
		return errors.New("ExternalTaskReconciler needs a Client and Schedulers")
	}
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&agentlanev1alpha1.ExternalTask{}).
		Owns(&batchv1.Job{}).
		Watches(&coordinationv1.Lease{}, r.leaseHandler()).
		Watches(&agentlanev1alpha1.LaneQueue{}, handler.EnqueueRequestsFromMapFunc(r.unboundTasks)).
		// A task needs its session's existence and spec (queue, identity,
		// lane timeouts), not its status.
		Watches(&agentlanev1alpha1.AgentSession{}, handler.EnqueueRequestsFromMapFunc(r.sessionTasks),
			builder.WithPredicates(specOrLifeChanged())).
		WatchesRawSource(r.Schedulers.TaskEvents().Source()).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Named("externaltask").
		Complete(retryUnanswered(r))
}

// unboundTasks maps a LaneQueue (created, or its scheduler started) to the
// tasks of its namespace that wait for a queue.
func (r *ExternalTaskReconciler) unboundTasks(_ context.Context, o client.Object) []reconcile.Request {
	return r.unbound.in(o.GetNamespace())
}

// sessionTasks maps an AgentSession to its tasks.
func (r *ExternalTaskReconciler) sessionTasks(ctx context.Context, o client.Object) []reconcile.Request {
	list := &agentlanev1alpha1.ExternalTaskList{}
	if err := r.List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingFields{SessionRefNameField: o.GetName()}); err != nil {
		logf.FromContext(ctx).Error(err, "List the tasks of a session", "agentSession", klog.KObj(o))
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		if !list.Items[i].Status.Phase.IsTerminal() {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}

// leaseHandler records when the manager sees each worker Lease change
// (workerSightings), and wakes the tasks waiting for a worker: all of them
// when a worker Lease appears or what it advertises changes, as many as the
// worker has free slots when it only renews (a full worker's heartbeat
// cannot help them), and the tasks a worker held when its Lease goes away
// or names a new process of the worker.
func (r *ExternalTaskReconciler) leaseHandler() handler.EventHandler {
	waiting := func(ns string, n int, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		for _, req := range r.awaiting.first(ns, n) {
			q.Add(req)
		}
	}
	seen := func(o client.Object) {
		if l, ok := o.(*coordinationv1.Lease); ok {
			if _, ok := parseWorkerLease(l); ok {
				r.sightings.observe(l, r.Clock.Now())
			}
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			seen(e.Object)
			waiting(e.Object.GetNamespace(), -1, q)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			seen(e.ObjectNew)
			r.restartedWorkerTasks(e.ObjectOld, e.ObjectNew, q)
			waiting(e.ObjectNew.GetNamespace(), r.renewalWakes(e.ObjectOld, e.ObjectNew), q)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			l, ok := e.Object.(*coordinationv1.Lease)
			if !ok {
				return
			}
			if w, ok := parseWorkerLease(l); ok {
				r.sightings.forget(l, r.Clock.Now())
				for _, t := range r.workers.tasksOf(workerKey{l.Namespace, w.name}) {
					q.Add(reconcile.Request{NamespacedName: t})
				}
			}
			waiting(l.Namespace, -1, q)
		},
	}
}

// Reconcile brings one task's status in line with its scheduler. A write
// that lost a race with a worker's write is not an error: the task is
// reconciled again from its new state.
func (r *ExternalTaskReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	res, err := r.reconcile(ctx, req)
	if apierrors.IsConflict(err) {
		logf.FromContext(ctx).V(1).Info("Status changed under the write; reconciling again", "reason", err.Error())
		return ctrl.Result{RequeueAfter: retrySoon}, nil
	}
	return res, err
}

func (r *ExternalTaskReconciler) reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	task := &agentlanev1alpha1.ExternalTask{}
	if err := r.Get(ctx, req.NamespacedName, task); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		if r.stillExists(ctx, req.NamespacedName) {
			// Created a moment ago; its watch event brings it back.
			return ctrl.Result{}, nil
		}
		r.forgetDeleted(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	log := logf.FromContext(ctx).WithValues("externalTask", klog.KObj(task))
	ctx = logf.IntoContext(ctx, log)
	if r.written.Stale(req.NamespacedName, task.ResourceVersion) {
		// The cache has not caught up with this controller's last write;
		// its watch event brings the task back.
		return ctrl.Result{RequeueAfter: retrySoon}, nil
	}
	if taskstate.HolderOf(task) == agentlanev1alpha1.HolderDelegate {
		// A delegated task is carried by the delegation controller.
		return ctrl.Result{}, nil
	}
	if isDirectRecord(task) {
		return r.reconcileDirect(ctx, task)
	}
	if r.workers.observe(task) {
		r.wakeAwaiting(task.Namespace, 1) // its worker has a free slot now
	}
	if !task.DeletionTimestamp.IsZero() {
		r.forgetDeleted(req.NamespacedName)
		return ctrl.Result{}, nil
	}

	// Every phase below changes the status in memory only; it is written
	// once, here, whatever the pass decided.
	s := newTaskScope(task)
	defer func() {
		reterr = errors.Join(reterr, r.writeStatus(ctx, s, reterr == nil))
	}()
	// An attempt dispatched before status recorded its holder gets it
	// recorded, as inferred, by this pass's write.
	taskstate.RecordHolder(task)
	return r.reconcileTask(ctx, s)
}

// reconcileTask decides the status of a live task: finished tasks are
// settled and retained, unschedulable ones say why, and the others are
// handed to their scheduler and converged with it.
func (r *ExternalTaskReconciler) reconcileTask(ctx context.Context, s *taskScope) (ctrl.Result, error) {
	task := s.Task
	key := client.ObjectKeyFromObject(task)
	b, err := r.bind(ctx, task)
	if err != nil {
		return ctrl.Result{}, err
	}
	if task.Status.Phase.IsTerminal() {
		if b.tasks != nil {
			r.settleFinished(ctx, b, task)
		}
		return r.reconcileFinished(ctx, s, b.lq)
	}
	if b.problem != "" {
		r.unbound.add(key)
		if b.permanent {
			return ctrl.Result{}, r.finishUnscheduled(s, agentlanev1alpha1.ExternalTaskFailed, b.problem)
		}
		return ctrl.Result{RequeueAfter: unboundInterval}, r.setWaiting(task, b.problem)
	}

	r.unbound.remove(key)
	if _, tracked := b.tasks.Get(task.Name); !tracked {
		tk, err := r.admit(b, task)
		if err != nil {
			if errors.Is(err, lanequeue.ErrClosed) {
				return ctrl.Result{RequeueAfter: unboundInterval}, nil
			}
			// The scheduler refuses the command (an unknown lane, a bad
			// value): retrying cannot help.
			return ctrl.Result{}, r.finishUnscheduled(s, agentlanev1alpha1.ExternalTaskFailed, fmt.Sprintf("the scheduler refused the task: %v", err))
		}
		if err := r.ensureMetadata(ctx, s, b, tk.Lane()); err != nil {
			return ctrl.Result{}, err
		}
	}
	if task.Annotations[CancelAnnotation] == "true" {
		if err := b.queue.Cancel(task.Name); err == nil {
			logf.FromContext(ctx).Info("Task cancelled by annotation")
		}
	}
	res, err := r.converge(ctx, b, s)
	if err == nil {
		res = r.deferQueuedWrite(s, res)
	}
	return res, err
}

// deferQueuedWrite keeps a new task's first status write for its dispatch.
// A task that waits for a slot in its lane, or for one of the busy workers
// that serve it, is not written Queued at all: its LaneQueue's and its
// session's pending counts already say it waits, and a grant or a freed
// worker slot wakes it. A task that has a slot and finds no live worker
// serving it is written Queued once it has waited queuedWriteDelay (a
// worker wakes it earlier): that is worth telling. Most tasks are then
// written once by the manager, dispatched.
func (r *ExternalTaskReconciler) deferQueuedWrite(s *taskScope, res ctrl.Result) ctrl.Result {
	if s.Original().Status.Phase != "" || s.Task.Status.Phase != agentlanev1alpha1.ExternalTaskQueued {
		return res
	}
	if s.workersBusy || s.Task.Status.Attempt == 0 && !r.awaiting.has(client.ObjectKeyFromObject(s.Task)) {
		s.Reset()
		s.Deferred = true
		return res
	}
	wait := min(s.Task.CreationTimestamp.Add(queuedWriteDelay).Sub(r.Clock.Now()), queuedWriteDelay)
	if wait <= 0 {
		return res
	}
	s.Reset()
	s.Deferred = true
	if res.RequeueAfter <= 0 || wait < res.RequeueAfter {
		res.RequeueAfter = wait
	}
	return res
}

// binding is where a task is scheduled: its LaneQueue, the queue's
// scheduler and tracked tasks, and its session key. problem says why it
// cannot be scheduled now; permanent, that it never can.
type binding struct {
	lq        *agentlanev1alpha1.LaneQueue
	queueKey  types.NamespacedName
	queue     *lanequeue.Queue
	tasks     *scheduling.TaskSet
	session   *agentlanev1alpha1.AgentSession
	problem   string
	permanent bool
}

// bind finds the task's queue, through its session when it names one.
func (r *ExternalTaskReconciler) bind(ctx context.Context, task *agentlanev1alpha1.ExternalTask) (binding, error) {
	var b binding
	queueName := ""
	if task.Spec.QueueRef != nil {
		queueName = task.Spec.QueueRef.Name
	}
	if ref := task.Spec.SessionRef; ref != nil {
		s := &agentlanev1alpha1.AgentSession{}
		err := r.Get(ctx, types.NamespacedName{Namespace: task.Namespace, Name: ref.Name}, s)
		switch {
		case apierrors.IsNotFound(err):
			if queueName == "" {
				b.problem = fmt.Sprintf("AgentSession %q does not exist", ref.Name)
				return b, nil
			}
		case err != nil:
			return b, err
		case queueName != "" && queueName != s.Spec.QueueRef.Name:
			b.problem = fmt.Sprintf("queueRef %q is not the queue of AgentSession %q (%q)", queueName, ref.Name, s.Spec.QueueRef.Name)
			b.permanent = true
			return b, nil
		default:
			b.session = s
			queueName = s.Spec.QueueRef.Name
		}
	}
	b.queueKey = types.NamespacedName{Namespace: task.Namespace, Name: queueName}
	lq := &agentlanev1alpha1.LaneQueue{}
	if err := r.Get(ctx, b.queueKey, lq); err != nil {
		if !apierrors.IsNotFound(err) {
			return b, err
		}
		b.problem = fmt.Sprintf("LaneQueue %q does not exist", queueName)
	} else {
		b.lq = lq
	}
	if q, ts, ok := r.Schedulers.TasksOf(b.queueKey); ok {
		b.queue, b.tasks = q, ts
	} else if b.problem == "" {
		b.problem = fmt.Sprintf("LaneQueue %q has no running scheduler yet", queueName)
	}
	return b, nil
}

// sessionKey is the scheduler's session of the task: its AgentSession, or
// one shared session for the tasks created without one.
func sessionKey(task *agentlanev1alpha1.ExternalTask) string {
	if task.Spec.SessionRef != nil {
		return task.Spec.SessionRef.Name
	}
	return ""
}

// admit hands the task to the scheduler: an attempt that a worker already
// holds (the manager restarted) is adopted where it runs; anything else is
// queued, counting the attempts already made against its retries (except
// those lost before they started, which did not count).
func (r *ExternalTaskReconciler) admit(b binding, task *agentlanev1alpha1.ExternalTask) (*lanequeue.Ticket, error) {
	spec, st := &task.Spec, &task.Status
	cmd := lanequeue.Command{
		ID:         task.Name,
		SessionKey: sessionKey(task),
		Type:       string(spec.CommandType),
		Lane:       string(spec.Lane),
		RunID:      spec.RunID,
		External:   true,
		// The task is in the cluster: a draining queue still schedules it.
		Durable: true,
		// The timeout of an attempt runs from its dispatch to a worker
		// (or its Job's creation), not while it waits for one.
		AwaitStart: true,
	}
	// No payload: the scheduler never reads it, workers read it from the
	// task, and the manager's cache does not keep it (leanTask).
	if spec.Priority != nil {
		cmd.Priority = ptrInt(int(*spec.Priority))
	}
	if spec.Deadline != nil {
		cmd.Deadline = spec.Deadline.Time
	}
	if spec.Timeout != nil {
		cmd.Timeout = spec.Timeout.Duration
	} else if b.session != nil {
		// The session's lane override sets the timeout of its commands.
		if lane, _, err := b.queue.Route(cmd.SessionKey, cmd.Lane, cmd.Type); err == nil {
			if t := b.session.Spec.LaneTimeout(lane); t != nil {
				cmd.Timeout = t.Duration
			}
		}
	}
	id := spec.Identity
	if id == nil && b.session != nil {
		id = b.session.Spec.Identity
	}
	cmd.Labels = identity.Scheduler(id)

	var tk *lanequeue.Ticket
	var err error
	if held(st) {
		started := r.Clock.Now()
		if st.StartedAt != nil {
			started = st.StartedAt.Time
		} else if st.DispatchedAt != nil {
			started = st.DispatchedAt.Time
		}
		// Attempts lost before they started did not count; they still do
		// not.
		cmd.PriorNotStarted = notStartedRecords(st, int(st.Attempt)-1)
		tk, err = b.queue.Adopt(cmd, int(st.Attempt), started)
		if err == nil {
			restoreDeadline(b, task)
		}
	} else {
		cmd.PriorAttempts = priorAttempts(st)
		cmd.PriorNotStarted = notStartedRecords(st, cmd.PriorAttempts)
		tk, err = b.queue.Submit(cmd)
	}
	if err != nil {
		return nil, err
	}
	b.tasks.Put(task.Name, tk, false)
	return tk, nil
}

func ptrInt(v int) *int { return &v }

// ensureMetadata labels the task with its queue, lane and session and makes
// its session its owner, so that workers, Jobs, selectors and garbage
// collection find it. A submitter that sets them at creation saves the write.
func (r *ExternalTaskReconciler) ensureMetadata(ctx context.Context, s *taskScope, b binding, lane string) error {
	task := s.Task
	orig := task.DeepCopy()
	want := map[string]string{
		agentlanev1alpha1.QueueLabel: b.queueKey.Name,
		agentlanev1alpha1.LaneLabel:  lane,
	}
	if b.session != nil {
		want[agentlanev1alpha1.SessionLabel] = b.session.Name
	}
	if task.Labels == nil {
		task.Labels = map[string]string{}
	}
	maps.Copy(task.Labels, want)
	if b.session != nil && !metav1.IsControlledBy(task, b.session) {
		if err := controllerutil.SetControllerReference(b.session, task, r.Scheme()); err != nil {
			// Another controller owns the task; leave its owners alone.
			logf.FromContext(ctx).V(1).Info("Task has another controller; not owned by its session", "reason", err.Error())
		}
	}
	if equality.Semantic.DeepEqual(orig.ObjectMeta, task.ObjectMeta) {
		return nil
	}
	if err := r.Patch(ctx, task, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("label the task: %w", err)
	}
	r.written.Wrote(client.ObjectKeyFromObject(task), orig.ResourceVersion)
	s.MetadataWritten()
	return nil
}
