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

package scheduling

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// DefaultStatusInterval is how often, at most, a LaneQueue's status is
// rewritten while its scheduler is busy.
const DefaultStatusInterval = time.Second

// Schedulers holds the running lane scheduler of every LaneQueue the manager
// reconciles, keyed by namespace and name. Controllers and the Session API
// reach a queue's scheduler through it.
//
// Status updates are coalesced: every scheduler event marks its LaneQueue
// dirty, and at most once per StatusInterval the dirty queues are sent to
// the LaneQueue controller, which writes status only when it changed. A busy
// queue therefore costs at most one status write per interval, however many
// commands it runs.
type Schedulers struct {
	// Options are the host environment for new schedulers (clock, ids,
	// metrics). When Metrics is nil each scheduler reports to the manager's
	// Prometheus registry, labelled with its LaneQueue. OnExternalTask is set
	// per scheduler and must be left nil here.
	Options lanequeue.Options
	// Recorder, when set, receives the Kubernetes Events for lane pressure
	// and depth alerts.
	Recorder events.EventRecorder
	// StatusInterval bounds how often a busy queue's status is refreshed;
	// DefaultStatusInterval when zero.
	StatusInterval time.Duration

	// hooks are the calls into the components that consume the schedulers;
	// set once by Bind, before Start.
	hooks Hooks
	// bound tells that Bind set hooks.
	bound bool

	// taskEvents wakes the ExternalTask controller for the tasks whose
	// scheduler state changed: granted a slot, timed out, retried, finished.
	taskEvents RequestSink
	// delegationEvents wakes the delegation controller for the Delegate
	// lanes whose delegated commands' scheduler state changed
	// (delegations.go).
	delegationEvents RequestSink

	// stopping is set when the manager stops, before the schedulers close.
	stopping atomic.Bool

	// direct holds the recorded tasks of Direct lanes that this manager
	// run carries (DirectTasks).
	direct DirectTasks

	mu     sync.Mutex
	queues map[types.NamespacedName]*scheduler
	dirty  map[types.NamespacedName]bool
	// changed feeds the LaneQueue controller; created by Changes.
	changed chan event.GenericEvent
}

// Hooks are the calls the schedulers make into the components that
// consume them. Those components are built after the Schedulers (they hold
// it), so cmd/manager builds the Schedulers first, then the controllers and
// the Session API, and binds their hooks with Bind before the manager
// starts. Every hook is required: a Schedulers whose hooks are not bound
// starts no scheduler (Ensure and Start fail).
type Hooks struct {
	// Observer receives every session's command, inbox and cluster events,
	// for the Session API's event streams; NoObserver when the manager
	// serves no Session API.
	Observer SessionObserver
	// OnSessionActivity is told each time a session does something (a
	// command or inbox event), for the AgentSession controller's idle
	// reaper. Calls come from the queues' goroutines and must return
	// quickly.
	OnSessionActivity func(session types.NamespacedName, at time.Time)
	// Rebuild is called each time a scheduler starts, with its queue and
	// task set, before anyone else can reach it (Get, TasksOf and Session
	// do not find it until Rebuild returns): the ExternalTask controller
	// puts back the tasks an earlier manager, or the leader before this
	// one, left unfinished, so that a new leader's scheduler is whole
	// before it dispatches from it.
	Rebuild func(key types.NamespacedName, q *lanequeue.Queue, tasks *TaskSet)
}

// errNotBound is returned by Ensure and Start before Bind.
var errNotBound = errors.New("scheduling: the Schedulers' hooks are not bound (call Bind with the Observer, OnSessionActivity and Rebuild before the manager starts)")

// Bind sets the hooks, once, before the manager starts. It fails when a
// hook is missing or the hooks are already bound.
func (s *Schedulers) Bind(h Hooks) error {
	var missing []string
	if h.Observer == nil {
		missing = append(missing, "Observer")
	}
	if h.OnSessionActivity == nil {
		missing = append(missing, "OnSessionActivity")
	}
	if h.Rebuild == nil {
		missing = append(missing, "Rebuild")
	}
	if len(missing) > 0 {
		return fmt.Errorf("scheduling: Bind needs every hook; missing %s", strings.Join(missing, ", "))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bound {
		return errors.New("scheduling: the Schedulers' hooks are already bound")
	}
	s.hooks, s.bound = h, true
	return nil
}

// isBound tells whether Bind set the hooks.
func (s *Schedulers) isBound() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bound
}

// NoObserver is the Observer of a manager that serves no Session API: it
// drops every session event.
var NoObserver SessionObserver = noObserver{}

type noObserver struct{}

func (noObserver) CommandEvent(types.NamespacedName, lanequeue.Event)     {}
func (noObserver) InboxEvent(types.NamespacedName, lanequeue.InboxEvent)  {}
func (noObserver) SessionReleased(string, string)                         {}
func (noObserver) ClusterEvent(types.NamespacedName, sessionapi.Event)    {}
func (noObserver) SessionRetention(types.NamespacedName, RetentionLimits) {}

// observer is the bound Observer; nil before Bind.
func (s *Schedulers) observer() SessionObserver { return s.hooks.Observer }

// SessionObserver follows what the schedulers do for sessions. Calls come
// in the order things happened within one queue, from one goroutine per
// queue, and must return quickly.
type SessionObserver interface {
	// CommandEvent reports a command event of the queue's session
	// ev.SessionKey (the AgentSession's name).
	CommandEvent(queue types.NamespacedName, ev lanequeue.Event)
	// InboxEvent reports a turn, steer, abort or dropped message of the
	// queue's session ev.Session.
	InboxEvent(queue types.NamespacedName, ev lanequeue.InboxEvent)
	// SessionReleased reports that an AgentSession was deleted and its
	// scheduler state dropped.
	SessionReleased(namespace, name string)
	// ClusterEvent reports a cluster event of the session (budget
	// threshold, passivation request, peer invocation).
	ClusterEvent(session types.NamespacedName, ev sessionapi.Event)
	// SessionRetention reports the retention caps of an AgentSession, each
	// time it is reconciled; what the observer keeps of the session follows
	// them from then on.
	SessionRetention(session types.NamespacedName, limits RetentionLimits)
}

// Publish reports a cluster event of a session to the observer (none
// before Bind).
func (s *Schedulers) Publish(session types.NamespacedName, ev sessionapi.Event) {
	if o := s.observer(); o != nil {
		o.ClusterEvent(session, ev)
	}
}

// SetRetention reports a session's retention caps to the observer (none
// before Bind).
func (s *Schedulers) SetRetention(session types.NamespacedName, limits RetentionLimits) {
	if o := s.observer(); o != nil {
		o.SessionRetention(session, limits)
	}
}

// scheduler is one LaneQueue's scheduler and its event consumer.
type scheduler struct {
	queue *lanequeue.Queue
	// inbox applies the queue modes to the inbound messages of the queue's
	// sessions.
	inbox *lanequeue.Inbox
	sub   *lanequeue.Subscription
	// ref identifies the LaneQueue for Kubernetes Events.
	ref *corev1.ObjectReference
	// tasks are the ExternalTasks the scheduler holds.
	tasks *TaskSet
}

// touched reports a session's activity to the OnSessionActivity hook.
func (s *Schedulers) touched(session types.NamespacedName, at time.Time) {
	if f := s.hooks.OnSessionActivity; f != nil {
		f(session, at)
	}
}

// TaskEvents is where the schedulers wake the ExternalTask controller for
// the tasks whose scheduler state changed; the controller watches its
// Source.
func (s *Schedulers) TaskEvents() *RequestSink { return &s.taskEvents }

// now reads the schedulers' clock.
func (s *Schedulers) now() time.Time {
	if s.Options.Clock != nil {
		return s.Options.Clock.Now()
	}
	return clock.RealClock{}.Now()
}

// Changes returns the channel on which the LaneQueues whose scheduler state
// changed are announced. It is created on first use.
func (s *Schedulers) Changes() <-chan event.GenericEvent {
	return s.changes()
}

func (s *Schedulers) changes() chan event.GenericEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed == nil {
		s.changed = make(chan event.GenericEvent, 1024)
	}
	return s.changed
}

// Get returns the scheduler of the LaneQueue key, if it runs.
func (s *Schedulers) Get(key types.NamespacedName) (*lanequeue.Queue, bool) {
	q, _, ok := s.TasksOf(key)
	return q, ok
}

// Session returns the scheduler and the inbox of the LaneQueue key, if it
// runs.
func (s *Schedulers) Session(key types.NamespacedName) (*lanequeue.Queue, *lanequeue.Inbox, bool) {
	sc, ok := s.lookup(key)
	if !ok {
		return nil, nil, false
	}
	return sc.queue, sc.inbox, true
}

// lookup returns the scheduler of the LaneQueue key, if it runs.
func (s *Schedulers) lookup(key types.NamespacedName) (*scheduler, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sc, ok := s.queues[key]
	return sc, ok
}

// SubmitTask submits cmd to the scheduler of the LaneQueue key as the
// ExternalTask named cmd.ID, which create then makes, given the lane the
// command was routed to. Submitting first fixes the command's place in its
// lane at once, so commands submitted one after another keep their order
// whatever order their tasks are reconciled in; the ExternalTask controller
// takes the task over when it sees the object. If create fails, the command
// is cancelled and forgotten.
func (s *Schedulers) SubmitTask(key types.NamespacedName, cmd lanequeue.Command, create func(lane string) error) (*lanequeue.Ticket, error) {
	q, ts, ok := s.TasksOf(key)
	if !ok {
		return nil, fmt.Errorf("%w: LaneQueue %s has no running scheduler", lanequeue.ErrClosed, key)
	}
	cmd.External = true
	cmd.AwaitStart = true // the ExternalTask controller reports the start
	// The ExternalTask carries the payload (create puts it there) and
	// workers read it from there: the scheduler keeps none, as for the
	// tasks it rebuilds from the manager's cache, which holds none either.
	cmd.Payload = nil
	tk, err := q.Submit(cmd)
	if err != nil {
		return nil, err
	}
	ts.Put(cmd.ID, tk, true)
	if err := create(tk.Lane()); err != nil {
		_ = q.Cancel(cmd.ID)
		ts.Forget(cmd.ID)
		return nil, err
	}
	ts.Created(cmd.ID)
	return tk, nil
}

// ReleaseSession cancels the commands of the deleted AgentSession name in
// the scheduler of the LaneQueue key, if it runs, and drops its scheduler,
// inbox and observer state (the AgentSession controller forgets its own).
// It returns how many commands were cancelled; it fails while a cancelled
// command still runs.
func (s *Schedulers) ReleaseSession(key types.NamespacedName, name string) (int, error) {
	n := 0
	if q, in, ok := s.Session(key); ok {
		n = q.CancelSession(name)
		if err := q.ForgetSession(name); err != nil {
			return n, err
		}
		in.ForgetSession(name)
	}
	if o := s.observer(); o != nil {
		o.SessionReleased(key.Namespace, name)
	}
	return n, nil
}

// TasksOf returns the scheduler of the LaneQueue key and the ExternalTasks
// it holds, if it runs.
func (s *Schedulers) TasksOf(key types.NamespacedName) (*lanequeue.Queue, *TaskSet, bool) {
	sc, ok := s.lookup(key)
	if !ok {
		return nil, nil, false
	}
	return sc.queue, sc.tasks, true
}

// ForEachTasks calls fn for every running scheduler in namespace, outside
// the lock.
func (s *Schedulers) ForEachTasks(namespace string, fn func(*lanequeue.Queue, *TaskSet)) {
	s.mu.Lock()
	var found []*scheduler
	for k, sc := range s.queues {
		if k.Namespace == namespace {
			found = append(found, sc)
		}
	}
	s.mu.Unlock()
	for _, sc := range found {
		fn(sc.queue, sc.tasks)
	}
}

// Ensure runs cfg for lq: it starts a scheduler if none runs, or
// reconfigures the running one in place (queued and running commands are
// kept). It reports whether a scheduler was started. Calls for one
// LaneQueue must not overlap (its controller reconciles it one at a time).
func (s *Schedulers) Ensure(lq *agentlanev1alpha1.LaneQueue, cfg lanequeue.Config) (bool, error) {
	key := types.NamespacedName{Namespace: lq.Namespace, Name: lq.Name}
	s.mu.Lock()
	if !s.bound {
		s.mu.Unlock()
		return false, errNotBound
	}
	if sc, ok := s.queues[key]; ok {
		defer s.mu.Unlock()
		// Each status refresh of the queue passes here: leave an unchanged
		// scheduler alone, and do not mark the queue dirty for it, or every
		// refresh would ask for the next one.
		if reflect.DeepEqual(sc.queue.Config(), cfg) {
			return false, nil
		}
		if err := sc.queue.Reconfigure(cfg); err != nil {
			return false, fmt.Errorf("reconfigure the scheduler: %w", err)
		}
		if s.Options.Metrics == nil {
			queueMetrics{namespace: key.Namespace, queue: key.Name}.setCapacity(sc.queue.Config())
		}
		s.markDirtyLocked(key)
		return false, nil
	}
	s.mu.Unlock()

	sc, err := s.start(lq, cfg)
	if err != nil {
		return false, err
	}
	go s.consume(key, sc)
	s.hooks.Rebuild(key, sc.queue, sc.tasks)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.queues == nil {
		s.queues = make(map[types.NamespacedName]*scheduler)
	}
	s.queues[key] = sc
	s.markDirtyLocked(key)
	return true, nil
}

// start builds the scheduler of lq.
func (s *Schedulers) start(lq *agentlanev1alpha1.LaneQueue, cfg lanequeue.Config) (*scheduler, error) {
	key := types.NamespacedName{Namespace: lq.Namespace, Name: lq.Name}
	opts := s.Options
	ns := lq.Namespace
	if opts.Metrics == nil {
		opts.Metrics = queueMetrics{namespace: ns, queue: lq.Name}
	}
	// Every external attempt the scheduler grants belongs to an
	// ExternalTask (its command ID is the task's name): wake the task's
	// reconcile to dispatch it.
	opts.OnExternalTask = func(x lanequeue.ExternalTask) {
		s.taskEvents.Add(TaskRequest(ns, x.ID))
		s.wakeDelegation(key, x.CommandType, x.Lane)
	}
	// An attempt's timeout counts once the task's status records it: a
	// worker's result may reach the API server first.
	opts.ConfirmExternalTimeouts = true
	q, err := lanequeue.New(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("start the scheduler: %w", err)
	}
	if s.Options.Metrics == nil {
		queueMetrics{namespace: ns, queue: lq.Name}.setCapacity(q.Config())
	}
	inboxOpts := lanequeue.InboxOptions{Queue: q, IDs: opts.IDs}
	if c, ok := opts.Clock.(clock.WithDelayedExecution); ok {
		inboxOpts.Clock = c
	}
	inboxLog := logf.Log.WithName("inbox").WithValues("laneQueue", key)
	inboxOpts.OnEvent = func(ev lanequeue.InboxEvent) {
		session := types.NamespacedName{Namespace: key.Namespace, Name: ev.Session}
		s.touched(session, s.now())
		logInboxWait(inboxLog, session, ev)
		s.hooks.Observer.InboxEvent(key, ev)
	}
	return &scheduler{
		queue: q,
		inbox: lanequeue.NewInbox(inboxOpts),
		// A backlog, not a buffer: 4096 buffered events would cost every
		// LaneQueue about a megabyte up front.
		sub:   q.SubscribeBacklog(4096),
		tasks: &TaskSet{},
		ref: &corev1.ObjectReference{
			APIVersion: agentlanev1alpha1.GroupVersion.String(),
			Kind:       "LaneQueue",
			Namespace:  lq.Namespace,
			Name:       lq.Name,
			UID:        lq.UID,
		},
	}, nil
}

// Remove stops the scheduler of key; its queued commands end Cancelled.
func (s *Schedulers) Remove(key types.NamespacedName) {
	s.mu.Lock()
	sc, ok := s.queues[key]
	delete(s.queues, key)
	delete(s.dirty, key)
	s.mu.Unlock()
	if ok {
		sc.queue.Close()
		sc.sub.Close()
		if s.Options.Metrics == nil {
			queueMetrics{namespace: key.Namespace, queue: key.Name}.forget()
		}
	}
}

// consume turns a scheduler's events into dirty marks and Kubernetes Events
// until the subscription closes.
func (s *Schedulers) consume(key types.NamespacedName, sc *scheduler) {
	for ev := range sc.sub.Events() {
		s.MarkDirty(key)
		if ev.SessionKey != "" {
			s.touched(types.NamespacedName{Namespace: key.Namespace, Name: ev.SessionKey}, ev.Time)
			s.hooks.Observer.CommandEvent(key, ev)
		}
		if taskEnding(ev.Type) && sc.tasks.Has(ev.CommandID) {
			s.taskEvents.Add(TaskRequest(key.Namespace, ev.CommandID))
		}
		if delegationEnding(ev) {
			s.wakeDelegation(key, ev.CommandType, ev.Lane)
		}
		if s.Recorder == nil {
			continue
		}
		switch ev.Type {
		case lanequeue.EventLanePressure:
			s.Recorder.Eventf(sc.ref, nil, corev1.EventTypeWarning, agentlanev1alpha1.LaneQueueLanePressureReason, "Schedule",
				"lane %s has %d pending commands, at or above the pressure threshold", ev.Lane, ev.Depth)
		case lanequeue.EventLaneIdle:
			s.Recorder.Eventf(sc.ref, nil, corev1.EventTypeNormal, agentlanev1alpha1.LaneQueueLaneIdleReason, "Schedule",
				"lane %s drained to 0 pending commands", ev.Lane)
		case lanequeue.EventAlert:
			s.Recorder.Eventf(sc.ref, nil, corev1.EventTypeWarning, depthReason(ev.Level), "Schedule",
				"lane %s reached %d pending commands (%s depth)", ev.Lane, ev.Depth, ev.Level)
		case lanequeue.EventLanePaused, lanequeue.EventLaneResumed, lanequeue.EventQueueDraining, lanequeue.EventQueueDrained:
			reason, note := laneControlEvent(ev)
			s.Recorder.Eventf(sc.ref, nil, corev1.EventTypeNormal, reason, "Control", "%s", note)
		}
	}
}

// taskEnding tells which command events end an attempt or a command, which
// an ExternalTask's status must then record.
func taskEnding(t lanequeue.EventType) bool {
	switch t {
	case lanequeue.EventCompleted, lanequeue.EventFailed, lanequeue.EventRetry, lanequeue.EventTimeout,
		lanequeue.EventDeadLettered, lanequeue.EventCancelled:
		return true
	}
	return false
}

// depthReason is the reason of the Event of a depth alert at level.
func depthReason(level lanequeue.AlertLevel) string {
	if level == lanequeue.AlertCritical {
		return agentlanev1alpha1.LaneQueueDepthCriticalReason
	}
	return agentlanev1alpha1.LaneQueueDepthWarningReason
}

// MarkDirty asks for the LaneQueue key's status to be refreshed at the next
// interval.
func (s *Schedulers) MarkDirty(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.markDirtyLocked(key)
}

func (s *Schedulers) markDirtyLocked(key types.NamespacedName) {
	if s.dirty == nil {
		s.dirty = make(map[types.NamespacedName]bool)
	}
	s.dirty[key] = true
}

// Start announces the dirty queues once per StatusInterval until ctx ends.
// It implements manager.Runnable, and fails at once when the hooks are not
// bound.
func (s *Schedulers) Start(ctx context.Context) error {
	if !s.isBound() {
		return errNotBound
	}
	interval := s.StatusInterval
	if interval <= 0 {
		interval = DefaultStatusInterval
	}
	changed := s.changes()
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	log := logf.FromContext(ctx).WithName("schedulers")
	for {
		select {
		case <-ctx.Done():
			s.stopping.Store(true)
			s.closeAll()
			return nil
		case <-ticker.C:
		}
		s.mu.Lock()
		keys := make([]types.NamespacedName, 0, len(s.dirty))
		for k := range s.dirty {
			keys = append(keys, k)
		}
		clear(s.dirty)
		s.mu.Unlock()
		for _, k := range keys {
			lq := &agentlanev1alpha1.LaneQueue{}
			lq.Namespace, lq.Name = k.Namespace, k.Name
			select {
			case changed <- event.GenericEvent{Object: lq}:
			default:
				// The controller is far behind; it will see the queue on a
				// later tick.
				s.MarkDirty(k)
				log.V(1).Info("status refresh deferred", "laneQueue", k)
			}
		}
	}
}

// Stopping tells whether the manager is stopping: the commands its
// schedulers hold end Cancelled with lanequeue.ErrClosed because the
// manager (or its leadership) ends, not because anybody cancelled them. The
// next manager rebuilds them from the cluster.
func (s *Schedulers) Stopping() bool { return s.stopping.Load() }

func (s *Schedulers) closeAll() {
	s.mu.Lock()
	keys := make([]types.NamespacedName, 0, len(s.queues))
	for k := range s.queues {
		keys = append(keys, k)
	}
	s.mu.Unlock()
	for _, k := range keys {
		s.Remove(k)
	}
}

// logInboxWait logs the inbox's wait notices: messages that have waited
// more than lanequeue.SlowWait while a run is active, and a turn that
// started after such a wait.
func logInboxWait(log logr.Logger, session types.NamespacedName, ev lanequeue.InboxEvent) {
	switch {
	case ev.Type == lanequeue.InboxWaiting:
		log.Info("Messages wait for a turn while a run is active", "session", session, "run", ev.RunID,
			"messages", len(ev.Messages), "waited", ev.Waited)
	case ev.Type == lanequeue.InboxTurn && ev.Slow:
		log.Info("Turn started after a slow wait", "session", session, "run", ev.RunID,
			"messages", len(ev.Messages), "waited", ev.Waited)
	}
}
