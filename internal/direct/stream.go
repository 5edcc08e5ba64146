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

package direct

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/workerproto"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// Admitter checks a worker's stream before it is accepted: the bearer token
// of r and whether its identity may serve hello.Namespace. A
// *sessionapi.Error gives the HTTP status and code of the refusal; any other
// error is a 500.
type Admitter func(ctx context.Context, r *http.Request, hello workerproto.DirectHello) error

// Refresher checks the token of a Token frame that the stream of r sent:
// nil lets the stream go on (checked with that token from then on, or,
// when the token could not be reviewed for now, again later), an error
// ends it (EndTokenRefused). ctx ends with the stream. The hub calls it
// for one frame of a stream at a time, never on the stream's reader.
type Refresher func(ctx context.Context, r *http.Request, token string) error

const (
	// helloTimeout bounds the wait for the Hello.
	helloTimeout = 5 * time.Second
	// maxHelloBytes bounds the Hello, read before the worker is admitted:
	// its lists at their bounds take well under this.
	maxHelloBytes = 128 << 10
	// maxListEntries bounds each list of a Hello and its labels.
	maxListEntries = 64
	// maxNameLen bounds each name in a Hello.
	maxNameLen = validation.DNS1123SubdomainMaxLength
	// readBufferBytes is the reader's buffer; a longer frame is assembled
	// in a buffer that is dropped after it.
	readBufferBytes = 8 << 10
	// writeChunk is how much of a batch is encoded before it is written.
	writeChunk = 32 << 10
	// keepWriteBuffer is the largest buffer a stream keeps between frames
	// (the batch's, the long frame reader's).
	keepWriteBuffer = 64 << 10
	// refusedRetryAfter is the Retry-After of a refusal for a bound.
	refusedRetryAfter = 5 * time.Second
)

var errFrameTooLarge = errors.New("direct: frame over the size limit")

type frameKind uint8

const (
	frameWelcome frameKind = iota
	frameTask
	frameCancel
	framePing
)

// outFrame is a frame queued for a stream's writer. A task frame is
// encoded from its call, whose task and attempt do not change.
type outFrame struct {
	kind   frameKind
	c      *call
	reason string
}

// stream is one admitted worker's Direct stream.
type stream struct {
	hello workerproto.DirectHello
	ns    *namespace
	since time.Time

	// Guarded by Hub.mu.
	busy      int
	draining  bool
	gone      bool
	endReason string
	held      callList

	// qmu guards queue, the frames the writer has not taken yet. Its
	// length is bounded: at most one Task and one Cancel per held attempt,
	// one Welcome, one Ping.
	qmu   sync.Mutex
	queue []outFrame
	// notify (capacity 1) wakes the writer; quit is closed when the stream
	// is gone.
	notify chan struct{}
	quit   chan struct{}
	// lastRecv is when the last frame arrived (Hub clock, Unix nanos).
	lastRecv atomic.Int64

	// req is the stream's request, which Refresh is given.
	req *http.Request
	// lastToken is when the last Token frame came (Hub clock); the reader
	// only uses it.
	lastToken time.Time
	// tokenMu guards nextToken, the token Refresh has not taken yet,
	// refreshing, set while a goroutine runs Refresh, and tokensDone, set
	// once the stream's handler waits for that goroutine (refreshes).
	tokenMu    sync.Mutex
	nextToken  string
	refreshing bool
	tokensDone bool
	refreshes  sync.WaitGroup
}

func (s *stream) enqueue(f outFrame) {
	s.qmu.Lock()
	s.queue = append(s.queue, f)
	s.qmu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// take swaps the queue for spare (emptied), returning the frames queued.
func (s *stream) take(spare []outFrame) []outFrame {
	clear(spare)
	s.qmu.Lock()
	q := s.queue
	s.queue = spare[:0]
	s.qmu.Unlock()
	return q
}

// ServeHTTP serves POST workerproto.DirectPath: it admits a worker's Direct
// stream and serves it until it ends.
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		h.refuse(w, &sessionapi.Error{Status: http.StatusMethodNotAllowed, Code: sessionapi.CodeMethodNotAllowed,
			Message: "the Direct stream is POST " + workerproto.DirectPath})
		return
	}
	if !h.leads() {
		h.refuse(w, notLeader())
		return
	}
	rc := http.NewResponseController(w)
	// HTTP/1.1 needs full duplex to write while the body is read; HTTP/2
	// always has it.
	_ = rc.EnableFullDuplex()
	_ = rc.SetReadDeadline(time.Now().Add(helloTimeout))

	fr := &frameReader{br: bufio.NewReaderSize(r.Body, readBufferBytes)}
	hello, err := readHello(fr)
	if err != nil {
		h.refuse(w, err)
		return
	}
	if err := h.o.Admit(r.Context(), r, *hello); err != nil {
		var apiErr *sessionapi.Error
		if !errors.As(err, &apiErr) {
			h.o.Log.Error(err, "Admitting a Direct stream failed", "namespace", hello.Namespace, "worker", hello.Worker)
			// The cause is logged, not told to a caller not yet admitted.
			apiErr = &sessionapi.Error{Status: http.StatusInternalServerError, Code: sessionapi.CodeInternal,
				Message: "the manager could not check the stream's credentials; retry later"}
		}
		h.refuse(w, apiErr)
		return
	}
	// refreshCtx ends with the stream: a Refresh in flight then returns.
	refreshCtx, endRefresh := context.WithCancel(r.Context())
	defer endRefresh()
	s := &stream{
		hello:  *hello,
		since:  h.clock.Now(),
		notify: make(chan struct{}, 1),
		quit:   make(chan struct{}),
		req:    r.WithContext(refreshCtx),
	}
	s.lastRecv.Store(s.since.UnixNano())
	if err := h.register(s); err != nil {
		h.refuse(w, err)
		return
	}
	h.o.Log.V(1).Info("Direct stream admitted", "namespace", hello.Namespace, "worker", hello.Worker,
		"node", hello.Node, "capacity", hello.Capacity)

	w.Header().Set("Content-Type", workerproto.DirectContentType)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)

	dl := &deadlines{rc: rc, every: h.o.DeadAfter}
	dl.extendRead(time.Now())
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		h.readFrames(s, fr, dl)
	}()
	h.writeFrames(r.Context(), s, w, dl)
	// The reader may still block in the body: a deadline in the past ends
	// its read, and the handler must not return while it reads.
	if rc.SetReadDeadline(time.Now().Add(-time.Second)) == nil {
		<-readerDone
	}
	endRefresh()
	s.tokenMu.Lock()
	s.tokensDone = true
	s.tokenMu.Unlock()
	s.refreshes.Wait()
}

func (h *Hub) leads() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.leading
}

func notLeader() *sessionapi.Error {
	return &sessionapi.Error{Status: http.StatusServiceUnavailable, Code: sessionapi.CodeNotLeader, RetryAfter: time.Second,
		Message: "this manager replica does not lead; Direct streams go to the leader, retry through the Service"}
}

// refuse answers a stream that is not admitted with err, a
// *sessionapi.Error.
func (h *Hub) refuse(w http.ResponseWriter, err error) {
	var e *sessionapi.Error
	if !errors.As(err, &e) {
		e = &sessionapi.Error{Status: http.StatusInternalServerError, Code: sessionapi.CodeInternal, Message: err.Error()}
	}
	StreamsRefused.WithLabelValues(e.Code).Inc()
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((e.RetryAfter+time.Second-1)/time.Second)))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(e)
}

func invalid(format string, args ...any) *sessionapi.Error {
	return &sessionapi.Error{Status: http.StatusBadRequest, Code: sessionapi.CodeInvalidRequest, Message: fmt.Sprintf(format, args...)}
}

// readHello reads and checks the stream's first frame.
func readHello(fr *frameReader) (*workerproto.DirectHello, error) {
	line, err := fr.next(maxHelloBytes)
	for err == nil && len(bytes.TrimSpace(line)) == 0 {
		line, err = fr.next(maxHelloBytes)
	}
	switch {
	case errors.Is(err, errFrameTooLarge):
		return nil, &sessionapi.Error{Status: http.StatusRequestEntityTooLarge, Code: sessionapi.CodeTooLarge,
			Message: fmt.Sprintf("the Hello is larger than %d bytes", maxHelloBytes)}
	case err != nil:
		return nil, invalid("no Hello frame: %v", err)
	}
	var f workerproto.WorkerFrame
	if err := json.Unmarshal(line, &f); err != nil {
		return nil, invalid("the first frame is not valid JSON: %v", err)
	}
	if f.Hello == nil {
		return nil, invalid("the first frame must be a hello")
	}
	if err := validateHello(f.Hello); err != nil {
		return nil, invalid("invalid hello: %v", err)
	}
	return f.Hello, nil
}

// validateHello checks what a Hello may hold.
func validateHello(h *workerproto.DirectHello) error {
	if errs := validation.IsDNS1123Subdomain(h.Worker); len(errs) > 0 {
		return fmt.Errorf("worker %q: %v", h.Worker, errs[0])
	}
	if errs := validation.IsDNS1123Label(h.Namespace); len(errs) > 0 {
		return fmt.Errorf("namespace %q: %v", h.Namespace, errs[0])
	}
	if h.Capacity < 1 || h.Capacity > workerproto.MaxDirectCapacity {
		return fmt.Errorf("capacity %d is not within 1..%d", h.Capacity, workerproto.MaxDirectCapacity)
	}
	if len(h.Node) > maxNameLen || len(h.Incarnation) > maxNameLen {
		return fmt.Errorf("node and incarnation are at most %d characters", maxNameLen)
	}
	for field, list := range map[string][]string{"queues": h.Queues, "lanes": h.Lanes, "commandTypes": h.CommandTypes} {
		if len(list) > maxListEntries {
			return fmt.Errorf("%s has %d entries, at most %d", field, len(list), maxListEntries)
		}
		for _, v := range list {
			if v == "" || len(v) > maxNameLen {
				return fmt.Errorf("%s: an entry is empty or longer than %d characters", field, maxNameLen)
			}
		}
	}
	if len(h.CommandTypes) == 0 {
		return errors.New("commandTypes is empty: the worker would run nothing")
	}
	if len(h.Labels) > maxListEntries {
		return fmt.Errorf("labels has %d entries, at most %d", len(h.Labels), maxListEntries)
	}
	for k, v := range h.Labels {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return fmt.Errorf("label %q: %v", k, errs[0])
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return fmt.Errorf("label %q: %v", k, errs[0])
		}
	}
	return nil
}

// register admits s: the bounds hold, it replaces an earlier stream of the
// same worker, it gets its Welcome and the waiters it serves.
func (h *Hub) register(s *stream) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.leading {
		return notLeader()
	}
	ns := h.namespaceLocked(s.hello.Namespace)
	// Two streams of one namespace/worker name: the newer replaces the older,
	// whose attempts are lost. A worker that reconnects after a network
	// failure is the usual case: its old stream may not have timed out yet,
	// and it no longer runs what was sent over it.
	old := ns.workers[s.hello.Worker]
	streams, inNS := h.streams, len(ns.list)
	if old != nil {
		streams--
		inNS--
	}
	var bound string
	switch {
	case inNS >= h.o.MaxWorkersPerNamespace:
		bound = fmt.Sprintf("namespace %s already has %d Direct workers connected, the most one namespace may have", s.hello.Namespace, inNS)
	case streams >= h.o.MaxWorkers:
		bound = fmt.Sprintf("the manager already holds %d Direct streams, the most it takes", streams)
	}
	if bound != "" {
		h.gcNamespaceLocked(ns)
		return &sessionapi.Error{Status: http.StatusTooManyRequests, Code: sessionapi.CodeQueueFull, RetryAfter: refusedRetryAfter,
			Message: bound + "; retry later or use fewer workers"}
	}
	s.ns = ns
	ns.workers[s.hello.Worker] = s
	ns.list = append(ns.list, s)
	h.streams++
	ns.g.workers.Inc()
	ns.g.free.Add(float64(s.hello.Capacity))
	if old != nil {
		// After s joined ns, so that ns is not dropped as empty.
		h.loseLocked(old, EndReplaced, ErrWorkerLost)
	}
	s.enqueue(outFrame{kind: frameWelcome, reason: h.runID})
	h.dispatchLocked(s)
	return nil
}

// deadlines keeps the stream's read and write deadlines ahead of now. Each
// extension costs a message to the HTTP/2 connection's goroutine and a
// timer, so a deadline is set 2*every ahead and moved only when less than
// every remains: a silent worker is cut between every and 2*every after its
// last frame (the hub's own check, on its clock, cuts it after DeadAfter),
// and a write blocks for at most 2*every.
type deadlines struct {
	rc    *http.ResponseController
	every time.Duration
	read  atomic.Int64 // Unix nanos
	write time.Time    // used by the writer only
}

func (d *deadlines) extendRead(now time.Time) {
	if now.UnixNano()+int64(d.every) < d.read.Load() {
		return
	}
	at := now.Add(2 * d.every)
	d.read.Store(at.UnixNano())
	_ = d.rc.SetReadDeadline(at)
}

func (d *deadlines) extendWrite(now time.Time) {
	if now.Add(d.every).Before(d.write) {
		return
	}
	d.write = now.Add(2 * d.every)
	_ = d.rc.SetWriteDeadline(d.write)
}

// readFrames decodes the worker's frames until the stream ends.
func (h *Hub) readFrames(s *stream, fr *frameReader, dl *deadlines) {
	for {
		line, err := fr.next(workerproto.MaxDirectFrameBytes)
		if err != nil {
			reason := EndRead
			switch {
			case errors.Is(err, errFrameTooLarge):
				reason = EndTooLarge
			case errors.Is(err, io.EOF):
				reason = EndEOF
				h.mu.Lock()
				if s.draining {
					reason = EndWorkerDone
				}
				h.mu.Unlock()
			case errors.Is(err, os.ErrDeadlineExceeded):
				reason = EndDead
			}
			h.lose(s, reason)
			return
		}
		select {
		case <-s.quit:
			return
		default:
		}
		s.lastRecv.Store(h.clock.Now().UnixNano())
		dl.extendRead(time.Now())
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var f workerproto.WorkerFrame
		if err := json.Unmarshal(line, &f); err != nil || f.Hello != nil {
			h.lose(s, EndProtocol)
			return
		}
		switch {
		case f.Result != nil:
			h.deliver(s, f.Result)
		case f.Drain:
			h.drain(s)
		case f.Token != "":
			if !h.takeToken(s, f.Token) {
				return
			}
		}
	}
}

// takeToken hands the rotated token of a Token frame to Refresh, on a
// goroutine of its own so that a slow review holds no Result up. A token
// over workerproto.MaxDirectTokenBytes, or one that comes sooner than
// workerproto.DirectMinTokenInterval after the previous one, ends the
// stream; false then.
func (h *Hub) takeToken(s *stream, token string) bool {
	now := h.clock.Now()
	reason, why := "", ""
	switch {
	case h.o.Refresh == nil:
		reason, why = EndProtocol, "this manager takes no Token frame"
	case len(token) > workerproto.MaxDirectTokenBytes:
		reason, why = EndTooLarge, fmt.Sprintf("a Token frame's token is over %d bytes", workerproto.MaxDirectTokenBytes)
	case !s.lastToken.IsZero() && now.Sub(s.lastToken) < workerproto.DirectMinTokenInterval:
		reason, why = EndTokenFlood, fmt.Sprintf("a Token frame came %s after the previous one, sooner than %s",
			now.Sub(s.lastToken), workerproto.DirectMinTokenInterval)
	}
	if reason != "" {
		h.o.Log.Info("Ending a Direct stream: its Token frame is refused", "namespace", s.hello.Namespace,
			"worker", s.hello.Worker, "reason", why)
		h.lose(s, reason)
		return false
	}
	s.lastToken = now
	s.tokenMu.Lock()
	defer s.tokenMu.Unlock()
	if s.tokensDone {
		return false
	}
	s.nextToken = token
	if !s.refreshing {
		s.refreshing = true
		s.refreshes.Add(1)
		go h.refresh(s)
	}
	return true
}

// refresh runs Refresh on the tokens takeToken hands over until none is
// left, and ends the stream if one is refused.
func (h *Hub) refresh(s *stream) {
	defer s.refreshes.Done()
	for {
		s.tokenMu.Lock()
		token := s.nextToken
		s.nextToken = ""
		if token == "" {
			s.refreshing = false
			s.tokenMu.Unlock()
			return
		}
		s.tokenMu.Unlock()
		err := h.o.Refresh(s.req.Context(), s.req, token)
		if err == nil {
			continue
		}
		if s.req.Context().Err() == nil {
			h.o.Log.Info("Ending a Direct stream: its rotated token is refused", "namespace", s.hello.Namespace,
				"worker", s.hello.Worker, "reason", err.Error())
		}
		h.lose(s, EndTokenRefused)
		return
	}
}

// writeFrames is the stream's writer: it sends what is queued, one flush
// per batch, a Ping when it sent nothing for a while, and ends the stream
// when the worker was silent for DeadAfter.
func (h *Hub) writeFrames(ctx context.Context, s *stream, w http.ResponseWriter, dl *deadlines) {
	// Ticking at half the ping interval, a Ping goes out when nothing else
	// did for half an interval to one interval.
	ticker := h.clock.NewTicker(max(h.o.PingInterval/2, time.Millisecond))
	defer ticker.Stop()
	var (
		buf     bytes.Buffer
		enc     = json.NewEncoder(&buf)
		spare   []outFrame
		sent    bool
		task    workerproto.DirectTask
		cancel  workerproto.DirectCancel
		welcome workerproto.DirectWelcome
	)
	enc.SetEscapeHTML(false)
	writeOut := func() error {
		if buf.Len() == 0 {
			return nil
		}
		dl.extendWrite(time.Now())
		_, err := w.Write(buf.Bytes())
		buf.Reset()
		return err
	}
	taskFrame := workerproto.ManagerFrame{Task: &task}
	cancelFrame := workerproto.ManagerFrame{Cancel: &cancel}
	welcomeFrame := workerproto.ManagerFrame{Welcome: &welcome}
	pingFrame := workerproto.ManagerFrame{Ping: true}
	for {
		select {
		case <-s.quit:
			return
		case <-ctx.Done():
			h.lose(s, EndContext)
			return
		case <-ticker.C():
			now := h.clock.Now()
			if now.Sub(time.Unix(0, s.lastRecv.Load())) >= h.o.DeadAfter {
				h.lose(s, EndDead)
				return
			}
			if !sent {
				s.enqueue(outFrame{kind: framePing})
			}
			sent = false
		case <-s.notify:
		}
		frames := s.take(spare)
		if len(frames) == 0 {
			spare = frames
			continue
		}
		now := h.clock.Now()
		var err error
		for i := range frames {
			f := &frames[i]
			switch f.kind {
			case frameWelcome:
				welcome = workerproto.DirectWelcome{Manager: h.o.Manager, RunID: f.reason}
				err = enc.Encode(&welcomeFrame)
			case frameTask:
				c := f.c
				t := c.t
				task = workerproto.DirectTask{ID: t.ID, Attempt: c.key.attempt, Namespace: t.Namespace, Queue: t.Queue,
					Lane: t.Lane, Session: t.Session, CommandType: t.CommandType, RunID: t.RunID, Payload: t.Payload,
					Traceparent: t.Traceparent}
				if !c.deadline.IsZero() {
					task.TimeoutMillis = max(c.deadline.Sub(now).Milliseconds(), 1)
				}
				if err = enc.Encode(&taskFrame); err != nil {
					// Nothing was written: the payload is not JSON. The
					// attempt fails; the stream and its other attempts go on.
					h.failSent(s, c, lanequeue.Permanent(ErrInvalidPayload))
					err = nil
				}
			case frameCancel:
				cancel = workerproto.DirectCancel{ID: f.c.t.ID, Attempt: f.c.key.attempt, Reason: f.reason}
				err = enc.Encode(&cancelFrame)
			case framePing:
				err = enc.Encode(&pingFrame)
			}
			if err != nil {
				h.o.Log.Error(err, "Encoding a Direct frame failed", "namespace", s.hello.Namespace, "worker", s.hello.Worker)
				h.lose(s, EndWrite)
				return
			}
			// A batch of large payloads is written as it is encoded, so
			// that the buffer holds at most one of them past writeChunk.
			if buf.Len() >= writeChunk {
				if err := writeOut(); err != nil {
					h.lose(s, EndWrite)
					return
				}
			}
		}
		spare = frames
		if err = writeOut(); err == nil {
			err = dl.rc.Flush()
		}
		if err != nil {
			h.lose(s, EndWrite)
			return
		}
		sent = true
		if buf.Cap() > keepWriteBuffer {
			buf = bytes.Buffer{} // enc and writeOut use the variable
		}
	}
}

// frameReader reads newline-delimited frames of bounded size.
type frameReader struct {
	br *bufio.Reader
	// long assembles a frame longer than br's buffer; it is dropped after
	// a frame larger than keepWriteBuffer so that one large Result does
	// not stay held.
	long []byte
}

// next returns the next line, valid until the next call, or
// errFrameTooLarge when it is longer than limit bytes.
func (f *frameReader) next(limit int) ([]byte, error) {
	if cap(f.long) > keepWriteBuffer {
		f.long = nil
	}
	line, err := f.br.ReadSlice('\n')
	if err == nil || (err == io.EOF && len(line) > 0) {
		if len(line) > limit {
			return nil, errFrameTooLarge
		}
		return line, nil
	}
	if !errors.Is(err, bufio.ErrBufferFull) {
		return nil, err
	}
	f.long = append(f.long[:0], line...)
	for {
		line, err = f.br.ReadSlice('\n')
		if len(f.long)+len(line) > limit {
			return nil, errFrameTooLarge
		}
		f.long = append(f.long, line...)
		switch {
		case err == nil || (err == io.EOF && len(line) > 0):
			return f.long, nil
		case !errors.Is(err, bufio.ErrBufferFull):
			return nil, err
		}
	}
}
