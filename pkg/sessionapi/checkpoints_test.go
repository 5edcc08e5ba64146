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

package sessionapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestCheckpointRequests(t *testing.T) {
	const prefix = "/v1/namespaces/team-a/sessions/chat-1"
	saved := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := map[string]struct {
		call   func(context.Context, *SessionClient) (any, error)
		method string
		uri    string
		body   string
		status int
		reply  string
		want   any
		// wantCode is the code of the error the call fails with.
		wantCode string
	}{
		"save": {
			call: func(ctx context.Context, s *SessionClient) (any, error) {
				return s.SaveCheckpoint(ctx, Checkpoint{RunID: "r1", Turn: 1, Round: 2, State: json.RawMessage(`{"nextStep":2}`)})
			},
			method: http.MethodPut, uri: prefix + "/checkpoints", body: `{"runId":"r1","turn":1,"round":2,"state":{"nextStep":2}}`,
			reply: `{"checkpoint":{"schemaVersion":1,"runId":"r1","turn":1,"round":2,"time":"2026-01-02T03:04:05Z"},"location":"configmap/agentlane-checkpoint-chat-1#r1"}`,
			want: &CheckpointSaved{Checkpoint: Checkpoint{SchemaVersion: 1, RunID: "r1", Turn: 1, Round: 2, Time: saved},
				Location: "configmap/agentlane-checkpoint-chat-1#r1"},
		},
		"load the latest": {
			call:   func(ctx context.Context, s *SessionClient) (any, error) { return s.LoadCheckpoint(ctx, "") },
			method: http.MethodGet, uri: prefix + "/checkpoints/latest",
			reply: `{"schemaVersion":1,"runId":"r2","identity":{"tenantId":"acme"}}`,
			want:  &Checkpoint{SchemaVersion: 1, RunID: "r2", Identity: Identity{TenantID: "acme"}},
		},
		"load a run": {
			call:   func(ctx context.Context, s *SessionClient) (any, error) { return s.LoadCheckpoint(ctx, "r 1") },
			method: http.MethodGet, uri: prefix + "/checkpoints/r%201",
			status: http.StatusNotFound, reply: `{"code":"CheckpointNotFound","message":"no checkpoint for run r 1"}`,
			wantCode: CodeCheckpointNotFound,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var method, uri string
			var body []byte
			s := newTestSession(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				method, uri = r.Method, r.RequestURI
				body, _ = io.ReadAll(r.Body)
				if tc.status != 0 {
					w.WriteHeader(tc.status)
				}
				_, _ = io.WriteString(w, tc.reply)
			}))
			got, err := tc.call(testContext(t), s)
			if tc.wantCode != "" {
				if !IsCode(err, tc.wantCode) {
					t.Fatalf("error = %v, want code %s", err, tc.wantCode)
				}
			} else if err != nil {
				t.Fatalf("call: %v", err)
			}
			if method != tc.method || uri != tc.uri {
				t.Errorf("request %s %s, want %s %s", method, uri, tc.method, tc.uri)
			}
			if diff := jsonDiff(t, tc.body, body); diff != "" {
				t.Errorf("request body (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, got); tc.want != nil && diff != "" {
				t.Errorf("result (-want,+got):\n%s", diff)
			}
		})
	}
}
