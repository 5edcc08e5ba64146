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
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// bashPayload is a bash task's payload with env.
func bashPayload(t *testing.T, command string, env map[string]string) json.RawMessage {
	t.Helper()
	raw, err := json.Marshal(ProcessPayload{Command: command, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestHeartbeatFileProgress: each write to the heartbeat file is a
// heartbeat whose note is the file's last line; the test and the task take
// turns through files, so nothing depends on timing.
func TestHeartbeatFileProgress(t *testing.T) {
	r := NewSandboxedRegistry(0, Sandbox{Root: t.TempDir()})
	syncDir := t.TempDir()
	beats := make(chan string, 16)
	ctx := WithHeartbeat(context.Background(), 20*time.Millisecond, func(p string) { beats <- p })
	cmd := `for i in 1 2 3; do echo "step $i/3" >> "$AGENTLANE_HEARTBEAT_FILE"; while [ ! -e "$SYNC/go$i" ]; do sleep 0.02; done; done`
	done := make(chan Output, 1)
	go func() {
		out, err := r.Run(ctx, Task{CommandType: "bash", Payload: bashPayload(t, cmd, map[string]string{"SYNC": syncDir})})
		if err != nil {
			t.Error(err)
		}
		done <- out
	}()
	for i := 1; i <= 3; i++ {
		select {
		case got := <-beats:
			if want := "step " + string(rune('0'+i)) + "/3"; got != want {
				t.Errorf("heartbeat %d: progress %q, want %q", i, got, want)
			}
		case <-time.After(time.Minute):
			t.Fatalf("no heartbeat %d", i)
		}
		if err := os.WriteFile(filepath.Join(syncDir, "go"+string(rune('0'+i))), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if out := <-done; !out.Success {
		t.Fatalf("task failed: %+v", out)
	}
}

// TestHeartbeatFileFlood: a task that writes its heartbeat file in a tight
// loop gives at most one heartbeat per interval.
func TestHeartbeatFileFlood(t *testing.T) {
	r := NewSandboxedRegistry(0, Sandbox{Root: t.TempDir()})
	syncDir := t.TempDir()
	const interval = 100 * time.Millisecond
	var mu sync.Mutex
	n := 0
	ctx := WithHeartbeat(context.Background(), interval, func(string) { mu.Lock(); n++; mu.Unlock() })
	cmd := `i=0; while [ ! -e "$SYNC/stop" ]; do i=$((i+1)); echo "$i" >> "$AGENTLANE_HEARTBEAT_FILE"; done; echo "$i"`
	start := time.Now()
	done := make(chan Output, 1)
	go func() {
		out, _ := r.Run(ctx, Task{CommandType: "bash", Payload: bashPayload(t, cmd, map[string]string{"SYNC": syncDir})})
		done <- out
	}()
	for {
		mu.Lock()
		got := n
		mu.Unlock()
		if got >= 5 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := os.WriteFile(filepath.Join(syncDir, "stop"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	out := <-done
	elapsed := time.Since(start)
	mu.Lock()
	defer mu.Unlock()
	writes := strings.TrimSpace(out.Stdout)
	// The ticker cannot fire more than once per interval.
	if max := int(elapsed/interval) + 1; n > max {
		t.Errorf("%d heartbeats in %s at one look per %s (the task wrote the file %s times): more than %d", n, elapsed, interval, writes, max)
	}
	t.Logf("%d heartbeats in %s for %s writes of the file", n, elapsed, writes)
}

// TestHeartbeatFileIsNotFollowed: a task that replaces its heartbeat file
// with a link to another file gives no heartbeat and leaks nothing of it.
func TestHeartbeatFileIsNotFollowed(t *testing.T) {
	r := NewSandboxedRegistry(0, Sandbox{Root: t.TempDir()})
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("password\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	syncDir := t.TempDir()
	var mu sync.Mutex
	var notes []string
	ctx := WithHeartbeat(context.Background(), 20*time.Millisecond, func(p string) { mu.Lock(); notes = append(notes, p); mu.Unlock() })
	// The link goes in, then the task writes the secret's file (through
	// the link's target) and waits for several looks at the file.
	cmd := `ln -sf "$SECRET" "$AGENTLANE_HEARTBEAT_FILE"; echo more >> "$SECRET"; for i in $(seq 1 20); do sleep 0.02; done`
	out, err := r.Run(ctx, Task{CommandType: "bash", Payload: bashPayload(t, cmd, map[string]string{"SECRET": secret, "SYNC": syncDir})})
	if err != nil || !out.Success {
		t.Fatalf("task: %+v, %v", out, err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, n := range notes {
		if strings.Contains(n, "password") || strings.Contains(n, "more") {
			t.Errorf("a heartbeat read the link's target: %q", n)
		}
	}
}

// TestNoHeartbeatFileUnlessAsked: without WithHeartbeat a task has no
// heartbeat file, and a payload's own variable of that name is not read.
func TestNoHeartbeatFileUnlessAsked(t *testing.T) {
	r := NewSandboxedRegistry(0, Sandbox{Root: t.TempDir()})
	out, err := r.Run(context.Background(), Task{CommandType: "bash", Payload: bashPayload(t, `echo "[$AGENTLANE_HEARTBEAT_FILE]"`, nil)})
	if err != nil || strings.TrimSpace(out.Stdout) != "[]" {
		t.Errorf("without heartbeats: %+v, %v", out, err)
	}
	ctx := WithHeartbeat(context.Background(), time.Second, func(string) {})
	out, err = r.Run(ctx, Task{CommandType: "bash", Payload: bashPayload(t, `echo "$AGENTLANE_HEARTBEAT_FILE"`, map[string]string{HeartbeatEnv: "/etc/passwd"})})
	if err != nil || !strings.HasSuffix(strings.TrimSpace(out.Stdout), heartbeatFile) {
		t.Errorf("a payload set the heartbeat file: %+v, %v", out, err)
	}
}

// TestHeartbeatThroughTheRunner: a task run in the runner's sandbox gets
// its heartbeat file there, and its heartbeats reach the worker's
// Heartbeat as lines of the run's answer, before the answer.
func TestHeartbeatThroughTheRunner(t *testing.T) {
	served := NewSandboxedRegistry(0, Sandbox{Root: t.TempDir()})
	runner, socket := listenRunner(t, 1<<20)
	startRunner(t, socket, served)
	reg, err := runner.Registry(context.Background(), 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	syncDir := t.TempDir()
	beats := make(chan string, 16)
	ctx := WithHeartbeat(context.Background(), 20*time.Millisecond, func(p string) { beats <- p })
	cmd := `for i in 1 2; do echo "step $i" >> "$AGENTLANE_HEARTBEAT_FILE"; while [ ! -e "$SYNC/go$i" ]; do sleep 0.02; done; done; echo done`
	done := make(chan Output, 1)
	go func() {
		out, err := reg.Run(ctx, Task{CommandType: "bash", Payload: bashPayload(t, cmd, map[string]string{"SYNC": syncDir})})
		if err != nil {
			t.Error(err)
		}
		done <- out
	}()
	for i := 1; i <= 2; i++ {
		select {
		case got := <-beats:
			if want := "step " + string(rune('0'+i)); got != want {
				t.Errorf("heartbeat %d: %q, want %q", i, got, want)
			}
		case <-time.After(time.Minute):
			t.Fatalf("no heartbeat %d through the runner", i)
		}
		if err := os.WriteFile(filepath.Join(syncDir, "go"+string(rune('0'+i))), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if out := <-done; !out.Success || out.Stdout != "done\n" {
		t.Fatalf("run through the runner: %+v", out)
	}

	// Without WithHeartbeat the runner gives no heartbeat file.
	out, err := reg.Run(context.Background(), Task{CommandType: "bash", Payload: bashPayload(t, `echo "[$AGENTLANE_HEARTBEAT_FILE]"`, nil)})
	if err != nil || out.Stdout != "[]\n" {
		t.Errorf("without heartbeats: %+v, %v", out, err)
	}
}
