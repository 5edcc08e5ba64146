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
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// configuredRegistry is a sandboxed registry under a temporary root with the
// declared executors.
func configuredRegistry(t *testing.T, decls ...string) (*Registry, string) {
	t.Helper()
	configs, err := ParseExecutors(decls)
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(t.TempDir(), "tasks")
	r := NewSandboxedRegistry(0, Sandbox{Root: root, Env: []string{"DECLARED=yes"}})
	r.RegisterConfigured(configs, 0)
	return r, root
}

func TestConfiguredExecutorRunsItsCommandLineWithThePayloadOnStdin(t *testing.T) {
	r, _ := configuredRegistry(t, "wordcount=wc -w", "echo=cat")
	if diff := cmp.Diff([]string{"bash", "echo", "exec", "read", "wordcount"}, r.CommandTypes()); diff != "" {
		t.Errorf("command types (-want,+got):\n%s", diff)
	}
	out, err := r.Run(context.Background(), Task{CommandType: "wordcount", Payload: json.RawMessage(`{"text":"one two three four"}`)})
	if err != nil || !out.Success || strings.TrimSpace(out.Stdout) != "4" {
		t.Fatalf("wordcount = %+v, %v; want success with 4 words", out, err)
	}
	// The payload is input, never part of the command line.
	hostile := `{"text":"$(touch pwned); ` + "`touch pwned`" + `"}`
	out, err = r.Run(context.Background(), Task{CommandType: "echo", Payload: json.RawMessage(hostile)})
	if err != nil || out.Stdout != hostile {
		t.Fatalf("echo = %+v, %v; want the payload back unchanged", out, err)
	}
	if _, err := os.Stat("pwned"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the payload ran as a command: %v", err)
	}
}

func TestConfiguredExecutorSeesOnlyTheSandbox(t *testing.T) {
	t.Setenv("AGENTLANE_WORKER_SECRET", "token-of-the-worker")
	r, root := configuredRegistry(t, "printenv=env; pwd")
	out, err := r.Run(context.Background(), Task{CommandType: "printenv"})
	if err != nil || !out.Success {
		t.Fatalf("printenv = %+v, %v", out, err)
	}
	lines := strings.Split(strings.TrimSpace(out.Stdout), "\n")
	dir := lines[len(lines)-1]
	env := envOf(t, strings.Join(lines[:len(lines)-1], "\n"))
	if _, ok := env["AGENTLANE_WORKER_SECRET"]; ok || strings.Contains(out.Stdout, "token-of-the-worker") {
		t.Errorf("the worker's variable reached the executor: %s", out.Stdout)
	}
	if env[CommandTypeEnv] != "printenv" || env["DECLARED"] != "yes" || env["PATH"] != DefaultPath {
		t.Errorf("environment %v, want the sandbox's with %s=printenv", env, CommandTypeEnv)
	}
	if filepath.Dir(dir) != root || env["HOME"] != dir {
		t.Errorf("ran in %s with HOME %s, want the attempt's directory under %s", dir, env["HOME"], root)
	}
}

func TestConfiguredExecutorFailureAndUnknownType(t *testing.T) {
	r, _ := configuredRegistry(t, "fails=echo broken >&2; exit 3")
	out, err := r.Run(context.Background(), Task{CommandType: "fails"})
	if err != nil || out.Success || out.ExitCode != 3 || out.Stderr != "broken\n" {
		t.Fatalf("fails = %+v, %v; want exit 3 with stderr", out, err)
	}
	_, err = r.Run(context.Background(), Task{CommandType: "translate"})
	if !errors.Is(err, ErrUnknownCommandType) || !strings.Contains(err.Error(), `"translate"`) {
		t.Fatalf("translate = %v, want ErrUnknownCommandType naming it", err)
	}
}

func TestParseExecutors(t *testing.T) {
	cases := map[string]struct {
		items   []string
		want    []ExecutorConfig
		wantErr []string
	}{
		"none": {},
		"trimmed, in order": {
			items: []string{" wordcount = wc -w ", "tools/lint=ruff check --stdin-filename x.py -"},
			want:  []ExecutorConfig{{"wordcount", "wc -w"}, {"tools/lint", "ruff check --stdin-filename x.py -"}},
		},
		"every problem": {
			items: []string{"wc", "=true", "read=cat", "x=", "-x=true", "y=true", "y=false", "z=a\x00b"},
			wantErr: []string{`"wc" is not TYPE=COMMAND LINE`, `"" is not a command type`, "read is a built-in command type",
				"command type x has an empty command line", `"-x" is not a command type`, "command type y is declared twice",
				"the command line of z holds a NUL byte"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseExecutors(tc.items)
			for _, w := range tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v does not contain %q", err, w)
				}
			}
			if len(tc.wantErr) == 0 && err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); len(tc.wantErr) == 0 && diff != "" {
				t.Errorf("configs (-want,+got):\n%s", diff)
			}
		})
	}
}
