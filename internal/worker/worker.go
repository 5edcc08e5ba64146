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
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/oklog/ulid/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/executor"
	"github.com/agentlane/agentlane/internal/steadywatch"
	"github.com/agentlane/agentlane/internal/workerproto"
)

// WorkerField is the selectable field of ExternalTask that names the worker
// holding the current attempt.
const WorkerField = "status.worker"

// Options configure a Worker.
type Options struct {
	// Name identifies the worker: the manager writes it in status.worker and
	// the worker's Lease is named after it. Usually the pod name.
	Name string
	// NodeName is the node the worker runs on, advertised on its Lease.
	NodeName string
	// Namespace is the namespace whose tasks the worker runs.
	Namespace string
	// Queues and Lanes restrict the tasks the worker takes; empty means all.
	Queues, Lanes []string
	// Labels are advertised on the Lease for lanes' workerSelector.
	Labels map[string]string
	// Capacity is how many tasks the worker runs at once.
	Capacity int
	// HeartbeatInterval is how often the Lease is renewed.
	HeartbeatInterval time.Duration
	// GracePeriod is how long a stopping worker lets its running tasks
	// finish before it hands them back.
	GracePeriod time.Duration
	// RunningAfter is how long a run lasts before its attempt is marked
	// Running (a shorter one is reported in one write with its start): 0
	// means DefaultRunningAfter, negative marks it Running before it runs.
	RunningAfter time.Duration
	// Registry runs the tasks; nil means executor.NewSandboxedRegistry with the
	// default output limit and task root.
	Registry *executor.Registry
	// Clock drives the heartbeat, the grace period and status timestamps;
	// nil means the real clock.
	Clock clock.WithTicker
	// Log is the worker's logger; the zero value means ctrl.Log.WithName("worker").
	Log logr.Logger
}

// Validate reports every setting the worker cannot run with, each as an
// *OptionError.
func (o *Options) Validate() error {
	var errs optionErrors
	if o.Name == "" {
		errs.add("name", "name", "is required")
	} else {
		for _, msg := range validation.IsDNS1123Subdomain(workerproto.LeaseName(o.Name)) {
			errs.add("name", "name", "%q cannot name a Lease: %s", o.Name, msg)
		}
	}
	for _, msg := range validation.IsValidLabelValue(o.NodeName) {
		errs.add("node-name", "node name", "%q cannot be a label value: %s", o.NodeName, msg)
	}
	if o.Namespace == "" {
		errs.add("namespace", "namespace", "is required")
	}
	if o.Capacity < 1 {
		errs.add("capacity", "capacity", "must be at least 1, got %d", o.Capacity)
	}
	if o.HeartbeatInterval <= 0 {
		errs.add("heartbeat-interval", "heartbeat interval", "must be positive, got %s", o.HeartbeatInterval)
	}
	if o.GracePeriod < 0 {
		errs.add("grace-period", "grace period", "must not be negative, got %s", o.GracePeriod)
	}
	for k, v := range o.Labels {
		if k == workerproto.WorkerLabel || k == workerproto.NodeLabel {
			errs.add("labels", "label", "%s is set by the worker itself", k)
			continue
		}
		for _, msg := range validation.IsQualifiedName(k) {
			errs.add("labels", "label key", "%q: %s", k, msg)
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			errs.add("labels", "label", "%s value %q: %s", k, v, msg)
		}
	}
	return errs.join()
}

func (o *Options) defaults() {
	if o.Registry == nil {
		o.Registry = executor.NewSandboxedRegistry(executor.DefaultMaxOutputBytes, executor.Sandbox{})
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.RunningAfter == 0 {
		o.RunningAfter = DefaultRunningAfter
	}
	if o.Log.GetSink() == nil {
		o.Log = ctrl.Log.WithName("worker")
	}
}

// Scheme returns a scheme with the types a worker reads and writes.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = agentlanev1alpha1.AddToScheme(s)
	return s
}

// Worker runs the ExternalTasks the manager dispatches to it. It watches only
// tasks whose status.worker is its name, so its memory and watch traffic grow
// with its own tasks, not with the cluster's.
type Worker struct {
	opts Options
	// incarnation names this process of the worker: a new ULID each time a
	// Worker is made, advertised on its Lease. The manager dispatches each
	// attempt to one incarnation, and the worker runs only its own.
	incarnation string
	log         logr.Logger
	cache       cache.Cache
	lease       *heartbeat
	attempts    *attempts
	queue       workqueue.TypedRateLimitingInterface[types.NamespacedName]

	// runEnded is signalled (without blocking) whenever a run ends.
	runEnded chan struct{}
	// wg counts the goroutines that run, report or hand back attempts.
	// Only the sync loop adds to it, and it is waited for only after that
	// loop has stopped.
	wg sync.WaitGroup

	mu sync.Mutex
	// draining is set once the worker stops taking work.
	draining bool
	// runs are the attempts the worker is claiming or running, by task;
	// len(runs) <= Capacity.
	runs map[types.NamespacedName]*run
	// handled is the attempt of each task the worker last acted on (claimed,
	// handed back or reported as lost), so that a cache that lags behind the
	// worker's own writes never makes it act twice on one attempt. Entries go
	// when the task leaves the cache or finishes.
	handled map[types.NamespacedName]int32
	// waiting are Dispatched tasks left unclaimed because every slot was
	// busy; they are looked at again when a run ends.
	waiting sets.Set[types.NamespacedName]
}

// run is one attempt the worker holds.
type run struct {
	attempt int32
	// cancel stops the run with a cause: errAttemptLost or errShuttingDown.
	cancel context.CancelCauseFunc
	// executed is set once the command has returned: from then on a loss
	// no longer stops anything, and the fenced report settles it.
	executed atomic.Bool
}

// New returns a worker that talks to the API server at cfg.
func New(cfg *rest.Config, opts Options) (*Worker, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts.defaults()
	scheme := Scheme()
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("create API client: %w", err)
	}
	tasks, err := cache.New(cfg, cache.Options{
		Scheme:            scheme,
		DefaultNamespaces: map[string]cache.Config{opts.Namespace: {}},
		ByObject: map[client.Object]cache.ByObject{
			&agentlanev1alpha1.ExternalTask{}: {Field: fields.OneTermEqualSelector(WorkerField, opts.Name)},
		},
		DefaultTransform: cache.TransformStripManagedFields(),
		NewInformer:      steadywatch.NewInformer, // back within seconds of an API server outage
	})
	if err != nil {
		return nil, fmt.Errorf("create task cache: %w", err)
	}
	incarnation := ulid.Make().String()
	log := opts.Log.WithValues("worker", opts.Name, "incarnation", incarnation)
	id := leaseIdentity{
		incarnation:  incarnation,
		namespace:    opts.Namespace,
		name:         opts.Name,
		nodeName:     opts.NodeName,
		labels:       opts.Labels,
		capacity:     opts.Capacity,
		queues:       opts.Queues,
		lanes:        opts.Lanes,
		commandTypes: opts.Registry.CommandTypes(),
		heartbeat:    opts.HeartbeatInterval,
	}
	return &Worker{
		opts:        opts,
		incarnation: incarnation,
		log:         log,
		cache:       tasks,
		lease:       newHeartbeat(c, opts.Clock, id, log),
		attempts:    &attempts{client: c, registry: opts.Registry, clock: opts.Clock, log: log},
		queue:       workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName]()),
		runEnded:    make(chan struct{}, 1),
		runs:        map[types.NamespacedName]*run{},
		handled:     map[types.NamespacedName]int32{},
		waiting:     sets.New[types.NamespacedName](),
	}, nil
}

// Run registers the worker, runs the tasks dispatched to it until ctx ends,
// then drains: it marks its Lease draining, hands back the tasks it has not
// started, gives running tasks the grace period to finish, hands back the
// rest and deletes its Lease. It returns nil after a clean drain. A Worker
// runs once.
func (w *Worker) Run(ctx context.Context) error {
	// The worker outlives ctx while it drains.
	life, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()

	if err := w.lease.renew(ctx); err != nil {
		return fmt.Errorf("register Lease %s: %w", workerproto.LeaseName(w.opts.Name), err)
	}
	capacityGauge.Set(float64(w.opts.Capacity))
	w.log.Info("Worker registered", "lease", workerproto.LeaseName(w.opts.Name), "node", w.opts.NodeName,
		"capacity", w.opts.Capacity, "queues", w.opts.Queues, "lanes", w.opts.Lanes)
	beatCtx, stopBeat := context.WithCancel(life)
	beatDone := make(chan struct{})
	go func() {
		defer close(beatDone)
		w.lease.run(beatCtx)
	}()
	stopHeartbeat := func() {
		stopBeat()
		<-beatDone
	}

	if err := w.startCache(life, ctx); err != nil {
		stopHeartbeat()
		if ctx.Err() != nil {
			// Stopped before it took any work.
			return w.lease.release(life)
		}
		return errors.Join(err, w.lease.release(life))
	}
	loopDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		for w.processNext(life) {
		}
	}()

	<-ctx.Done()
	w.drain(life)

	w.queue.ShutDown()
	<-loopDone
	w.wg.Wait()
	stopHeartbeat()
	if err := w.lease.release(life); err != nil {
		return fmt.Errorf("delete Lease %s: %w", workerproto.LeaseName(w.opts.Name), err)
	}
	w.log.Info("Worker stopped")
	return nil
}

// startCache starts watching the worker's tasks for as long as life lasts,
// and waits for the first list unless ctx ends first.
func (w *Worker) startCache(life, ctx context.Context) error {
	inf, err := w.cache.GetInformer(life, &agentlanev1alpha1.ExternalTask{})
	if err != nil {
		return fmt.Errorf("watch ExternalTasks: %w", err)
	}
	enqueue := func(obj any) {
		if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if o, ok := obj.(client.Object); ok {
			w.queue.Add(client.ObjectKeyFromObject(o))
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}); err != nil {
		return fmt.Errorf("watch ExternalTasks: %w", err)
	}
	go func() {
		if err := w.cache.Start(life); err != nil {
			w.log.Error(err, "Task cache stopped")
		}
	}()
	if !w.cache.WaitForCacheSync(ctx) {
		return errors.New("task cache did not sync")
	}
	return nil
}

func (w *Worker) processNext(ctx context.Context) bool {
	key, quit := w.queue.Get()
	if quit {
		return false
	}
	defer w.queue.Done(key)
	if err := w.sync(ctx, key); err != nil {
		w.log.Error(err, "Sync failed", "externalTask", key)
		w.queue.AddRateLimited(key)
		return true
	}
	w.queue.Forget(key)
	return true
}

// sync acts on the cached state of one task: it stops a run whose attempt
// was taken away, claims a Dispatched attempt when a slot is free (hands it
// back when draining), and reports as failed a Running attempt that an
// earlier process of this worker left behind.
func (w *Worker) sync(ctx context.Context, key types.NamespacedName) error {
	task := &agentlanev1alpha1.ExternalTask{}
	if err := w.cache.Get(ctx, key, task); err != nil {
		if !apierrors.IsNotFound(err) {
			return err
		}
		task = nil
	}
	if task != nil && isDirectRecord(task) {
		task = nil // the Session API carries it
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	if r := w.runs[key]; r != nil && !r.executed.Load() && !w.holds(task, r.attempt) {
		w.log.V(1).Info("Attempt taken away; stopping its run", "externalTask", key, "attempt", r.attempt)
		r.cancel(errAttemptLost)
	}
	if r := w.runs[key]; r != nil && task != nil && task.Status.Deadline != nil {
		// The attempt's deadline was extended: its run's bound moves too.
		w.attempts.moveDeadline(key, r.attempt, task.Status.Deadline.Time)
	}
	if task == nil || task.Status.Worker != w.opts.Name || task.Status.Phase.IsTerminal() {
		delete(w.handled, key)
		w.waiting.Delete(key)
		return nil
	}
	st := task.Status
	if st.Attempt < 1 || w.handled[key] == st.Attempt {
		return nil
	}
	log := w.log.WithValues("externalTask", klog.KObj(task), "attempt", st.Attempt)
	switch st.Phase {
	case agentlanev1alpha1.ExternalTaskDispatched:
		switch {
		case !w.dispatchedToMe(task):
			// Dispatched to an earlier process of this worker, which may
			// have run it: the manager records it lost with that process
			// and dispatches a new attempt. Running it again here would
			// be a run that status never shows.
			log.V(1).Info("Leaving an attempt dispatched to an earlier process of this worker",
				"dispatchedTo", st.WorkerIncarnation)
		case !w.serves(task):
			log.V(1).Info("Ignoring a task of a queue or lane this worker does not serve",
				"queue", taskQueue(task), "lane", st.Lane)
		case w.draining:
			w.handled[key] = st.Attempt
			w.goHandBack(task)
		case len(w.runs) >= w.opts.Capacity:
			log.V(1).Info("Every slot is busy; leaving the task unclaimed", "capacity", w.opts.Capacity)
			w.waiting.Insert(key)
		default:
			w.waiting.Delete(key)
			w.handled[key] = st.Attempt
			w.start(task)
		}
	case agentlanev1alpha1.ExternalTaskRunning:
		if st.Result == nil {
			w.handled[key] = st.Attempt
			w.goReportOrphan(task)
		}
	}
	return nil
}

// holds tells whether task still shows the worker holding attempt.
func (w *Worker) holds(task *agentlanev1alpha1.ExternalTask, attempt int32) bool {
	return task != nil && task.Status.Worker == w.opts.Name && task.Status.Attempt == attempt &&
		(task.Status.Phase == agentlanev1alpha1.ExternalTaskDispatched || task.Status.Phase == agentlanev1alpha1.ExternalTaskRunning)
}

// serves tells whether the task belongs to a queue and lane the worker serves.
func (w *Worker) serves(task *agentlanev1alpha1.ExternalTask) bool {
	if len(w.opts.Queues) > 0 && !slices.Contains(w.opts.Queues, taskQueue(task)) {
		return false
	}
	return len(w.opts.Lanes) == 0 || slices.Contains(w.opts.Lanes, string(task.Status.Lane))
}

// taskQueue is the LaneQueue of a task: its queue label, which the operator
// sets, or else its queueRef.
func taskQueue(task *agentlanev1alpha1.ExternalTask) string {
	if q := task.Labels[agentlanev1alpha1.QueueLabel]; q != "" {
		return q
	}
	if task.Spec.QueueRef != nil {
		return task.Spec.QueueRef.Name
	}
	return ""
}

// start runs a Dispatched attempt in its own goroutine, claimed (marked
// Running) once it has run RunningAfter. w.mu is held.
func (w *Worker) start(task *agentlanev1alpha1.ExternalTask) {
	key := client.ObjectKeyFromObject(task)
	// Runs outlive the worker's context: the drain decides when they stop.
	ctx, cancel := context.WithCancelCause(context.Background())
	r := &run{attempt: task.Status.Attempt, cancel: cancel}
	w.runs[key] = r
	f := w.fence(task)
	log := w.log.WithValues("externalTask", klog.KObj(task), "attempt", task.Status.Attempt)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer w.runDone(key, r)
		rep := runReport{startedAt: w.attempts.now()}
		if w.opts.RunningAfter < 0 && !w.claimFirst(ctx, key, task, f, r, &rep) {
			return
		}
		log.V(1).Info("Attempt started", "commandType", task.Spec.CommandType)
		tasksStarted.Inc()
		tasksRunning.Inc()
		defer tasksRunning.Dec()
		lazy := w.attempts.claimAfter(ctx, task, f, claimDelay(task, w.opts.RunningAfter), rep, func() { cancel(errAttemptLost) })
		runCtx := w.attempts.withHeartbeat(ctx, task, f, lazy, func() { cancel(errAttemptLost) })
		out, runErr := w.attempts.run(runCtx, task)
		r.executed.Store(true)
		rep.claim = lazy.stop(rep.claim)
		outcome, err := w.attempts.settle(ctx, task, f, rep, out, runErr, true)
		tasksFinished.WithLabelValues(outcome).Inc()
		if err != nil {
			log.Error(err, "Could not report the attempt; the manager will time it out", "outcome", outcome)
			return
		}
		log.V(1).Info("Attempt finished", "outcome", outcome)
	}()
}

// runDone frees the run's slot and looks again at the tasks that waited for
// one.
func (w *Worker) runDone(key types.NamespacedName, r *run) {
	r.cancel(nil)
	w.mu.Lock()
	if w.runs[key] == r {
		delete(w.runs, key)
	}
	for k := range w.waiting {
		w.queue.Add(k)
	}
	w.waiting.Clear()
	w.mu.Unlock()
	select {
	case w.runEnded <- struct{}{}:
	default:
	}
}

// retryLater forgets that the worker acted on the attempt and queues the task
// again with backoff.
func (w *Worker) retryLater(key types.NamespacedName, attempt int32) {
	w.mu.Lock()
	if w.handled[key] == attempt {
		delete(w.handled, key)
	}
	w.mu.Unlock()
	w.queue.AddRateLimited(key)
}

// goHandBack returns a Dispatched attempt the draining worker will not start.
// w.mu is held.
func (w *Worker) goHandBack(task *agentlanev1alpha1.ExternalTask) {
	f := w.fence(task)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		log := w.log.WithValues("externalTask", klog.KObj(task), "attempt", task.Status.Attempt)
		if err := w.attempts.handBack(context.Background(), task, f, agentlanev1alpha1.ExternalTaskDispatched); err != nil {
			if !errors.Is(err, errAttemptLost) {
				log.Error(err, "Could not hand back a task dispatched to the draining worker")
			}
			return
		}
		log.V(1).Info("Unstarted attempt handed back")
	}()
}

// goReportOrphan reports as failed a Running attempt held in the worker's
// name that this process did not start: an earlier process of the same
// worker (a restarted pod) claimed it and died with it. The Lease, renewed
// under the same name, would otherwise hide the loss from the manager
// forever. w.mu is held.
func (w *Worker) goReportOrphan(task *agentlanev1alpha1.ExternalTask) {
	f := w.fence(task)
	result := agentlanev1alpha1.TaskResult{
		Error: fmt.Sprintf("worker %s restarted while it ran the attempt; its output is lost", w.opts.Name),
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		log := w.log.WithValues("externalTask", klog.KObj(task), "attempt", task.Status.Attempt)
		if err := w.attempts.complete(context.Background(), task, f, result); err != nil {
			if !errors.Is(err, errAttemptLost) {
				log.Error(err, "Could not report an attempt an earlier process of this worker left behind")
			}
			return
		}
		tasksFinished.WithLabelValues(outcomeFailed).Inc()
		log.Info("Reported an attempt an earlier process of this worker left behind as failed")
	}()
}
