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
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/executor"
	"github.com/agentlane/agentlane/internal/workerproto"
)

// Polling of a one-shot worker waiting for its task: quick at first, since
// the manager usually dispatches the task as it creates the Job, then slower.
const (
	firstPoll = 100 * time.Millisecond
	maxPoll   = 2 * time.Second
)

// TaskOptions configure RunTask.
type TaskOptions struct {
	// Task is the name of the ExternalTask to run.
	Task string
	// Namespace is the task's namespace.
	Namespace string
	// Name identifies this process, usually its pod name; the claim writes
	// it in status.worker.
	Name string
	// NodeName, when set, is written in status.nodeName by the claim.
	NodeName string
	// JobName, when set, is the Job this pod belongs to: the task is run
	// only while status.jobName names that Job, so that a late pod of an
	// earlier attempt's Job never takes a later attempt.
	JobName string
	// WaitTimeout bounds the wait for the task to be dispatched to a Job.
	WaitTimeout time.Duration
	// GracePeriod is how long the run may go on after ctx ends; it is then
	// stopped and reported as failed.
	GracePeriod time.Duration
	// Registry runs the task; nil means executor.NewSandboxedRegistry with the
	// default output limit and task root.
	Registry *executor.Registry
	// Clock drives polling, the grace period and status timestamps; nil
	// means the real clock.
	Clock clock.WithTicker
	// Log is the logger; the zero value means ctrl.Log.WithName("worker").
	Log logr.Logger
}

// Validate reports every setting RunTask cannot run with, each as an
// *OptionError.
func (o *TaskOptions) Validate() error {
	var errs optionErrors
	if o.Task == "" {
		errs.add("task", "task", "is required")
	}
	if o.Namespace == "" {
		errs.add("namespace", "namespace", "is required")
	}
	if o.Name == "" {
		errs.add("name", "name", "is required")
	}
	if o.WaitTimeout <= 0 {
		errs.add("wait-timeout", "wait timeout", "must be positive, got %s", o.WaitTimeout)
	}
	if o.GracePeriod < 0 {
		errs.add("grace-period", "grace period", "must not be negative, got %s", o.GracePeriod)
	}
	return errs.join()
}

// RunTask is one-shot mode, run by the pod of a Job-target lane: it waits
// until the task is Dispatched to a Job, claims the attempt (fenced on
// status.jobName and status.attempt), runs it and reports the result. It
// returns nil once a result is reported, whether the run succeeded or not,
// and an error when the task could not be run or reported, so that the Job
// fails. It keeps no Lease: the Job is what the manager watches.
func RunTask(ctx context.Context, cfg *rest.Config, o TaskOptions) error {
	if err := o.Validate(); err != nil {
		return err
	}
	if o.Registry == nil {
		o.Registry = executor.NewSandboxedRegistry(executor.DefaultMaxOutputBytes, executor.Sandbox{})
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Log.GetSink() == nil {
		o.Log = ctrl.Log.WithName("worker")
	}
	c, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		return fmt.Errorf("create API client: %w", err)
	}
	a := &attempts{client: c, registry: o.Registry, clock: o.Clock, log: o.Log.WithValues("worker", o.Name)}

	task, err := waitForJobDispatch(ctx, c, a, o)
	if err != nil {
		return err
	}
	f := workerproto.JobFence(task.Status.JobName, task.Status.Attempt)
	log := a.log.WithValues("externalTask", klog.KObj(task), "attempt", task.Status.Attempt, "job", task.Status.JobName)

	extra := []workerproto.PatchOp{workerproto.AddOp(workerproto.PathWorker, o.Name)}
	if o.NodeName != "" {
		extra = append(extra, workerproto.AddOp(workerproto.PathNodeName, o.NodeName))
	}
	if err := a.claim(context.WithoutCancel(ctx), task, f, extra...); err != nil {
		return fmt.Errorf("claim attempt %d of %s: %w", task.Status.Attempt, o.Task, err)
	}
	log.Info("Attempt claimed", "commandType", task.Spec.CommandType)
	tasksStarted.Inc()

	// The run outlives ctx by the grace period.
	runCtx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	go func() {
		select {
		case <-runCtx.Done():
			return
		case <-ctx.Done():
		}
		grace := o.Clock.NewTimer(o.GracePeriod)
		defer grace.Stop()
		select {
		case <-runCtx.Done():
		case <-grace.C():
			cancel(errShuttingDown)
		}
	}()
	outcome, err := a.finish(runCtx, task, f, false)
	tasksFinished.WithLabelValues(outcome).Inc()
	switch {
	case err != nil:
		return fmt.Errorf("report attempt %d of %s: %w", task.Status.Attempt, o.Task, err)
	case outcome == outcomeLost:
		return fmt.Errorf("report attempt %d of %s: %w", task.Status.Attempt, o.Task, errAttemptLost)
	}
	log.Info("Attempt reported", "outcome", outcome)
	return nil
}

// waitForJobDispatch polls the task, with backoff, until it is Dispatched to
// a Job (to o.JobName when set) and returns it. A read that fails for a
// transient reason (an API server outage) is polled again, within
// o.WaitTimeout.
func waitForJobDispatch(ctx context.Context, c client.Client, a *attempts, o TaskOptions) (*agentlanev1alpha1.ExternalTask, error) {
	ctx, cancel := context.WithTimeout(ctx, o.WaitTimeout)
	defer cancel()
	key := client.ObjectKey{Namespace: o.Namespace, Name: o.Task}
	delay := firstPoll
	for {
		task := &agentlanev1alpha1.ExternalTask{}
		err := c.Get(ctx, key, task)
		if err != nil && ctx.Err() == nil && !transient(err) {
			return nil, fmt.Errorf("get ExternalTask %s: %w", key, err)
		}
		if err == nil {
			st := task.Status
			ours := st.JobName != "" && (o.JobName == "" || st.JobName == o.JobName)
			switch {
			case st.Phase.IsTerminal():
				return nil, fmt.Errorf("ExternalTask %s already finished: phase %s", key, st.Phase)
			case ours && st.Attempt > 0 && st.Phase == agentlanev1alpha1.ExternalTaskDispatched:
				return task, nil
			case ours && st.Phase == agentlanev1alpha1.ExternalTaskRunning && st.Worker == o.Name && st.Result == nil:
				return nil, reportRestarted(ctx, a, task)
			}
			a.log.V(1).Info("Waiting for the task to be dispatched to a Job", "externalTask", key,
				"phase", st.Phase, "job", st.JobName)
		}
		t := o.Clock.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("ExternalTask %s was not dispatched to a Job within %s: %w", key, o.WaitTimeout, context.Cause(ctx))
		case <-t.C():
		}
		delay = min(2*delay, maxPoll)
	}
}

// reportRestarted reports as failed an attempt this pod claimed in an
// earlier container (a Job with restartPolicy OnFailure): its run is lost.
func reportRestarted(ctx context.Context, a *attempts, task *agentlanev1alpha1.ExternalTask) error {
	f := workerproto.JobFence(task.Status.JobName, task.Status.Attempt)
	result := agentlanev1alpha1.TaskResult{
		Error: fmt.Sprintf("worker %s restarted while it ran the attempt; its output is lost", task.Status.Worker),
	}
	if err := a.complete(context.WithoutCancel(ctx), task, f, result); err != nil {
		return fmt.Errorf("report the lost attempt %d of %s: %w", task.Status.Attempt, task.Name, err)
	}
	tasksFinished.WithLabelValues(outcomeFailed).Inc()
	return fmt.Errorf("attempt %d of %s was claimed by an earlier container of this pod and is lost; reported it as failed",
		task.Status.Attempt, task.Name)
}
