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
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/budget"
	"github.com/agentlane/agentlane/internal/delegation"
	"github.com/agentlane/agentlane/internal/scheduling"
	"github.com/agentlane/agentlane/internal/taskstate"
)

// Inboxes posts inbound messages to sessions, through the Session API's
// inboxes (sessionserver.Server implements it).
type Inboxes interface {
	// Deliver posts text to the session's inbox as an inbound message.
	Deliver(ctx context.Context, session types.NamespacedName, id, text string) error
	// Busy reports whether the session has a run in progress or messages
	// waiting, as far as this manager knows.
	Busy(ctx context.Context, session types.NamespacedName) (bool, error)
}

// delegationRecheck is how often a lane with work in flight is looked at
// again when no watch event brings it back first.
const delegationRecheck = 30 * time.Second

// DelegationReconciler runs the Delegate lanes (aegis's delegation queues).
// A delegated task is an ExternalTask labelled agentlane.io/delegated with
// command type delegate (delegation.IsDelegated); the ExternalTask
// controller leaves it alone. It is a command of its lane in its queue's
// scheduler (delegation_engine.go), which keeps the lane's caps, order,
// rate limit, timeouts, retries and dead letters and counts it. Each pass
// takes one lane of one LaneQueue and, reading its tasks from the cache
// with exact counts (see listLane) and its worker sessions around the
// cache:
//   - fails at once a new task whose producer cannot delegate here, or
//     whose first turn no session can take as a turn (a /queue
//     directive), and admits the others to the lane's scheduler;
//   - starts each attempt the scheduler granted in a worker AgentSession of
//     its own, created from the lane's template, owned by the producer
//     session and carrying its identity, with a budget carved from the
//     producer's, and posts the payload as its first turn, unless the
//     producer has Bounds.MaxChildren workers running: then the attempt
//     waits with its slot;
//   - ends through the scheduler the attempt of a worker session that was
//     deleted, failed, lost its runtime pod, or lost its run to a manager
//     restart, and re-posts a first turn that a restart kept from being
//     posted;
//   - records what the scheduler decided: an attempt that timed out or was
//     lost (its worker session deleted), a retry, the task's final phase;
//   - posts each finished task's result to the producer's inbox, headed
//     "from queue:<lane> · task#<id> · ok|error · <time>", once;
//   - deletes finished tasks after the queue's ttlAfterFinished, and the
//     worker sessions whose task is gone (the LaneQueue controller removes
//     finished tasks beyond the producer's retention caps).
//
// A worker's runtime completes its task through the Session API when it
// finishes its first run (POST .../runs/{run}/finish with the outcome);
// the pass then settles the command in the scheduler.
type DelegationReconciler struct {
	client.Client
	// APIReader reads tasks and sessions around the cache.
	APIReader client.Reader
	Inboxes   Inboxes
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock
	// Schedulers holds the lane schedulers: a delegated task is a command
	// of its Delegate lane there (delegation_engine.go).
	Schedulers *scheduling.Schedulers
	// Budgets is the budget ledger: each worker's budget is carved from
	// what its producer has left and paid by the producer when the worker
	// is created. Without it a worker gets its template's budget.
	Budgets *budget.Ledger
	// Bounds limit delegation depth, each producer's running workers and
	// the deadline of a delegation that sets none; zero fields take the
	// defaults of package delegation.
	Bounds delegation.Bounds

	// startedAt is when this manager run began: tasks started before it
	// are checked once for a lost run.
	startedAt time.Time
	// checked holds the tasks started by an earlier manager run whose
	// worker this run has found busy.
	checked sync.Map // types.NamespacedName -> struct{}
	// written remembers the task versions this controller's status writes
	// replaced, so that a pass never acts on a cache that has not caught
	// up with them.
	written taskstate.Versions
	// admitted remembers the live tasks each lane's scheduler tracks, so
	// that a deleted task leaves its scheduler.
	admitted admittedTasks
}

var _ reconcile.Reconciler = &DelegationReconciler{}

// SetupWithManager registers the reconciler: delegated tasks, worker
// sessions and LaneQueues map to the lanes they belong to.
func (r *DelegationReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil || r.APIReader == nil || r.Inboxes == nil || r.Schedulers == nil {
		return errors.New("DelegationReconciler needs a Client, an APIReader, Inboxes and Schedulers")
	}
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	r.Bounds = r.Bounds.WithDefaults()
	r.startedAt = r.Clock.Now()
	return ctrl.NewControllerManagedBy(mgr).
		Named("delegation").
		Watches(&agentlanev1alpha1.ExternalTask{}, handler.EnqueueRequestsFromMapFunc(laneOfLabels(agentlanev1alpha1.DelegatedLabel))).
		Watches(&agentlanev1alpha1.AgentSession{}, handler.EnqueueRequestsFromMapFunc(laneOfLabels(agentlanev1alpha1.DelegationTaskLabel))).
		Watches(&agentlanev1alpha1.LaneQueue{}, handler.EnqueueRequestsFromMapFunc(delegateLanesOf)).
		// The lane's scheduler granted, timed out, retried or ended a
		// delegated command.
		WatchesRawSource(r.Schedulers.DelegationEvents().Source()).
		// One pass at a time: a lane's cap is counted, then filled.
		WithOptions(controller.Options{MaxConcurrentReconciles: 1}).
		Complete(r)
}

// laneKey names one lane of one queue as a request, as the schedulers'
// DelegationEvents do.
func laneKey(namespace, queue, lane string) reconcile.Request {
	return scheduling.LaneRequest(namespace, queue, lane)
}

// laneOfLabels maps a delegated task or a worker session (marked by label)
// to its lane.
func laneOfLabels(label string) handler.MapFunc {
	return func(_ context.Context, o client.Object) []reconcile.Request {
		l := o.GetLabels()
		if l[label] == "" || l[agentlanev1alpha1.QueueLabel] == "" || l[agentlanev1alpha1.LaneLabel] == "" {
			return nil
		}
		return []reconcile.Request{laneKey(o.GetNamespace(), l[agentlanev1alpha1.QueueLabel], l[agentlanev1alpha1.LaneLabel])}
	}
}

// delegateLanesOf maps a LaneQueue to its Delegate lanes.
func delegateLanesOf(_ context.Context, o client.Object) []reconcile.Request {
	lq, ok := o.(*agentlanev1alpha1.LaneQueue)
	if !ok {
		return nil
	}
	var reqs []reconcile.Request
	for _, l := range lq.Spec.Lanes {
		if t := l.ExternalTarget; t != nil && t.Type == agentlanev1alpha1.ExternalTargetDelegate {
			reqs = append(reqs, laneKey(lq.Namespace, lq.Name, string(l.Name)))
		}
	}
	return reqs
}

// delegateLane is one Delegate lane as a pass sees it. problem says why
// the lane cannot start work (no such queue or lane, not Delegate).
type delegateLane struct {
	namespace, queue, name string
	lq                     *agentlanev1alpha1.LaneQueue
	spec                   *agentlanev1alpha1.Lane
	problem                string
}

// Reconcile runs one pass over one Delegate lane.
func (r *DelegationReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	queue, lane, ok := strings.Cut(req.Name, "/")
	if !ok {
		return ctrl.Result{}, nil
	}
	log := logf.FromContext(ctx).WithValues("laneQueue", queue, "lane", lane)
	ctx = logf.IntoContext(ctx, log)
	dl, err := r.lane(ctx, req.Namespace, queue, lane)
	if err != nil {
		return ctrl.Result{}, err
	}
	tasks, workers, err := r.listLane(ctx, dl)
	if errors.Is(err, errStaleCache) {
		// The watch event of the controller's own write brings it back.
		return ctrl.Result{RequeueAfter: retrySoon}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	// Each task's status changes in memory only and is written once, at
	// the end of the pass, fenced on the version the pass read.
	var p pass
	p.requeue(0)
	e, scheduled := r.engine(dl)
	scopes := make([]*taskstate.Scope, 0, len(tasks))
	tracked := map[string]bool{}
	for i := range tasks {
		t := &tasks[i]
		if !t.DeletionTimestamp.IsZero() {
			if scheduled {
				r.release(e, t.Name)
			}
			continue
		}
		s := taskstate.NewScope(t)
		scopes = append(scopes, s)
		switch {
		case t.Status.Phase.IsTerminal():
			p.finished++
			if scheduled {
				r.settleEngine(ctx, e, t)
			}
			p.requeue(r.settle(ctx, dl, s))
		case !scheduled:
			// The queue's scheduler has not started (or the queue is
			// gone): the tasks wait, and a lane that cannot delegate
			// fails its waiting ones.
			if dl.problem != "" && !delegatedRunning(&t.Status) {
				r.fail(ctx, s, dl.problem)
			}
			p.requeue(engineRecheck)
		default:
			p.requeue(r.carry(ctx, dl, e, s, workers))
			if _, ok := e.tasks.Get(t.Name); ok {
				tracked[t.Name] = true
			}
		}
	}
	if scheduled {
		for _, name := range r.admitted.sync(req.NamespacedName, tracked) {
			if !slices.ContainsFunc(tasks, func(t agentlanev1alpha1.ExternalTask) bool { return t.Name == name }) {
				r.release(e, name) // deleted while it was live
			}
		}
	}
	for _, s := range scopes {
		if err := s.Write(ctx, r.Client, &r.written, false); err != nil {
			p.errs = append(p.errs, fmt.Errorf("task %s: %w", s.Task.Name, err))
		}
	}
	if p.finished > 0 && dl.lq != nil {
		p.errs = append(p.errs, r.sweep(ctx, dl.lq))
	}
	r.deleteOrphans(ctx, tasks, workers)
	if err := errors.Join(p.errs...); err != nil {
		if apierrors.IsConflict(err) {
			return ctrl.Result{RequeueAfter: retrySoon}, nil
		}
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: p.after}, nil
}

// pass is what one Reconcile found and decided.
type pass struct {
	// finished counts the lane's finished tasks.
	finished int
	// after is when the lane should be looked at again; 0 for never.
	after time.Duration
	errs  []error
}

// requeue asks for another pass within d (0: no need).
func (p *pass) requeue(d time.Duration) {
	if d > 0 && (p.after == 0 || d < p.after) {
		p.after = d
	}
}

// lane reads the lane's spec from its LaneQueue.
func (r *DelegationReconciler) lane(ctx context.Context, ns, queue, lane string) (*delegateLane, error) {
	dl := &delegateLane{namespace: ns, queue: queue, name: lane}
	lq := &agentlanev1alpha1.LaneQueue{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: ns, Name: queue}, lq); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, err
		}
		dl.problem = "LaneQueue " + queue + " does not exist"
		return dl, nil
	}
	dl.lq = lq
	for i := range lq.Spec.Lanes {
		if string(lq.Spec.Lanes[i].Name) == lane {
			dl.spec = &lq.Spec.Lanes[i]
		}
	}
	switch {
	case dl.spec == nil:
		dl.problem = "LaneQueue " + queue + " has no lane " + lane
	case dl.spec.ExternalTarget == nil || dl.spec.ExternalTarget.Type != agentlanev1alpha1.ExternalTargetDelegate || dl.spec.ExternalTarget.Delegate == nil:
		dl.problem = "lane " + lane + " of LaneQueue " + queue + " no longer delegates (its externalTarget is not Delegate with a sessionTemplate)"
	case dl.spec.ExternalTarget.Delegate.SessionTemplate.Spec.Runtime != nil && dl.spec.ExternalTarget.Delegate.SessionTemplate.Spec.Runtime.UndecodablePodTemplate != nil:
		dl.problem = dl.spec.ExternalTarget.Delegate.SessionTemplate.Spec.Runtime.UndecodablePodTemplate.Error(
			"spec.lanes[" + lane + "].externalTarget.delegate.sessionTemplate.spec.runtime.podTemplate")
	}
	return dl, nil
}

// errStaleCache: the manager's cache does not show one of the controller's
// own writes yet.
var errStaleCache = errors.New("the cache has not caught up with the delegation controller's writes")

// listLane reads the lane's delegated tasks, oldest first, from the
// manager's cache (without their payloads: a pass costs the API server
// nothing however many tasks the lane keeps), and its worker sessions by
// name around the cache. The counts are exact: a cache that does not show
// one of the controller's own writes yet is errStaleCache, and a task
// another writer finished meanwhile only holds its slot until its watch
// event brings the lane back.
func (r *DelegationReconciler) listLane(ctx context.Context, dl *delegateLane) ([]agentlanev1alpha1.ExternalTask, map[string]*agentlanev1alpha1.AgentSession, error) {
	in := []client.ListOption{client.InNamespace(dl.namespace),
		client.MatchingLabels{agentlanev1alpha1.QueueLabel: dl.queue, agentlanev1alpha1.LaneLabel: dl.name}}
	tasks := &agentlanev1alpha1.ExternalTaskList{}
	if err := r.List(ctx, tasks, append(in, client.MatchingLabels{agentlanev1alpha1.DelegatedLabel: "true"})...); err != nil {
		return nil, nil, err
	}
	for i := range tasks.Items {
		if r.written.Stale(client.ObjectKeyFromObject(&tasks.Items[i]), tasks.Items[i].ResourceVersion) {
			return nil, nil, errStaleCache
		}
	}
	// The label selects; the immutable command type decides.
	tasks.Items = slices.DeleteFunc(tasks.Items, func(t agentlanev1alpha1.ExternalTask) bool { return !delegation.IsDelegated(&t) })
	slices.SortFunc(tasks.Items, func(a, b agentlanev1alpha1.ExternalTask) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), strings.Compare(a.Name, b.Name))
	})
	sessions := &agentlanev1alpha1.AgentSessionList{}
	if err := r.APIReader.List(ctx, sessions, append(in, client.HasLabels{agentlanev1alpha1.DelegationTaskLabel})...); err != nil {
		return nil, nil, err
	}
	workers := make(map[string]*agentlanev1alpha1.AgentSession, len(sessions.Items))
	for i := range sessions.Items {
		workers[sessions.Items[i].Name] = &sessions.Items[i]
	}
	return tasks.Items, workers, nil
}

// deleteOrphans deletes the worker sessions whose task is gone (retention
// removed it, or someone deleted it).
func (r *DelegationReconciler) deleteOrphans(ctx context.Context, tasks []agentlanev1alpha1.ExternalTask, workers map[string]*agentlanev1alpha1.AgentSession) {
	live := make(map[string]bool, len(tasks))
	for i := range tasks {
		live[tasks[i].Name] = true
	}
	for _, w := range workers {
		if live[w.Labels[agentlanev1alpha1.DelegationTaskLabel]] || !w.DeletionTimestamp.IsZero() {
			continue
		}
		if err := r.Delete(ctx, w, client.Preconditions{UID: &w.UID}); client.IgnoreNotFound(err) != nil {
			logf.FromContext(ctx).Error(err, "Delete the worker session of a deleted task", "agentSession", w.Name)
			continue
		}
		logf.FromContext(ctx).V(1).Info("Deleted the worker session of a deleted task", "agentSession", w.Name)
	}
}

// sweep removes the queue's finished tasks beyond its retention and its
// sessions' (sweepFinished), as the LaneQueue controller does, so that
// finished delegations go as soon as they are settled; their worker
// sessions follow (deleteOrphans).
func (r *DelegationReconciler) sweep(ctx context.Context, lq *agentlanev1alpha1.LaneQueue) error {
	sessions := &agentlanev1alpha1.AgentSessionList{}
	if err := r.List(ctx, sessions, client.InNamespace(lq.Namespace), client.MatchingFields{QueueRefNameField: lq.Name},
		client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	_, err := sweepFinished(ctx, r.Client, lq, sessions.Items)
	return err
}

// WithDelegationBounds sets the bounds of the delegation controller.
func WithDelegationBounds(b delegation.Bounds) SetupOption {
	return func(o *setupOptions) { o.Delegation = b }
}

// withPayload reads the task's payload, which the manager's cache does not
// keep, from the API server. The payload is immutable.
func (r *DelegationReconciler) withPayload(ctx context.Context, t *agentlanev1alpha1.ExternalTask) error {
	if t.Spec.Payload != nil {
		return nil
	}
	full := &agentlanev1alpha1.ExternalTask{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(t), full); err != nil {
		return err
	}
	t.Spec.Payload = full.Spec.Payload
	return nil
}
