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
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// newTestSession serves h and returns a client of one session on it, with
// short backoffs.
func newTestSession(t *testing.T, h http.Handler) *SessionClient {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c, err := NewClient(srv.URL, WithToken("t0ken"))
	if err != nil {
		t.Fatal(err)
	}
	c.minBackoff, c.maxBackoff = time.Millisecond, 10*time.Millisecond
	c.maxNotLeaderWait = time.Millisecond
	return c.Session("team-a", "chat-1")
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// jsonDiff compares two JSON texts as values; "" stands for no body.
func jsonDiff(t *testing.T, want string, got []byte) string {
	t.Helper()
	if want == "" || len(got) == 0 {
		return cmp.Diff(want, string(got))
	}
	var w, g any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want JSON %s: %v", want, err)
	}
	if err := json.Unmarshal(got, &g); err != nil {
		return "body is not JSON: " + string(got)
	}
	return cmp.Diff(w, g)
}

func TestNewClient(t *testing.T) {
	for _, bad := range []string{"127.0.0.1:8443", "ftp://host", "http://", "http://host/?x=1", "http://[::1"} {
		if _, err := NewClient(bad); err == nil {
			t.Errorf("NewClient(%q): no error", bad)
		}
	}

	var uri string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		uri = r.RequestURI
		_, _ = io.WriteString(w, `{}`)
	}))
	defer srv.Close()
	c, err := NewClient(srv.URL + "/api/")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Session("ns", "s").Stats(testContext(t)); err != nil {
		t.Fatal(err)
	}
	if want := "/api/v1/namespaces/ns/sessions/s/stats"; uri != want {
		t.Errorf("request URI %q, want %q", uri, want)
	}
}

func TestRequests(t *testing.T) {
	const prefix = "/v1/namespaces/team%20a/sessions/chat%2F1"
	cases := map[string]struct {
		call   func(context.Context, *SessionClient) (any, error)
		method string
		uri    string
		body   string
		status int
		reply  string
		want   any
	}{
		"submit, answered 202": {
			call: func(ctx context.Context, s *SessionClient) (any, error) {
				return s.Submit(ctx, SubmitRequest{Type: "bash", Wait: &metav1.Duration{Duration: 10 * time.Second}})
			},
			method: http.MethodPost, uri: prefix + "/commands", body: `{"type":"bash","wait":"10s"}`,
			status: http.StatusAccepted, reply: `{"id":"c1","state":"Queued"}`,
			want: &Command{ID: "c1", State: StateQueued},
		},
		"get without wait": {
			call:   func(ctx context.Context, s *SessionClient) (any, error) { return s.Get(ctx, "c/1", 0) },
			method: http.MethodGet, uri: prefix + "/commands/c%2F1",
			reply: `{"id":"c/1","state":"Running","grant":{"attempt":2,"deadline":"2026-01-02T03:04:05Z"}}`,
			want:  &Command{ID: "c/1", State: StateRunning, Grant: &Grant{Attempt: 2, Deadline: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}},
		},
		"get with wait": {
			call:   func(ctx context.Context, s *SessionClient) (any, error) { return s.Get(ctx, "c1", 30*time.Second) },
			method: http.MethodGet, uri: prefix + "/commands/c1?wait=30s",
			reply: `{"id":"c1"}`, want: &Command{ID: "c1"},
		},
		"report": {
			call: func(ctx context.Context, s *SessionClient) (any, error) {
				return s.Report(ctx, "c1", ReportRequest{Attempt: 2, Result: Result{Success: true, Output: json.RawMessage(`{"n":1}`)}})
			},
			method: http.MethodPost, uri: prefix + "/commands/c1/result", body: `{"attempt":2,"success":true,"output":{"n":1}}`,
			reply: `{"id":"c1","state":"Succeeded"}`, want: &Command{ID: "c1", State: StateSucceeded},
		},
		"post": {
			call:   func(ctx context.Context, s *SessionClient) (any, error) { return s.Post(ctx, Message{Text: "hi"}) },
			method: http.MethodPost, uri: prefix + "/messages", body: `{"text":"hi"}`,
			reply: `{"queued":true}`, want: &PostResult{Queued: true},
		},
		"finish run": {
			call:   func(ctx context.Context, s *SessionClient) (any, error) { return nil, s.FinishRun(ctx, "r 1") },
			method: http.MethodPost, uri: prefix + "/runs/r%201/finish",
			reply: `{}`,
		},
		"cancel": {
			call: func(ctx context.Context, s *SessionClient) (any, error) {
				return s.Cancel(ctx, CancelRequest{RunID: "r1"})
			},
			method: http.MethodPost, uri: prefix + "/cancel", body: `{"runId":"r1"}`,
			reply: `{"cancelled":3}`, want: 3,
		},
		"stats": {
			call:   func(ctx context.Context, s *SessionClient) (any, error) { return s.Stats(ctx) },
			method: http.MethodGet, uri: prefix + "/stats",
			reply: `{"queue":"q","session":{"pending":2}}`, want: &Stats{Queue: "q", Session: SessionCounts{Pending: 2}},
		},
		"pending external": {
			call:   func(ctx context.Context, s *SessionClient) (any, error) { return s.PendingExternal(ctx) },
			method: http.MethodGet, uri: prefix + "/external",
			reply: `{"items":[{"id":"c1","attempt":1}]}`, want: []ExternalTask{{ID: "c1", Attempt: 1}},
		},
		"dead letters": {
			call:   func(ctx context.Context, s *SessionClient) (any, error) { return s.DeadLetters(ctx) },
			method: http.MethodGet, uri: prefix + "/deadletters",
			reply: `{"items":[{"id":"c1","attempts":3}]}`, want: []DeadLetter{{ID: "c1", Attempts: 3}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var method, uri, auth, ctype string
			var body []byte
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				method, uri, auth, ctype = r.Method, r.RequestURI, r.Header.Get("Authorization"), r.Header.Get("Content-Type")
				body, _ = io.ReadAll(r.Body)
				if tc.status != 0 {
					w.WriteHeader(tc.status)
				}
				_, _ = io.WriteString(w, tc.reply)
			}))
			defer srv.Close()
			c, err := NewClient(srv.URL, WithToken("t0ken"))
			if err != nil {
				t.Fatal(err)
			}
			got, err := tc.call(testContext(t), c.Session("team a", "chat/1"))
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			if method != tc.method || uri != tc.uri {
				t.Errorf("request %s %s, want %s %s", method, uri, tc.method, tc.uri)
			}
			if auth != "Bearer t0ken" {
				t.Errorf("Authorization %q", auth)
			}
			if diff := jsonDiff(t, tc.body, body); diff != "" {
				t.Errorf("request body (-want,+got):\n%s", diff)
			}
			if tc.body != "" && ctype != "application/json" {
				t.Errorf("Content-Type %q", ctype)
			}
			if diff := cmp.Diff(tc.want, got); tc.want != nil && diff != "" {
				t.Errorf("result (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestErrorReplies(t *testing.T) {
	cases := map[string]struct {
		status     int
		retryAfter string
		body       string
		want       *Error
	}{
		"a refusal with Retry-After": {
			status:     http.StatusTooManyRequests,
			retryAfter: "3",
			body:       `{"code":"QueueFull","message":"session \"chat-1\" has 1000 pending commands"}`,
			want: &Error{Status: http.StatusTooManyRequests, Code: CodeQueueFull,
				Message: `session "chat-1" has 1000 pending commands`, RetryAfter: 3 * time.Second},
		},
		"a Retry-After that is not whole seconds": {
			status:     http.StatusTooManyRequests,
			retryAfter: "Wed, 21 Oct 2026 07:28:00 GMT",
			body:       `{"code":"RateLimited","message":"slow down"}`,
			want:       &Error{Status: http.StatusTooManyRequests, Code: CodeRateLimited, Message: "slow down"},
		},
		"an Error body": {
			status: http.StatusConflict,
			body:   `{"code":"StaleAttempt","message":"attempt 2 no longer holds the slot"}`,
			want:   &Error{Status: http.StatusConflict, Code: CodeStaleAttempt, Message: "attempt 2 no longer holds the slot"},
		},
		"a plain-text body": {
			status: http.StatusBadGateway,
			body:   "upstream connect error\n",
			want:   &Error{Status: http.StatusBadGateway, Code: CodeInternal, Message: "upstream connect error"},
		},
		"JSON that is not an Error": {
			status: http.StatusInternalServerError,
			body:   `{"kind":"Status"}`,
			want:   &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: `{"kind":"Status"}`},
		},
		"no body": {
			status: http.StatusServiceUnavailable,
			want:   &Error{Status: http.StatusServiceUnavailable, Code: CodeInternal, Message: "Service Unavailable"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := newTestSession(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.retryAfter != "" {
					w.Header().Set("Retry-After", tc.retryAfter)
				}
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
			}))
			_, err := s.Get(testContext(t), "c1", 0)
			var got *Error
			if !errors.As(err, &got) {
				t.Fatalf("error %v (%T), want an *Error", err, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("error (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestTokenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := &tokenFile{path: path, now: func() time.Time { return now }}
	get := func() string {
		t.Helper()
		token, err := f.get()
		if err != nil {
			t.Fatal(err)
		}
		return token
	}

	if _, err := f.get(); err == nil {
		t.Error("no error for a missing token file")
	}
	write("one\n")
	if got := get(); got != "one" {
		t.Errorf("token %q, want one", got)
	}
	write("two")
	now = now.Add(59 * time.Second)
	if got := get(); got != "one" {
		t.Errorf("token %q before a minute passed, want the cached one", got)
	}
	now = now.Add(time.Second)
	if got := get(); got != "two" {
		t.Errorf("token %q after a minute, want the rotated one", got)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	if got := get(); got != "two" {
		t.Errorf("token %q after the file went away, want the last one read", got)
	}
}

// exchange is one request a scripted server expects, and its reply.
type exchange struct {
	method, uri string // uri below the session's prefix
	body        string // the JSON the request must carry; "" skips the check
	status      int
	reply       any
}

// scripted serves script in order; it reports any request that is not the
// next one expected. done tells how many exchanges were served.
func scripted(t *testing.T, script []exchange) (h http.Handler, done func() int) {
	const prefix = "/v1/namespaces/team-a/sessions/chat-1"
	var mu sync.Mutex
	next := 0
	h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if next == len(script) {
			t.Errorf("unexpected request %s %s after the script ended", r.Method, r.RequestURI)
			w.WriteHeader(http.StatusTeapot)
			return
		}
		ex := script[next]
		next++
		if r.Method != ex.method || r.RequestURI != prefix+ex.uri {
			t.Errorf("exchange %d: request %s %s, want %s %s", next, r.Method, r.RequestURI, ex.method, prefix+ex.uri)
		}
		body, _ := io.ReadAll(r.Body)
		if ex.body != "" {
			if diff := jsonDiff(t, ex.body, body); diff != "" {
				t.Errorf("exchange %d: body (-want,+got):\n%s", next, diff)
			}
		}
		w.Header().Set("Content-Type", "application/json")
		if ex.status != 0 {
			w.WriteHeader(ex.status)
		}
		_ = json.NewEncoder(w).Encode(ex.reply)
	})
	return h, func() int {
		mu.Lock()
		defer mu.Unlock()
		return next
	}
}

func TestRunCallsFnOncePerGrant(t *testing.T) {
	// Grant deadlines before testContext's, so that they bound fn's context.
	d1 := time.Now().Add(3 * time.Second).UTC().Round(0)
	d2, d3 := d1.Add(time.Second), d1.Add(2*time.Second)
	running := func(attempt int, deadline time.Time) Command {
		return Command{ID: "c1", Mode: ModeInternal, State: StateRunning, Attempt: attempt, Grant: &Grant{Attempt: attempt, Deadline: deadline}}
	}
	h, done := scripted(t, []exchange{
		{method: http.MethodPost, uri: "/commands", body: `{"type":"bash","runId":"r1"}`, reply: running(1, d1)},
		{method: http.MethodPost, uri: "/commands/c1/result", body: `{"attempt":1,"success":false,"error":"boom 1"}`,
			reply: Command{ID: "c1", Mode: ModeInternal, State: StateRetrying, Attempt: 1}},
		{method: http.MethodGet, uri: "/commands/c1?wait=30s", reply: running(2, d2)},
		// Attempt 2 timed out while fn ran: its report is stale.
		{method: http.MethodPost, uri: "/commands/c1/result", body: `{"attempt":2,"success":false,"error":"boom 2"}`,
			status: http.StatusConflict, reply: Error{Code: CodeStaleAttempt, Message: "stale"}},
		// The server still shows attempt 2's grant once: fn must not run it again.
		{method: http.MethodGet, uri: "/commands/c1?wait=30s", reply: running(2, d2)},
		{method: http.MethodGet, uri: "/commands/c1?wait=30s", reply: running(3, d3)},
		{method: http.MethodPost, uri: "/commands/c1/result", body: `{"attempt":3,"success":true}`,
			reply: Command{ID: "c1", Mode: ModeInternal, State: StateSucceeded, Attempt: 3, Result: &Result{Success: true}}},
	})
	s := newTestSession(t, h)

	var attempts []int
	var deadlines []time.Time
	cmd, err := s.Run(testContext(t), SubmitRequest{Type: "bash", RunID: "r1"}, func(ctx context.Context, cmd *Command) Result {
		attempts = append(attempts, cmd.Grant.Attempt)
		d, _ := ctx.Deadline()
		deadlines = append(deadlines, d)
		if cmd.Grant.Attempt < 3 {
			return Result{Error: "boom " + strconv.Itoa(cmd.Grant.Attempt)}
		}
		return Result{Success: true}
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if cmd.State != StateSucceeded {
		t.Errorf("final state %s, want Succeeded", cmd.State)
	}
	if diff := cmp.Diff([]int{1, 2, 3}, attempts); diff != "" {
		t.Errorf("attempts passed to fn (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]time.Time{d1, d2, d3}, deadlines); diff != "" {
		t.Errorf("deadlines of fn's context (-want,+got):\n%s", diff)
	}
	if got := done(); got != 7 {
		t.Errorf("%d exchanges served, want 7", got)
	}
}

func TestRunExternal(t *testing.T) {
	h, done := scripted(t, []exchange{
		{method: http.MethodPost, uri: "/commands", status: http.StatusAccepted,
			reply: Command{ID: "c1", Mode: ModeExternal, State: StateQueued}},
		{method: http.MethodGet, uri: "/commands/c1?wait=30s", reply: Command{ID: "c1", Mode: ModeExternal, State: StateRunning, Attempt: 1}},
		{method: http.MethodGet, uri: "/commands/c1?wait=30s", reply: Command{ID: "c1", Mode: ModeExternal, State: StateSucceeded, Attempt: 1}},
	})
	s := newTestSession(t, h)
	cmd, err := s.Run(testContext(t), SubmitRequest{Type: "approve"}, func(context.Context, *Command) Result {
		t.Error("fn called for an External command")
		return Result{}
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if cmd.State != StateSucceeded || done() != 3 {
		t.Errorf("Run returned state %s after %d exchanges, want Succeeded after 3", cmd.State, done())
	}
}

func TestRunReportError(t *testing.T) {
	h, _ := scripted(t, []exchange{
		{method: http.MethodPost, uri: "/commands",
			reply: Command{ID: "c1", Mode: ModeInternal, State: StateRunning, Attempt: 1, Grant: &Grant{Attempt: 1, Deadline: time.Now().Add(time.Hour)}}},
		{method: http.MethodPost, uri: "/commands/c1/result", status: http.StatusNotFound,
			reply: Error{Code: CodeCommandNotFound, Message: "gone"}},
	})
	s := newTestSession(t, h)
	cmd, err := s.Run(testContext(t), SubmitRequest{Type: "bash"}, func(context.Context, *Command) Result { return Result{Success: true} })
	if !IsCode(err, CodeCommandNotFound) {
		t.Errorf("error %v, want CommandNotFound", err)
	}
	if cmd == nil || cmd.ID != "c1" {
		t.Errorf("command %+v, want the last one seen", cmd)
	}
}

func TestNotLeaderIsRetried(t *testing.T) {
	cases := map[string]struct {
		retries  int  // 0: the default
		refusals int  // answers NotLeader before the leader answers
		wantErr  bool // the call ends in NotLeader
		wantSent int
	}{
		"a failover shorter than the retries":   {refusals: 2, wantSent: 3},
		"no leader for longer than the retries": {refusals: 100, wantErr: true, wantSent: DefaultNotLeaderRetries + 1},
		"retries turned off":                    {retries: -1, refusals: 1, wantErr: true, wantSent: 1},
		"one retry":                             {retries: 1, refusals: 1, wantSent: 2},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var bodies []string
			s := newTestSession(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				bodies = append(bodies, r.Header.Get("Authorization")+" "+string(b))
				if len(bodies) <= tc.refusals {
					w.Header().Set("Retry-After", "1")
					w.WriteHeader(http.StatusServiceUnavailable)
					_, _ = io.WriteString(w, `{"code":"NotLeader","message":"this replica is a standby"}`)
					return
				}
				_, _ = io.WriteString(w, `{"id":"c1","phase":"Succeeded"}`)
			}))
			switch {
			case tc.retries > 0:
				WithNotLeaderRetries(tc.retries)(s.c)
			case tc.retries < 0:
				WithNotLeaderRetries(0)(s.c)
			}
			cmd, err := s.Submit(testContext(t), SubmitRequest{ID: "c1", Type: "bash"})
			if tc.wantErr {
				if !IsCode(err, CodeNotLeader) {
					t.Fatalf("error %v, want NotLeader", err)
				}
			} else if err != nil || cmd.ID != "c1" {
				t.Fatalf("Submit = %+v, %v; want command c1", cmd, err)
			}
			if len(bodies) != tc.wantSent {
				t.Fatalf("sent %d times, want %d", len(bodies), tc.wantSent)
			}
			for _, b := range bodies[1:] {
				if b != bodies[0] {
					t.Errorf("a retry sent %q, the first call %q", b, bodies[0])
				}
			}
		})
	}
}

func TestNotLeaderRetryEndsWithTheContext(t *testing.T) {
	calls := 0
	s := newTestSession(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"code":"NotLeader","message":"standby"}`)
	}))
	s.c.maxNotLeaderWait = time.Hour // Retry-After would be honoured in full
	ctx, cancel := context.WithCancel(testContext(t))
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err := s.Get(ctx, "c1", 0)
	if !IsCode(err, CodeNotLeader) || calls != 1 {
		t.Fatalf("Get = %v after %d calls; want the NotLeader error after one call", err, calls)
	}
}
