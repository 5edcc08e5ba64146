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

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/agentlane/agentlane/internal/executor"
)

// taskOptions are the settings of the sandbox tasks run in, shared by the
// worker (tasks in-process) and the runner.
type taskOptions struct {
	root string
	// envFlags are the --task-env values as given; env is them checked.
	envFlags stringList
	env      []string
	// executorFlags are the --task-executor values as given; executors are
	// them checked.
	executorFlags stringList
	executors     []executor.ExecutorConfig
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

// Set adds one occurrence of the flag.
func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}

func (t *taskOptions) bindFlags(fs *flag.FlagSet) {
	fs.StringVar(&t.root, "task-root", "", "Directory under which each task attempt gets a private directory, removed after it; defaults to agentlane-tasks in the temporary directory.")
	fs.Var(&t.envFlags, "task-env", "Variables every task gets, as NAME=VALUE; repeatable, or a comma-separated list. Tasks get nothing else of this process's environment.")
	fs.Var(&t.executorFlags, "task-executor", "A command type served by a command line, as TYPE=COMMAND LINE (wordcount='wc -w'); repeatable. The line runs through the shell in the task's sandbox with the payload JSON on stdin and "+executor.CommandTypeEnv+" set.")
}

// parse checks the --task-env values.
func (t *taskOptions) parse() error {
	env, err := executor.ParseEnv(t.envFlags)
	if err != nil {
		return fmt.Errorf("--task-env: %w", err)
	}
	t.env = env
	executors, err := executor.ParseExecutors(t.executorFlags)
	if err != nil {
		return fmt.Errorf("--task-executor: %w", err)
	}
	t.executors = executors
	return nil
}

// registry is the sandboxed registry the settings describe: the built-in
// executors and the configured ones.
func (t *taskOptions) registry(maxOutput int) *executor.Registry {
	r := executor.NewSandboxedRegistry(maxOutput, t.sandbox())
	r.RegisterConfigured(t.executors, maxOutput)
	return r
}

// sandbox is the Sandbox the settings describe. Each process task runs
// under this binary as its init, which ends the task's process tree with
// its attempt.
func (t *taskOptions) sandbox() executor.Sandbox {
	self, err := os.Executable()
	if err != nil {
		self = "/proc/self/exe"
	}
	return executor.Sandbox{Root: t.root, Env: t.env, Init: self}
}

// runnerOptions are the command-line settings of `worker runner`.
type runnerOptions struct {
	socket        string
	tasks         taskOptions
	maxOutputSize int
	drain         time.Duration
	zap           zap.Options
}

// parseRunnerFlags reads the command line of `worker runner`.
func parseRunnerFlags(args []string, output io.Writer) (runnerOptions, error) {
	o := runnerOptions{}
	fs := flag.NewFlagSet("worker runner", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.StringVar(&o.socket, "socket", "/run/agentlane/runner.sock", "Unix socket of the worker (its --runner-socket) to connect to; the runner needs no write access to its directory. The runner exits when it loses the connection.")
	fs.IntVar(&o.maxOutputSize, "max-output-bytes", 64*1024, "Largest command output kept in a task result; the rest is cut.")
	fs.DurationVar(&o.drain, "shutdown-timeout", 30*time.Second, "On SIGTERM, how long running tasks may go on (the worker finishes or hands them back) before they are stopped.")
	o.tasks.bindFlags(fs)
	o.zap.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	var errs []error
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments: %q", fs.Args()))
	}
	if o.socket == "" {
		errs = append(errs, errors.New("--socket is required"))
	}
	if o.maxOutputSize < 1 {
		errs = append(errs, fmt.Errorf("--max-output-bytes must be at least 1, got %d", o.maxOutputSize))
	}
	if o.drain < 0 {
		errs = append(errs, fmt.Errorf("--shutdown-timeout must not be negative, got %s", o.drain))
	}
	if err := o.tasks.parse(); err != nil {
		errs = append(errs, err)
	}
	return o, errors.Join(errs...)
}

// runnerMain runs `worker runner` and returns its exit code. The runner
// needs no kubeconfig and reads none: it talks only to the worker.
func runnerMain(args []string) int {
	o, err := parseRunnerFlags(args, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.zap)))
	log := ctrl.Log.WithName("runner")
	if err := serveRunner(ctrl.SetupSignalHandler(), o); err != nil {
		log.Error(err, "Runner failed")
		return 1
	}
	return 0
}

// serveRunner connects to the worker's socket and serves a sandboxed
// registry on that connection until ctx ends or the connection is lost. The
// runner becomes the parent of its tasks' orphans and forbids tracing of
// itself before it runs a task.
func serveRunner(ctx context.Context, o runnerOptions) error {
	if err := executor.ForbidTracing(); err != nil {
		return err
	}
	if err := executor.AdoptOrphans(); err != nil {
		return err
	}
	registry := o.tasks.registry(o.maxOutputSize)
	ctrl.Log.WithName("runner").Info("Serving tasks", "socket", o.socket, "commandTypes", registry.CommandTypes())
	return executor.ServeRunner(ctx, o.socket, &executor.RunnerServer{Registry: registry}, o.drain, 50*time.Millisecond)
}
