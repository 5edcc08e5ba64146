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

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentlane/agentlane/internal/agentscript"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

const sample = "../../config/samples/scripts/agent-script.yaml"

// envMap stands in for the process environment.
type envMap map[string]string

func (e envMap) get(name string) string { return e[name] }

// noEnv is an empty environment.
var noEnv = envMap(nil).get

func TestParseFlags(t *testing.T) {
	base := []string{"--server", "http://127.0.0.1:8443", "--session", "s1", "--script", "s.yaml"}
	pod := envMap{
		sessionapi.EnvSessionAPIURL:       "https://session-api:8443",
		sessionapi.EnvNamespace:           "team-a",
		sessionapi.EnvSession:             "s9",
		sessionapi.EnvPodName:             "s9-x7k2p",
		sessionapi.EnvSessionAPITokenFile: "/run/token",
		sessionapi.EnvSessionAPICAFile:    "/run/ca.crt",
	}
	resumed := envMap{sessionapi.EnvResumeRunID: "01jrun"}
	cases := map[string]struct {
		args    []string
		env     envMap
		want    func(o options) bool
		wantErr string
	}{
		"defaults": {
			args: base,
			want: func(o options) bool {
				return o.mode == modeScript && o.namespace == "default" && o.report == "-" && o.turns == 0 &&
					o.pod == "" && !o.resume
			},
		},
		"defaults from a runtime pod's environment": {
			args: []string{"--script", "s.yaml"},
			env:  pod,
			want: func(o options) bool {
				return o.server == "https://session-api:8443" && o.namespace == "team-a" && o.session == "s9" &&
					o.pod == "s9-x7k2p" && o.resume && o.tokenFile == "/run/token" && o.caFile == "/run/ca.crt"
			},
		},
		"a token given on the command line wins over the pod's token file": {
			args: append([]string{"--token", "x"}, base...),
			env:  pod,
			want: func(o options) bool { return o.token == "x" && o.tokenFile == "" && o.caFile == "/run/ca.crt" },
		},
		"flags win over the environment": {
			args: append([]string{"--namespace", "team-b", "--pod", "p"}, base...),
			env:  pod,
			want: func(o options) bool {
				return o.server == "http://127.0.0.1:8443" && o.namespace == "team-b" && o.session == "s1" && o.pod == "p"
			},
		},
		"a pod created after a checkpoint resumes": {
			args: base,
			env:  resumed,
			want: func(o options) bool { return o.resume },
		},
		"resume turned off": {
			args: append([]string{"--resume=false"}, base...),
			env:  resumed,
			want: func(o options) bool { return !o.resume },
		},
		"serve with turns": {
			args: append([]string{"--mode", "serve", "--turns", "3", "--token-file", "/t"}, base...),
			want: func(o options) bool { return o.mode == modeServe && o.turns == 3 && o.tokenFile == "/t" },
		},
		"a warm pod waits for its session": {
			args: []string{"--script", "s.yaml"},
			env: envMap{sessionapi.EnvSessionAPIURL: "https://session-api:8443", sessionapi.EnvNamespace: "team-a",
				sessionapi.EnvWarmPool: "pool-a", sessionapi.EnvPodName: "pool-a-warm-x"},
			want: func(o options) bool {
				return o.session == "" && o.warmPool == "pool-a" && o.namespace == "team-a" && o.resume
			},
		},
		"missing required flags": {
			args:    nil,
			wantErr: "--server is required\n--session is required\n--script is required",
		},
		"unknown mode": {
			args:    append([]string{"--mode", "batch"}, base...),
			wantErr: `--mode must be script or serve, got "batch"`,
		},
		"turns in script mode": {
			args:    append([]string{"--turns", "2"}, base...),
			wantErr: "--turns applies to --mode=serve only",
		},
		"negative turns": {
			args:    append([]string{"--mode", "serve", "--turns", "-1"}, base...),
			wantErr: "--turns must not be negative, got -1",
		},
		"token and token file": {
			args:    append([]string{"--token", "x", "--token-file", "/t"}, base...),
			wantErr: "--token and --token-file cannot both be set",
		},
		"stray argument": {
			args:    append(base, "extra"),
			wantErr: `unexpected arguments: ["extra"]`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o, err := parseFlags(tc.args, io.Discard, tc.env.get)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if !tc.want(o) {
				t.Errorf("options = %+v", o)
			}
		})
	}
}

// closedServer returns the URL of a local port nothing listens on.
func closedServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return url
}

func TestRunExitCodes(t *testing.T) {
	dir := t.TempDir()
	invalid := filepath.Join(dir, "invalid.yaml")
	if err := os.WriteFile(invalid, []byte("turns: [{steps: [{type: read, parallel: []}]}]"), 0o600); err != nil {
		t.Fatal(err)
	}
	server := closedServer(t)
	cases := map[string]struct {
		args       []string
		wantCode   int
		wantStderr string
	}{
		"bad flag": {
			args:       []string{"--mode", "batch"},
			wantCode:   exitInvalid,
			wantStderr: "--mode must be script or serve",
		},
		"missing script": {
			args:       []string{"--server", server, "--session", "s", "--script", filepath.Join(dir, "none.yaml")},
			wantCode:   exitInvalid,
			wantStderr: "agent: --script: open " + filepath.Join(dir, "none.yaml"),
		},
		"invalid script": {
			args:       []string{"--server", server, "--session", "s", "--script", invalid},
			wantCode:   exitInvalid,
			wantStderr: "agent: --script: " + invalid + ": turns[0].steps[0]: a step is either a command (type) or a parallel group",
		},
		"bad server URL": {
			args:       []string{"--server", "localhost:8443", "--session", "s", "--script", sample},
			wantCode:   exitInvalid,
			wantStderr: "agent: --server:",
		},
		"server unreachable": {
			args:       []string{"--server", server, "--session", "s", "--script", sample, "--zap-log-level", "error"},
			wantCode:   exitFailed,
			wantStderr: "commands did not finish",
		},
		"serve with the server unreachable": {
			args:       []string{"--server", server, "--session", "s", "--script", sample, "--mode", "serve", "--zap-log-level", "error"},
			wantCode:   exitFailed,
			wantStderr: "open the event stream",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tc.args, noEnv, &stdout, &stderr)
			if code != tc.wantCode || !strings.Contains(stderr.String(), tc.wantStderr) {
				t.Fatalf("exit code %d, stderr %q; want %d and a stderr containing %q", code, stderr.String(), tc.wantCode, tc.wantStderr)
			}
		})
	}
}

// The report is written even when the run failed, and says how each
// command ended.
func TestRunWritesTheReport(t *testing.T) {
	path := filepath.Join(t.TempDir(), "report.json")
	args := []string{"--server", closedServer(t), "--session", "s", "--script", sample, "--report", path, "--zap-log-level", "error"}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), args, noEnv, &stdout, &stderr); code != exitFailed {
		t.Fatalf("exit code %d, want %d; stderr %q", code, exitFailed, stderr.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout = %q, want nothing: the report goes to --report", stdout.String())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep agentscript.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatalf("report is not JSON: %v", err)
	}
	script, err := agentscript.Load(sample)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Turns) != len(script.Turns) {
		t.Fatalf("report has %d turns, want one per script turn (%d)", len(rep.Turns), len(script.Turns))
	}
	first := rep.Turns[0]
	if first.RunID == "" || len(first.Commands) == 0 || first.Commands[0].Type != "llm" || first.Commands[0].Error == "" {
		t.Errorf("first turn = %+v, want a run ID and the failed llm call first", first)
	}
}

// A warm pod's agent calls nothing of a session before its assignment,
// then runs as the assigned session.
func TestRunWarmPodWaitsForItsAssignment(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	assignments := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		paths = append(paths, r.URL.Path)
		if r.URL.Path == "/v1/namespaces/team-a/runtime/assignment" {
			if assignments++; assignments == 1 {
				w.WriteHeader(http.StatusNoContent)
				return
			}
			_ = json.NewEncoder(w).Encode(sessionapi.Assignment{Namespace: "team-a", Session: "s7"})
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_ = json.NewEncoder(w).Encode(sessionapi.Error{Code: sessionapi.CodeForbidden, Message: "not in this test"})
	}))
	defer srv.Close()
	env := envMap{sessionapi.EnvNamespace: "team-a", sessionapi.EnvWarmPool: "pool-a"}
	args := []string{"--server", srv.URL, "--script", sample, "--mode", "serve", "--zap-log-level", "error"}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), args, env.get, &stdout, &stderr); code != exitFailed {
		t.Fatalf("exit code %d, want %d (the session's calls refused); stderr %q", code, exitFailed, stderr.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(paths) < 3 || paths[0] != paths[1] || !strings.HasSuffix(paths[1], "/runtime/assignment") {
		t.Fatalf("calls %q: want two assignment calls first", paths)
	}
	for _, p := range paths[2:] {
		if !strings.HasPrefix(p, "/v1/namespaces/team-a/sessions/s7/") {
			t.Errorf("call %q after the assignment: want the assigned session's routes only", p)
		}
	}
}
