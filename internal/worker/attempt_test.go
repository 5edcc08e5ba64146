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
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/executor"
	"github.com/agentlane/agentlane/internal/truncate"
)

func TestTaskResult(t *testing.T) {
	cases := map[string]struct {
		out  executor.Output
		err  error
		want agentlanev1alpha1.TaskResult
	}{
		"success": {
			out: executor.Output{Success: true, Stdout: "hi\n"},
			want: agentlanev1alpha1.TaskResult{
				Success: true, ExitCode: ptr.To[int32](0),
				Result: &runtime.RawExtension{Raw: []byte(`{"exitCode":0,"stdout":"hi\n"}`)},
			},
		},
		"non-zero exit": {
			out: executor.Output{ExitCode: 3, Stderr: "oops\n", Error: "exit code 3: oops"},
			want: agentlanev1alpha1.TaskResult{
				Error: "exit code 3: oops", ExitCode: ptr.To[int32](3),
				Result: &runtime.RawExtension{Raw: []byte(`{"exitCode":3,"stdout":"","stderr":"oops\n"}`)},
			},
		},
		"truncated output": {
			out: executor.Output{Success: true, Stdout: "xx", Truncated: true},
			want: agentlanev1alpha1.TaskResult{
				Success: true, ExitCode: ptr.To[int32](0),
				Result: &runtime.RawExtension{Raw: []byte(`{"exitCode":0,"stdout":"xx","truncated":true}`)},
			},
		},
		"stopped process": {
			out: executor.Output{ExitCode: -1, Stdout: "partial"},
			err: errors.New("process stopped: attempt timed out after 1s"),
			want: agentlanev1alpha1.TaskResult{
				Error: "process stopped: attempt timed out after 1s", ExitCode: ptr.To[int32](-1),
				Result: &runtime.RawExtension{Raw: []byte(`{"exitCode":-1,"stdout":"partial"}`)},
			},
		},
		"nothing ran": {
			err:  errors.New(`no executor for command type "teleport"`),
			want: agentlanev1alpha1.TaskResult{Error: `no executor for command type "teleport"`},
		},
		"failure without a message": {
			out: executor.Output{},
			want: agentlanev1alpha1.TaskResult{
				Error: "the command failed without an error message", ExitCode: ptr.To[int32](0),
				Result: &runtime.RawExtension{Raw: []byte(`{"exitCode":0,"stdout":""}`)},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, taskResult(tc.out, tc.err)); diff != "" {
				t.Errorf("result (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestTruncateRunes(t *testing.T) {
	cases := map[string]struct {
		s    string
		n    int
		want string
	}{
		"short":             {s: "abc", n: 5, want: "abc"},
		"cut":               {s: "abcdef", n: 3, want: "abc"},
		"multi-byte kept":   {s: "ééé", n: 3, want: "ééé"},
		"multi-byte cut":    {s: "éééé", n: 2, want: "éé"},
		"long error is cut": {s: strings.Repeat("x", maxResultError+10), n: maxResultError, want: strings.Repeat("x", maxResultError)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, truncate.Runes(tc.s, tc.n, "")); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}
