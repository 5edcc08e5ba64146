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

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/budget"
	"github.com/agentlane/agentlane/internal/delegation"
	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/scheduling"
	"github.com/agentlane/agentlane/internal/steadywatch"
	"github.com/agentlane/agentlane/internal/workerproto"

	"k8s.io/utils/clock"
)

// Shared is what the controllers share with the Session API. The caller
// (cmd/manager) builds each part once and hands the same objects to the
// Session API (sessionserver.Config).
type Shared struct {
	// Schedulers are the lane schedulers; Setup adds them to the manager.
	Schedulers *scheduling.Schedulers
	// Budgets is the budget ledger; the AgentSession controller writes
	// what it holds into status.
	Budgets *budget.Ledger
	// Passivations orders the checkpoints the Session API saves against
	// passivation requests; a private one when nil.
	Passivations *PassivationClock
	// Inboxes posts the messages of Delegate lanes (the Session API); the
	// delegation controller runs only when it is set.
	Inboxes Inboxes
}

// Controllers are the reconcilers Setup registered that the caller wires to
// the shared state: the scheduler hooks they expose (SessionActivity,
// Rebuild), bound with scheduling.Schedulers.Bind, and their metrics
// (RegisterMetrics).
type Controllers struct {
	// Sessions is the AgentSession controller; its SessionActivity is the
	// schedulers' OnSessionActivity hook.
	Sessions *AgentSessionReconciler
	// Tasks is the ExternalTask controller; its Rebuild is the schedulers'
	// Rebuild hook.
	Tasks *ExternalTaskReconciler
	// Pools is the WorkerPool controller.
	Pools *WorkerPoolReconciler
	// RuntimePools is the RuntimePool controller.
	RuntimePools *RuntimePoolReconciler
}

// Setup registers agentlane's field indexes, the schedulers and every
// controller with mgr. It returns the controllers whose hooks the caller
// binds to the schedulers (scheduling.Hooks) before the manager starts.
func Setup(ctx context.Context, mgr ctrl.Manager, shared Shared, options ...SetupOption) (*Controllers, error) {
	var opts setupOptions
	for _, o := range options {
		o(&opts)
	}
	schedulers := shared.Schedulers
	if schedulers == nil || shared.Budgets == nil {
		return nil, errors.New("setup needs the Schedulers and the Budgets")
	}
	if err := SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return nil, err
	}
	// One clock for the schedulers and every reconciler, so that a fake
	// clock reaches task timestamps, TTLs and passivation deadlines alike.
	if schedulers.Options.Clock == nil {
		schedulers.Options.Clock = clock.RealClock{}
	}
	clk := schedulers.Options.Clock
	if schedulers.Recorder == nil {
		schedulers.Recorder = mgr.GetEventRecorder("agentlane-scheduler")
	}
	if err := mgr.Add(schedulers); err != nil {
		return nil, fmt.Errorf("add the schedulers: %w", err)
	}
	if err := (&LaneQueueReconciler{Client: mgr.GetClient(), Schedulers: schedulers}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up the LaneQueue controller: %w", err)
	}
	sessions := &AgentSessionReconciler{Client: mgr.GetClient(), Schedulers: schedulers, Budgets: shared.Budgets,
		Passivations: shared.Passivations, Recorder: mgr.GetEventRecorder("agentlane-session"),
		SessionAPIURL: opts.SessionAPIURL, SessionAPIAudience: opts.SessionAPIAudience, SessionAPICA: opts.SessionAPICA,
		APIReader: mgr.GetAPIReader(), Clock: clk, warm: newWarmPools()}
	if err := sessions.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up the AgentSession controller: %w", err)
	}
	tasks := &ExternalTaskReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Schedulers: schedulers,
		Recorder: mgr.GetEventRecorder("agentlane-externaltask"), Clock: clk}
	if err := tasks.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up the ExternalTask controller: %w", err)
	}
	if shared.Inboxes != nil {
		delegation := &DelegationReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Inboxes: shared.Inboxes, Schedulers: schedulers,
			Recorder: mgr.GetEventRecorder("agentlane-delegation"), Clock: clk, Budgets: shared.Budgets, Bounds: opts.Delegation}
		if err := delegation.SetupWithManager(mgr); err != nil {
			return nil, fmt.Errorf("set up the delegation controller: %w", err)
		}
	}
	if opts.SessionAPICA != nil && opts.CANamespace != "" {
		ca := &caPublisher{Reader: mgr.GetAPIReader(), Client: mgr.GetClient(), Namespace: opts.CANamespace,
			CA: opts.SessionAPICA, Clock: clk}
		if err := mgr.Add(ca); err != nil {
			return nil, fmt.Errorf("add the Session API's CA publisher: %w", err)
		}
	}
	pools := &WorkerPoolReconciler{Client: mgr.GetClient(), Schedulers: schedulers,
		Recorder: mgr.GetEventRecorder("agentlane-workerpool"), Clock: clk, Options: opts.WorkerPools}
	if err := pools.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up the WorkerPool controller: %w", err)
	}
	runtimePools := &RuntimePoolReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
		Recorder: mgr.GetEventRecorder("agentlane-runtimepool"), Clock: clk, Options: opts.RuntimePools,
		SessionAPIURL: opts.SessionAPIURL, SessionAPIAudience: opts.SessionAPIAudience, SessionAPICA: opts.SessionAPICA,
		warm: sessions.warm}
	if err := runtimePools.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up the RuntimePool controller: %w", err)
	}
	return &Controllers{Sessions: sessions, Tasks: tasks, Pools: pools, RuntimePools: runtimePools}, nil
}

// RegisterMetrics adds the controllers' metrics (the worker pools as the
// ExternalTask controller judges them, worker_metrics.go) to reg, the
// manager's controller-runtime registry; cmd/manager calls it once.
func (c *Controllers) RegisterMetrics(reg prometheus.Registerer) error {
	if err := reg.Register(&workerPools{source: c.Tasks}); err != nil {
		return fmt.Errorf("register the worker pool metrics: %w", err)
	}
	pools := newWorkerPoolMetrics()
	if c.Pools != nil && c.Pools.metrics != nil {
		pools = c.Pools.metrics
	}
	if err := pools.Register(reg); err != nil {
		return fmt.Errorf("register the WorkerPool metrics: %w", err)
	}
	warm := newRuntimePoolMetrics()
	if c.RuntimePools != nil && c.RuntimePools.warm != nil {
		warm = c.RuntimePools.warm.metrics
	}
	if err := warm.Register(reg); err != nil {
		return fmt.Errorf("register the RuntimePool metrics: %w", err)
	}
	return nil
}

// Rebuild is the schedulers' Rebuild hook (scheduling.Hooks): it puts the
// unfinished tasks of the LaneQueue key back into its starting scheduler
// (externaltask_rebuild.go).
func (r *ExternalTaskReconciler) Rebuild(key types.NamespacedName, q *lanequeue.Queue, tasks *scheduling.TaskSet) {
	r.rebuild(key, q, tasks)
}

// SetupOption configures Setup.
type SetupOption func(*setupOptions)

type setupOptions struct {
	Delegation         delegation.Bounds
	WorkerPools        WorkerPoolOptions
	RuntimePools       RuntimePoolOptions
	SessionAPIURL      string
	SessionAPIAudience string
	SessionAPICA       func() []byte
	CANamespace        string
}

// WithWorkerPools sets the manager's settings for WorkerPools.
func WithWorkerPools(o WorkerPoolOptions) SetupOption {
	return func(opts *setupOptions) { opts.WorkerPools = o }
}

// WithRuntimePools sets the manager's settings for RuntimePools.
func WithRuntimePools(o RuntimePoolOptions) SetupOption {
	return func(opts *setupOptions) { opts.RuntimePools = o }
}

// WithSessionAPIURL sets the Session API address put in runtime pods'
// environment.
func WithSessionAPIURL(url string) SetupOption {
	return func(o *setupOptions) { o.SessionAPIURL = url }
}

// WithSessionAPIAudience makes runtime pods carry a service-account token
// for audience, which they send to the Session API.
func WithSessionAPIAudience(audience string) SetupOption {
	return func(o *setupOptions) { o.SessionAPIAudience = audience }
}

// WithSessionAPICA makes runtime pods trust the CA bundle ca returns
// (sessionserver.Server.CABundle) for the Session API.
func WithSessionAPICA(ca func() []byte) SetupOption {
	return func(o *setupOptions) { o.SessionAPICA = ca }
}

// WithSessionAPICAIn makes the leader keep the Session API's CA bundle
// (WithSessionAPICA) in the ConfigMap SessionAPICAConfigMap of namespace,
// the manager's own, for the worker pods of Direct lanes (session_ca.go).
func WithSessionAPICAIn(namespace string) SetupOption {
	return func(o *setupOptions) { o.CANamespace = namespace }
}

// CacheOptions limits what the manager's cache holds of objects that are
// not agentlane's: only worker Leases, session runtime pods (warm pods of
// RuntimePools among them: their agentlane.io/session-runtime label is
// empty) and their disruption budgets, Nodes without their status (not every node's
// heartbeat), only the Jobs agentlane creates for Job-target lanes and only
// the Deployments of WorkerPools. Of
// ExternalTasks and AgentSessions it keeps what the controllers read, with
// their repeated strings shared (cache_transforms.go). ConfigMaps and
// Secrets are read around the cache.
func CacheOptions() cache.Options {
	return cache.Options{
		// The manager never reads managedFields; on a status-heavy object
		// such as an ExternalTask they are most of its size.
		DefaultTransform: cache.TransformStripManagedFields(),
		// After an API server outage, see worker renewals and results
		// again within seconds, not after the reflector's backoff of up
		// to 30s (internal/steadywatch).
		NewInformer: steadywatch.NewInformer,
		ByObject: map[client.Object]cache.ByObject{
			&agentlanev1alpha1.ExternalTask{}: {Transform: leanTask},
			&agentlanev1alpha1.AgentSession{}: {Transform: leanSession},
			&corev1.Node{}:                    {Transform: leanNode},
			&coordinationv1.Lease{}:           {Label: labels.SelectorFromSet(labels.Set{workerproto.WorkerLabel: "true"})},
			&appsv1.Deployment{}:              {Label: labels.SelectorFromValidatedSet(nil).Add(mustRequirement(agentlanev1alpha1.WorkerPoolLabel, selection.Exists))},
			&batchv1.Job{}:                    {Label: labels.SelectorFromValidatedSet(nil).Add(mustRequirement(TaskLabel, selection.Exists))},
			&corev1.Pod{}:                     {Label: labels.SelectorFromValidatedSet(nil).Add(mustRequirement(RuntimeLabel, selection.Exists))},
			&policyv1.PodDisruptionBudget{}:   {Label: labels.SelectorFromValidatedSet(nil).Add(mustRequirement(RuntimeLabel, selection.Exists))},
		},
	}
}

func mustRequirement(key string, op selection.Operator, vals ...string) labels.Requirement {
	r, err := labels.NewRequirement(key, op, vals)
	if err != nil {
		panic(err)
	}
	return *r
}
