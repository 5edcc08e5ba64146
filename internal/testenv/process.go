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

package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Process is a built agentlane binary (manager, worker) that a suite runs as
// a separate operating-system process, authenticated by a kubeconfig, its
// output kept in a log file.
type Process struct {
	Cmd *exec.Cmd
	// Log is the path of the file that holds the process's output.
	Log string
	// Done is closed once the process has exited; Err is then its exit
	// error.
	Done chan struct{}
	Err  error
}

// StartProcess starts bin with args, with KUBECONFIG set to kubeconfig and
// its output written to logPath.
func StartProcess(logPath, bin, kubeconfig string, args ...string) (*Process, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p := &Process{Cmd: cmd, Log: logPath, Done: make(chan struct{})}
	go func() {
		p.Err = cmd.Wait()
		logFile.Close()
		close(p.Done)
	}()
	return p, nil
}

// Exited tells whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.Done:
		return true
	default:
		return false
	}
}

// Kill ends the process at once, as a crashed pod or a lost node would, and
// waits for it. A stopped (SIGSTOP) process is continued so that it can die.
func (p *Process) Kill() {
	_ = p.Cmd.Process.Signal(syscall.SIGCONT)
	_ = p.Cmd.Process.Kill()
	<-p.Done
}

// Terminate sends SIGTERM (continuing a stopped process first) and returns
// without waiting.
func (p *Process) Terminate() {
	_ = p.Cmd.Process.Signal(syscall.SIGCONT)
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
}

// Stop sends SIGTERM and waits, killing the process if it has not exited
// after grace.
func (p *Process) Stop(grace time.Duration) {
	if p.Exited() {
		return
	}
	p.Terminate()
	select {
	case <-p.Done:
	case <-time.After(grace):
		p.Kill()
	}
}

// LogTail returns the last max bytes of the process's log.
func (p *Process) LogTail(max int) string {
	b, _ := os.ReadFile(p.Log)
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}

// GoBuild builds the main package pkg of the module rooted at root into
// out.
func GoBuild(root, pkg, out string) error {
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}
