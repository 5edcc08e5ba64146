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
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// listenRunner listens as a worker on a socket in a fresh directory until
// the test ends and returns the runner's client and the socket's path.
func listenRunner(t *testing.T, maxOutput int) (*Runner, string) {
	t.Helper()
	socket := filepath.Join(t.TempDir(), "runner.sock")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r, err := ListenRunner(ctx, socket, maxOutput)
	if err != nil {
		t.Fatal(err)
	}
	return r, socket
}

// startRunner connects a runner serving reg to the worker's socket until
// the test ends.
func startRunner(t *testing.T, socket string, reg *Registry) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- ServeRunner(ctx, socket, &RunnerServer{Registry: reg}, 5*time.Second, 5*time.Millisecond)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("runner: %v", err)
		}
	})
}

// A task run through the runner gives the worker what it would get running
// the task itself, within the worker's own output limit.
func TestRunnerRoundTrip(t *testing.T) {
	served := NewSandboxedRegistry(64, Sandbox{Root: t.TempDir(), Env: []string{"DECLARED=yes"}})
	served.Register("noop", ExecutorFunc(func(context.Context, json.RawMessage) (Output, error) {
		return Output{Success: true}, nil
	}))
	runner, socket := listenRunner(t, 32)
	startRunner(t, socket, served)
	reg, err := runner.Registry(context.Background(), 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"bash", "exec", "noop", "read"}, reg.CommandTypes()); diff != "" {
		t.Errorf("command types (-want,+got):\n%s", diff)
	}
	cases := map[string]struct {
		task    Task
		want    Output
		wantErr string
	}{
		"bash in the runner's sandbox": {
			task: Task{CommandType: "bash", Payload: payload(t, ProcessPayload{Command: `echo "$DECLARED $GREETING"`, Env: map[string]string{"GREETING": "hi"}})},
			want: Output{Success: true, Stdout: "yes hi\n"},
		},
		"non-zero exit": {
			task: Task{CommandType: "bash", Payload: payload(t, ProcessPayload{Command: "echo oops >&2; exit 3"})},
			want: Output{ExitCode: 3, Stderr: "oops\n", Error: "exit code 3: oops"},
		},
		"output cut at the runner's limit": {
			task: Task{CommandType: "bash", Payload: payload(t, ProcessPayload{Command: "head -c 100 /dev/zero | tr '\\0' x >&2"})},
			want: Output{Success: true, Stderr: strings.Repeat("x", 32), Truncated: true},
		},
		"output cut at the worker's smaller limit": {
			task: Task{CommandType: "bash", Payload: payload(t, ProcessPayload{Command: "printf %040d 0"})},
			want: Output{Success: true, Stdout: strings.Repeat("0", 32), Truncated: true},
		},
		"a read outside the sandbox is refused": {
			task:    Task{CommandType: "read", Payload: readPayload(t, ReadPayload{Path: "/etc/hostname"})},
			wantErr: `invalid payload: path "/etc/hostname" must be relative to the task directory`,
		},
		"a read of a missing file": {
			task:    Task{CommandType: "read", Payload: readPayload(t, ReadPayload{Path: "a.txt"})},
			wantErr: "read a.txt: no such file or directory",
		},
		"a registered executor": {
			task: Task{CommandType: "noop"},
			want: Output{Success: true},
		},
		"a command type the runner does not know": {
			task:    Task{CommandType: "teleport"},
			wantErr: `no executor for command type "teleport"`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := reg.Run(context.Background(), tc.task)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("output (-want,+got):\n%s", diff)
			}
		})
	}
	t.Run("a command type the runner does not know, asked directly", func(t *testing.T) {
		_, err := runner.Run(context.Background(), Task{CommandType: "teleport"})
		if err == nil || !strings.Contains(err.Error(), `no executor for command type "teleport"`) {
			t.Errorf("error = %v, want the runner's refusal", err)
		}
	})
}

// Cancelling a run closes its request, and the runner then stops the whole
// process group of the task, as it is stopped in-process.
func TestRunnerCancelStopsTheProcessGroup(t *testing.T) {
	runner, socket := listenRunner(t, 1024)
	startRunner(t, socket, NewSandboxedRegistry(1024, Sandbox{Root: t.TempDir(), Init: testInit(t)}))
	if _, err := runner.Registry(context.Background(), 5*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	var out Output
	go func() {
		var err error
		out, err = runner.Run(ctx, Task{CommandType: "bash", Payload: payload(t, ProcessPayload{
			Command: "sleep 300 & echo $! > " + pidFile + "; wait",
		})})
		done <- err
	}()
	var pid int
	for pid == 0 {
		select {
		case err := <-done:
			t.Fatalf("run ended before it was cancelled: %v", err)
		default:
		}
		if b, err := os.ReadFile(pidFile); err == nil && len(strings.TrimSpace(string(b))) > 0 {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		time.Sleep(10 * time.Millisecond)
	}
	cause := errors.New("attempt lost")
	cancel(cause)
	if err := <-done; !errors.Is(err, cause) {
		t.Fatalf("error = %v, want it to wrap %v", err, cause)
	}
	if out.ExitCode != -1 || out.Success {
		t.Errorf("output = %+v, want exit code -1 and no success", out)
	}
	for range 250 {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("child process %d of the cancelled task is still alive in the runner", pid)
}

// A worker whose runner is not up yet waits for it; one that never comes
// up is reported when the worker gives up.
func TestRunnerRegistryWaitsForTheRunner(t *testing.T) {
	runner, socket := listenRunner(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := runner.Registry(ctx, 5*time.Millisecond); err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error = %v, want the deadline", err)
	}
	type answer struct {
		reg *Registry
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		reg, err := runner.Registry(context.Background(), 5*time.Millisecond)
		answered <- answer{reg, err}
	}()
	time.Sleep(20 * time.Millisecond) // a few refused attempts first; not asserted
	startRunner(t, socket, NewSandboxedRegistry(0, Sandbox{Root: t.TempDir()}))
	a := <-answered
	reg, err := a.reg, a.err
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"bash", "exec", "read"}, reg.CommandTypes()); diff != "" {
		t.Errorf("command types (-want,+got):\n%s", diff)
	}
}

// A runner waits for the worker's socket, and exits when it loses the
// worker: its tasks end with it.
func TestRunnerExitsWhenTheWorkerIsLost(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "runner.sock")
	served := make(chan error, 1)
	go func() {
		served <- ServeRunner(context.Background(), socket, &RunnerServer{Registry: NewRegistry(0)}, time.Second, 5*time.Millisecond)
	}()
	ctx, cancel := context.WithCancel(context.Background())
	runner, err := ListenRunner(ctx, socket, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runner.Registry(context.Background(), 5*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	cancel() // the worker stops listening and drops its runner
	if err := <-served; err == nil || !strings.Contains(err.Error(), "lost the connection to the worker") {
		t.Fatalf("runner ended with %v, want the lost connection", err)
	}
}

// While a runner is connected, and for RunnerQuietPeriod after it is lost,
// the worker closes every other connection to its socket: whoever else
// connects (a task of the runner) never gets a task.
func TestWorkerServesOneRunnerConnection(t *testing.T) {
	runner, socket := listenRunner(t, 0)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- ServeRunner(ctx, socket, &RunnerServer{Registry: NewRegistry(0)}, time.Second, 5*time.Millisecond)
	}()
	if _, err := runner.Registry(context.Background(), 5*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	closedAtOnce := func(t *testing.T) {
		t.Helper()
		c, err := net.Dial("unix", socket)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Close() }()
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Errorf("read = %v, want the worker to close the connection", err)
		}
	}
	closedAtOnce(t)
	if got := runner.Refused(); got != 1 {
		t.Errorf("refused = %d, want 1", got)
	}
	cancel() // the runner goes away
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := runner.CommandTypes(context.Background()); errors.Is(err, errNoRunner) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	closedAtOnce(t) // in the quiet period
	if got := runner.Refused(); got != 2 {
		t.Errorf("refused = %d, want 2", got)
	}
}

// A runner told to stop while a task runs lets the task finish and the
// worker read its whole answer before it closes the connection: the last
// frames of the answer may still be on their way out when the run ends.
func TestRunnerStoppedMidRunDeliversTheAnswer(t *testing.T) {
	big := strings.Repeat("o", 256<<10)
	for i := range 20 {
		started := make(chan struct{})
		reg := NewRegistry(1 << 20)
		reg.Register("slow", ExecutorFunc(func(context.Context, json.RawMessage) (Output, error) {
			close(started)
			time.Sleep(20 * time.Millisecond)
			return Output{Success: true, Stdout: big}, nil
		}))
		runner, socket := listenRunner(t, 1<<20)
		ctx, stop := context.WithCancel(context.Background())
		served := make(chan error, 1)
		go func() {
			served <- ServeRunner(ctx, socket, &RunnerServer{Registry: reg}, 5*time.Second, 5*time.Millisecond)
		}()
		if _, err := runner.Registry(context.Background(), 5*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		type result struct {
			out Output
			err error
		}
		done := make(chan result, 1)
		go func() {
			out, err := runner.Run(context.Background(), Task{CommandType: "slow"})
			done <- result{out, err}
		}()
		<-started
		stop()
		got := <-done
		if got.err != nil || got.out.Stdout != big {
			t.Fatalf("run %d: the answer of a run that finished while the runner stopped: error %v, %d bytes of stdout", i, got.err, len(got.out.Stdout))
		}
		if err := <-served; err != nil {
			t.Fatalf("run %d: runner: %v", i, err)
		}
	}
}
