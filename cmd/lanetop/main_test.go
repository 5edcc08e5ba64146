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
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseFlags(t *testing.T) {
	cases := map[string]struct {
		args    []string
		want    options
		wantErr string
	}{
		"defaults": {
			want: options{view: viewDashboard, interval: time.Second},
		},
		"all flags": {
			args: []string{"--kubeconfig=/k", "--context=c", "--namespace=team-a", "--view=strip", "--interval=250ms",
				"--once", "--headless", "--task=team-a/t1", "--width=80"},
			want: options{kubeconfig: "/k", context: "c", namespace: "team-a", view: viewStrip, interval: 250 * time.Millisecond,
				once: true, headless: true, task: "team-a/t1", width: 80},
		},
		"-n is --namespace": {
			args: []string{"-n", "team-b"},
			want: options{namespace: "team-b", view: viewDashboard, interval: time.Second},
		},
		"-A is --all-namespaces": {
			args: []string{"-A"},
			want: options{allNamespaces: true, view: viewDashboard, interval: time.Second},
		},
		"-A and -n":          {args: []string{"-A", "-n", "x"}, wantErr: "--all-namespaces and --namespace exclude each other"},
		"unknown view":       {args: []string{"--view=table"}, wantErr: `--view must be strip or dashboard, got "table"`},
		"interval too short": {args: []string{"--interval=10ms"}, wantErr: "--interval must be at least 100ms, got 10ms"},
		"negative width":     {args: []string{"--width=-1"}, wantErr: "--width must not be negative, got -1"},
		"stray argument":     {args: []string{"dashboard"}, wantErr: `unexpected arguments: ["dashboard"]`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := parseFlags(tc.args, &bytes.Buffer{})
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(options{})); diff != "" {
				t.Errorf("options (-want,+got):\n%s", diff)
			}
		})
	}
}
