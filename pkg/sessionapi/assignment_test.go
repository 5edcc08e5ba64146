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
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// AwaitAssignment long-polls through 204s, asks for the longest wait, and
// returns the assignment; a refusal ends it.
func TestAwaitAssignment(t *testing.T) {
	for name, tc := range map[string]struct {
		replies  []int
		want     *Assignment
		wantCode string
	}{
		"adopted after two waits": {replies: []int{http.StatusNoContent, http.StatusNoContent, http.StatusOK},
			want: &Assignment{Namespace: "team-a", Session: "s1", ResumeRunID: "r7"}},
		"a pod that is no warm pod": {replies: []int{http.StatusForbidden}, wantCode: CodeForbidden},
	} {
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			var calls []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				n := len(calls)
				calls = append(calls, r.Method+" "+r.URL.RequestURI()+" "+r.Header.Get("Authorization"))
				mu.Unlock()
				switch status := tc.replies[min(n, len(tc.replies)-1)]; status {
				case http.StatusOK:
					_ = json.NewEncoder(w).Encode(Assignment{Namespace: "team-a", Session: "s1", ResumeRunID: "r7"})
				case http.StatusNoContent:
					w.WriteHeader(status)
				default:
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(status)
					_ = json.NewEncoder(w).Encode(Error{Code: CodeForbidden, Message: "no runtime pod"})
				}
			}))
			defer srv.Close()
			c, err := NewClient(srv.URL, WithToken("pod-token"))
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.AwaitAssignment(context.Background(), "team-a")
			if tc.wantCode != "" {
				if !IsCode(err, tc.wantCode) {
					t.Fatalf("AwaitAssignment: %v, want %s", err, tc.wantCode)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("assignment (-want,+got):\n%s", diff)
			}
			want := make([]string, len(tc.replies))
			for i := range want {
				want[i] = "GET /v1/namespaces/team-a/runtime/assignment?wait=1m0s Bearer pod-token"
			}
			if diff := cmp.Diff(want, calls); diff != "" {
				t.Errorf("calls (-want,+got):\n%s", diff)
			}
		})
	}
}
