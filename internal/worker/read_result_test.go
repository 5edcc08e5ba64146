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

package worker

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentlane/agentlane/internal/executor"
)

func jsonPayload(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The result a worker reports for a read carries the read's JSON, and a
// failed read carries its error and no output, like a program that could not
// start; process results keep their own fields.
func TestReadTaskResult(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.txt")
	if err := os.WriteFile(path, []byte("alpha"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := executor.NewRegistry(0)
	run := func(task executor.Task) string {
		t.Helper()
		out, err := r.Run(context.Background(), task)
		got, mErr := json.Marshal(taskResult(out, err))
		if mErr != nil {
			t.Fatal(mErr)
		}
		return string(got)
	}
	cases := map[string]struct {
		task executor.Task
		want string
	}{
		"read": {
			task: executor.Task{CommandType: "read", Payload: jsonPayload(t, executor.ReadPayload{Path: path})},
			want: `{"success":true,"result":{"content":"alpha","bytes":5,"truncated":false},"exitCode":0}`,
		},
		"missing file": {
			task: executor.Task{CommandType: "read", Payload: jsonPayload(t, executor.ReadPayload{Path: filepath.Join(dir, "b.txt")})},
			want: `{"success":false,"error":"read ` + filepath.Join(dir, "b.txt") + `: no such file or directory"}`,
		},
		"bash": {
			task: executor.Task{CommandType: "bash", Payload: jsonPayload(t, executor.ProcessPayload{Command: "echo hi"})},
			want: `{"success":true,"result":{"exitCode":0,"stdout":"hi\n"},"exitCode":0}`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, run(tc.task)); diff != "" {
				t.Errorf("task result (-want,+got):\n%s", diff)
			}
		})
	}
}
