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
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// envOf parses the output of env into a map.
func envOf(t *testing.T, stdout string) map[string]string {
	t.Helper()
	env := map[string]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(stdout), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("env printed %q", line)
		}
		env[k] = v
	}
	return env
}

// A task's environment holds PATH, HOME, TMPDIR, the declared variables and
// its payload's, and nothing of the worker's.
func TestSandboxEnvironment(t *testing.T) {
	t.Setenv("AGENTLANE_WORKER_SECRET", "s3cret")
	t.Setenv("KUBECONFIG", "/home/worker/.kube/config")
	root := t.TempDir()
	r := NewSandboxedRegistry(0, Sandbox{Root: root, Env: []string{"DECLARED=yes", "OVERRIDDEN=declared"}})
	cases := map[string]struct {
		task Task
		// extra are the variables the program itself adds.
		extra map[string]string
	}{
		"exec env": {
			task:  Task{CommandType: "exec", Payload: payload(t, ProcessPayload{Args: []string{"env"}, Env: map[string]string{"FROM_PAYLOAD": "1", "OVERRIDDEN": "payload"}})},
			extra: map[string]string{},
		},
		"bash env": {
			task:  Task{CommandType: "bash", Payload: payload(t, ProcessPayload{Command: "env", Env: map[string]string{"FROM_PAYLOAD": "1", "OVERRIDDEN": "payload"}})},
			extra: map[string]string{"PWD": "", "SHLVL": "", "_": ""}, // set by the shell
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := r.Run(context.Background(), tc.task)
			if err != nil || !out.Success {
				t.Fatalf("run: %v, %+v", err, out)
			}
			env := envOf(t, out.Stdout)
			home := env["HOME"]
			if filepath.Dir(home) != root {
				t.Errorf("HOME = %q, want a directory of its own in %s", home, root)
			}
			for k := range tc.extra {
				delete(env, k)
			}
			want := map[string]string{
				"PATH": DefaultPath, "HOME": home, "TMPDIR": home,
				"DECLARED": "yes", "OVERRIDDEN": "payload", "FROM_PAYLOAD": "1",
			}
			if diff := cmp.Diff(want, env); diff != "" {
				t.Errorf("environment (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestSandboxWorkingDir(t *testing.T) {
	root := t.TempDir()
	r := NewSandboxedRegistry(0, Sandbox{Root: root})
	cases := map[string]struct {
		workingDir string
		wantSuffix string
		wantErr    string
	}{
		"the attempt's directory by default":  {wantSuffix: ""},
		"a relative directory is made inside": {workingDir: "src/app", wantSuffix: "/src/app"},
		"an absolute directory is refused": {
			workingDir: os.TempDir(),
			wantErr:    `invalid payload: workingDir "` + os.TempDir() + `" must be relative to the task directory and stay inside it`,
		},
		"a parent directory is refused":     {workingDir: "..", wantErr: "invalid payload: workingDir \"..\""},
		"a path that climbs out is refused": {workingDir: "src/../../other", wantErr: "invalid payload: workingDir \"src/../../other\""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := r.Run(context.Background(), Task{CommandType: "bash", Payload: payload(t, ProcessPayload{
				Command: `printf '%s\n%s' "$(pwd)" "$HOME"`, WorkingDir: tc.workingDir,
			})})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			pwd, home, _ := strings.Cut(out.Stdout, "\n")
			if filepath.Dir(home) != root || pwd != home+tc.wantSuffix {
				t.Errorf("pwd %q, HOME %q: want HOME in %s and pwd HOME%s", pwd, home, root, tc.wantSuffix)
			}
		})
	}
}

// A read in a sandbox reads the attempt's directory and nothing outside it,
// whichever way the path points out.
func TestSandboxRead(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	writeFile(t, dir, "inside.txt", "inside")
	secret := writeFile(t, outside, "token", "secret")
	for link, target := range map[string]string{"out-link": secret, "dir-link": outside, "in-link": "inside.txt"} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	rel, err := filepath.Rel(dir, secret)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		path    string
		want    string
		wantErr string
	}{
		"a file inside":                           {path: "inside.txt", want: "inside"},
		"a link to a file inside":                 {path: "in-link", want: "inside"},
		"an absolute path outside":                {path: secret, wantErr: `invalid payload: path "` + secret + `" must be relative to the task directory`},
		"a relative path that climbs out":         {path: rel, wantErr: `invalid payload: path "` + rel + `" must be relative to the task directory`},
		"a link to a file outside":                {path: "out-link", wantErr: "read out-link: path escapes from parent"},
		"a file under a link to a dir outside":    {path: "dir-link/token", wantErr: "read dir-link/token: path escapes from parent"},
		"a file missing inside":                   {path: "missing", wantErr: "read missing: no such file or directory"},
		"the service-account token of a pod":      {path: "/var/run/secrets/kubernetes.io/serviceaccount/token", wantErr: "invalid payload"},
		"a read that names the attempt directory": {path: dir + "/inside.txt", wantErr: "invalid payload"},
	}
	ctx := WithAttempt(context.Background(), Attempt{Dir: dir})
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := (&ReadExecutor{}).Execute(ctx, readPayload(t, ReadPayload{Path: tc.path}))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v (output %s), want it to contain %q", err, out.Result, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			var got ReadOutput
			if err := json.Unmarshal(out.Result, &got); err != nil {
				t.Fatal(err)
			}
			if got.Content != tc.want {
				t.Errorf("content = %q, want %q", got.Content, tc.want)
			}
		})
	}

	t.Run("through a sandboxed registry", func(t *testing.T) {
		r := NewSandboxedRegistry(0, Sandbox{Root: t.TempDir()})
		_, err := r.Run(context.Background(), Task{CommandType: "read", Payload: readPayload(t, ReadPayload{Path: secret})})
		if err == nil || !strings.Contains(err.Error(), "invalid payload") {
			t.Fatalf("error = %v, want an invalid payload", err)
		}
	})
}

// Each attempt gets a fresh directory of its own, 0700, that is gone when
// the attempt ends, also when the task made it hard to remove.
func TestSandboxAttemptDirectories(t *testing.T) {
	root := filepath.Join(t.TempDir(), "tasks") // made by the first attempt
	r := NewSandboxedRegistry(0, Sandbox{Root: root})
	var seen []string
	r.Register("probe", ExecutorFunc(func(ctx context.Context, _ json.RawMessage) (Output, error) {
		a, ok := AttemptFrom(ctx)
		if !ok {
			return Output{}, errors.New("no attempt")
		}
		info, err := os.Stat(a.Dir)
		if err != nil {
			return Output{}, err
		}
		if info.Mode().Perm() != 0o700 || filepath.Dir(a.Dir) != root {
			t.Errorf("attempt directory %s has mode %v, want 0700 in %s", a.Dir, info.Mode().Perm(), root)
		}
		entries, err := os.ReadDir(a.Dir)
		if err != nil || len(entries) != 0 {
			t.Errorf("attempt directory %s holds %v (%v), want it empty", a.Dir, entries, err)
		}
		// What the task leaves behind, some of it read-only.
		if err := os.MkdirAll(filepath.Join(a.Dir, "a", "b"), 0o700); err != nil {
			return Output{}, err
		}
		writeFile(t, filepath.Join(a.Dir, "a", "b"), "f", "x")
		if err := os.Chmod(filepath.Join(a.Dir, "a", "b"), 0o500); err != nil {
			return Output{}, err
		}
		if err := os.Chmod(filepath.Join(a.Dir, "a"), 0o500); err != nil {
			return Output{}, err
		}
		seen = append(seen, a.Dir)
		return Output{Success: true}, nil
	}))
	for range 2 {
		if _, err := r.Run(context.Background(), Task{CommandType: "probe"}); err != nil {
			t.Fatalf("run: %v", err)
		}
	}
	if len(seen) != 2 || seen[0] == seen[1] {
		t.Fatalf("attempt directories %v, want two distinct ones", seen)
	}
	for _, d := range seen {
		if _, err := os.Lstat(d); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("attempt directory %s is still there after the attempt (%v)", d, err)
		}
	}
}

func TestParseEnv(t *testing.T) {
	cases := map[string]struct {
		items   []string
		want    []string
		wantErr []string
	}{
		"repeated and comma-separated": {
			items: []string{"A=1", "B=x=y, C=", ""},
			want:  []string{"A=1", "B=x=y", "C="},
		},
		"invalid items are all reported": {
			items:   []string{"NOVALUE", "1X=1", "A-B=2", "=3", "OK=1"},
			wantErr: []string{`"NOVALUE" is not NAME=VALUE`, `invalid variable name "1X"`, `invalid variable name "A-B"`, `invalid variable name ""`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseEnv(tc.items)
			if len(tc.wantErr) > 0 {
				for _, w := range tc.wantErr {
					if err == nil || !strings.Contains(err.Error(), w) {
						t.Errorf("error = %v, want it to contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("env (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestSandboxRefusesInvalidPayloadEnv(t *testing.T) {
	r := NewSandboxedRegistry(0, Sandbox{Root: t.TempDir()})
	_, err := r.Run(context.Background(), Task{CommandType: "bash", Payload: payload(t, ProcessPayload{
		Command: "true", Env: map[string]string{"BAD NAME": "x"},
	})})
	if err == nil || !strings.Contains(err.Error(), `invalid payload: env: invalid variable name "BAD NAME"`) {
		t.Fatalf("error = %v, want an invalid payload naming the variable", err)
	}
}
