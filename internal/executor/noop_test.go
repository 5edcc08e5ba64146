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
	"testing"
)

func TestNoopExecutor(t *testing.T) {
	// A task root that cannot be made: a noop task needs none.
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := NewSandboxedRegistry(0, Sandbox{Root: filepath.Join(blocker, "tasks")})
	r.Register(NoopCommandType, NoopExecutor{})
	out, err := r.Run(t.Context(), Task{CommandType: NoopCommandType, Payload: json.RawMessage(`{"ignored":true}`)})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !out.Success {
		t.Errorf("Success = false, want true")
	}
	got, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "{}" {
		t.Errorf("reported output = %s, want {}", got)
	}

	stopped, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := (NoopExecutor{}).Execute(stopped, nil); !errors.Is(err, ErrNotStarted) {
		t.Errorf("Execute after the stop: error %v, want one wrapping ErrNotStarted", err)
	}
}
