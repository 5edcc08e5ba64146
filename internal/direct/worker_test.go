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
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/workerproto"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// guard bounds every wait of a test for something that must happen; it
// only keeps a broken test from hanging.
const guard = 20 * time.Second

// testEnv is a hub served over real HTTP/2 and TLS.
type testEnv struct {
	t   testing.TB
	hub *Hub
	srv *httptest.Server
	clk *testingclock.FakeClock
}

type envOption func(*Options, *httptest.Server)

// newEnv starts a leading hub (run "run-1") with a fake clock, admitting
// every worker unless an option sets Admit.
func newEnv(t testing.TB, opts ...envOption) *testEnv {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	o := Options{
		Admit:     func(context.Context, *http.Request, workerproto.DirectHello) error { return nil },
		Manager:   "manager-0",
		Clock:     clk,
		DeadAfter: time.Hour, // streams die only when a test wants them to
	}
	mux := http.NewServeMux()
	srv := httptest.NewUnstartedServer(mux)
	srv.EnableHTTP2 = true
	for _, opt := range opts {
		opt(&o, srv)
	}
	hub := NewHub(o)
	mux.Handle(workerproto.DirectPath, hub)
	hub.Lead("run-1")
	srv.StartTLS()

	e := &testEnv{t: t, hub: hub, srv: srv, clk: clk}
	t.Cleanup(func() {
		hub.Close()
		srv.CloseClientConnections()
		srv.Close()
	})
	return e
}

func hello(name string) workerproto.DirectHello {
	return workerproto.DirectHello{Worker: name, Node: "node-1", Namespace: "team-a", Incarnation: name + "-1",
		Capacity: 1, CommandTypes: []string{"shell"}}
}

// testWorker is a worker speaking the Direct protocol, NDJSON over one
// HTTP/2 request.
type testWorker struct {
	t       testing.TB
	name    string
	resp    *http.Response
	cancel  context.CancelFunc
	mu      sync.Mutex
	body    *io.PipeWriter
	enc     *json.Encoder
	welcome workerproto.DirectWelcome
	// frames has every frame after the Welcome but Pings; pings counts those.
	frames chan workerproto.ManagerFrame
	pings  chan struct{}
	// ended is closed when the manager's body ended.
	ended chan struct{}
}

// dial opens a stream with h as Hello and returns the worker once it got
// its Welcome, or the refusal.
func (e *testEnv) dial(h workerproto.DirectHello) (*testWorker, *reply) {
	return e.dialRaw(func(enc *json.Encoder, _ io.Writer) error {
		return enc.Encode(workerproto.WorkerFrame{Hello: &h})
	}, h.Worker)
}

// dialRaw opens a stream whose first bytes first writes.
func (e *testEnv) dialRaw(first func(*json.Encoder, io.Writer) error, name string) (*testWorker, *reply) {
	t := e.t
	t.Helper()
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.srv.URL+workerproto.DirectPath, pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer token-of-"+name)
	req.Header.Set("Content-Type", workerproto.DirectContentType)
	w := &testWorker{t: t, name: name, cancel: cancel, body: pw, enc: json.NewEncoder(pw),
		frames: make(chan workerproto.ManagerFrame, 4096), pings: make(chan struct{}, 4096), ended: make(chan struct{})}
	go func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		_ = first(w.enc, pw)
	}()
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		cancel()
		t.Fatalf("dial: %v", err)
	}
	if resp.ProtoMajor != 2 {
		t.Fatalf("the stream is %s, want HTTP/2", resp.Proto)
	}
	if resp.StatusCode != http.StatusOK {
		t.Cleanup(cancel)
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		_ = resp.Body.Close()
		return nil, &reply{StatusCode: resp.StatusCode, Header: resp.Header, body: body}
	}
	w.resp = resp
	dec := json.NewDecoder(bufio.NewReader(resp.Body))
	var first0 workerproto.ManagerFrame
	if err := dec.Decode(&first0); err != nil || first0.Welcome == nil {
		t.Fatalf("want a Welcome first, got %+v, %v", first0, err)
	}
	w.welcome = *first0.Welcome
	go func() {
		defer close(w.ended)
		for {
			var f workerproto.ManagerFrame
			if err := dec.Decode(&f); err != nil {
				return
			}
			if f.Ping {
				w.pings <- struct{}{}
				continue
			}
			w.frames <- f
		}
	}()
	t.Cleanup(w.close)
	return w, &reply{StatusCode: resp.StatusCode, Header: resp.Header}
}

// reply is the manager's answer to a stream: its status and header, and
// the body of a refusal.
type reply struct {
	StatusCode int
	Header     http.Header
	body       []byte
}

// send writes frames to the manager.
func (w *testWorker) send(frames ...workerproto.WorkerFrame) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, f := range frames {
		if err := w.enc.Encode(f); err != nil {
			return err
		}
	}
	return nil
}

// write writes raw bytes to the manager.
func (w *testWorker) write(b []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, err := w.body.Write(b)
	return err
}

func (w *testWorker) result(id string, attempt int, success bool, output string) {
	w.t.Helper()
	r := &workerproto.DirectResult{ID: id, Attempt: attempt, Success: success}
	if output != "" {
		r.Output = json.RawMessage(output)
	}
	if err := w.send(workerproto.WorkerFrame{Result: r}); err != nil {
		w.t.Fatalf("send result: %v", err)
	}
}

// next returns the next Task or Cancel frame.
func (w *testWorker) next() workerproto.ManagerFrame {
	w.t.Helper()
	select {
	case f := <-w.frames:
		return f
	case <-time.After(guard):
		w.t.Fatalf("worker %s: no frame came", w.name)
	}
	return workerproto.ManagerFrame{}
}

func (w *testWorker) nextTask() *workerproto.DirectTask {
	w.t.Helper()
	f := w.next()
	if f.Task == nil {
		w.t.Fatalf("worker %s: want a Task, got %+v", w.name, f)
	}
	return f.Task
}

// noFrame fails when a Task or Cancel frame is waiting.
func (w *testWorker) noFrame() {
	w.t.Helper()
	select {
	case f := <-w.frames:
		w.t.Fatalf("worker %s: got an unexpected frame %+v", w.name, f)
	default:
	}
}

// waitEnded waits until the manager ended the stream.
func (w *testWorker) waitEnded() {
	w.t.Helper()
	select {
	case <-w.ended:
	case <-time.After(guard):
		w.t.Fatalf("worker %s: the manager did not end the stream", w.name)
	}
}

// serve answers every task with success and its id as output, until the
// stream ends.
func (w *testWorker) serve() {
	go func() {
		for {
			select {
			case f := <-w.frames:
				if f.Task != nil {
					_ = w.send(workerproto.WorkerFrame{Result: &workerproto.DirectResult{
						ID: f.Task.ID, Attempt: f.Task.Attempt, Success: true, Output: json.RawMessage(`"` + f.Task.ID + `"`)}})
				}
			case <-w.ended:
				return
			}
		}
	}()
}

func (w *testWorker) close() {
	w.cancel()
	_ = w.body.Close()
	if w.resp != nil {
		_ = w.resp.Body.Close()
	}
}

// ran is what Run returned.
type ran struct {
	res lanequeue.Result
	err error
}

// task builds a task of namespace team-a for the shell command type.
func task(id string) *Task {
	return &Task{Namespace: "team-a", Queue: "q", Lane: "tools", Session: "s1", ID: id, CommandType: "shell",
		Payload: json.RawMessage(`{"cmd":"true"}`)}
}

// start runs attempt n of t in a goroutine.
func (e *testEnv) start(ctx context.Context, t *Task, n int) <-chan ran {
	out := make(chan ran, 1)
	go func() {
		res, err := e.hub.Run(ctx, t, lanequeue.Attempt{ID: t.ID, Number: n})
		out <- ran{res, err}
	}()
	return out
}

func wait(t testing.TB, ch <-chan ran) ran {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(guard):
		t.Fatal("Run did not return")
	}
	return ran{}
}

// stateOf is the state of an attempt in the hub, or -1 when it is not in it.
func (e *testEnv) stateOf(ns, id string, attempt int) callState {
	e.hub.mu.Lock()
	defer e.hub.mu.Unlock()
	c := e.hub.attempts[attemptKey{taskKey{ns, id}, attempt}]
	if c == nil {
		return 255
	}
	return c.state
}

// eventually waits until cond holds.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(guard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitState waits until the attempt is in state want.
func (e *testEnv) waitState(ns, id string, attempt int, want callState) {
	e.t.Helper()
	eventually(e.t, "attempt "+id+" in the expected state", func() bool { return e.stateOf(ns, id, attempt) == want })
}

func counter(c prometheus.Collector) float64 { return testutil.ToFloat64(c) }

func apiError(t testing.TB, resp *reply) sessionapi.Error {
	t.Helper()
	var e sessionapi.Error
	if err := json.Unmarshal(resp.body, &e); err != nil {
		t.Fatalf("refusal body: %v", err)
	}
	return e
}

var _ = errors.Is

func testingProcs() int { return runtime.GOMAXPROCS(0) }
