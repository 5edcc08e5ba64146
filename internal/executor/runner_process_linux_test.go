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

package executor

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// The helper processes of these tests are this test binary, told what to be
// by AGENTLANE_TEST_HELPER.
const helperEnv = "AGENTLANE_TEST_HELPER"

// runHelperIfAsked runs the test binary as a helper process, and exits,
// when helperEnv says so.
func runHelperIfAsked() {
	switch os.Getenv(helperEnv) {
	case "runner":
		os.Exit(runnerHelper())
	case "impersonator":
		os.Exit(impersonatorHelper())
	}
}

// runnerHelper is a runner as cmd/worker's `worker runner` is one: not
// dumpable, the parent of its tasks' orphans, tasks under this binary as
// their init.
func runnerHelper() int {
	if err := ForbidTracing(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := AdoptOrphans(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	self, _ := os.Executable()
	reg := NewSandboxedRegistry(4096, Sandbox{
		Root: os.Getenv("AGENTLANE_TEST_TASK_ROOT"), Init: self,
		Env: []string{os.Getenv("AGENTLANE_TEST_SANDBOX_ENV")},
	})
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := ServeRunner(ctx, os.Getenv("AGENTLANE_TEST_SOCKET"), &RunnerServer{Registry: reg}, 5*time.Second, 5*time.Millisecond); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// forgedAnswer is what an impersonating runner answers every run with.
const forgedAnswer = `{"output":{"success":true,"stdout":"forged\n"}}`

// impersonatorHelper is a hostile task: it tries to remove the worker's
// socket, to put its own in its place and to connect to it as a runner,
// reports how each went, and leaves a copy of itself behind that goes on
// trying.
func impersonatorHelper() int {
	sock := os.Getenv("SOCK")
	fmt.Printf("remove: %v\n", os.Remove(sock))
	forged := sock + ".forged"
	l, err := net.Listen("unix", forged)
	fmt.Printf("listen: %v\n", err)
	if err == nil {
		fmt.Printf("rename: %v\n", os.Rename(forged, sock))
		go serveForged(l)
	}
	serve := func(c net.Conn) {
		(&http2.Server{}).ServeConn(c, &http2.ServeConnOpts{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, forgedAnswer)
		})})
	}
	if os.Getenv("LINGER") != "" {
		for {
			if c, err := net.Dial("unix", sock); err == nil {
				go serve(c)
			}
			time.Sleep(time.Millisecond)
		}
	}
	connected := 0
	for range 20 {
		if c, err := net.Dial("unix", sock); err == nil {
			connected++
			go serve(c)
		}
	}
	fmt.Printf("connected: %d\n", connected)
	self, _ := os.Executable()
	linger := exec.Command(self)
	linger.Env = append(os.Environ(), "LINGER=1")
	linger.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := linger.Start(); err != nil {
		fmt.Printf("linger: %v\n", err)
	}
	return 0
}

// serveForged answers runs on l with forgedAnswer.
func serveForged(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go (&http2.Server{}).ServeConn(c, &http2.ServeConnOpts{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, forgedAnswer)
		})})
	}
}

// taskUID and taskGID are the user and group the runner and its tasks run
// as in these tests: another user than the worker's, as in a pod the runner
// cannot write the socket's directory (it mounts it read-only). The group
// is the worker's, which may connect to the socket.
const (
	taskUID = 65534
	taskGID = 0
)

// A task cannot remove or replace the worker's socket, nor pass itself off
// as the runner, nor read the runner's environment, nor outlive its attempt
// by killing its own init; the worker goes on getting the real runner's
// results.
func TestRunnerSocketOutOfTasksReach(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root, to run the runner and its tasks as another user than the worker")
	}
	dir := t.TempDir()
	must(t, os.Chmod(filepath.Dir(dir), 0o755)) // the test's own directory
	must(t, os.Chmod(dir, 0o755))
	bin := filepath.Join(dir, "executor.test")
	copyFile(t, testInit(t), bin)
	sockDir := filepath.Join(dir, "sock")
	must(t, os.Mkdir(sockDir, 0o750)) // the runner's group may enter, not write
	taskRoot := filepath.Join(dir, "tasks")
	must(t, os.Mkdir(taskRoot, 0o700))
	must(t, os.Chown(taskRoot, taskUID, taskGID))
	socket := filepath.Join(sockDir, "runner.sock")

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // after the runner's
	runner, err := ListenRunner(ctx, socket, 4096)
	if err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(socket)
	if err != nil {
		t.Fatal(err)
	}
	token := "AGENTLANE_TEST_TREE=" + strconv.FormatInt(time.Now().UnixNano(), 36)
	var log bytes.Buffer
	cmd := exec.Command(bin)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), helperEnv + "=runner", "AGENTLANE_TEST_SOCKET=" + socket,
		"AGENTLANE_TEST_TASK_ROOT=" + taskRoot, "AGENTLANE_TEST_SANDBOX_ENV=" + token}
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: taskUID, Gid: taskGID}}
	must(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("runner output:\n%s", log.String())
		}
	})
	reg, err := runner.Registry(ctx, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, task Task) Output {
		t.Helper()
		out, err := reg.Run(ctx, task)
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		if pids := processesWith(t, token); len(pids) > 0 {
			t.Errorf("processes %v of the task outlived its attempt", pids)
		}
		return out
	}
	bash := func(command string) Task {
		return Task{CommandType: "bash", Payload: payload(t, ProcessPayload{Command: command})}
	}

	t.Run("a task cannot take the socket or pass for the runner", func(t *testing.T) {
		out := run(t, Task{CommandType: "exec", Payload: payload(t, ProcessPayload{
			Args: []string{bin}, Env: map[string]string{helperEnv: "impersonator", "SOCK": socket},
		})})
		for _, want := range []string{
			"remove: remove " + socket + ": permission denied",
			"listen: listen unix " + socket + ".forged: bind: permission denied",
		} {
			if !strings.Contains(out.Stdout, want) {
				t.Errorf("the task's report %q does not say %q", out.Stdout, want)
			}
		}
		if !strings.Contains(out.Stdout, "connected: ") || strings.Contains(out.Stdout, "connected: 0\n") {
			t.Errorf("the task's report %q: want it to have reached the socket", out.Stdout)
		}
		if runner.Refused() == 0 {
			t.Error("the worker refused no connection, want the task's refused")
		}
		after, err := os.Stat(socket)
		if err != nil || !os.SameFile(before, after) {
			t.Errorf("the worker's socket was replaced or removed (%v)", err)
		}
	})
	t.Run("the next tasks get the real runner", func(t *testing.T) {
		for i := range 5 {
			if out := run(t, bash(fmt.Sprintf("echo real-%d", i))); out.Stdout != fmt.Sprintf("real-%d\n", i) {
				t.Errorf("task %d: stdout = %q, want the real runner's", i, out.Stdout)
			}
		}
	})
	t.Run("a task cannot read the runner's environment", func(t *testing.T) {
		out := run(t, bash(`cat /proc/$(cut -d' ' -f4 /proc/$PPID/stat)/environ | tr '\0' '\n'`))
		if strings.Contains(out.Stdout, helperEnv) || !strings.Contains(out.Stderr, "Permission denied") {
			t.Errorf("output = %+v, want the runner's environment refused", out)
		}
	})
	t.Run("a task that kills its init does not outlive its attempt", func(t *testing.T) {
		out := run(t, bash(`setsid sleep 300 >/dev/null 2>&1 </dev/null & kill -9 $PPID; sleep 300`))
		if out.Success || out.Error != "the task's init was killed" {
			t.Errorf("output = %+v, want a failed attempt", out)
		}
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// copyFile copies the executable src to dst.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	must(t, err)
	must(t, os.WriteFile(dst, b, 0o755))
}
