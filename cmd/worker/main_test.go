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

	"github.com/agentlane/agentlane/internal/executor"
	"github.com/agentlane/agentlane/internal/worker"
)

func TestParseFlags(t *testing.T) {
	env := map[string]string{"POD_NAME": "pod-1", "NODE_NAME": "node-a", "POD_NAMESPACE": "agents", "JOB_NAME": "job-1"}
	defaults := options{
		pool: worker.Options{Name: "pod-1", NodeName: "node-a", Namespace: "agents",
			Capacity: 4, HeartbeatInterval: 5 * time.Second, GracePeriod: 25 * time.Second},
		oneShot:       worker.TaskOptions{JobName: "job-1", WaitTimeout: 10 * time.Minute},
		maxOutputSize: 64 * 1024, metricsAddr: "0",
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
				o.pool.Name, o.pool.NodeName, o.pool.Namespace, o.oneShot.JobName = "host-1", "", "default", ""
				return o
			}(),
		},
		"every flag": {
			env: env,
			args: []string{"--name=w1", "--node-name=node-b", "--namespace=ns", "--queues= q1, q2 ,", "--lanes=tools",
				"--labels=gpu=a100,zone=z1", "--capacity=8", "--heartbeat-interval=2s", "--grace-period=0s",
				"--task=t1", "--job-name=job-9", "--wait-timeout=1m", "--max-output-bytes=10", "--metrics-bind-address=:8080",
				"--task-root=/scratch", "--task-env=LANG=C.UTF-8,GOFLAGS=-mod=mod", "--task-env=HTTP_PROXY=http://proxy:3128",
				"--metrics-secure=false"},
			want: options{
				pool: worker.Options{Name: "w1", NodeName: "node-b", Namespace: "ns", Queues: []string{"q1", "q2"}, Lanes: []string{"tools"},
					Labels: map[string]string{"gpu": "a100", "zone": "z1"}, Capacity: 8, HeartbeatInterval: 2 * time.Second},
				oneShot:       worker.TaskOptions{Task: "t1", JobName: "job-9", WaitTimeout: time.Minute},
				maxOutputSize: 10, metricsAddr: ":8080",
				tasks: taskOptions{
					root:     "/scratch",
					envFlags: stringList{"LANG=C.UTF-8,GOFLAGS=-mod=mod", "HTTP_PROXY=http://proxy:3128"},
					env:      []string{"LANG=C.UTF-8", "GOFLAGS=-mod=mod", "HTTP_PROXY=http://proxy:3128"},
				},
			},
		},
		"tasks in a runner": {
			env:  env,
			args: []string{"--runner-socket=/run/agentlane/runner.sock"},
			want: func() options {
				o := defaults
				o.runnerSocket = "/run/agentlane/runner.sock"
				return o
			}(),
		},
		"task settings belong to the runner when there is one": {
			env:     env,
			args:    []string{"--runner-socket=/run/agentlane/runner.sock", "--task-root=/scratch"},
			wantErr: []string{"--task-root, --task-env and --task-executor belong to the runner when --runner-socket is set"},
		},
		"configured executors": {
			env: env, args: []string{"--task-executor=wordcount=wc -w", "--task-executor= lint = ruff check - "},
			want: func() options {
				o := defaults
				o.tasks.executorFlags = stringList{"wordcount=wc -w", " lint = ruff check - "}
				o.tasks.executors = []executor.ExecutorConfig{{CommandType: "wordcount", CommandLine: "wc -w"}, {CommandType: "lint", CommandLine: "ruff check -"}}
				return o
			}(),
		},
		"invalid configured executors are all reported": {
			env: env, args: []string{"--task-executor=wc -w", "--task-executor=bash=sh", "--task-executor=x=", "--task-executor=a b=true",
				"--task-executor=y=true", "--task-executor=y=false"},
			wantErr: []string{`--task-executor: "wc -w" is not TYPE=COMMAND LINE`, "bash is a built-in command type and cannot be replaced",
				"command type x has an empty command line", `"a b" is not a command type`, "command type y is declared twice"},
		},
		"invalid task variables": {
			env: env, args: []string{"--task-env=A=1,9LIVES=x", "--task-env=NOPE"},
			wantErr: []string{`--task-env: invalid variable name "9LIVES"`, `"NOPE" is not NAME=VALUE`},
		},
		"invalid settings are all reported": {
			env: env,
			args: []string{"--name=", "--namespace=", "--capacity=0", "--heartbeat-interval=0s", "--grace-period=-1s",
				"--wait-timeout=0s", "--max-output-bytes=0"},
			wantErr: []string{"--name is required", "--namespace is required", "--capacity must be at least 1, got 0",
				"--heartbeat-interval must be positive", "--grace-period must not be negative", "--wait-timeout must be positive",
				"--max-output-bytes must be at least 1"},
		},
		"Direct stream": {
			env: map[string]string{"POD_NAME": "pod-1", "POD_NAMESPACE": "agents",
				"AGENTLANE_SESSION_API_CA_FILE": "/ca/ca.crt", "AGENTLANE_SESSION_API_TOKEN_FILE": "/token/token"},
			args: []string{"--direct-server=https://api.agentlane-system.svc:8443", "--noop-executor"},
			want: func() options {
				o := defaults
				o.pool.NodeName, o.oneShot.JobName = "", ""
				o.direct = worker.DirectOptions{Server: "https://api.agentlane-system.svc:8443", CAFile: "/ca/ca.crt", TokenFile: "/token/token"}
				o.noopExecutor = true
				return o
			}(),
		},
		"Direct stream with its own files and capacity": {
			env: env,
			args: []string{"--direct-server=https://10.0.0.1:8443/prefix", "--direct-ca-file=/etc/ca.pem",
				"--direct-token-file=/var/run/agentlane/token", "--direct-capacity=64"},
			want: func() options {
				o := defaults
				o.direct = worker.DirectOptions{Server: "https://10.0.0.1:8443/prefix", CAFile: "/etc/ca.pem",
					TokenFile: "/var/run/agentlane/token", Capacity: 64}
				return o
			}(),
		},
		"invalid Direct settings are all reported": {
			env:  env,
			args: []string{"--direct-server=http://api:8080", "--direct-capacity=2000"},
			wantErr: []string{`--direct-server "http://api:8080" must be https://host[:port][/path]`,
				"--direct-token-file is required", "--direct-capacity must be 1 to 1024, got 2000"},
		},
		"Direct capacity without a Direct server": {
			env: env, args: []string{"--direct-capacity=8"},
			wantErr: []string{"--direct-capacity needs --direct-server"},
		},
		"Direct stream and one-shot mode": {
			env: env, args: []string{"--direct-server=https://api:8443", "--direct-token-file=/t", "--task=t1"},
			wantErr: []string{"--direct-server serves a pool worker's Direct lanes; it does not combine with --task"},
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
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(options{}, taskOptions{}), cmpopts.IgnoreFields(options{}, "zap"),
				cmpopts.IgnoreFields(worker.Options{}, "Log"), cmpopts.IgnoreFields(worker.TaskOptions{}, "Log"),
				cmpopts.IgnoreFields(worker.DirectOptions{}, "Log")); diff != "" {
				t.Errorf("options (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestParseRunnerFlags(t *testing.T) {
	cases := map[string]struct {
		args    []string
		want    runnerOptions
		wantErr []string
	}{
		"defaults": {
			want: runnerOptions{socket: "/run/agentlane/runner.sock", maxOutputSize: 64 * 1024, drain: 30 * time.Second},
		},
		"every flag": {
			args: []string{"--socket=/tmp/r.sock", "--max-output-bytes=10", "--shutdown-timeout=5s",
				"--task-root=/scratch", "--task-env=A=1"},
			want: runnerOptions{socket: "/tmp/r.sock", maxOutputSize: 10, drain: 5 * time.Second,
				tasks: taskOptions{root: "/scratch", envFlags: stringList{"A=1"}, env: []string{"A=1"}}},
		},
		"invalid settings are all reported": {
			args: []string{"--socket=", "--max-output-bytes=0", "--shutdown-timeout=-1s", "--task-env=-=1", "extra"},
			wantErr: []string{"--socket is required", "--max-output-bytes must be at least 1", "--shutdown-timeout must not be negative",
				`--task-env: invalid variable name "-"`, `unexpected arguments: ["extra"]`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := parseRunnerFlags(tc.args, io.Discard)
			if len(tc.wantErr) > 0 {
				for _, w := range tc.wantErr {
					if err == nil || !strings.Contains(err.Error(), w) {
						t.Errorf("error %v does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(runnerOptions{}, taskOptions{}), cmpopts.IgnoreFields(runnerOptions{}, "zap")); diff != "" {
				t.Errorf("options (-want,+got):\n%s", diff)
			}
		})
	}
}
