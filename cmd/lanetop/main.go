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

// Command lanetop shows the live state of agentlane's queues in a terminal:
// a one-line strip or a dashboard of queues, lanes, sessions, tasks in
// flight, waiting and finished, and the detail of one task. It reads the
// cluster of a kubeconfig (--kubeconfig, $KUBECONFIG, ~/.kube/config, or the
// pod's service account in a cluster) and needs only get/list/watch on the
// LaneQueues, ExternalTasks and AgentSessions (config/rbac/queue_viewer_role.yaml):
// it lists each kind once and then watches it (laneview.Watcher).
//
// On a terminal it draws on the alternate screen, in place and to the
// terminal's size, and reads keys as they are typed (n, p, v, q, / and a
// task's name). With --headless, or when stdout is not a terminal, it
// writes plain frames one after the other, for logs and tests, and reads
// keys from stdin as lines. Installed as kubectl-lanetop it runs as
// `kubectl lanetop`. See docs/lanetop.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/agentlane/agentlane/internal/laneview"
)

// The views lanetop can show.
const (
	viewStrip     = "strip"
	viewDashboard = "dashboard"
)

// options are lanetop's command-line settings.
type options struct {
	kubeconfig    string
	context       string
	namespace     string
	allNamespaces bool
	view          string
	interval      time.Duration
	once          bool
	headless      bool
	task          string
	width         int
}

// parseFlags reads the command line.
func parseFlags(args []string, output io.Writer) (options, error) {
	o := options{}
	fs := flag.NewFlagSet(programName(), flag.ContinueOnError)
	fs.SetOutput(output)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "Path of the kubeconfig; defaults to $KUBECONFIG, then ~/.kube/config, then the in-cluster service account.")
	fs.StringVar(&o.context, "context", "", "Kubeconfig context to use; defaults to the current context.")
	fs.StringVar(&o.namespace, "namespace", "", "Namespace to show; empty shows all namespaces.")
	fs.StringVar(&o.namespace, "n", "", "Shorthand for --namespace.")
	fs.BoolVar(&o.allNamespaces, "all-namespaces", false, "Show all namespaces (the default without --namespace).")
	fs.BoolVar(&o.allNamespaces, "A", false, "Shorthand for --all-namespaces.")
	fs.StringVar(&o.view, "view", viewDashboard, "What to show: strip (one line) or dashboard.")
	fs.DurationVar(&o.interval, "interval", time.Second, "How often to redraw elapsed times; changes are drawn as they are watched.")
	fs.BoolVar(&o.once, "once", false, "Print one frame and exit; exit status 1 when the cluster cannot be read.")
	fs.BoolVar(&o.headless, "headless", false, "No ANSI escapes, no screen clearing: each refresh prints a new dashboard after a blank line; the strip prints a line when it changed.")
	fs.StringVar(&o.task, "task", "", "Task shown in the detail pane, as name or namespace/name; defaults to the latest in flight, else the most recently finished.")
	fs.IntVar(&o.width, "width", 0, "Cut lines to this many columns; 0 uses the terminal's width, or no limit when stdout is not a terminal.")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	var errs []error
	if o.view != viewStrip && o.view != viewDashboard {
		errs = append(errs, fmt.Errorf("--view must be strip or dashboard, got %q", o.view))
	}
	if o.interval < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("--interval must be at least 100ms, got %s", o.interval))
	}
	if o.allNamespaces && o.namespace != "" {
		errs = append(errs, errors.New("--all-namespaces and --namespace exclude each other"))
	}
	if o.width < 0 {
		errs = append(errs, fmt.Errorf("--width must not be negative, got %d", o.width))
	}
	return o, errors.Join(errs...)
}

// programName is the name lanetop was started as: lanetop, or
// kubectl-lanetop when kubectl runs it as a plugin.
func programName() string {
	return filepath.Base(os.Args[0])
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "lanetop:", err)
		os.Exit(2)
	}
	if err := launch(o); err != nil {
		fmt.Fprintln(os.Stderr, "lanetop:", err)
		os.Exit(1)
	}
}

// launch connects to the cluster and runs the view until it ends. The
// terminal is put back (normal screen, cursor, input settings) on every
// way out: q, a signal, an error, and a panic of this goroutine.
func launch(o options) error {
	cfg, err := restConfig(o.kubeconfig, o.context)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), exitSignals...)
	defer stop()
	out := newScreen(os.Stdout, o)
	defer func() {
		if r := recover(); r != nil {
			out.stop()
			panic(r)
		}
	}()
	if o.once {
		reader, err := laneview.NewReader(cfg)
		if err != nil {
			return err
		}
		return once(ctx, o, reader, out)
	}
	w, err := laneview.NewWatcher(cfg, o.namespace)
	if err != nil {
		return err
	}
	if err := w.Start(ctx); err != nil {
		return err
	}
	out.start(os.Stdin)
	defer out.stop()
	keys := make(chan string)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				out.stop()
				panic(r)
			}
		}()
		if out.rawKeys() {
			readKeys(os.Stdin, keys)
		} else {
			readLines(os.Stdin, keys)
		}
	}()
	resize := make(chan os.Signal, 1)
	notifyResize(resize)
	return run(ctx, o, w, keys, resize, out)
}

// restConfig loads the kubeconfig the way kubectl does: the explicit path,
// else $KUBECONFIG, else ~/.kube/config; with none of them, the service
// account of the pod lanetop runs in.
func restConfig(path, kubeContext string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: kubeContext}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load a kubeconfig: %w", err)
	}
	cfg.UserAgent = "lanetop"
	return cfg, nil
}
