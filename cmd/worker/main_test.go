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
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestParseFlags(t *testing.T) {
	env := map[string]string{"POD_NAME": "pod-1", "NODE_NAME": "node-a", "POD_NAMESPACE": "agents", "JOB_NAME": "job-1"}
	defaults := options{
		name: "pod-1", nodeName: "node-a", namespace: "agents", jobName: "job-1",
		capacity: 4, heartbeat: 5 * time.Second, gracePeriod: 25 * time.Second, waitTimeout: 10 * time.Minute,
		maxOutputSize: 64 * 1024, metricsAddr: "0", metricsSecure: true,
	}
	cases := map[string]struct {
		args    []string
		env     map[string]string
		want    options
		wantErr []string
	}{
		"defaults from the pod's environment": {env: env, want: defaults},
		"host name and default namespace without a pod environment": {
			env: map[string]string{},
			want: func() options {
				o := defaults
				o.name, o.nodeName, o.namespace, o.jobName = "host-1", "", "default", ""
				return o
			}(),
		},
		"every flag": {
			env: env,
			args: []string{"--name=w1", "--node-name=node-b", "--namespace=ns", "--queues= q1, q2 ,", "--lanes=tools",
				"--labels=gpu=a100,zone=z1", "--capacity=8", "--heartbeat-interval=2s", "--grace-period=0s",
				"--task=t1", "--job-name=job-9", "--wait-timeout=1m", "--max-output-bytes=10", "--metrics-bind-address=:8080",
				"--metrics-secure=false"},
			want: options{
				name: "w1", nodeName: "node-b", namespace: "ns", queues: []string{"q1", "q2"}, lanes: []string{"tools"},
				labels: map[string]string{"gpu": "a100", "zone": "z1"}, capacity: 8, heartbeat: 2 * time.Second,
				oneShotTask: "t1", jobName: "job-9", waitTimeout: time.Minute, maxOutputSize: 10, metricsAddr: ":8080",
			},
		},
		"invalid settings are all reported": {
			env: env,
			args: []string{"--name=", "--namespace=", "--capacity=0", "--heartbeat-interval=0s", "--grace-period=-1s",
				"--wait-timeout=0s", "--max-output-bytes=0"},
			wantErr: []string{"--name is required", "--namespace is required", "--capacity must be at least 1, got 0",
				"--heartbeat-interval must be positive", "--grace-period must not be negative", "--wait-timeout must be positive",
				"--max-output-bytes must be at least 1"},
		},
		"malformed labels": {
			env: env, args: []string{"--labels=gpu"},
			wantErr: []string{"--labels: invalid selector"},
		},
		"stray arguments": {
			env: env, args: []string{"run"},
			wantErr: []string{`unexpected arguments: ["run"]`},
		},
		"unknown flag": {
			env: env, args: []string{"--workers=3"},
			wantErr: []string{"flag provided but not defined: -workers"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := parseFlags(tc.args, func(k string) string { return tc.env[k] }, "host-1", io.Discard)
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("no error, want one containing %q", tc.wantErr)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(options{}), cmpopts.IgnoreFields(options{}, "zap")); diff != "" {
				t.Errorf("options (-want,+got):\n%s", diff)
			}
		})
	}
}
