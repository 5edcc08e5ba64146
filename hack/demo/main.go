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

// Command demo runs agentlane on an embedded control plane: it starts
// kube-apiserver and etcd, installs the CRDs, starts the manager and several
// workers as separate processes (each standing in for a pod on its own node),
// applies the samples and shows what the cluster holds.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/agentlane/agentlane/internal/manifest"
)

func main() {
	var (
		workers int
		keep    bool
		binDir  string
	)
	flag.IntVar(&workers, "workers", 3, "Worker processes to start, each on its own simulated node.")
	flag.BoolVar(&keep, "keep", false, "Keep everything running after the demo and print the KUBECONFIG path; Ctrl-C stops it.")
	flag.StringVar(&binDir, "bin", "bin", "Directory holding the manager and worker binaries.")
	flag.Parse()

	if err := run(workers, keep, binDir); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func step(format string, args ...any) {
	fmt.Printf("==> "+format+"\n", args...)
}

func run(workers int, keep bool, binDir string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return errors.New("KUBEBUILDER_ASSETS is not set; run the demo with `make demo`")
	}
	workDir, err := os.MkdirTemp("", "agentlane-demo-")
	if err != nil {
		return err
	}

	step("starting the control plane (kube-apiserver and etcd)")
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		return fmt.Errorf("start control plane: %w", err)
	}
	defer func() {
		step("stopping the control plane")
		_ = env.Stop()
	}()
	user, err := env.ControlPlane.AddUser(envtest.User{Name: "demo-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return err
	}
	kubeconfigPath := filepath.Join(workDir, "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		return err
	}
	step("CRDs installed; kubeconfig at %s", kubeconfigPath)

	procs := &processes{dir: workDir, kubeconfig: kubeconfigPath}
	defer procs.stopAll()
	if err := procs.start("manager", filepath.Join(binDir, "manager"),
		"--metrics-bind-address=0", "--health-probe-bind-address=0"); err != nil {
		return err
	}
	for i := 0; i < workers; i++ {
		node := fmt.Sprintf("node-%c", 'a'+i)
		name := "worker-" + node
		if err := procs.start(name, filepath.Join(binDir, "worker"),
			"--name="+name, "--node-name="+node, "--namespace=default", "--grace-period=5s"); err != nil {
			return err
		}
	}

	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	step("applying config/samples")
	files, _ := filepath.Glob(filepath.Join("config", "samples", "agentlane_*.yaml"))
	for _, f := range files {
		objs, err := manifest.ReadFile(f)
		if err != nil {
			return err
		}
		for _, o := range objs {
			o.SetNamespace("default")
			if err := c.Create(ctx, o); err != nil {
				return fmt.Errorf("apply %s: %w", f, err)
			}
			fmt.Printf("    %s/%s created\n", strings.ToLower(o.GetKind()), o.GetName())
		}
	}

	// Give the processes a moment to come up, then show what is there.
	select {
	case <-time.After(2 * time.Second):
	case <-ctx.Done():
	}
	if err := procs.alive(); err != nil {
		return err
	}
	kubectl := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl")
	out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", kubeconfigPath,
		"get", "lanequeues,agentsessions,externaltasks", "-o", "wide").CombinedOutput()
	step("kubectl get lanequeues,agentsessions,externaltasks -o wide")
	fmt.Print(string(out))
	if err != nil {
		return fmt.Errorf("kubectl: %w", err)
	}
	out, err = exec.CommandContext(ctx, kubectl, "--kubeconfig", kubeconfigPath,
		"get", "leases", "-l", "agentlane.io/worker=true", "-L", "agentlane.io/node").CombinedOutput()
	step("worker heartbeats: kubectl get leases -l agentlane.io/worker=true -L agentlane.io/node")
	fmt.Print(string(out))
	if err != nil {
		return fmt.Errorf("kubectl: %w", err)
	}

	if keep {
		step("running; explore with: KUBECONFIG=%s %s get agentlane", kubeconfigPath, kubectl)
		step("process logs are in %s; press Ctrl-C to stop", workDir)
		<-ctx.Done()
		return nil
	}
	step("done; process logs are in %s", workDir)
	return nil
}

// processes are the manager and worker processes the demo started.
type processes struct {
	dir        string
	kubeconfig string
	running    []*process
}

type process struct {
	name string
	cmd  *exec.Cmd
	done chan error
}

func (p *processes) start(name, bin string, args ...string) error {
	logPath := filepath.Join(p.dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+p.kubeconfig)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	proc := &process{name: name, cmd: cmd, done: make(chan error, 1)}
	go func() {
		proc.done <- cmd.Wait()
		logFile.Close()
	}()
	p.running = append(p.running, proc)
	step("started %s (pid %d, log %s)", name, cmd.Process.Pid, logPath)
	return nil
}

// alive returns an error naming the first process that has already exited.
func (p *processes) alive() error {
	for _, proc := range p.running {
		select {
		case err := <-proc.done:
			return fmt.Errorf("%s exited early (%v); see %s", proc.name, err, filepath.Join(p.dir, proc.name+".log"))
		default:
		}
	}
	return nil
}

// stopAll sends SIGTERM to every process and waits for it to exit, killing
// those that do not stop within ten seconds.
func (p *processes) stopAll() {
	for _, proc := range p.running {
		_ = proc.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, proc := range p.running {
		select {
		case err := <-proc.done:
			fmt.Printf("    %s stopped (%v)\n", proc.name, exitText(err))
		case <-time.After(10 * time.Second):
			_ = proc.cmd.Process.Kill()
			fmt.Printf("    %s killed after 10s\n", proc.name)
		}
	}
}

func exitText(err error) string {
	if err == nil {
		return "exit 0"
	}
	return err.Error()
}
