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
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// processes are the manager, worker and agent processes the demo started.
type processes struct {
	dir        string
	kubeconfig string
	// kubeconfigs are the processes, by name, that run as another user.
	kubeconfigs map[string]string
	running     []*process
}

// process is one started program; done is closed once it exited, with its
// exit error in err.
type process struct {
	name string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// start runs bin with args; its output goes to <name>.log in the demo's
// directory.
func (p *processes) start(name, bin string, args ...string) (*process, error) {
	logPath := filepath.Join(p.dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	kubeconfig := p.kubeconfig
	if k, ok := p.kubeconfigs[name]; ok {
		kubeconfig = k
	}
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	proc := &process{name: name, log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		proc.err = cmd.Wait()
		logFile.Close()
		close(proc.done)
	}()
	p.running = append(p.running, proc)
	return proc, nil
}

// exited tells whether the process has ended.
func (proc *process) exited() bool {
	select {
	case <-proc.done:
		return true
	default:
		return false
	}
}

// alive returns an error naming the first long-running process that has
// already exited.
func (p *processes) alive() error {
	for _, proc := range p.running {
		if proc.exited() && !proc.oneShot() {
			return fmt.Errorf("%s exited early (%v); see %s", proc.name, exitText(proc.err), proc.log)
		}
	}
	return nil
}

// oneShot tells the agents, which end on their own, from the manager and
// the workers, which run until stopped.
func (proc *process) oneShot() bool { return filepath.Base(proc.cmd.Path) == "agent" }

// stopAll sends SIGTERM to every process still running and waits for it to
// exit, killing those that do not stop within ten seconds. Workers stop
// first, the manager last.
func (p *processes) stopAll() {
	for i := len(p.running) - 1; i >= 0; i-- {
		proc := p.running[i]
		if proc.exited() {
			continue
		}
		_ = proc.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-proc.done:
			fmt.Printf("    %-16s stopped (%s)\n", proc.name, exitText(proc.err))
		case <-time.After(10 * time.Second):
			_ = proc.cmd.Process.Kill()
			<-proc.done
			fmt.Printf("    %-16s killed after 10s\n", proc.name)
		}
	}
}

func exitText(err error) string {
	if err == nil {
		return "exit 0"
	}
	return err.Error()
}

// freeAddress returns a loopback address with a port no one listens on.
func freeAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
