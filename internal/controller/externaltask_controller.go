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
	"slices"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
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
	"github.com/agentlane/agentlane/internal/truncate"
	"github.com/agentlane/agentlane/internal/workerproto"
)

// CancelAnnotation, set to "true" on an ExternalTask, cancels it: a queued
// task never runs, a running attempt is taken from its worker, and the task
// ends Cancelled.
const CancelAnnotation = "agentlane.io/cancel"

// Timing of the ExternalTask controller.
const (
	// awaitWorkerInterval is how often a task that has a lane slot but no
	// free worker looks for one again (a new or renewed worker Lease also
	// wakes it).
	awaitWorkerInterval = time.Second
	// unboundInterval is how often a task whose session or queue is missing
	// checks again.
	unboundInterval = 5 * time.Second
	// maxHeldCheck bounds how long a dispatched task goes without checking
	// its worker or Job.
	maxHeldCheck = 30 * time.Second
	// jobGrace is how long a Job that completed may take to show its pod's
	// result before the attempt counts as failed.
	jobGrace = 10 * time.Second
	// retrySoon is when a task whose state moved during a reconcile is
	// looked at again, should no watch event bring it back first.
	retrySoon = 200 * time.Millisecond
	// maxAttemptRecords is how many attempts status.attempts keeps (the
	// CRD's maxItems).
	maxAttemptRecords = 16
	// maxAttemptError is the longest error kept in an attempt record.
	maxAttemptError = 4096
	// maxConditionMessage is the longest message a condition may carry.
	maxConditionMessage = 32768
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
	// awaiting holds the tasks that have a lane slot and wait for a worker.
	awaiting taskKeys
	// unbound holds the tasks whose queue or session is missing or whose
	// queue's scheduler has not started.
	unbound taskKeys
	// written remembers, per task, the resourceVersions the controller's own
	// writes replaced, until the cache shows a newer one: a read that
	// predates the controller's last write is not acted on.
	written writtenVersions
}

// taskKeys is a set of tasks that wait for something to appear in their
// namespace.
type taskKeys struct {
	m sync.Map // types.NamespacedName -> struct{}
}

func (k *taskKeys) add(key types.NamespacedName)    { k.m.Store(key, struct{}{}) }
func (k *taskKeys) remove(key types.NamespacedName) { k.m.Delete(key) }

// in returns the requests of the tasks of namespace ns.
func (k *taskKeys) in(ns string) []reconcile.Request {
	var reqs []reconcile.Request
	k.m.Range(func(key, _ any) bool {
		if t := key.(types.NamespacedName); t.Namespace == ns {
			reqs = append(reqs, reconcile.Request{NamespacedName: t})
		}
		return true
	})
	return reqs
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
		Watches(&agentlanev1alpha1.AgentSession{}, handler.EnqueueRequestsFromMapFunc(r.sessionTasks)).
		WatchesRawSource(r.Schedulers.TaskEvents().Source()).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Named("externaltask").
		Complete(r)
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

// leaseHandler wakes the tasks waiting for a worker whenever a worker Lease
// appears or changes, and the tasks a worker held when its Lease goes away.
func (r *ExternalTaskReconciler) leaseHandler() handler.EventHandler {
	waiting := func(ns string, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		for _, req := range r.awaiting.in(ns) {
			q.Add(req)
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			waiting(e.Object.GetNamespace(), q)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			waiting(e.ObjectNew.GetNamespace(), q)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			l, ok := e.Object.(*coordinationv1.Lease)
			if !ok {
				return
			}
			if w, ok := parseWorkerLease(l); ok {
				for _, t := range r.workers.tasksOf(workerKey{l.Namespace, w.name}) {
					q.Add(reconcile.Request{NamespacedName: t})
				}
			}
			waiting(l.Namespace, q)
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

func (r *ExternalTaskReconciler) reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
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
	if r.written.stale(req.NamespacedName, task.ResourceVersion) {
		// The cache has not caught up with this controller's last write;
		// its watch event brings the task back.
		return ctrl.Result{RequeueAfter: retrySoon}, nil
	}
	r.workers.observe(task)
	if !task.DeletionTimestamp.IsZero() {
		r.forgetDeleted(req.NamespacedName)
		return ctrl.Result{}, nil
	}

	b, err := r.bind(ctx, task)
	if err != nil {
		return ctrl.Result{}, err
	}
	if task.Status.Phase.IsTerminal() {
		if b.tasks != nil {
			r.settleFinished(ctx, b, task)
		}
		return r.reconcileFinished(ctx, task, b.lq)
	}
	if b.problem != "" {
		r.unbound.add(req.NamespacedName)
		if b.permanent {
			return ctrl.Result{}, r.finishUnscheduled(ctx, task, agentlanev1alpha1.ExternalTaskFailed, b.problem)
		}
		return ctrl.Result{RequeueAfter: unboundInterval}, r.setWaiting(ctx, task, b.problem)
	}

	r.unbound.remove(req.NamespacedName)
	if _, tracked := b.tasks.Get(task.Name); !tracked {
		tk, err := r.admit(b, task)
		if err != nil {
			if errors.Is(err, lanequeue.ErrClosed) {
				return ctrl.Result{RequeueAfter: unboundInterval}, nil
			}
			// The scheduler refuses the command (an unknown lane, a bad
			// value): retrying cannot help.
			return ctrl.Result{}, r.finishUnscheduled(ctx, task, agentlanev1alpha1.ExternalTaskFailed,
				fmt.Sprintf("the scheduler refused the task: %v", err))
		}
		if err := r.ensureMetadata(ctx, task, b, tk.Lane()); err != nil {
			return ctrl.Result{}, err
		}
	}
	if task.Annotations[CancelAnnotation] == "true" {
		if err := b.queue.Cancel(task.Name); err == nil {
			log.Info("Task cancelled by annotation")
		}
	}
	return r.converge(ctx, b, task)
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
// queued, counting the attempts already made against its retries.
func (r *ExternalTaskReconciler) admit(b binding, task *agentlanev1alpha1.ExternalTask) (*lanequeue.Ticket, error) {
	spec, st := &task.Spec, &task.Status
	cmd := lanequeue.Command{
		ID:         task.Name,
		SessionKey: sessionKey(task),
		Type:       string(spec.CommandType),
		Lane:       string(spec.Lane),
		RunID:      spec.RunID,
		External:   true,
	}
	if spec.Payload != nil {
		cmd.Payload = spec.Payload.Raw
	}
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
		tk, err = b.queue.Adopt(cmd, int(st.Attempt), started)
	} else {
		cmd.PriorAttempts = priorAttempts(st)
		tk, err = b.queue.Submit(cmd)
	}
	if err != nil {
		return nil, err
	}
	b.tasks.Put(task.Name, tk, false)
	return tk, nil
}

func ptrInt(v int) *int { return &v }

// held tells whether a worker or Job holds the task's current attempt.
func held(st *agentlanev1alpha1.ExternalTaskStatus) bool {
	return st.Attempt > 0 && !recorded(st, st.Attempt) &&
		(st.Phase == agentlanev1alpha1.ExternalTaskDispatched || st.Phase == agentlanev1alpha1.ExternalTaskRunning)
}

// recorded tells whether attempt n already has its record.
func recorded(st *agentlanev1alpha1.ExternalTaskStatus, n int32) bool {
	return len(st.Attempts) > 0 && st.Attempts[len(st.Attempts)-1].Attempt >= n
}

// priorAttempts is how many attempts of a task that is not held have been
// made: status.attempt once that attempt has its record; one less when it
// has none, because then it was handed back or never reached a worker.
func priorAttempts(st *agentlanev1alpha1.ExternalTaskStatus) int {
	if st.Attempt <= 0 {
		return 0
	}
	if recorded(st, st.Attempt) {
		return int(st.Attempt)
	}
	return int(st.Attempt) - 1
}

// ensureMetadata labels the task with its queue, lane and session and makes
// its session its owner, so that workers, Jobs, selectors and garbage
// collection find it. A submitter that sets them at creation saves the write.
func (r *ExternalTaskReconciler) ensureMetadata(ctx context.Context, task *agentlanev1alpha1.ExternalTask, b binding, lane string) error {
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
	r.written.wrote(client.ObjectKeyFromObject(task), orig.ResourceVersion)
	return nil
}

// converge writes what the scheduler decided about the task: a granted
// attempt is dispatched, a result is fed to the scheduler, an ended attempt
// is recorded, a finished command gets its final phase.
func (r *ExternalTaskReconciler) converge(ctx context.Context, b binding, task *agentlanev1alpha1.ExternalTask) (ctrl.Result, error) {
	// Feeding a result or a loss to the scheduler changes its state; look
	// again afterwards. Two reports are the most one pass can make.
	for range 3 {
		tt, ok := b.tasks.Get(task.Name)
		if !ok {
			return ctrl.Result{}, nil
		}
		o, final := tt.Ticket.Outcome()
		n := int32(o.Attempts)
		st := &task.Status
		switch {
		case final:
			return ctrl.Result{}, r.finish(ctx, b, task, tt, o)

		case o.State == lanequeue.StateRunning && st.Attempt == n && held(st):
			// Attempt n is out with a worker or a Job.
			end, requeue, err := r.checkHeld(ctx, task)
			if err != nil || end == nil {
				return ctrl.Result{RequeueAfter: requeue}, err
			}
			if err := closeAttempt(b, task, n, *end, st.Result); err != nil {
				return ctrl.Result{}, err
			}

		case o.State == lanequeue.StateRunning:
			// Attempt n is granted and nobody has it: dispatch it.
			return r.dispatch(ctx, b, task, tt, o)

		default:
			// Waiting in the lane, or for a retry.
			return ctrl.Result{}, r.setQueued(ctx, b, task, tt, o)
		}
	}
	return ctrl.Result{RequeueAfter: retrySoon}, nil
}

// schedulerResult converts a task result for the scheduler.
func schedulerResult(res *agentlanev1alpha1.TaskResult) lanequeue.Result {
	if res == nil {
		return lanequeue.Result{}
	}
	out := lanequeue.Result{Success: res.Success, Error: res.Error}
	if res.Result != nil {
		out.Output = res.Result.Raw
	}
	if res.ExitCode != nil {
		out.ExitCode = int(*res.ExitCode)
	}
	return out
}

// closeAttempt reports to the scheduler that attempt n of the task ended:
// with the worker's result res when there is one, else as a failure. It
// remembers how, for the attempt's record. A scheduler that has already
// closed the attempt (its timeout won) is not an error.
func closeAttempt(b binding, task *agentlanev1alpha1.ExternalTask, n int32, end scheduling.AttemptEnd, res *agentlanev1alpha1.TaskResult) error {
	b.tasks.MarkClosed(task.Name, n, end)
	var err error
	if res != nil {
		err = b.queue.CompleteAttempt(task.Name, int(n), schedulerResult(res))
	} else {
		err = b.queue.FailAttempt(task.Name, int(n), errors.New(end.Msg))
	}
	if err != nil && !errors.Is(err, lanequeue.ErrStaleAttempt) && !errors.Is(err, lanequeue.ErrNotFound) {
		return fmt.Errorf("report attempt %d to the scheduler: %w", n, err)
	}
	return nil
}

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
	if st.JobName != "" {
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

	lease := &coordinationv1.Lease{}
	err := r.Get(ctx, types.NamespacedName{Namespace: task.Namespace, Name: workerproto.LeaseName(st.Worker)}, lease)
	switch {
	case apierrors.IsNotFound(err):
		return ended(agentlanev1alpha1.AttemptWorkerLost, "worker %s has no heartbeat Lease", st.Worker)
	case err != nil:
		return nil, 0, err
	}
	w, ok := parseWorkerLease(lease)
	if !ok || !w.live(now) {
		return ended(agentlanev1alpha1.AttemptWorkerLost, "the heartbeat of worker %s expired", st.Worker)
	}
	// Look again just after the Lease would lapse unless renewed.
	return nil, min(w.expires.Sub(now)+100*time.Millisecond, maxHeldCheck), nil
}

// dispatch gives the granted attempt of the task to a worker, or creates its
// Job, in one status write that also records the previous attempt if the
// status still shows it.
func (r *ExternalTaskReconciler) dispatch(ctx context.Context, b binding, task *agentlanev1alpha1.ExternalTask, tt scheduling.TrackedTask, o lanequeue.Outcome) (ctrl.Result, error) {
	key := client.ObjectKeyFromObject(task)
	orig := task.DeepCopy()
	st := &task.Status
	n := int32(o.Attempts)
	now := metav1.NewTime(r.Clock.Now())
	if st.Attempt > 0 && st.Attempt < n && !recorded(st, st.Attempt) {
		r.recordEnded(st, tt, o, now)
	}
	lane := tt.Ticket.Lane()
	target := laneTarget(b.lq, lane)
	if st.Attempt != n || st.JobName != "" {
		clearAttempt(st)
	}
	st.Lane = agentlanev1alpha1.LaneName(lane)
	st.Attempt = n
	if st.QueuedAt == nil {
		st.QueuedAt = &now
	}
	setInProgress(st, task.Generation, now)

	if target != nil && target.Type == agentlanev1alpha1.ExternalTargetJob {
		job, err := buildJob(task, target.JobTemplate, n, r.Scheme())
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
		st.Phase = agentlanev1alpha1.ExternalTaskDispatched
		st.JobName, st.Worker, st.NodeName = job.Name, "", ""
		st.DispatchedAt = &now
		setCondition(st, task.Generation, now, agentlanev1alpha1.ExternalTaskClaimedCondition, metav1.ConditionFalse,
			agentlanev1alpha1.ExternalTaskJobPendingReason, fmt.Sprintf("Job %s runs attempt %d", job.Name, n))
		return ctrl.Result{}, r.patchStatus(ctx, task, orig)
	}

	w, ok := r.pickWorker(ctx, task, b, lane, target)
	if !ok {
		r.awaiting.add(key)
		st.Phase = agentlanev1alpha1.ExternalTaskQueued
		st.Worker, st.NodeName = "", ""
		setCondition(st, task.Generation, now, agentlanev1alpha1.ExternalTaskClaimedCondition, metav1.ConditionFalse,
			agentlanev1alpha1.ExternalTaskAwaitingWorkerReason,
			fmt.Sprintf("attempt %d has a slot in lane %s; no live worker serving it has a free slot", n, lane))
		return ctrl.Result{RequeueAfter: awaitWorkerInterval}, r.patchStatus(ctx, task, orig)
	}
	r.awaiting.remove(key)
	st.Phase = agentlanev1alpha1.ExternalTaskDispatched
	st.Worker, st.NodeName = w.name, w.node
	st.DispatchedAt = &now
	setCondition(st, task.Generation, now, agentlanev1alpha1.ExternalTaskClaimedCondition, metav1.ConditionFalse,
		agentlanev1alpha1.ExternalTaskAwaitingWorkerReason,
		fmt.Sprintf("attempt %d dispatched to worker %s on node %s", n, w.name, w.node))
	if err := r.patchStatus(ctx, task, orig); err != nil {
		r.workers.release(key)
		return ctrl.Result{}, err
	}
	logf.FromContext(ctx).V(1).Info("Dispatched", "attempt", n, "worker", w.name, "node", w.node)
	return ctrl.Result{RequeueAfter: min(w.expires.Sub(r.Clock.Now())+100*time.Millisecond, maxHeldCheck)}, nil
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
// queue, lane and command type and matches the lane's workerSelector.
func (r *ExternalTaskReconciler) pickWorker(ctx context.Context, task *agentlanev1alpha1.ExternalTask, b binding, lane string, target *agentlanev1alpha1.ExternalTarget) (workerInfo, bool) {
	var selector labels.Selector
	if target != nil && target.WorkerSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(target.WorkerSelector)
		if err != nil {
			logf.FromContext(ctx).Error(err, "Invalid workerSelector; no worker matches", "lane", lane)
			return workerInfo{}, false
		}
		selector = s
	}
	leases := &coordinationv1.LeaseList{}
	if err := r.List(ctx, leases, client.InNamespace(task.Namespace), client.MatchingLabels{workerproto.WorkerLabel: "true"}); err != nil {
		logf.FromContext(ctx).Error(err, "List worker Leases")
		return workerInfo{}, false
	}
	now := r.Clock.Now()
	var candidates []workerInfo
	for i := range leases.Items {
		w, ok := parseWorkerLease(&leases.Items[i])
		if ok && w.live(now) && !w.draining && w.serves(b.queueKey.Name, lane, string(task.Spec.CommandType), selector) {
			candidates = append(candidates, w)
		}
	}
	return r.workers.pick(client.ObjectKeyFromObject(task), candidates)
}

// setQueued writes that the task waits in its lane, recording the attempt
// that just ended if the status still shows it.
func (r *ExternalTaskReconciler) setQueued(ctx context.Context, b binding, task *agentlanev1alpha1.ExternalTask, tt scheduling.TrackedTask, o lanequeue.Outcome) error {
	orig := task.DeepCopy()
	st := &task.Status
	now := metav1.NewTime(r.Clock.Now())
	n := int32(o.Attempts)
	r.awaiting.remove(client.ObjectKeyFromObject(task))
	reason, msg := agentlanev1alpha1.ExternalTaskAwaitingWorkerReason, fmt.Sprintf("waiting for a slot in lane %s", tt.Ticket.Lane())
	switch {
	case st.Attempt > 0 && st.Attempt == n && !recorded(st, n):
		rec := r.recordEnded(st, tt, o, now)
		clearAttempt(st)
		reason = agentlanev1alpha1.ExternalTaskRetryBackoffReason
		msg = fmt.Sprintf("attempt %d ended %s; retrying", n, rec.Outcome)
		if rec.Outcome == agentlanev1alpha1.AttemptWorkerLost {
			reason = agentlanev1alpha1.ExternalTaskWorkerLostReason
		}
		if r.Recorder != nil {
			r.Recorder.Eventf(task, nil, corev1.EventTypeNormal, "Retrying", "Retry",
				"attempt %d ended %s: %s", n, rec.Outcome, rec.Error)
		}
	case st.Phase == agentlanev1alpha1.ExternalTaskQueued:
		// Already shows it, or shows why it waits.
		return nil
	}
	st.Phase = agentlanev1alpha1.ExternalTaskQueued
	st.Lane = agentlanev1alpha1.LaneName(tt.Ticket.Lane())
	if st.QueuedAt == nil {
		st.QueuedAt = &now
	}
	setInProgress(st, task.Generation, now)
	setCondition(st, task.Generation, now, agentlanev1alpha1.ExternalTaskClaimedCondition, metav1.ConditionFalse, reason, msg)
	return r.patchStatus(ctx, task, orig)
}

// finish writes the final phase the scheduler decided, recording the last
// attempt if the status still shows it, and forgets the task.
func (r *ExternalTaskReconciler) finish(ctx context.Context, b binding, task *agentlanev1alpha1.ExternalTask, tt scheduling.TrackedTask, o lanequeue.Outcome) error {
	orig := task.DeepCopy()
	st := &task.Status
	now := metav1.NewTime(r.Clock.Now())
	n := int32(o.Attempts)
	phase := finalPhase(o.State)
	msg := ""
	if o.Err != nil {
		msg = o.Err.Error()
	}
	if phase != agentlanev1alpha1.ExternalTaskSucceeded && st.Attempt > 0 && st.Attempt == n && !recorded(st, n) {
		rec := r.recordEnded(st, tt, o, now)
		if msg == "" {
			msg = rec.Error
		}
	}
	if phase == agentlanev1alpha1.ExternalTaskSucceeded && msg == "" {
		msg = fmt.Sprintf("attempt %d succeeded", n)
	}
	r.closeTask(st, task.Generation, phase, msg, now)
	if err := r.patchStatus(ctx, task, orig); err != nil {
		return err
	}
	b.tasks.Forget(task.Name)
	r.workers.release(client.ObjectKeyFromObject(task))
	if phase != agentlanev1alpha1.ExternalTaskSucceeded && phase != agentlanev1alpha1.ExternalTaskCancelled && r.Recorder != nil {
		r.Recorder.Eventf(task, nil, corev1.EventTypeWarning, string(phase), "Finish", "task ended %s after %d attempts: %s", phase, n, msg)
	}
	logf.FromContext(ctx).V(1).Info("Task finished", "phase", phase, "attempts", n)
	return nil
}

// finishUnscheduled ends a task the scheduler never took.
func (r *ExternalTaskReconciler) finishUnscheduled(ctx context.Context, task *agentlanev1alpha1.ExternalTask, phase agentlanev1alpha1.ExternalTaskPhase, msg string) error {
	orig := task.DeepCopy()
	r.closeTask(&task.Status, task.Generation, phase, msg, metav1.NewTime(r.Clock.Now()))
	if r.Recorder != nil {
		r.Recorder.Eventf(task, nil, corev1.EventTypeWarning, string(phase), "Schedule", "%s", msg)
	}
	return r.patchStatus(ctx, task, orig)
}

// closeTask sets the final phase and conditions.
func (r *ExternalTaskReconciler) closeTask(st *agentlanev1alpha1.ExternalTaskStatus, generation int64, phase agentlanev1alpha1.ExternalTaskPhase, msg string, now metav1.Time) {
	st.Phase = phase
	if st.FinishedAt == nil {
		st.FinishedAt = &now
	}
	if phase != agentlanev1alpha1.ExternalTaskSucceeded {
		setCondition(st, generation, now, agentlanev1alpha1.ExternalTaskClaimedCondition, metav1.ConditionFalse, string(phase), msg)
	}
	setCondition(st, generation, now, agentlanev1alpha1.ExternalTaskFinishedCondition, metav1.ConditionTrue, string(phase), msg)
}

// finalPhase maps a scheduler's terminal state to the task phase.
func finalPhase(s lanequeue.State) agentlanev1alpha1.ExternalTaskPhase {
	switch s {
	case lanequeue.StateSucceeded:
		return agentlanev1alpha1.ExternalTaskSucceeded
	case lanequeue.StateTimedOut:
		return agentlanev1alpha1.ExternalTaskTimedOut
	case lanequeue.StateDeadLettered:
		return agentlanev1alpha1.ExternalTaskDeadLettered
	case lanequeue.StateCancelled:
		return agentlanev1alpha1.ExternalTaskCancelled
	default:
		return agentlanev1alpha1.ExternalTaskFailed
	}
}

// recordEnded appends the record of the task's current attempt, which the
// scheduler has closed. The outcome is the one the manager reported, else
// the result the worker wrote, else cancellation or the scheduler's timeout.
func (r *ExternalTaskReconciler) recordEnded(st *agentlanev1alpha1.ExternalTaskStatus, tt scheduling.TrackedTask, o lanequeue.Outcome, now metav1.Time) agentlanev1alpha1.TaskAttempt {
	rec := agentlanev1alpha1.TaskAttempt{
		Attempt: st.Attempt, Worker: st.Worker, NodeName: st.NodeName,
		StartedAt: st.StartedAt, FinishedAt: st.FinishedAt,
	}
	switch {
	case tt.Closed == st.Attempt:
		rec.Outcome, rec.Error = tt.ClosedAs.Outcome, tt.ClosedAs.Msg
	case st.Result != nil && st.Result.Success:
		rec.Outcome = agentlanev1alpha1.AttemptSucceeded
	case st.Result != nil:
		rec.Outcome, rec.Error = agentlanev1alpha1.AttemptFailed, st.Result.Error
	case o.State == lanequeue.StateCancelled:
		rec.Outcome = agentlanev1alpha1.AttemptCancelled
		if o.Err != nil {
			rec.Error = o.Err.Error()
		}
	default:
		rec.Outcome = agentlanev1alpha1.AttemptTimedOut
		rec.Error = fmt.Sprintf("attempt %d did not finish within its timeout", st.Attempt)
	}
	if rec.FinishedAt == nil {
		rec.FinishedAt = &now
	}
	if rec.Worker == "" && st.JobName != "" {
		rec.Worker = st.JobName
	}
	rec.Error = truncate.Runes(rec.Error, maxAttemptError, "")
	st.Attempts = append(st.Attempts, rec)
	if extra := len(st.Attempts) - maxAttemptRecords; extra > 0 {
		st.Attempts = slices.Delete(st.Attempts, 0, extra)
	}
	return rec
}

// clearAttempt removes what belonged to the previous attempt.
func clearAttempt(st *agentlanev1alpha1.ExternalTaskStatus) {
	st.Worker, st.NodeName, st.JobName = "", "", ""
	st.StartedAt, st.FinishedAt, st.DispatchedAt, st.Result = nil, nil, nil, nil
}

// setInProgress makes sure the task shows Claimed and Finished=False, in
// that order, so that a worker can update them in place (docs/workers.md).
func setInProgress(st *agentlanev1alpha1.ExternalTaskStatus, generation int64, now metav1.Time) {
	if meta.FindStatusCondition(st.Conditions, agentlanev1alpha1.ExternalTaskClaimedCondition) == nil {
		setCondition(st, generation, now, agentlanev1alpha1.ExternalTaskClaimedCondition, metav1.ConditionFalse,
			agentlanev1alpha1.ExternalTaskAwaitingWorkerReason, "waiting for a slot")
	}
	setCondition(st, generation, now, agentlanev1alpha1.ExternalTaskFinishedCondition, metav1.ConditionFalse,
		agentlanev1alpha1.ExternalTaskInProgressReason, "the task has not finished")
}

func setCondition(st *agentlanev1alpha1.ExternalTaskStatus, generation int64, now metav1.Time, typ string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: truncate.Runes(msg, maxConditionMessage, ""),
		ObservedGeneration: generation, LastTransitionTime: now,
	})
}

// setWaiting shows why a task cannot be scheduled yet.
func (r *ExternalTaskReconciler) setWaiting(ctx context.Context, task *agentlanev1alpha1.ExternalTask, why string) error {
	orig := task.DeepCopy()
	st := &task.Status
	now := metav1.NewTime(r.Clock.Now())
	if st.Phase == "" {
		st.Phase = agentlanev1alpha1.ExternalTaskQueued
	}
	setInProgress(st, task.Generation, now)
	setCondition(st, task.Generation, now, agentlanev1alpha1.ExternalTaskClaimedCondition, metav1.ConditionFalse,
		agentlanev1alpha1.ExternalTaskAwaitingWorkerReason, why)
	return r.patchStatus(ctx, task, orig)
}

// patchStatus writes the status change from orig, only if there is one. The
// patch carries the resourceVersion it was computed from, so a write based
// on a stale read (the worker wrote in between) fails with a conflict and
// the task is reconciled again from fresh state.
func (r *ExternalTaskReconciler) patchStatus(ctx context.Context, task, orig *agentlanev1alpha1.ExternalTask) error {
	task.Status.ObservedGeneration = task.Generation
	if equality.Semantic.DeepEqual(orig.Status, task.Status) {
		return nil
	}
	if err := r.Status().Patch(ctx, task, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	r.written.wrote(client.ObjectKeyFromObject(task), orig.ResourceVersion)
	return nil
}

// settleFinished reconciles the scheduler with a task whose phase is
// already final, usually a worker's successful completion: the result is
// reported, or, if the scheduler had moved on, its command is cancelled.
// The API server decides: the write that reached it first counts.
func (r *ExternalTaskReconciler) settleFinished(ctx context.Context, b binding, task *agentlanev1alpha1.ExternalTask) {
	defer b.tasks.Forget(task.Name)
	tt, ok := b.tasks.Get(task.Name)
	if !ok {
		return
	}
	if _, final := tt.Ticket.Outcome(); final {
		return
	}
	st := &task.Status
	if st.Phase == agentlanev1alpha1.ExternalTaskSucceeded && st.Result != nil {
		if err := b.queue.CompleteAttempt(task.Name, int(st.Attempt), schedulerResult(st.Result)); err == nil {
			return
		}
	}
	if err := b.queue.Cancel(task.Name); err != nil && !errors.Is(err, lanequeue.ErrNotFound) {
		logf.FromContext(ctx).Error(err, "Cancel the scheduler's command of a finished task")
	}
}

// reconcileFinished completes the record of a finished task and deletes it
// once its queue's ttlAfterFinished has passed. Dead letters are kept, up to
// the queue's deadLetter.maxSize (see the LaneQueue's retention sweep).
func (r *ExternalTaskReconciler) reconcileFinished(ctx context.Context, task *agentlanev1alpha1.ExternalTask, lq *agentlanev1alpha1.LaneQueue) (ctrl.Result, error) {
	r.release(client.ObjectKeyFromObject(task))
	st := &task.Status
	if !meta.IsStatusConditionTrue(st.Conditions, agentlanev1alpha1.ExternalTaskFinishedCondition) {
		// A worker without the condition to update finished it.
		orig := task.DeepCopy()
		now := metav1.NewTime(r.Clock.Now())
		msg := fmt.Sprintf("attempt %d %s", st.Attempt, st.Phase)
		setCondition(st, task.Generation, now, agentlanev1alpha1.ExternalTaskFinishedCondition, metav1.ConditionTrue, string(st.Phase), msg)
		if st.FinishedAt == nil {
			st.FinishedAt = &now
		}
		if err := r.patchStatus(ctx, task, orig); err != nil {
			return ctrl.Result{}, err
		}
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
	r.workers.release(key)
	r.awaiting.remove(key)
	r.unbound.remove(key)
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
	r.written.forget(key)
	r.release(key)
	r.Schedulers.ForEachTasks(key.Namespace, func(q *lanequeue.Queue, ts *scheduling.TaskSet) {
		if ts.Has(key.Name) {
			_ = q.Cancel(key.Name)
			ts.Forget(key.Name)
		}
	})
}
