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
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary serve as a task's init (the Init of the
// sandboxes below) and as the helper processes of the runner tests.
func TestMain(m *testing.M) {
	RunTaskInitIfAsked()
	runHelperIfAsked()
	os.Exit(m.Run())
}

// testInit is the Init of a test's sandbox: this test binary.
func testInit(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// processesWith lists the processes whose environment holds the variable
// kv (NAME=VALUE), whatever their parent, session or process group.
func processesWith(t *testing.T, kv string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue // gone, or not ours to read
		}
		for v := range bytes.SplitSeq(env, []byte{0}) {
			if string(v) == kv {
				if p, ok := readProc(pid); ok && p.state != 'Z' {
					out = append(out, pid)
				}
				break
			}
		}
	}
	return out
}

// escapingTask starts processes that leave the task's process group in
// every way a shell can (a new session, a double fork, one that ignores
// SIGTERM), none holding the task's output, then writes the ready file and
// goes on with rest.
const escapingTask = `
setsid sleep 300 >/dev/null 2>&1 </dev/null &
(sh -c 'while :; do date >> "$MARKER"; sleep 0.05; done' >/dev/null 2>&1 </dev/null &)
(trap '' TERM; setsid sh -c 'trap "" TERM; sleep 300' >/dev/null 2>&1 </dev/null &)
echo ready > "$READY"
`

// A task's whole process tree ends with its attempt, however the attempt
// ends, also the processes that called setsid() or were double-forked.
func TestInitEndsTheTaskTree(t *testing.T) {
	cases := map[string]struct {
		rest string
		// stop, when set, ends the attempt once the task is ready.
		stop    func(cancel context.CancelCauseFunc)
		wantOut Output
		wantErr error
	}{
		"success": {rest: "echo done", wantOut: Output{Success: true, Stdout: "done\n"}},
		"failure": {rest: "echo failed >&2; exit 3", wantOut: Output{ExitCode: 3, Stderr: "failed\n", Error: "exit code 3: failed"}},
		"timeout": {
			rest:    "sleep 300",
			stop:    func(cancel context.CancelCauseFunc) { cancel(context.DeadlineExceeded) },
			wantOut: Output{ExitCode: -1}, wantErr: context.DeadlineExceeded,
		},
		"cancellation ignored by the task": {
			rest:    "trap '' TERM; while :; do sleep 0.05; done",
			stop:    func(cancel context.CancelCauseFunc) { cancel(errors.New("attempt lost")) },
			wantOut: Output{ExitCode: -1}, wantErr: errors.New("attempt lost"),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			ready, marker := filepath.Join(dir, "ready"), filepath.Join(dir, "marker")
			token := "AGENTLANE_TEST_TREE=" + strconv.FormatInt(time.Now().UnixNano(), 36)
			reg := NewSandboxedRegistry(1024, Sandbox{Root: t.TempDir(), Init: testInit(t), Env: []string{token}})
			reg.Register("bash", &ProcessExecutor{Shell: true, KillGrace: 200 * time.Millisecond})
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			type result struct {
				out Output
				err error
			}
			done := make(chan result, 1)
			go func() {
				out, err := reg.Run(ctx, Task{CommandType: "bash", Payload: payload(t, ProcessPayload{
					Command: escapingTask + tc.rest,
					Env:     map[string]string{"READY": ready, "MARKER": marker},
				})})
				done <- result{out, err}
			}()
			var got result
			if tc.stop != nil {
				waitForFile(t, ready)
				tc.stop(cancel)
			}
			got = <-done
			if tc.wantErr == nil && got.err != nil {
				t.Fatalf("unexpected error: %v", got.err)
			}
			if tc.wantErr != nil && (got.err == nil || !strings.Contains(got.err.Error(), tc.wantErr.Error())) {
				t.Fatalf("error = %v, want it to contain %q", got.err, tc.wantErr)
			}
			if got.out.ExitCode != tc.wantOut.ExitCode || got.out.Success != tc.wantOut.Success ||
				got.out.Stdout != tc.wantOut.Stdout || got.out.Stderr != tc.wantOut.Stderr || got.out.Error != tc.wantOut.Error {
				t.Errorf("output = %+v, want %+v", got.out, tc.wantOut)
			}
			if _, err := os.Stat(ready); err != nil {
				t.Fatalf("the task did not start its processes: %v", err)
			}
			if pids := processesWith(t, token); len(pids) > 0 {
				t.Errorf("processes %v of the task outlived its attempt", pids)
			}
		})
	}
}

// waitForFile waits until path exists.
func waitForFile(t *testing.T, path string) {
	t.Helper()
	for range 1000 {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s never appeared", path)
}

// TestInitStoppedBeforeTheTaskStarts: a stop that reaches the init before it
// started the task is reported as ErrNotStarted, and the task never runs,
// so that a worker shutting down hands the attempt back uncounted.
func TestInitStoppedBeforeTheTaskStarts(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "marker")
	reg := NewSandboxedRegistry(1024, Sandbox{Root: t.TempDir(), Init: testInit(t)})
	reg.Register("bash", &ProcessExecutor{Shell: true, KillGrace: 200 * time.Millisecond})
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("shutting down"))
	payload, _ := json.Marshal(map[string]string{"command": "echo ran > " + marker})
	_, err := reg.Run(ctx, Task{CommandType: "bash", Payload: payload})
	if !errors.Is(err, ErrNotStarted) {
		t.Fatalf("Run after the stop: %v, want ErrNotStarted", err)
	}
	time.Sleep(100 * time.Millisecond)
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Errorf("the task ran: %v", err)
	}
}
