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
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// waitingServer answers POST /commands with a queued command (202), holds
// every GET of it until the request ends, and records the requests, with
// the bodies of the cancels.
type waitingServer struct {
	mu       sync.Mutex
	requests []string
	polling  chan struct{} // closed at the first held GET
	once     sync.Once
	// holdSubmit holds POST /commands too, until the request ends.
	holdSubmit bool
}

func (w *waitingServer) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	const prefix = "/v1/namespaces/team-a/sessions/chat-1"
	body, _ := io.ReadAll(r.Body)
	entry := r.Method + " " + r.URL.Path[len(prefix):]
	if r.URL.Path == prefix+"/cancel" {
		entry += " " + string(body)
	}
	w.mu.Lock()
	w.requests = append(w.requests, entry)
	w.mu.Unlock()
	rw.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodPost && r.URL.Path == prefix+"/commands":
		if w.holdSubmit {
			w.once.Do(func() { close(w.polling) })
			<-r.Context().Done()
			return
		}
		rw.WriteHeader(http.StatusAccepted)
		_ = json.NewEncoder(rw).Encode(Command{ID: "c1", Mode: ModeInternal, State: StateQueued})
	case r.Method == http.MethodGet:
		w.once.Do(func() { close(w.polling) })
		<-r.Context().Done()
	case r.URL.Path == prefix+"/cancel":
		_ = json.NewEncoder(rw).Encode(CancelResult{Cancelled: 1})
	default:
		rw.WriteHeader(http.StatusTeapot)
	}
}

func (w *waitingServer) log() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.requests...)
}

func TestRunCancelsTheCommandWhenItsContextEnds(t *testing.T) {
	srv := &waitingServer{polling: make(chan struct{})}
	s := newTestSession(t, srv)
	ctx, cancel := context.WithCancel(testContext(t))
	go func() {
		<-srv.polling
		cancel()
	}()
	cmd, err := s.Run(ctx, SubmitRequest{Type: "bash"}, func(context.Context, *Command) Result {
		t.Error("fn called without a grant")
		return Result{}
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want context.Canceled", err)
	}
	if cmd == nil || cmd.ID != "c1" {
		t.Errorf("command %+v, want the last one seen", cmd)
	}
	want := []string{"POST /commands", "GET /commands/c1", `POST /cancel {"commandId":"c1"}`}
	if diff := cmp.Diff(want, srv.log()); diff != "" {
		t.Errorf("requests (-want,+got):\n%s", diff)
	}
}

func TestRunCancelsByIDWhenTheSubmissionIsAbandoned(t *testing.T) {
	srv := &waitingServer{polling: make(chan struct{}), holdSubmit: true}
	s := newTestSession(t, srv)
	ctx, cancel := context.WithCancel(testContext(t))
	go func() {
		<-srv.polling
		cancel()
	}()
	_, err := s.Run(ctx, SubmitRequest{ID: "mine", Type: "bash"}, func(context.Context, *Command) Result { return Result{} })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want context.Canceled", err)
	}
	want := []string{"POST /commands", `POST /cancel {"commandId":"mine"}`}
	if diff := cmp.Diff(want, srv.log()); diff != "" {
		t.Errorf("requests (-want,+got):\n%s", diff)
	}
}
