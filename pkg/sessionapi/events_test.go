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
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSSEReader(t *testing.T) {
	cases := map[string]struct {
		stream string
		want   []sseBlock
	}{
		"fields": {
			stream: "id: 7\nevent: turn\ndata: {\"id\":7}\n\n",
			want:   []sseBlock{{id: "7", hasID: true, event: "turn", data: []byte(`{"id":7}`)}},
		},
		"multi-line data joined with newlines": {
			stream: "data: {\"a\":1,\ndata:\"b\":2}\ndata:\n\n",
			want:   []sseBlock{{data: []byte("{\"a\":1,\n\"b\":2}\n")}},
		},
		"comments and empty blocks skipped": {
			stream: ": keepalive\n\n\n: hello\ndata: x\n: between\n\n: keepalive\n",
			want:   []sseBlock{{data: []byte("x")}},
		},
		"only one space after the colon is dropped": {
			stream: "data:x\n\ndata:  y\n\n",
			want:   []sseBlock{{data: []byte("x")}, {data: []byte(" y")}},
		},
		"CRLF line ends": {
			stream: "id: 1\r\ndata: x\r\n\r\n",
			want:   []sseBlock{{id: "1", hasID: true, data: []byte("x")}},
		},
		"an id-only block is returned": {
			stream: "id: 5\n\n",
			want:   []sseBlock{{id: "5", hasID: true}},
		},
		"an event name alone is not": {
			stream: "event: turn\n\ndata: x\n\n",
			want:   []sseBlock{{data: []byte("x")}},
		},
		"unknown fields ignored": {
			stream: "retry: 10\nfoo\nfoo: bar\ndata: x\n\n",
			want:   []sseBlock{{data: []byte("x")}},
		},
		"an unfinished event is dropped at the end": {
			stream: "data: x\n\nid: 2\ndata: y\n",
			want:   []sseBlock{{data: []byte("x")}},
		},
	}
	readers := map[string]func(string) io.Reader{
		"whole":       func(s string) io.Reader { return strings.NewReader(s) },
		"byte a read": func(s string) io.Reader { return iotest.OneByteReader(strings.NewReader(s)) },
	}
	for name, tc := range cases {
		for rname, newReader := range readers {
			t.Run(name+"/"+rname, func(t *testing.T) {
				r := newSSEReader(newReader(tc.stream))
				var got []sseBlock
				for {
					b, err := r.next()
					if err == io.EOF {
						break
					}
					if err != nil {
						t.Fatalf("next: %v", err)
					}
					got = append(got, b)
				}
				if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(sseBlock{})); diff != "" {
					t.Errorf("blocks (-want,+got):\n%s", diff)
				}
			})
		}
	}
}

func TestSSEReaderBounds(t *testing.T) {
	big := strings.Repeat("x", maxEventData)
	cases := map[string]struct {
		stream  string
		wantErr error
	}{
		"a line of 1 MiB":          {stream: "data:" + big[5:] + "\n\n", wantErr: io.EOF},
		"a line over 1 MiB":        {stream: "data: " + big + "\n\n", wantErr: errLineTooLong},
		"data over 1 MiB in lines": {stream: "data: " + big[:maxEventData/2] + "\ndata: " + big[:maxEventData/2] + "\n\n", wantErr: errLineTooLong},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := newSSEReader(strings.NewReader(tc.stream))
			var err error
			for err == nil {
				_, err = r.next()
			}
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("error %v, want %v", err, tc.wantErr)
			}
		})
	}
}

// sseEvent frames an event as the server does.
func sseEvent(id uint64, typ string) string {
	b, _ := json.Marshal(Event{ID: id, Type: typ})
	return fmt.Sprintf("id: %d\nevent: %s\ndata: %s\n\n", id, typ, b)
}

// sendSSE writes s and flushes it, so it reaches the client in a read of
// its own.
func sendSSE(w http.ResponseWriter, s string) {
	_, _ = io.WriteString(w, s)
	w.(http.Flusher).Flush()
}

// streamServer answers the n-th connection (from 0) to the event stream
// with serve and records the Last-Event-ID header of each.
type streamServer struct {
	t     *testing.T
	serve func(n int, w http.ResponseWriter, r *http.Request)

	mu          sync.Mutex
	lastEventID []string
}

func (s *streamServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/namespaces/team-a/sessions/chat-1/events" || r.Header.Get("Accept") != "text/event-stream" {
		s.t.Errorf("request %s with Accept %q", r.URL, r.Header.Get("Accept"))
	}
	s.mu.Lock()
	n := len(s.lastEventID)
	s.lastEventID = append(s.lastEventID, r.Header.Get("Last-Event-ID"))
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	s.serve(n, w, r)
}

func (s *streamServer) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.lastEventID...)
}

// nextIDs reads n events and returns their IDs and types as "id:type".
func nextIDs(t *testing.T, es *EventStream, n int) []string {
	t.Helper()
	var got []string
	for range n {
		ev, err := es.Next()
		if err != nil {
			t.Fatalf("Next after %v: %v", got, err)
		}
		got = append(got, fmt.Sprintf("%d:%s", ev.ID, ev.Type))
	}
	return got
}

func TestEventStreamParsesAndTracksIDs(t *testing.T) {
	srv := &streamServer{t: t, serve: func(n int, w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("runtime") != "true" {
			t.Errorf("query %q, want runtime=true", r.URL.RawQuery)
		}
		sendSSE(w, ": welcome\n\n")
		// An event split across writes, with its JSON over two data lines.
		sendSSE(w, "id: 1\nevent: turn\ndata: {\"id\":1,\"type\":\"turn\",\n")
		sendSSE(w, "data: \"text\":\"hello\"}\n\n")
		// No id in the JSON: the id line supplies it.
		sendSSE(w, "id: 2\n")
		sendSSE(w, "event: steer\ndata: {\"type\":\"steer\"}\n\n")
		// An id-only block moves LastEventID but is no event.
		sendSSE(w, "id: 3\n\n")
		// Data that is not an Event is reported but does not end the stream.
		sendSSE(w, "id: 4\ndata: not json\n\n")
		// No id line: LastEventID stays where it was.
		sendSSE(w, "data: {\"id\":9,\"type\":\"abort\"}\n\n")
	}}
	s := newTestSession(t, srv)
	es, err := s.Events(testContext(t), EventsOptions{Runtime: true, LastEventID: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer es.Close()

	type step struct {
		event  Event
		err    bool
		lastID uint64
	}
	want := []step{
		{event: Event{ID: 1, Type: EventTurn, Text: "hello"}, lastID: 1},
		{event: Event{ID: 2, Type: EventSteer}, lastID: 2},
		{err: true, lastID: 4},
		{event: Event{ID: 9, Type: EventAbort}, lastID: 4},
	}
	var got []step
	for range want {
		ev, err := es.Next()
		got = append(got, step{event: ev, err: err != nil, lastID: es.LastEventID()})
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(step{})); diff != "" {
		t.Errorf("steps (-want,+got):\n%s", diff)
	}
	if _, err := es.Next(); err != io.EOF {
		t.Errorf("Next at the end of the stream: %v, want io.EOF", err)
	}
	if got := srv.seen(); len(got) != 1 {
		t.Errorf("%d connections without Reconnect, want 1", len(got))
	}
}

func TestEventStreamReconnectResumes(t *testing.T) {
	srv := &streamServer{t: t, serve: func(n int, w http.ResponseWriter, r *http.Request) {
		switch n {
		case 0:
			sendSSE(w, sseEvent(6, "turn")+sseEvent(7, "started"))
			// The connection drops in the middle of event 8.
			sendSSE(w, "id: 8\nevent: completed\ndata: {\"id\":8,")
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			_ = conn.Close()
		case 1:
			// The server ends the stream cleanly.
			sendSSE(w, sseEvent(8, "completed"))
		case 2:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"code":"SessionNotReady","message":"restarting"}`)
		case 3:
			sendSSE(w, sseEvent(9, "abort"))
			<-r.Context().Done()
		default:
			t.Errorf("connection %d", n)
		}
	}}
	s := newTestSession(t, srv)
	es, err := s.Events(testContext(t), EventsOptions{LastEventID: 5, Reconnect: true})
	if err != nil {
		t.Fatal(err)
	}
	defer es.Close()

	got := nextIDs(t, es, 4)
	if diff := cmp.Diff([]string{"6:turn", "7:started", "8:completed", "9:abort"}, got); diff != "" {
		t.Errorf("events (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"5", "7", "8", "8"}, srv.seen()); diff != "" {
		t.Errorf("Last-Event-ID of each connection (-want,+got):\n%s", diff)
	}
}

// A FromNow stream asks for from=now until the server names an id, then
// resumes after the last id like any other.
func TestEventStreamFromNow(t *testing.T) {
	var froms []string
	srv := &streamServer{t: t, serve: func(n int, w http.ResponseWriter, r *http.Request) {
		froms = append(froms, r.URL.Query().Get("from"))
		switch n {
		case 0:
			// The server names the newest event, then a new one comes.
			sendSSE(w, "id: 41\n\n"+sseEvent(42, "turn"))
		case 1:
			sendSSE(w, sseEvent(43, "steer"))
			<-r.Context().Done()
		default:
			t.Errorf("connection %d", n)
		}
	}}
	s := newTestSession(t, srv)
	es, err := s.Events(testContext(t), EventsOptions{FromNow: true, Reconnect: true})
	if err != nil {
		t.Fatal(err)
	}
	defer es.Close()
	if diff := cmp.Diff([]string{"42:turn", "43:steer"}, nextIDs(t, es, 2)); diff != "" {
		t.Errorf("events (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"", "42"}, srv.seen()); diff != "" {
		t.Errorf("Last-Event-ID of each connection (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"now", ""}, froms); diff != "" {
		t.Errorf("from of each connection (-want,+got):\n%s", diff)
	}
}

func TestEventStreamReconnectStopsOnAuthErrors(t *testing.T) {
	for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			srv := &streamServer{t: t, serve: func(n int, w http.ResponseWriter, r *http.Request) {
				if n == 0 {
					sendSSE(w, sseEvent(1, "turn"))
					return
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(status)
				_, _ = io.WriteString(w, `{"code":"Forbidden","message":"no"}`)
			}}
			s := newTestSession(t, srv)
			es, err := s.Events(testContext(t), EventsOptions{Reconnect: true})
			if err != nil {
				t.Fatal(err)
			}
			defer es.Close()
			nextIDs(t, es, 1)
			for range 2 {
				_, err := es.Next()
				var e *Error
				if !errors.As(err, &e) || e.Status != status {
					t.Errorf("Next: %v, want the %d reply", err, status)
				}
			}
			if got := len(srv.seen()); got != 2 {
				t.Errorf("%d connections, want 2: no retry after a %d", got, status)
			}
		})
	}
}

func TestEventStreamReconnectsWhenIdle(t *testing.T) {
	srv := &streamServer{t: t, serve: func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 0 {
			// Keepalives hold the connection open for a while, then the
			// server goes silent.
			sendSSE(w, sseEvent(1, "turn"))
			for range 10 {
				time.Sleep(20 * time.Millisecond)
				sendSSE(w, ": keepalive\n")
			}
			sendSSE(w, sseEvent(2, "steer"))
		} else {
			sendSSE(w, sseEvent(3, "abort"))
		}
		<-r.Context().Done()
	}}
	s := newTestSession(t, srv)
	s.c.streamIdle = 100 * time.Millisecond
	es, err := s.Events(testContext(t), EventsOptions{Reconnect: true})
	if err != nil {
		t.Fatal(err)
	}
	defer es.Close()
	if diff := cmp.Diff([]string{"1:turn", "2:steer", "3:abort"}, nextIDs(t, es, 3)); diff != "" {
		t.Errorf("events (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"", "2"}, srv.seen()); diff != "" {
		t.Errorf("Last-Event-ID of each connection (-want,+got):\n%s", diff)
	}
}

func TestEventStreamEnds(t *testing.T) {
	silent := func(n int, w http.ResponseWriter, r *http.Request) {
		sendSSE(w, ": hello\n")
		<-r.Context().Done()
	}
	t.Run("Close unblocks Next", func(t *testing.T) {
		s := newTestSession(t, &streamServer{t: t, serve: silent})
		es, err := s.Events(testContext(t), EventsOptions{Reconnect: true})
		if err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() {
			_, err := es.Next()
			errc <- err
		}()
		time.Sleep(20 * time.Millisecond)
		_ = es.Close()
		if err := <-errc; err != io.EOF {
			t.Errorf("Next after Close: %v, want io.EOF", err)
		}
	})
	t.Run("the context's end", func(t *testing.T) {
		s := newTestSession(t, &streamServer{t: t, serve: silent})
		ctx, cancel := context.WithTimeout(testContext(t), 50*time.Millisecond)
		defer cancel()
		es, err := s.Events(ctx, EventsOptions{Reconnect: true})
		if err != nil {
			t.Fatal(err)
		}
		defer es.Close()
		if _, err := es.Next(); err != context.DeadlineExceeded {
			t.Errorf("Next: %v, want context.DeadlineExceeded", err)
		}
	})
	t.Run("an error reply to the first connection", func(t *testing.T) {
		s := newTestSession(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"code":"SessionNotFound","message":"no session chat-1"}`)
		}))
		_, err := s.Events(testContext(t), EventsOptions{Reconnect: true})
		if !IsCode(err, CodeSessionNotFound) {
			t.Errorf("Events: %v, want SessionNotFound", err)
		}
	})
}

// A stream the server ends with an error event (its caller lost access)
// ends with that *Error, and does not reconnect.
func TestEventStreamErrorEventEndsStream(t *testing.T) {
	for _, tc := range []struct {
		code   string
		status int
	}{{CodeForbidden, http.StatusForbidden}, {CodeUnauthenticated, http.StatusUnauthorized}} {
		for _, reconnect := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/reconnect=%v", tc.code, reconnect), func(t *testing.T) {
				srv := &streamServer{t: t, serve: func(n int, w http.ResponseWriter, r *http.Request) {
					if n > 0 {
						t.Errorf("connection %d after the error event", n)
						return
					}
					data, _ := json.Marshal(Event{Type: EventError, Time: time.Unix(0, 0).UTC(),
						Error: tc.code + ": user alice may not get agentsessions/api: x"})
					sendSSE(w, sseEvent(1, "turn")+"event: error\ndata: "+string(data)+"\n\n")
				}}
				s := newTestSession(t, srv)
				es, err := s.Events(testContext(t), EventsOptions{Reconnect: reconnect})
				if err != nil {
					t.Fatal(err)
				}
				defer es.Close()
				nextIDs(t, es, 1)
				for range 2 {
					ev, err := es.Next()
					var e *Error
					if !errors.As(err, &e) {
						t.Fatalf("Next: %+v, %v; want the stream's *Error", ev, err)
					}
					if e.Code != tc.code || e.Status != tc.status || e.Message != "user alice may not get agentsessions/api: x" {
						t.Errorf("Next: %#v, want code %s, status %d and the server's message", e, tc.code, tc.status)
					}
					if !IsCode(err, tc.code) {
						t.Errorf("IsCode(%v, %s) is false", err, tc.code)
					}
				}
				if got := len(srv.seen()); got != 1 {
					t.Errorf("%d connections, want 1", got)
				}
			})
		}
	}
}

func TestStreamErrorText(t *testing.T) {
	for text, want := range map[string]Error{
		"Forbidden: no":          {Status: http.StatusForbidden, Code: CodeForbidden, Message: "no"},
		"Unauthenticated: a: b":  {Status: http.StatusUnauthorized, Code: CodeUnauthenticated, Message: "a: b"},
		"something went wrong":   {Status: http.StatusInternalServerError, Code: CodeInternal, Message: "something went wrong"},
		"not a code: but a text": {Status: http.StatusInternalServerError, Code: CodeInternal, Message: "not a code: but a text"},
	} {
		if got := streamError(text); *got != want {
			t.Errorf("streamError(%q) = %#v, want %#v", text, *got, want)
		}
	}
}
