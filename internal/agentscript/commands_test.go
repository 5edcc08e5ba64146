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
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// restartedServer grants each command at once, then restarts before the
// runtime reports: every later call about a command it granted is answered
// 410 Interrupted, as a restarted manager answers.
type restartedServer struct{}

func (restartedServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/commands") {
		var req sessionapi.SubmitRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		cmd := granted(req.Type, time.Time{})
		cmd.ID = req.ID
		_ = json.NewEncoder(w).Encode(cmd)
		return
	}
	w.WriteHeader(http.StatusGone)
	_ = json.NewEncoder(w).Encode(sessionapi.Error{Code: sessionapi.CodeInterrupted, Message: "the manager restarted"})
}

// A command whose report a restarted manager answers Interrupted failed,
// interrupted: the turn reports it so, not as a refusal, and goes on to its
// next step.
func TestInterruptedCommandFails(t *testing.T) {
	srv := httptest.NewServer(restartedServer{})
	t.Cleanup(srv.Close)
	c, err := sessionapi.NewClient(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	rt := &Runtime{Session: c.Session("ns", "s")}
	step := Step{Type: "bash", Payload: json.RawMessage(`{"command":"true"}`)}
	rep := rt.RunTurn(t.Context(), Turn{Steps: []Step{step, step}}, "run-1")
	if len(rep.Commands) != 2 {
		t.Fatalf("want both steps' commands in the report, got %+v (error %q)", rep.Commands, rep.Error)
	}
	for i, cr := range rep.Commands {
		if cr.State != sessionapi.StateFailed || !strings.HasPrefix(cr.Error, "interrupted: ") || cr.Refused != nil {
			t.Errorf("command %d = state %q, error %q, refused %v; want Failed, interrupted, not refused", i, cr.State, cr.Error, cr.Refused)
		}
	}
}
