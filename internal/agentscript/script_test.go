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

package agentscript

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func dur(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

func TestParse(t *testing.T) {
	cases := map[string]struct {
		in   string
		want Script
	}{
		"YAML with an llm call, a parallel group and commands": {
			in: `
turns:
  - prompt: "fix the failing test"
    llm: {inputTokens: 1200, outputTokens: 300, duration: 150ms}
    steps:
      - parallel:
          - {type: read, payload: {path: /tmp/a.txt}}
          - {type: read, payload: {path: /tmp/b.txt}}
      - {type: bash, payload: {command: "go test ./..."}, timeout: 30s}
      - {type: bash, lane: cron, payload: {command: "git diff"}}
  - llm: {text: done}
`,
			want: Script{Turns: []Turn{
				{
					Prompt: "fix the failing test",
					LLM:    &LLMCall{InputTokens: 1200, OutputTokens: 300, Duration: metav1.Duration{Duration: 150 * time.Millisecond}},
					Steps: []Step{
						{Parallel: []Step{
							{Type: "read", Payload: json.RawMessage(`{"path":"/tmp/a.txt"}`)},
							{Type: "read", Payload: json.RawMessage(`{"path":"/tmp/b.txt"}`)},
						}},
						{Type: "bash", Payload: json.RawMessage(`{"command":"go test ./..."}`), Timeout: dur(30 * time.Second)},
						{Type: "bash", Lane: "cron", Payload: json.RawMessage(`{"command":"git diff"}`)},
					},
				},
				{LLM: &LLMCall{Text: "done"}},
			}},
		},
		"JSON": {
			in: `{"turns": [{"steps": [{"type": "exec", "payload": {"args": ["true"]}}]}]}`,
			want: Script{Turns: []Turn{
				{Steps: []Step{{Type: "exec", Payload: json.RawMessage(`{"args":["true"]}`)}}},
			}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Parse([]byte(tc.in))
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("script (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	cases := map[string]struct {
		in string
		// want are parts of the error, each of which must appear in it.
		want []string
	}{
		"no turns": {
			in:   `turns: []`,
			want: []string{"turns: the script has no turns"},
		},
		"empty document": {
			in:   ``,
			want: []string{"turns: the script has no turns"},
		},
		"empty turn": {
			in:   `turns: [{prompt: hello}]`,
			want: []string{"turns[0]: the turn is empty"},
		},
		"unknown top-level field": {
			in:   `{turn: []}`,
			want: []string{`unknown field "turn"`},
		},
		"unknown turn field": {
			in:   `turns: [{promt: hi, llm: {}}]`,
			want: []string{`turns[0]: json: unknown field "promt"`},
		},
		"unknown llm field": {
			in:   `turns: [{llm: {tokens: 3}}]`,
			want: []string{`turns[0].llm: json: unknown field "tokens"`},
		},
		"unknown step field": {
			in:   `turns: [{llm: {}}, {steps: [{type: read}, {type: bash, cmd: ls}]}]`,
			want: []string{`turns[1].steps[1]: json: unknown field "cmd"`},
		},
		"unknown field in a parallel command": {
			in:   `turns: [{steps: [{parallel: [{type: read}, {type: read, paylod: {}}]}]}]`,
			want: []string{`turns[0].steps[0].parallel[1]: json: unknown field "paylod"`},
		},
		"duplicate field": {
			in:   "turns:\n- steps:\n  - type: read\n    type: bash\n",
			want: []string{"invalid YAML", `key "type" already set`},
		},
		"step with neither type nor parallel": {
			in:   `turns: [{steps: [{type: read}, {timeout: 1s}]}]`,
			want: []string{"turns[0].steps[1]: a step needs either type (one command) or parallel (a group of commands)"},
		},
		"empty step": {
			in:   `turns: [{steps: [{}]}]`,
			want: []string{"turns[0].steps[0]: a step needs either type"},
		},
		"step with both type and parallel": {
			in:   `turns: [{steps: [{type: bash, parallel: [{type: read}]}]}]`,
			want: []string{"turns[0].steps[0]: a step is either a command (type) or a parallel group, not both"},
		},
		"empty parallel group": {
			in:   `turns: [{steps: [{parallel: []}]}]`,
			want: []string{"turns[0].steps[0].parallel: the group is empty"},
		},
		"nested parallel group": {
			in:   `turns: [{steps: [{parallel: [{parallel: [{type: read}]}]}]}]`,
			want: []string{"turns[0].steps[0].parallel[0]: parallel groups do not nest"},
		},
		"parallel command without type": {
			in:   `turns: [{steps: [{parallel: [{type: read}, {payload: {path: /x}}]}]}]`,
			want: []string{"turns[0].steps[0].parallel[1].type: required"},
		},
		"negative llm duration": {
			in:   `turns: [{llm: {duration: -1s}}]`,
			want: []string{"turns[0].llm.duration: must not be negative, got -1s"},
		},
		"negative tokens": {
			in: `turns: [{llm: {inputTokens: -1, outputTokens: -2}}]`,
			want: []string{
				"turns[0].llm.inputTokens: must not be negative, got -1",
				"turns[0].llm.outputTokens: must not be negative, got -2",
			},
		},
		"negative step timeout": {
			in:   `turns: [{llm: {}}, {steps: [{type: bash, timeout: -5s}]}]`,
			want: []string{"turns[1].steps[0].timeout: must not be negative, got -5s"},
		},
		"negative timeout in a parallel command": {
			in:   `turns: [{steps: [{parallel: [{type: read, timeout: -1ms}]}]}]`,
			want: []string{"turns[0].steps[0].parallel[0].timeout: must not be negative"},
		},
		"duration that does not parse": {
			in:   `turns: [{llm: {duration: soon}}]`,
			want: []string{"turns[0].llm:", `invalid duration "soon"`},
		},
		"every problem is reported": {
			in: `turns: [{prompt: a}, {steps: [{}]}, {steps: [{type: read, nope: 1}]}]`,
			want: []string{
				"turns[1].steps[0]: a step needs either type",
				`turns[2].steps[0]: json: unknown field "nope"`,
			},
		},
		"not YAML": {
			in:   "turns: [",
			want: []string{"invalid YAML"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(tc.in))
			if err == nil {
				t.Fatalf("Parse succeeded, want an error containing %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

// Scripts built in Go (tests, benchmarks) get the checks Parse makes.
func TestValidate(t *testing.T) {
	cases := map[string]struct {
		script  Script
		wantErr string
	}{
		"valid": {
			script: Script{Turns: []Turn{{Steps: []Step{{Type: "read"}, {Parallel: []Step{{Type: "read"}, {Type: "bash"}}}}}}},
		},
		"no turns": {
			script:  Script{},
			wantErr: "turns: the script has no turns",
		},
		"nested parallel group": {
			script:  Script{Turns: []Turn{{Steps: []Step{{Parallel: []Step{{Parallel: []Step{{Type: "read"}}}}}}}}},
			wantErr: "turns[0].steps[0].parallel[0]: parallel groups do not nest",
		},
		"parallel group with a timeout": {
			script:  Script{Turns: []Turn{{Steps: []Step{{Timeout: dur(time.Second), Parallel: []Step{{Type: "read"}}}}}}},
			wantErr: "turns[0].steps[0]: a step is either a command (type) or a parallel group, not both",
		},
		"payload that is not JSON": {
			script:  Script{Turns: []Turn{{Steps: []Step{{Type: "read", Payload: json.RawMessage(`{path:`)}}}}},
			wantErr: "turns[0].steps[0].payload: not valid JSON",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := tc.script.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error = %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}

// The sample that the docs point to stays valid.
func TestParseSampleScript(t *testing.T) {
	s, err := Load("../../config/samples/scripts/agent-script.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Turns) == 0 {
		t.Fatal("the sample has no turns")
	}
}

func TestLoadScriptNamesTheFile(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("turns: [{steps: [{}]}]"), 0o600); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		filepath.Join(t.TempDir(), "missing.yaml"): "no such file or directory",
		bad: bad + ": turns[0].steps[0]: a step needs either type",
	} {
		_, err := Load(path)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), want) {
			t.Errorf("Load(%q) error = %v, want it to name the file and contain %q", path, err, want)
		}
	}
}
