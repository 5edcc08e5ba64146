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
	"io"
	"net/http"
	"testing"
	"time"
)

func TestClearLane(t *testing.T) {
	var method, uri, body string
	s := newTestSession(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		method, uri, body = r.Method, r.URL.RequestURI(), string(b)
		_, _ = io.WriteString(w, `{"cancelled":2}`)
	}))
	n, err := s.ClearLane(testContext(t), "execute")
	if err != nil || n != 2 {
		t.Fatalf("ClearLane = %d, %v; want 2", n, err)
	}
	if method != http.MethodPost || uri != "/v1/namespaces/team-a/sessions/chat-1/lanes/execute/clear" || body != "" {
		t.Errorf("request = %s %s %q", method, uri, body)
	}
}

func TestDrainingIsAnError(t *testing.T) {
	s := newTestSession(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "10")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"code":"Draining","message":"the queue is draining"}`)
	}))
	_, err := s.Submit(testContext(t), SubmitRequest{Type: "bash"})
	if !IsCode(err, CodeDraining) {
		t.Fatalf("Submit = %v, want Draining", err)
	}
	if e := err.(*Error); e.RetryAfter != 10*time.Second {
		t.Errorf("RetryAfter = %s", e.RetryAfter)
	}
}
