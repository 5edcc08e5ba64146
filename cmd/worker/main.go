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
// runs that one task and exits, as the pod of a Job-target lane.
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
	"github.com/agentlane/agentlane/internal/worker"
	"github.com/agentlane/agentlane/internal/workerproto"
)

// The worker reads the tasks dispatched to it, writes their status and keeps
// its heartbeat Lease; nothing else.
//
// +kubebuilder:rbac:groups=agentlane.io,resources=externaltasks,verbs=get;list;watch
// +kubebuilder:rbac:groups=agentlane.io,resources=externaltasks/status,verbs=get;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update;delete
//
// The metrics endpoint checks its callers' tokens and access
// (--metrics-secure) with the cluster-wide ClusterRole
// config/rbac/metrics_auth_role.yaml, bound apart from this role, which a
// worker may hold in one namespace only.

// options are the worker's command-line settings.
type options struct {
	name          string
	nodeName      string
	namespace     string
	queues        []string
	lanes         []string
	labels        map[string]string
	capacity      int
	heartbeat     time.Duration
	gracePeriod   time.Duration
	oneShotTask   string
	jobName       string
	waitTimeout   time.Duration
	maxOutputSize int
	metricsAddr   string
	metricsSecure bool
	zap           zap.Options
}

func (o *options) validate() error {
	var errs []error
	if o.name == "" {
		errs = append(errs, errors.New("--name is required (or set POD_NAME)"))
	}
	if o.namespace == "" {
		errs = append(errs, errors.New("--namespace is required (or set POD_NAMESPACE)"))
	}
	if o.capacity < 1 {
		errs = append(errs, fmt.Errorf("--capacity must be at least 1, got %d", o.capacity))
	}
	if o.heartbeat <= 0 {
		errs = append(errs, fmt.Errorf("--heartbeat-interval must be positive, got %s", o.heartbeat))
	}
	if o.gracePeriod < 0 {
		errs = append(errs, fmt.Errorf("--grace-period must not be negative, got %s", o.gracePeriod))
	}
	if o.waitTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--wait-timeout must be positive, got %s", o.waitTimeout))
	}
	if o.maxOutputSize < 1 {
		errs = append(errs, fmt.Errorf("--max-output-bytes must be at least 1, got %d", o.maxOutputSize))
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
	fs.StringVar(&o.name, "name", envOr("POD_NAME", hostname), "Worker identity; defaults to $POD_NAME, then the host name.")
	fs.StringVar(&o.nodeName, "node-name", getenv("NODE_NAME"), "Node the worker runs on; defaults to $NODE_NAME.")
	fs.StringVar(&o.namespace, "namespace", envOr("POD_NAMESPACE", "default"), "Namespace whose queues the worker serves; defaults to $POD_NAMESPACE.")
	fs.StringVar(&queues, "queues", "", "Comma-separated LaneQueue names to serve; empty serves every queue in the namespace.")
	fs.StringVar(&lanes, "lanes", "", "Comma-separated lane names to serve; empty serves every External lane.")
	fs.StringVar(&labelList, "labels", "", "Labels advertised on the worker's Lease for lanes' workerSelector, as k=v,k=v.")
	fs.IntVar(&o.capacity, "capacity", 4, "Tasks the worker runs at the same time.")
	fs.DurationVar(&o.heartbeat, "heartbeat-interval", 5*time.Second, "How often the worker renews its Lease.")
	fs.DurationVar(&o.gracePeriod, "grace-period", 25*time.Second, "On SIGTERM, how long the worker waits for running tasks before handing them back.")
	fs.StringVar(&o.oneShotTask, "task", "", "One-shot mode: run only this ExternalTask, report it and exit (used by Job-target lanes).")
	fs.StringVar(&o.jobName, "job-name", getenv("JOB_NAME"), "One-shot mode: the Job this pod belongs to; the task runs only while status.jobName names it. Defaults to $JOB_NAME; empty accepts any Job.")
	fs.DurationVar(&o.waitTimeout, "wait-timeout", 10*time.Minute, "One-shot mode: how long to wait for the task to be dispatched to the Job.")
	fs.IntVar(&o.maxOutputSize, "max-output-bytes", 64*1024, "Largest command output kept in a task result; the rest is cut.")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", "0", "Address the Prometheus metrics are served on, such as :8080; 0 turns them off.")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", true, "Serve the metrics over HTTPS to callers whose bearer token may get the non-resource URL /metrics (the metrics-reader ClusterRole); false serves them over plain HTTP to anyone.")
	o.zap.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	o.queues, o.lanes = workerproto.SplitList(queues), workerproto.SplitList(lanes)
	if labelList != "" {
		set, err := labels.ConvertSelectorToLabelsMap(labelList)
		if err != nil {
			return o, fmt.Errorf("--labels: %w", err)
		}
		o.labels = set
	}
	return o, o.validate()
}

func main() {
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
	if err := run(ctrl.SetupSignalHandler(), cfg, o); err != nil {
		log.Error(err, "Worker failed")
		os.Exit(1)
	}
}

// run runs the worker, or the one task of --task, until ctx ends.
func run(ctx context.Context, cfg *rest.Config, o options) error {
	registry := executor.NewRegistry(o.maxOutputSize)
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
	if o.oneShotTask != "" {
		return worker.RunTask(ctx, cfg, worker.TaskOptions{
			Task:        o.oneShotTask,
			Namespace:   o.namespace,
			Name:        o.name,
			NodeName:    o.nodeName,
			JobName:     o.jobName,
			WaitTimeout: o.waitTimeout,
			GracePeriod: o.gracePeriod,
			Registry:    registry,
		})
	}
	w, err := worker.New(cfg, worker.Options{
		Name:              o.name,
		NodeName:          o.nodeName,
		Namespace:         o.namespace,
		Queues:            o.queues,
		Lanes:             o.lanes,
		Labels:            o.labels,
		Capacity:          o.capacity,
		HeartbeatInterval: o.heartbeat,
		GracePeriod:       o.gracePeriod,
		Registry:          registry,
	})
	if err != nil {
		return err
	}
	return w.Run(ctx)
}
