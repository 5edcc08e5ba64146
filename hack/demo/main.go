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

// Command demo runs agentlane's main job on an embedded control plane. It
// starts kube-apiserver and etcd, installs the CRDs, starts the manager and
// several workers as separate processes (each standing in for a pod on its
// own node), applies the samples, and runs scripted agent sessions against
// the Session API: parallel reads, ordered bash commands on the workers, a
// failing command that ends in the dead-letter queue and a collect-mode
// burst of messages. It shows the queues live while they work, checks what
// happened, prints a summary per lane and per worker, passivates a session
// and resumes it, and exits 0 when everything behaved.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/agentlane/agentlane/internal/manifest"
	"github.com/agentlane/agentlane/internal/testenv"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// options are the demo's command-line settings.
type options struct {
	workers int
	keep    bool
	binDir  string
	timeout time.Duration
}

func main() {
	var o options
	flag.IntVar(&o.workers, "workers", 3, "Worker processes to start, each on its own simulated node.")
	flag.BoolVar(&o.keep, "keep", false, "Keep everything running after the demo and print the KUBECONFIG path; Ctrl-C stops it.")
	flag.StringVar(&o.binDir, "bin", "bin", "Directory holding the manager, worker and agent binaries.")
	flag.DurationVar(&o.timeout, "timeout", 3*time.Minute, "How long the scripted sessions may take before the demo gives up.")
	flag.Parse()
	if o.workers < 1 || o.workers > 26 {
		fmt.Fprintln(os.Stderr, "demo: --workers must be between 1 and 26")
		os.Exit(2)
	}

	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func step(format string, args ...any) {
	fmt.Printf("==> "+format+"\n", args...)
}

// demo is what the demo started and talks to.
type demo struct {
	options
	dir        string
	cfg        *rest.Config
	client     client.Client
	kubeconfig string
	procs      *processes
	apiURL     string
	tokenFile  string             // the agent runtimes' token
	api        *sessionapi.Client // the Session API, with that token
	pool       []*workerProc
}

// workerProc is a worker process and the address of its metrics.
type workerProc struct {
	*process
	node, metrics string
}

func run(o options) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	dir, err := os.MkdirTemp("", "agentlane-demo-")
	if err != nil {
		return err
	}
	d := &demo{options: o, dir: dir}

	step("starting the control plane (kube-apiserver and etcd) and installing the CRDs")
	started := time.Now()
	env, cfg, c, err := testenv.Start(testenv.Scheme())
	if err != nil {
		return err
	}
	defer func() {
		step("stopping the control plane")
		_ = env.Stop()
	}()
	d.cfg, d.client = cfg, c
	if err := d.writeKubeconfig(env); err != nil {
		return err
	}
	fmt.Printf("    up in %s; kubeconfig %s\n", time.Since(started).Round(100*time.Millisecond), d.kubeconfig)

	d.procs = &processes{dir: dir, kubeconfig: d.kubeconfig}
	defer func() {
		step("stopping the processes")
		d.procs.stopAll()
	}()
	if err := d.installPolicies(ctx); err != nil {
		return err
	}
	var workers []string
	for i := range d.workers {
		workers = append(workers, workerName(i))
	}
	if err := d.identities(ctx, env, workers); err != nil {
		return err
	}
	if err := d.startProcesses(); err != nil {
		return err
	}
	if err := d.applySamples(ctx); err != nil {
		return err
	}
	if err := d.waitReady(ctx); err != nil {
		return err
	}

	results, err := d.runSessions(ctx)
	if err != nil {
		return err
	}
	checked := &checks{}
	results.check(ctx, d, checked)
	if err := d.summarize(ctx, results); err != nil {
		return err
	}
	if err := d.dashboard(ctx, results.deadLettered()); err != nil {
		return err
	}
	if err := d.passivateAndResume(ctx, checked, results.reports["chat-9"]); err != nil {
		return err
	}
	if err := d.kubectlGet(ctx); err != nil {
		return err
	}
	if err := d.policiesHold(ctx, checked); err != nil {
		return err
	}
	if err := d.procs.alive(); err != nil {
		return err
	}

	if o.keep {
		step("running; explore with:")
		fmt.Printf("    export KUBECONFIG=%s\n", d.kubeconfig)
		fmt.Printf("    %s get lq,asn,xt\n", d.kubectl())
		fmt.Printf("    %s --kubeconfig=%s --view=dashboard\n", filepath.Join(o.binDir, "lanetop"), d.kubeconfig)
		fmt.Printf("    Session API %s, process logs in %s; press Ctrl-C to stop\n", d.apiURL, dir)
		<-ctx.Done()
	} else {
		step("process logs are in %s", dir)
	}
	if checked.failed > 0 {
		return fmt.Errorf("%d of the demo's checks failed; see above and the logs in %s", checked.failed, dir)
	}
	return nil
}

// writeKubeconfig writes a kubeconfig of a cluster administrator for the
// processes and for people exploring with kubectl.
func (d *demo) writeKubeconfig(env *envtest.Environment) error {
	user, err := env.ControlPlane.AddUser(envtest.User{Name: "demo-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return err
	}
	d.kubeconfig = filepath.Join(d.dir, "kubeconfig")
	return os.WriteFile(d.kubeconfig, kubeconfig, 0o600)
}

// startProcesses starts the manager with its Session API and the workers,
// each with a metrics endpoint.
func (d *demo) startProcesses() error {
	apiAddr, err := freeAddress()
	if err != nil {
		return err
	}
	d.apiURL = "http://" + apiAddr
	step("starting the manager (Session API %s) and %d workers", d.apiURL, d.workers)
	m, err := d.procs.start("manager", filepath.Join(d.binDir, "manager"),
		"--metrics-bind-address=0", "--health-probe-bind-address=0", "--session-api-bind-address="+apiAddr,
		// The demo's processes talk over loopback only.
		"--session-api-insecure-http")
	if err != nil {
		return err
	}
	fmt.Printf("    manager          pid %-7d log %s\n", m.cmd.Process.Pid, m.log)
	for i := range d.workers {
		node := nodeName(i)
		addr, err := freeAddress()
		if err != nil {
			return err
		}
		name := workerName(i)
		p, err := d.procs.start(name, filepath.Join(d.binDir, "worker"),
			"--name="+name, "--node-name="+node, "--namespace=default", "--grace-period=5s",
			"--heartbeat-interval=1s", "--metrics-bind-address="+addr, "--metrics-secure=false")
		if err != nil {
			return err
		}
		d.pool = append(d.pool, &workerProc{process: p, node: node, metrics: addr})
		fmt.Printf("    %-16s pid %-7d node %s, metrics http://%s/metrics\n", name, p.cmd.Process.Pid, node, addr)
	}
	return nil
}

// nodeName and workerName name the i-th worker and its simulated node.
func nodeName(i int) string   { return fmt.Sprintf("node-%c", 'a'+i) }
func workerName(i int) string { return "worker-" + nodeName(i) }

// applySamples creates the samples of config/samples and the demo's own
// sessions in the default namespace.
func (d *demo) applySamples(ctx context.Context) error {
	step("applying config/samples and the demo's sessions")
	files, _ := filepath.Glob(filepath.Join("config", "samples", "agentlane_*.yaml"))
	files = append(files, filepath.Join("hack", "demo", "assets", "sessions.yaml"))
	for _, f := range files {
		objs, err := manifest.ReadFile(f)
		if err != nil {
			return err
		}
		for _, o := range objs {
			o.SetNamespace("default")
			if err := d.client.Create(ctx, o); err != nil {
				return fmt.Errorf("apply %s: %w", f, err)
			}
			fmt.Printf("    %s/%s created\n", strings.ToLower(o.GetKind()), o.GetName())
		}
	}
	return nil
}

// waitReady waits for the Session API to answer, every worker to hold its
// heartbeat Lease and the sessions to be Active.
func (d *demo) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		err := d.ready(ctx)
		if err == nil {
			return nil
		}
		if perr := d.procs.alive(); perr != nil {
			return perr
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready after a minute: %w", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// kubectlGet shows what the cluster holds, as an operator would look at it.
func (d *demo) kubectlGet(ctx context.Context) error {
	for _, args := range [][]string{
		{"get", "lanequeues,agentsessions", "-o", "wide"},
		{"get", "leases", "-l", "agentlane.io/worker=true", "-L", "agentlane.io/node"},
	} {
		step("kubectl %s", strings.Join(args, " "))
		out, err := d.kubectlOutput(ctx, args...)
		fmt.Print(out)
		if err != nil {
			return err
		}
	}
	return nil
}

var errNotReady = errors.New("not ready")
