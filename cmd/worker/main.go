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
// told to, and reports each task's result on its ExternalTask.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// options are the worker's command-line settings.
type options struct {
	name          string
	nodeName      string
	namespace     string
	queues        []string
	lanes         []string
	capacity      int
	heartbeat     time.Duration
	gracePeriod   time.Duration
	oneShotTask   string
	maxOutputSize int
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
	if o.maxOutputSize < 1 {
		errs = append(errs, fmt.Errorf("--max-output-bytes must be at least 1, got %d", o.maxOutputSize))
	}
	return errors.Join(errs...)
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func main() {
	hostname, _ := os.Hostname()
	o := options{}
	var queues, lanes string
	flag.StringVar(&o.name, "name", envOr("POD_NAME", hostname), "Worker identity; defaults to $POD_NAME, then the host name.")
	flag.StringVar(&o.nodeName, "node-name", os.Getenv("NODE_NAME"), "Node the worker runs on; defaults to $NODE_NAME.")
	flag.StringVar(&o.namespace, "namespace", envOr("POD_NAMESPACE", "default"), "Namespace whose queues the worker serves; defaults to $POD_NAMESPACE.")
	flag.StringVar(&queues, "queues", "", "Comma-separated LaneQueue names to serve; empty serves every queue in the namespace.")
	flag.StringVar(&lanes, "lanes", "", "Comma-separated lane names to serve; empty serves every External lane.")
	flag.IntVar(&o.capacity, "capacity", 4, "Tasks the worker runs at the same time.")
	flag.DurationVar(&o.heartbeat, "heartbeat-interval", 5*time.Second, "How often the worker renews its Lease.")
	flag.DurationVar(&o.gracePeriod, "grace-period", 25*time.Second, "On SIGTERM, how long the worker waits for running tasks before handing them back.")
	flag.StringVar(&o.oneShotTask, "task", "", "One-shot mode: run only this ExternalTask, report it and exit (used by Job-target lanes).")
	flag.IntVar(&o.maxOutputSize, "max-output-bytes", 64*1024, "Largest command output kept in a task result; the rest is cut.")
	zopts := zap.Options{}
	zopts.BindFlags(flag.CommandLine)
	flag.Parse()
	o.queues, o.lanes = splitList(queues), splitList(lanes)

	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zopts)))
	log := ctrl.Log.WithName("worker")
	if err := o.validate(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if _, err := ctrl.GetConfig(); err != nil {
		log.Error(err, "unable to load a kubeconfig")
		os.Exit(1)
	}

	ctx := ctrl.SetupSignalHandler()
	log.Info("worker started", "name", o.name, "node", o.nodeName, "namespace", o.namespace,
		"queues", o.queues, "lanes", o.lanes, "capacity", o.capacity)
	<-ctx.Done()
	log.Info("worker stopped", "name", o.name)
}

func envOr(key, fallback string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return fallback
}
