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

func payload(t *testing.T, p ProcessPayload) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readPayload(t *testing.T, p ReadPayload) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readResult(t *testing.T, o ReadOutput) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRegistryRun(t *testing.T) {
	dir := t.TempDir()
	hello := writeFile(t, dir, "hello.txt", "hello\n")
	long := writeFile(t, dir, "long.txt", strings.Repeat("y", 100))
	exact := writeFile(t, dir, "exact.txt", strings.Repeat("z", 64))
	accent := writeFile(t, dir, "accent.txt", "abcé") // é is 2 bytes: 3 and 4
	empty := writeFile(t, dir, "empty.txt", "")
	cases := map[string]struct {
		task    Task
		want    Output
		wantErr string
	}{
		"bash success": {
			task: Task{CommandType: "bash", Payload: payload(t, ProcessPayload{Command: "echo hello"})},
			want: Output{Success: true, Stdout: "hello\n"},
		},
		"bash non-zero exit is a failed run, not an error": {
			task: Task{CommandType: "bash", Payload: payload(t, ProcessPayload{Command: "echo oops >&2; exit 3"})},
			want: Output{ExitCode: 3, Stderr: "oops\n", Error: "exit code 3: oops"},
		},
		"working directory and env": {
			task: Task{CommandType: "bash", Payload: payload(t, ProcessPayload{
				Command: `printf '%s %s' "$(pwd)" "$GREETING"`, WorkingDir: dir, Env: map[string]string{"GREETING": "hi"},
			})},
			want: Output{Success: true, Stdout: dir + " hi"},
		},
		"exec runs argv without a shell": {
			task: Task{CommandType: "exec", Payload: payload(t, ProcessPayload{Args: []string{"echo", "$HOME"}})},
			want: Output{Success: true, Stdout: "$HOME\n"},
		},
		"stdin": {
			task: Task{CommandType: "exec", Payload: payload(t, ProcessPayload{Args: []string{"cat"}, Stdin: "piped"})},
			want: Output{Success: true, Stdout: "piped"},
		},
		"output is cut at the limit": {
			task: Task{CommandType: "bash", Payload: payload(t, ProcessPayload{Command: "head -c 100 /dev/zero | tr '\\0' x"})},
			want: Output{Success: true, Stdout: strings.Repeat("x", 64), Truncated: true},
		},
		"read a file": {
			task: Task{CommandType: "read", Payload: readPayload(t, ReadPayload{Path: hello})},
			want: Output{Success: true, Result: readResult(t, ReadOutput{Content: "hello\n", Bytes: 6})},
		},
		"read an empty file": {
			task: Task{CommandType: "read", Payload: readPayload(t, ReadPayload{Path: empty})},
			want: Output{Success: true, Result: readResult(t, ReadOutput{})},
		},
		"read is cut at the limit and says how big the file is": {
			task: Task{CommandType: "read", Payload: readPayload(t, ReadPayload{Path: long})},
			want: Output{Success: true, Truncated: true, Result: readResult(t, ReadOutput{
				Content: strings.Repeat("y", 64), Bytes: 100, Truncated: true,
			})},
		},
		"read of a file exactly at the limit is whole": {
			task: Task{CommandType: "read", Payload: readPayload(t, ReadPayload{Path: exact})},
			want: Output{Success: true, Result: readResult(t, ReadOutput{Content: strings.Repeat("z", 64), Bytes: 64})},
		},
		"read maxBytes below the limit": {
			task: Task{CommandType: "read", Payload: readPayload(t, ReadPayload{Path: hello, MaxBytes: 4})},
			want: Output{Success: true, Truncated: true, Result: readResult(t, ReadOutput{Content: "hell", Bytes: 6, Truncated: true})},
		},
		"read maxBytes above the limit is capped at the limit": {
			task: Task{CommandType: "read", Payload: readPayload(t, ReadPayload{Path: long, MaxBytes: 1000})},
			want: Output{Success: true, Truncated: true, Result: readResult(t, ReadOutput{
				Content: strings.Repeat("y", 64), Bytes: 100, Truncated: true,
			})},
		},
		"read does not cut a character in half": {
			task: Task{CommandType: "read", Payload: readPayload(t, ReadPayload{Path: accent, MaxBytes: 4})},
			want: Output{Success: true, Truncated: true, Result: readResult(t, ReadOutput{Content: "abc", Bytes: 5, Truncated: true})},
		},
		"read a missing file": {
			task:    Task{CommandType: "read", Payload: readPayload(t, ReadPayload{Path: filepath.Join(dir, "missing.txt")})},
			wantErr: "read " + filepath.Join(dir, "missing.txt") + ": no such file or directory",
		},
		"read a directory": {
			task:    Task{CommandType: "read", Payload: readPayload(t, ReadPayload{Path: dir})},
			wantErr: "read " + dir + ": is a directory",
		},
		"read without path": {
			task:    Task{CommandType: "read", Payload: json.RawMessage(`{}`)},
			wantErr: "invalid payload: path is required",
		},
		"read with a negative maxBytes": {
			task:    Task{CommandType: "read", Payload: readPayload(t, ReadPayload{Path: hello, MaxBytes: -1})},
			wantErr: "invalid payload: maxBytes must not be negative, got -1",
		},
		"read with an unknown payload field": {
			task:    Task{CommandType: "read", Payload: json.RawMessage(`{"file":"/etc/hosts"}`)},
			wantErr: `invalid payload: json: unknown field "file"`,
		},
		"unknown command type": {
			task:    Task{CommandType: "teleport"},
			wantErr: `no executor for command type "teleport"`,
		},
		"bash without command": {
			task:    Task{CommandType: "bash", Payload: json.RawMessage(`{}`)},
			wantErr: "invalid payload: command is required",
		},
		"unknown payload field": {
			task:    Task{CommandType: "bash", Payload: json.RawMessage(`{"cmd":"ls"}`)},
			wantErr: `invalid payload: json: unknown field "cmd"`,
		},
		"missing program": {
			task:    Task{CommandType: "exec", Payload: payload(t, ProcessPayload{Args: []string{"/nonexistent/tool"}})},
			wantErr: "start /nonexistent/tool",
		},
	}
	r := NewRegistry(64)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := r.Run(context.Background(), tc.task)
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
}

func TestCancelStopsTheProcessGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	var out Output
	go func() {
		var err error
		out, err = NewRegistry(1024).Run(ctx, Task{CommandType: "bash", Payload: payload(t, ProcessPayload{
			// The background child must die with the shell.
			Command: "sleep 300 & echo $! > " + pidFile + "; echo started; wait",
		})})
		done <- err
	}()

	var pid int
	for pid == 0 {
		select {
		case err := <-done:
			t.Fatalf("process ended before it was cancelled: %v", err)
		default:
		}
		if b, err := os.ReadFile(pidFile); err == nil && len(strings.TrimSpace(string(b))) > 0 {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		time.Sleep(10 * time.Millisecond)
	}
	cause := errors.New("task timed out")
	cancel(cause)
	err := <-done
	if !errors.Is(err, cause) {
		t.Fatalf("error = %v, want it to wrap %v", err, cause)
	}
	if out.ExitCode != -1 || out.Success {
		t.Errorf("output = %+v, want exit code -1 and no success", out)
	}
	// The child is reaped by init once killed; give it a moment to go.
	for i := 0; i < 100; i++ {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("child process %d of the cancelled shell is still alive", pid)
}

func TestCommandTypes(t *testing.T) {
	r := NewRegistry(0)
	r.Register("noop", ExecutorFunc(func(context.Context, json.RawMessage) (Output, error) {
		return Output{Success: true}, nil
	}))
	if diff := cmp.Diff([]string{"bash", "exec", "noop", "read"}, r.CommandTypes()); diff != "" {
		t.Errorf("command types (-want,+got):\n%s", diff)
	}
}
