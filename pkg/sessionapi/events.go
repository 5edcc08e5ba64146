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
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// maxEventData bounds one line of the event stream, and the data of one
// event.
const maxEventData = 1 << 20

// errLineTooLong ends a stream whose server sent a line or an event over
// maxEventData: reconnecting would only bring it again.
var errLineTooLong = fmt.Errorf("sessionapi: event stream: a line or an event is over %d bytes", maxEventData)

// errStreamIdle drops a connection that sent nothing, not even a keepalive,
// for the client's streamIdle.
var errStreamIdle = errors.New("sessionapi: event stream: the server sent nothing for too long")

// EventError is the type of the last event of a stream the server ended
// because its caller lost access (a later review refused the token or the
// RBAC); its error is "<code>: <message>". Next returns it as an *Error with
// that code (Forbidden, Unauthenticated) and the stream ends: it does not
// reconnect.
const EventError = "error"

// streamError is the *Error an error event's text "<code>: <message>"
// stands for, with the status a call refused alike gets.
func streamError(text string) *Error {
	code, msg, ok := strings.Cut(text, ": ")
	if !ok || code == "" || strings.ContainsAny(code, " \t") {
		code, msg = CodeInternal, text
	}
	status := http.StatusInternalServerError
	switch code {
	case CodeForbidden:
		status = http.StatusForbidden
	case CodeUnauthenticated:
		status = http.StatusUnauthorized
	case CodeSessionNotFound:
		status = http.StatusNotFound
	}
	return &Error{Status: status, Code: code, Message: msg}
}

// EventsOptions say where an event stream starts and how it outlives a
// dropped connection.
type EventsOptions struct {
	// LastEventID resumes the stream after this event (Last-Event-ID); 0
	// sends none and lets the server pick where the stream starts. An id
	// of an earlier manager run brings a gap event first (EventGap); an id
	// the session never had is refused with FutureEventID.
	LastEventID uint64
	// FromNow starts the stream after the session's newest event, skipping
	// what it retains (from=now), unless LastEventID is set. The server
	// names that event's id at once, so a reconnect resumes from it.
	FromNow bool
	// Runtime marks the stream as the session's runtime, which takes steers
	// while it is connected (runtime=true).
	Runtime bool
	// Reconnect makes a dropped stream reconnect with Last-Event-ID set to
	// the last event seen, after a backoff from 100ms doubling to 5s. A 401,
	// 403 or 404 reply to a reconnect ends the stream with that *Error. A
	// connection that sends nothing for 45s, keepalives included, counts
	// as dropped.
	Reconnect bool
}

// EventStream reads a session's events. Next must not be called
// concurrently; Close and LastEventID may be called from any goroutine.
type EventStream struct {
	s      *SessionClient
	opts   EventsOptions
	ctx    context.Context // ends with the caller's context or Close
	cancel context.CancelFunc
	lastID atomic.Uint64

	mu     sync.Mutex // guards conn against Close, and closed
	conn   *sseConn   // nil between connections; written only by Events and Next
	closed bool

	backoff time.Duration // the last wait before a reconnect
	err     error         // once set, every Next returns it
}

// Events connects to the session's event stream. A non-2xx reply is
// returned as an *Error; the first connection is not retried.
func (s *SessionClient) Events(ctx context.Context, opts EventsOptions) (*EventStream, error) {
	ctx, cancel := context.WithCancel(ctx)
	es := &EventStream{s: s, opts: opts, ctx: ctx, cancel: cancel}
	es.lastID.Store(opts.LastEventID)
	if err := es.connect(); err != nil {
		cancel()
		return nil, err
	}
	return es, nil
}

// Next blocks for the next event. It returns ctx.Err() once the context
// given to Events ends, and io.EOF once the stream was closed or, without
// Reconnect, the server ended it; other errors of a connection without
// Reconnect are returned as they are. An error event (EventError: the
// server refused the caller on a later review) is returned as an *Error with
// its code, with or without Reconnect. All of these end the stream. An event
// whose data is not an Event is returned as an error that does not.
func (es *EventStream) Next() (Event, error) {
	for es.err == nil {
		if es.conn == nil {
			es.backoff = es.s.c.nextBackoff(es.backoff)
			if err := sleep(es.ctx, es.backoff); err != nil {
				es.err = es.endErr(err)
				continue
			}
			if err := es.connect(); err != nil {
				var e *Error
				if errors.As(err, &e) && (e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden || e.Status == http.StatusNotFound) {
					es.err = err
				} else if es.ctx.Err() != nil {
					es.err = es.endErr(err)
				}
				continue
			}
		}
		raw, err := es.conn.r.next()
		if err != nil {
			if es.conn.idle.Load() {
				err = errStreamIdle
			}
			es.disconnect()
			switch {
			case errors.Is(err, errLineTooLong):
				es.err = err
			case es.ctx.Err() != nil:
				es.err = es.endErr(err)
			case !es.opts.Reconnect:
				es.err = err
			}
			continue
		}
		es.backoff = 0
		var id uint64
		if raw.hasID {
			if n, err := strconv.ParseUint(raw.id, 10, 64); err == nil {
				id = n
				es.lastID.Store(id)
			}
		}
		if len(raw.data) == 0 {
			continue // an id-only block: SSE dispatches nothing
		}
		var ev Event
		if err := json.Unmarshal(raw.data, &ev); err != nil {
			return Event{}, fmt.Errorf("sessionapi: event stream: event %q: %w", raw.id, err)
		}
		if ev.ID == 0 {
			ev.ID = id
		}
		if ev.Type == "" {
			ev.Type = raw.event
		}
		if ev.Type == EventError {
			// The server ended the stream, its caller refused: reconnecting
			// would be refused too.
			es.disconnect()
			es.err = streamError(ev.Error)
			continue
		}
		return ev, nil
	}
	return Event{}, es.err
}

// LastEventID returns the id of the last event received, or the
// LastEventID the stream started after.
func (es *EventStream) LastEventID() uint64 { return es.lastID.Load() }

// Close ends the stream; a blocked Next returns io.EOF.
func (es *EventStream) Close() error {
	es.mu.Lock()
	es.closed = true
	conn := es.conn
	es.mu.Unlock()
	es.cancel()
	if conn != nil {
		conn.close()
	}
	return nil
}

// endErr is what Next returns once the stream's context ended.
func (es *EventStream) endErr(err error) error {
	es.mu.Lock()
	closed := es.closed
	es.mu.Unlock()
	switch {
	case closed:
		return io.EOF
	case es.ctx.Err() != nil:
		return es.ctx.Err()
	}
	return err
}

// connect opens a connection that resumes after the last event seen.
func (es *EventStream) connect() error {
	ctx, cancel := context.WithCancel(es.ctx)
	query := url.Values{}
	if es.opts.Runtime {
		query.Set("runtime", "true")
	}
	id := es.lastID.Load()
	if id == 0 && es.opts.FromNow {
		query.Set("from", "now")
	}
	req, err := es.s.c.newRequest(ctx, http.MethodGet, es.s.prefix+"/events", query, nil)
	if err != nil {
		cancel()
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	if id > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatUint(id, 10))
	}
	resp, err := es.s.c.send(req) //nolint:bodyclose // closed by drainClose below, or by the sseConn that holds it
	if err != nil {
		cancel()
		return err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		drainClose(resp.Body)
		cancel()
		return fmt.Errorf("sessionapi: event stream: the reply is %q, not text/event-stream", mt)
	}
	conn := &sseConn{body: resp.Body, cancel: cancel}
	conn.timer = time.AfterFunc(es.s.c.streamIdle, func() {
		conn.idle.Store(true)
		cancel()
	})
	conn.r = newSSEReader(&idleReader{r: resp.Body, t: conn.timer, d: es.s.c.streamIdle})

	es.mu.Lock()
	defer es.mu.Unlock()
	if es.closed {
		conn.close()
		return io.EOF
	}
	es.conn = conn
	return nil
}

// disconnect closes the current connection.
func (es *EventStream) disconnect() {
	es.mu.Lock()
	conn := es.conn
	es.conn = nil
	es.mu.Unlock()
	conn.close()
}

// sseConn is one connection of an EventStream.
type sseConn struct {
	body   io.ReadCloser
	r      *sseReader
	cancel context.CancelFunc
	timer  *time.Timer // cancels the connection when the server goes silent
	idle   atomic.Bool // the timer fired
}

func (c *sseConn) close() {
	c.timer.Stop()
	c.cancel() // unblocks a Read in progress before Close waits for it
	_ = c.body.Close()
}

// idleReader restarts t whenever the server sends something.
type idleReader struct {
	r io.Reader
	t *time.Timer
	d time.Duration
}

func (r *idleReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		r.t.Reset(r.d)
	}
	return n, err
}

// sseReader parses a Server-Sent Events stream as it arrives. Lines end in
// \n or \r\n.
type sseReader struct {
	sc *bufio.Scanner
}

func newSSEReader(r io.Reader) *sseReader {
	sc := bufio.NewScanner(r)
	// Room for a line of maxEventData and its \r\n.
	sc.Buffer(make([]byte, 0, 4<<10), maxEventData+2)
	return &sseReader{sc: sc}
}

// sseBlock is the fields of one dispatched SSE event.
type sseBlock struct {
	id    string
	hasID bool
	event string
	data  []byte
}

// next returns the next block that set an id or data; io.EOF when the
// stream ended, dropping an event it had not finished.
func (r *sseReader) next() (sseBlock, error) {
	var b sseBlock
	hasData := false
	for r.sc.Scan() {
		line := r.sc.Bytes()
		if len(line) == 0 {
			if b.hasID || hasData {
				return b, nil
			}
			b = sseBlock{}
			continue
		}
		if line[0] == ':' {
			continue // a comment, such as the server's keepalive
		}
		name, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(name) {
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				b.id, b.hasID = string(value), true
			}
		case "event":
			b.event = string(value)
		case "data":
			if hasData {
				b.data = append(b.data, '\n')
			}
			b.data = append(b.data, value...)
			hasData = true
			if len(b.data) > maxEventData {
				return sseBlock{}, errLineTooLong
			}
		}
	}
	if err := r.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return sseBlock{}, errLineTooLong
		}
		return sseBlock{}, err
	}
	return sseBlock{}, io.EOF
}
