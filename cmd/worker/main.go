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

// Command worker runs External-lane tasks of agentlane queues on any node. It
// identifies itself by pod and node name, serves the queues and lanes it is
// told to, and reports each task's result on its ExternalTask. With --task it
// runs that one task and exits, as the pod of a Job-target lane. With
// --direct-server it also holds the Direct stream to the manager's Session
// API and runs the tasks of Direct-target lanes that the manager hands it
// there, besides the ExternalTasks of the pool.
//
// Tasks run in a sandbox: each attempt in a private directory under
// --task-root, with an environment of PATH, HOME, TMPDIR and the --task-env
// variables only. With --runner-socket they run in a runner, `worker runner`,
// a process of its own (in a pod, a container without the worker's
// credentials) that the worker reaches through a unix socket.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/agentlane/agentlane/internal/executor"
	"github.com/agentlane/agentlane/internal/tracing"
	"github.com/agentlane/agentlane/internal/worker"
	"github.com/agentlane/agentlane/internal/workerproto"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// The worker reads the tasks dispatched to it, writes their status and keeps
// its heartbeat Lease; nothing else. config/rbac binds these rights only in
// the namespaces the workers serve, and the admission policies of
// config/policy/worker_security.yaml confine a worker's writes to its own
// tasks and its own Lease (docs/security.md).
//
// +kubebuilder:rbac:groups=agentlane.io,resources=externaltasks,verbs=get;list;watch
// +kubebuilder:rbac:groups=agentlane.io,resources=externaltasks/status,verbs=get;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update;delete
//
// The worker holds no cluster-wide right: its metrics are served over plain
// HTTP, which needs no TokenReview or SubjectAccessReview, and only the
// scrapers' namespaces reach them (the network-policy component).
// --metrics-secure checks each scrape's token and access instead, and then
// needs the create verb on tokenreviews and subjectaccessreviews, which
// agentlane does not grant: see docs/workers.md.

// options are the worker's command-line settings. The flags bind straight
// into the settings of the worker package, which validates them; only the
// settings of this binary are checked here.
type options struct {
	// pool is the pool worker, and the identity and grace period a
	// one-shot worker shares with it.
	pool worker.Options
	// oneShot holds --task, --job-name and --wait-timeout.
	oneShot       worker.TaskOptions
	maxOutputSize int
	metricsAddr   string
	tasks         taskOptions
	runnerSocket  string
	metricsSecure bool
	// direct holds --direct-server, --direct-ca-file, --direct-token-file
	// and --direct-capacity (0: --capacity); the rest of its settings are
	// the pool's.
	direct       worker.DirectOptions
	noopExecutor bool
	zap          zap.Options
}

// directOptions are the settings of the Direct stream, run through
// registry, in the name of the pool worker's incarnation.
func (o *options) directOptions(registry *executor.Registry, incarnation string) worker.DirectOptions {
	d := o.direct
	d.Name, d.NodeName, d.Namespace = o.pool.Name, o.pool.NodeName, o.pool.Namespace
	d.Queues, d.Lanes, d.Labels, d.GracePeriod = o.pool.Queues, o.pool.Lanes, o.pool.Labels, o.pool.GracePeriod
	if d.Capacity == 0 {
		d.Capacity = o.pool.Capacity
	}
	d.Registry, d.Incarnation = registry, incarnation
	return d
}

// taskOptions are the settings of one-shot mode.
func (o *options) taskOptions(registry *executor.Registry) worker.TaskOptions {
	t := o.oneShot
	t.Namespace, t.Name, t.NodeName, t.GracePeriod = o.pool.Namespace, o.pool.Name, o.pool.NodeName, o.pool.GracePeriod
	t.Registry = registry
	return t
}

// flagHints complete the messages of settings that come from the pod's
// environment by default.
var flagHints = map[string]string{"name": " (or set POD_NAME)", "namespace": " (or set POD_NAMESPACE)"}

// validate reports every setting the worker cannot run with, naming its
// flag: the worker package's checks of the pool and one-shot settings (an
// empty --task just means pool mode), then this binary's own.
func (o *options) validate() error {
	var errs []error
	seen := map[string]bool{}
	oneShot := o.taskOptions(nil)
	checks := []error{o.pool.Validate(), oneShot.Validate()}
	if o.direct.Server != "" {
		direct := o.directOptions(nil, "")
		checks = append(checks, direct.Validate())
	}
	for _, err := range checks {
		for _, e := range worker.OptionErrors(err) {
			if (e.Flag == "task" && o.oneShot.Task == "") || seen[e.Error()] {
				continue
			}
			seen[e.Error()] = true
			errs = append(errs, fmt.Errorf("--%s %s%s", e.Flag, e.Problem, flagHints[e.Flag]))
		}
	}
	if o.maxOutputSize < 1 {
		errs = append(errs, fmt.Errorf("--max-output-bytes must be at least 1, got %d", o.maxOutputSize))
	}
	if o.runnerSocket != "" && (o.tasks.root != "" || len(o.tasks.env) > 0 || len(o.tasks.executors) > 0) {
		errs = append(errs, errors.New("--task-root, --task-env and --task-executor belong to the runner when --runner-socket is set"))
	}
	switch {
	case o.direct.Server != "" && o.oneShot.Task != "":
		errs = append(errs, errors.New("--direct-server serves a pool worker's Direct lanes; it does not combine with --task"))
	case o.direct.Server == "" && o.direct.Capacity != 0:
		errs = append(errs, errors.New("--direct-capacity needs --direct-server"))
	}
	return errors.Join(errs...)
}

// parseFlags reads the command line; getenv and hostname supply the
// defaults taken from the pod's environment.
func parseFlags(args []string, getenv func(string) string, hostname string, output io.Writer) (options, error) {
	envOr := func(key, fallback string) string {
		if v := getenv(key); v != "" {
			return v
		}
		return fallback
	}
	o := options{}
	var queues, lanes, labelList string
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.StringVar(&o.pool.Name, "name", envOr("POD_NAME", hostname), "Worker identity; defaults to $POD_NAME, then the host name.")
	fs.StringVar(&o.pool.NodeName, "node-name", getenv("NODE_NAME"), "Node the worker runs on; defaults to $NODE_NAME.")
	fs.StringVar(&o.pool.Namespace, "namespace", envOr("POD_NAMESPACE", "default"), "Namespace whose queues the worker serves; defaults to $POD_NAMESPACE.")
	fs.StringVar(&queues, "queues", "", "Comma-separated LaneQueue names to serve; empty serves every queue in the namespace.")
	fs.StringVar(&lanes, "lanes", "", "Comma-separated lane names to serve; empty serves every External lane.")
	fs.StringVar(&labelList, "labels", "", "Labels advertised on the worker's Lease for lanes' workerSelector, as k=v,k=v.")
	fs.IntVar(&o.pool.Capacity, "capacity", 4, "Tasks the worker runs at the same time.")
	fs.DurationVar(&o.pool.HeartbeatInterval, "heartbeat-interval", 5*time.Second, "How often the worker renews its Lease.")
	fs.DurationVar(&o.pool.GracePeriod, "grace-period", 25*time.Second, "On SIGTERM, how long the worker waits for running tasks before handing them back.")
	fs.StringVar(&o.oneShot.Task, "task", "", "One-shot mode: run only this ExternalTask, report it and exit (used by Job-target lanes).")
	fs.StringVar(&o.oneShot.JobName, "job-name", getenv("JOB_NAME"), "One-shot mode: the Job this pod belongs to; the task runs only while status.jobName names it. Defaults to $JOB_NAME; empty accepts any Job.")
	fs.DurationVar(&o.oneShot.WaitTimeout, "wait-timeout", 10*time.Minute, "One-shot mode: how long to wait for the task to be dispatched to the Job.")
	fs.IntVar(&o.maxOutputSize, "max-output-bytes", 64*1024, "Largest command output kept in a task result; the rest is cut.")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", "0", "Address the Prometheus metrics are served on, such as :8080; 0 turns them off.")
	fs.StringVar(&o.runnerSocket, "runner-socket", "", "Unix socket this worker listens on for its runner (`worker runner --socket`), which runs the tasks; one runner connection at a time. Empty runs the tasks in this process.")
	o.tasks.bindFlags(fs)
	fs.StringVar(&o.direct.Server, "direct-server", "", "https URL of the manager's Session API, such as https://agentlane-session-api.agentlane-system.svc:8443: the worker also holds the Direct stream there and runs the tasks of Direct-target lanes. Empty serves the ExternalTask pool only.")
	fs.StringVar(&o.direct.CAFile, "direct-ca-file", getenv(sessionapi.EnvSessionAPICAFile), "CA bundle (PEM) the Session API's certificate is verified with, read again at each connection; defaults to $"+sessionapi.EnvSessionAPICAFile+", then the system's roots.")
	fs.StringVar(&o.direct.TokenFile, "direct-token-file", getenv(sessionapi.EnvSessionAPITokenFile), "File of the worker's projected service-account token for audience agentlane, the Direct stream's bearer token, read again at each connection; defaults to $"+sessionapi.EnvSessionAPITokenFile+". Tasks never see it.")
	fs.IntVar(&o.direct.Capacity, "direct-capacity", 0, "Direct tasks the worker runs at the same time, besides the pool's --capacity; 0 means --capacity.")
	fs.BoolVar(&o.noopExecutor, "noop-executor", false, "Serve the command type noop, which runs nothing and succeeds with the output {}: for measuring the scheduling path.")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", false, "Serve the metrics over HTTPS to callers whose bearer token may get the non-resource URL /metrics (the metrics-reader ClusterRole), which needs a binding that lets the worker create TokenReviews and SubjectAccessReviews; false, the default, serves them over plain HTTP to whoever the network lets reach the port.")
	o.zap.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	o.pool.Queues, o.pool.Lanes = workerproto.SplitList(queues), workerproto.SplitList(lanes)
	if err := o.tasks.parse(); err != nil {
		return o, err
	}
	if labelList != "" {
		set, err := labels.ConvertSelectorToLabelsMap(labelList)
		if err != nil {
			return o, fmt.Errorf("--labels: %w", err)
		}
		o.pool.Labels = set
	}
	err := o.validate()
	return o, err
}

func main() {
	executor.RunTaskInitIfAsked() // this binary is also each task's init
	if len(os.Args) > 1 && os.Args[1] == "runner" {
		os.Exit(runnerMain(os.Args[2:]))
	}
	hostname, _ := os.Hostname()
	o, err := parseFlags(os.Args[1:], os.Getenv, hostname, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.zap)))
	log := ctrl.Log.WithName("worker")
	cfg, err := ctrl.GetConfig()
	if err != nil {
		log.Error(err, "Unable to load a kubeconfig")
		os.Exit(1)
	}
	ctx := ctrl.SetupSignalHandler()
	// Traces are exported only when the OTEL_* variables ask for it
	// (docs/observability.md).
	stopTracing, err := tracing.Setup(ctx, tracing.Options{Service: "agentlane-worker", Getenv: os.Getenv, Log: ctrl.Log.WithName("tracing")})
	if err != nil {
		log.Error(err, "Invalid OTEL_* settings")
		os.Exit(2)
	}
	err = run(ctx, cfg, o)
	tracing.Flush(stopTracing, ctrl.Log.WithName("tracing"))
	if err != nil {
		log.Error(err, "Worker failed")
		os.Exit(1)
	}
}

// run runs the worker, or the one task of --task, until ctx ends.
func run(ctx context.Context, cfg *rest.Config, o options) error {
	registry, err := o.registry(ctx)
	if err != nil {
		return err
	}
	if o.noopExecutor {
		// It runs nothing, so it needs no sandbox or runner.
		registry.Register(executor.NoopCommandType, executor.NoopExecutor{})
	}
	worker.RegisterMetrics()
	if o.metricsAddr != "0" {
		opts := metricsserver.Options{BindAddress: o.metricsAddr}
		if o.metricsSecure {
			opts.SecureServing, opts.FilterProvider = true, filters.WithAuthenticationAndAuthorization
		}
		httpClient, err := rest.HTTPClientFor(cfg)
		if err != nil {
			return fmt.Errorf("metrics server: %w", err)
		}
		srv, err := metricsserver.NewServer(opts, cfg, httpClient)
		if err != nil {
			return fmt.Errorf("metrics server: %w", err)
		}
		go func() {
			if err := srv.Start(ctx); err != nil {
				ctrl.Log.WithName("worker").Error(err, "Metrics server stopped")
			}
		}()
	}
	if o.oneShot.Task != "" {
		return worker.RunTask(ctx, cfg, o.taskOptions(registry))
	}
	pool := o.pool
	pool.Registry = registry
	w, err := worker.New(cfg, pool)
	if err != nil {
		return err
	}
	if o.direct.Server == "" {
		return w.Run(ctx)
	}
	direct, err := worker.NewDirectClient(o.directOptions(registry, w.Incarnation()))
	if err != nil {
		return err
	}
	// The pool and the Direct stream run side by side and drain together.
	// A pool that fails stops the stream too.
	directCtx, stopDirect := context.WithCancel(ctx)
	defer stopDirect()
	directDone := make(chan error, 1)
	go func() { directDone <- direct.Run(directCtx) }()
	poolErr := w.Run(ctx)
	stopDirect()
	return errors.Join(poolErr, <-directDone)
}

// registry returns what runs the tasks: the runner of --runner-socket, once
// it answers, or a sandbox in this process.
func (o options) registry(ctx context.Context) (*executor.Registry, error) {
	if o.runnerSocket == "" {
		return o.tasks.registry(o.maxOutputSize), nil
	}
	ctrl.Log.WithName("worker").Info("Waiting for the runner", "socket", o.runnerSocket)
	// The runner's connection outlives the signal that starts the worker's
	// drain: running tasks finish within the grace period, and the runner
	// goes when this process ends.
	runner, err := executor.ListenRunner(context.WithoutCancel(ctx), o.runnerSocket, o.maxOutputSize)
	if err != nil {
		return nil, err
	}
	// Both containers start at once: asking often keeps a new worker's
	// first task (a WorkerPool's, scaled from zero) from waiting for the
	// next look. A look is one request on a local socket.
	registry, err := runner.Registry(ctx, 50*time.Millisecond)
	if err != nil {
		return nil, fmt.Errorf("runner at %s: %w", o.runnerSocket, err)
	}
	return registry, nil
}
