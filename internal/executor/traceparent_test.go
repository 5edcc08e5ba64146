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
	"testing"
)

// A traced task's environment holds its TRACEPARENT, which its payload
// cannot replace, and nothing more of the worker's: not the worker's own
// OTLP headers (a collector's token) nor its credentials.
func TestSandboxTraceparent(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer collector-token")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")
	t.Setenv("KUBECONFIG", "/home/worker/.kube/config")
	t.Setenv(TraceparentEnv, "00-11111111111111111111111111111111-2222222222222222-01")
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	root := t.TempDir()
	r := NewSandboxedRegistry(0, Sandbox{Root: root})
	cases := map[string]struct {
		traceparent string
		payloadEnv  map[string]string
		want        string
	}{
		"traced":                    {traceparent: tp, want: tp},
		"traced, payload sets it":   {traceparent: tp, payloadEnv: map[string]string{TraceparentEnv: "forged"}, want: tp},
		"untraced":                  {},
		"untraced, payload sets it": {payloadEnv: map[string]string{TraceparentEnv: "own"}, want: "own"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			for _, typ := range []string{"bash", "exec"} {
				pl := ProcessPayload{Command: "env", Env: tc.payloadEnv}
				if typ == "exec" {
					pl = ProcessPayload{Args: []string{"env"}, Env: tc.payloadEnv}
				}
				out, err := r.Run(context.Background(), Task{CommandType: typ, Payload: payload(t, pl), Traceparent: tc.traceparent})
				if err != nil || !out.Success {
					t.Fatalf("%s: %v, %+v", typ, err, out)
				}
				env := envOf(t, out.Stdout)
				got, ok := env[TraceparentEnv]
				if got != tc.want || ok != (tc.want != "") {
					t.Errorf("%s: %s = %q (set %v), want %q", typ, TraceparentEnv, got, ok, tc.want)
				}
				for k := range env {
					switch k {
					case "PATH", "HOME", "TMPDIR", TraceparentEnv, "PWD", "SHLVL", "_":
					default:
						t.Errorf("%s: the task sees %s", typ, k)
					}
				}
			}
		})
	}
}
