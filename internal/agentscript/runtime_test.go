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
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/agentlane/agentlane/internal/executor"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// granted builds the Command of an Internal attempt holding a grant.
func granted(commandType string, deadline time.Time) *sessionapi.Command {
	return &sessionapi.Command{
		ID: "01jtest", Session: "s", Type: commandType, Lane: "query", RunID: "run", Mode: sessionapi.ModeInternal,
		State: sessionapi.StateRunning, Attempt: 1, Grant: &sessionapi.Grant{Attempt: 1, Deadline: deadline},
	}
}

// An Internal grant runs on the agent with the workers' executors and is
// reported the way a worker reports an ExternalTask.
func TestLocalExecution(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "a.txt")
	if err := os.WriteFile(file, []byte("alpha\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Minute)
	panicky := executor.NewRegistry(0)
	panicky.Register("boom", executor.ExecutorFunc(func(context.Context, json.RawMessage) (executor.Output, error) {
		panic("out of cheese")
	}))
	cases := map[string]struct {
		registry *executor.Registry
		cmd      *sessionapi.Command
		payload  string
		want     sessionapi.Result
		// wantErr is a part of the result's error, for errors with
		// changing parts; want.Error is then ignored.
		wantErr string
	}{
		"read": {
			cmd:     granted("read", later),
			payload: `{"path":"` + file + `"}`,
			want:    sessionapi.Result{Success: true, Output: json.RawMessage(`{"content":"alpha\n","bytes":6,"truncated":false}`)},
		},
		"read with a smaller limit from the registry": {
			registry: executor.NewRegistry(3),
			cmd:      granted("read", later),
			payload:  `{"path":"` + file + `"}`,
			want:     sessionapi.Result{Success: true, Output: json.RawMessage(`{"content":"alp","bytes":6,"truncated":true}`)},
		},
		"read of a missing file fails without output": {
			cmd:     granted("read", later),
			payload: `{"path":"` + filepath.Join(dir, "b.txt") + `"}`,
			want:    sessionapi.Result{Error: "read " + filepath.Join(dir, "b.txt") + ": no such file or directory"},
		},
		"read of a directory fails": {
			cmd:     granted("read", later),
			payload: `{"path":"` + dir + `"}`,
			want:    sessionapi.Result{Error: "read " + dir + ": is a directory"},
		},
		"bash": {
			cmd:     granted("bash", later),
			payload: `{"command":"echo hi"}`,
			want:    sessionapi.Result{Success: true, Output: json.RawMessage(`{"exitCode":0,"stdout":"hi\n"}`)},
		},
		"bash exiting non-zero keeps its output and exit code": {
			cmd:     granted("bash", later),
			payload: `{"command":"echo oops >&2; exit 3"}`,
			want: sessionapi.Result{Error: "exit code 3: oops", ExitCode: 3,
				Output: json.RawMessage(`{"exitCode":3,"stdout":"","stderr":"oops\n"}`)},
		},
		"invalid payload": {
			cmd:     granted("bash", later),
			payload: `{"cmd":"ls"}`,
			want:    sessionapi.Result{Error: `invalid payload: json: unknown field "cmd"`},
		},
		"unknown command type": {
			cmd:  granted("teleport", later),
			want: sessionapi.Result{Error: `no executor for command type "teleport"`},
		},
		"an attempt past its grant deadline is stopped": {
			cmd:     granted("bash", time.Now().Add(-time.Second)),
			payload: `{"command":"sleep 30"}`,
			wantErr: "attempt 1 ran past its grant deadline",
		},
		"a panicking executor fails the attempt": {
			registry: panicky,
			cmd:      granted("boom", later),
			want:     sessionapi.Result{Error: `executor for "boom" panicked: out of cheese`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := &Runtime{Executors: tc.registry}
			var payload json.RawMessage
			if tc.payload != "" {
				payload = json.RawMessage(tc.payload)
			}
			got := r.execute(context.Background(), tc.cmd, payload)
			if tc.wantErr != "" {
				if got.Success || !strings.Contains(got.Error, tc.wantErr) {
					t.Fatalf("result = %+v, want a failure whose error contains %q", got, tc.wantErr)
				}
				return
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("result (-want,+got):\n%s", diff)
			}
		})
	}
}

// The model call placeholder takes its duration on the runtime's clock and
// reports the scripted usage.
func TestLocalModelCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
		r := &Runtime{Clock: clk}
		call := LLMCall{InputTokens: 1200, OutputTokens: 300, Duration: metav1.Duration{Duration: 150 * time.Millisecond}}
		done := make(chan sessionapi.Result, 1)
		go func() { done <- r.generate(context.Background(), "fix the failing test", call) }()
		synctest.Wait()
		clk.Step(149 * time.Millisecond)
		synctest.Wait()
		select {
		case res := <-done:
			t.Fatalf("the call ended before its duration: %+v", res)
		default:
		}
		clk.Step(time.Millisecond)
		got := <-done
		want := sessionapi.Result{Success: true, Output: json.RawMessage(
			`{"text":"Scripted reply to \"fix the failing test\".","usage":{"inputTokens":1200,"outputTokens":300}}`)}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("result (-want,+got):\n%s", diff)
		}
	})

	// A stopped call fails and reports why.
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errAborted)
	got := (&Runtime{}).generate(ctx, "p", LLMCall{Duration: metav1.Duration{Duration: time.Hour}})
	if got.Success || !strings.Contains(got.Error, errAborted.Error()) {
		t.Errorf("result of an aborted call = %+v, want a failure naming the abort", got)
	}
}

// A run's steers wait for its next tool boundary, and an abort stops the
// run's calls even when it came before the turn started.
func TestLocalRunState(t *testing.T) {
	var s runState
	s.steer("use the other file")
	s.abort()
	ctx, cancel := context.WithCancelCause(context.Background())
	s.start(cancel)
	if !errors.Is(context.Cause(ctx), errAborted) {
		t.Fatalf("context cause = %v, want %v", context.Cause(ctx), errAborted)
	}
	steers, aborted := s.boundary()
	if diff := cmp.Diff([]string{"use the other file"}, steers); diff != "" || !aborted {
		t.Errorf("boundary = %q, %v; want the steer once and aborted (-want,+got):\n%s", steers, aborted, diff)
	}
	if steers, _ := s.boundary(); len(steers) != 0 {
		t.Errorf("steers taken twice: %q", steers)
	}
}

// Report.Refusal finds the API's refusals and leaves lost attempts alone.
func TestLocalRefusal(t *testing.T) {
	forbidden := &sessionapi.Error{Status: 403, Code: sessionapi.CodeForbidden, Message: "no"}
	stale := &sessionapi.Error{Status: 409, Code: sessionapi.CodeStaleAttempt, Message: "late"}
	if got := refusal(stale); got != nil {
		t.Errorf("refusal(StaleAttempt) = %v, want nil", got)
	}
	if got := refusal(context.Canceled); got != nil {
		t.Errorf("refusal(context.Canceled) = %v, want nil", got)
	}
	rep := Report{Turns: []TurnReport{
		{Commands: []CommandReport{{ID: "a"}}},
		{Commands: []CommandReport{{ID: "b", Refused: refusal(forbidden)}}},
	}}
	if got := rep.Refusal(); got != forbidden || !fatal(got) {
		t.Errorf("Refusal() = %v, want the Forbidden reply, fatal", got)
	}
}

// stuckSubmitServer takes a submission and never answers it, as a server
// does whose reply is lost; it records the commands cancelled.
type stuckSubmitServer struct {
	submitted chan string
	mu        sync.Mutex
	cancelled []string
}

func (f *stuckSubmitServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/commands"):
		var req sessionapi.SubmitRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		f.submitted <- req.ID
		<-r.Context().Done()
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/cancel"):
		var req sessionapi.CancelRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		f.mu.Lock()
		f.cancelled = append(f.cancelled, req.CommandID)
		f.mu.Unlock()
		_ = json.NewEncoder(w).Encode(sessionapi.CancelResult{Cancelled: 1})
	default:
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(sessionapi.Error{Code: sessionapi.CodeNotFound, Message: r.URL.Path})
	}
}

// A runtime stopped while its submission is in flight cannot tell whether
// the server took the command: it cancels it by the ID it gave it, so that
// the command does not take a slot no one will use.
func TestStopCancelsASubmissionInFlight(t *testing.T) {
	f := &stuckSubmitServer{submitted: make(chan string, 1)}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	c, err := sessionapi.NewClient(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	rt := &Runtime{Session: c.Session("ns", "s")}
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan TurnReport, 1)
	go func() {
		done <- rt.RunTurn(ctx, Turn{Steps: []Step{{Type: "bash", Payload: json.RawMessage(`{"command":"true"}`)}}}, "run-1")
	}()
	id := <-f.submitted
	stop()
	rep := <-done
	if len(rep.Commands) != 1 || rep.Commands[0].ID != id {
		t.Fatalf("want the one command %s in the report, got %+v", id, rep.Commands)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if diff := cmp.Diff([]string{id}, f.cancelled); diff != "" {
		t.Errorf("cancelled commands (-want,+got):\n%s", diff)
	}
}
