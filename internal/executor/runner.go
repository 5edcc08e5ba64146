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

package executor

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"golang.org/x/net/http2"
)

// The runner protocol is HTTP/2 over one unix-socket connection between a
// worker and a runner that share nothing but the socket's directory. The
// worker listens (ListenRunner) and is the HTTP client (Runner); the runner
// dials in and is the HTTP server (RunnerServer, ServeRunner):
//
//	GET  /v1/command-types  -> {"commandTypes": ["bash", ...]}
//	POST /v1/run            {"commandType": "bash", "payload": {...},
//	                         "heartbeatIntervalMs": 500}
//	                        -> {"heartbeat": "3/10"} ...  (one line each)
//	                           {"output": {...}, "error": "..."}
//
// A run that asks for heartbeats (heartbeatIntervalMs, when the worker's
// context carries WithHeartbeat) gets its command's heartbeat file in the
// runner's sandbox; each heartbeat the runner sees is one line of the
// answer before its last, which the worker hands to its Heartbeat. A
// heartbeat line is at most maxHeartbeatLine bytes.
//
// The direction keeps the socket out of the tasks' reach: the runner needs
// no write access to the directory (in a pod it mounts it read-only), so a
// task, running as the runner's user, can neither remove nor replace the
// socket. It can connect to it, but the worker serves one runner connection
// at a time and closes every other one at once; after losing its runner it
// accepts none for RunnerQuietPeriod, in which the runner's processes end
// (a runner is PID 1 of its container: when it exits, every task process
// dies with it). The runner exits when it loses its connection.
//
// A run lasts as long as its request: the worker cancels an attempt by
// resetting the request's stream, and the runner then stops the task as a
// cancelled context stops it in-process.
const (
	commandTypesPath = "/v1/command-types"
	runPath          = "/v1/run"
	// maxRunRequestBytes bounds a run request's body; the Session API
	// accepts bodies of up to 4 MiB.
	maxRunRequestBytes = 8 << 20
)

// runRequest is the body of a run.
type runRequest struct {
	CommandType string          `json:"commandType"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	// HeartbeatIntervalMs asks for heartbeats, looked for that often.
	HeartbeatIntervalMs int64 `json:"heartbeatIntervalMs,omitempty"`
}

// heartbeatFrame is a heartbeat line of a run's answer.
type heartbeatFrame struct {
	Heartbeat string `json:"heartbeat"`
}

// maxHeartbeatLine bounds a heartbeat line of a run's answer: a note of
// HeartbeatTail bytes, each escaped in JSON to at most 6.
const maxHeartbeatLine = 8 * HeartbeatTail

// wireOutput is an Output with every field, as the runner answers it.
// Output(w) and wireOutput(o) convert between the two, so a field added to
// one and not the other does not compile.
type wireOutput struct {
	Success   bool            `json:"success"`
	ExitCode  int             `json:"exitCode"`
	Stdout    string          `json:"stdout,omitempty"`
	Stderr    string          `json:"stderr,omitempty"`
	Truncated bool            `json:"truncated,omitempty"`
	Error     string          `json:"error,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
}

// runResponse is the answer to a run: Error is set when the task could not
// run (Registry.Run returned an error).
type runResponse struct {
	Output wireOutput `json:"output"`
	Error  string     `json:"error,omitempty"`
}

// commandTypesResponse is the answer to a command-types request.
type commandTypesResponse struct {
	CommandTypes []string `json:"commandTypes"`
}

// RunnerServer serves a Registry to the worker over the runner protocol.
// Give it a sandboxed Registry: the server runs whatever it is sent.
type RunnerServer struct {
	// Registry runs the tasks.
	Registry *Registry

	mu sync.Mutex
	// inFlight counts the runs going on; idle, when set, is closed when it
	// falls to zero after draining began.
	inFlight int
	draining bool
	idle     chan struct{}
}

var _ http.Handler = &RunnerServer{}

// ServeHTTP answers the runner protocol.
func (s *RunnerServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == commandTypesPath && r.Method == http.MethodGet:
		writeJSON(w, commandTypesResponse{CommandTypes: s.Registry.CommandTypes()})
	case r.URL.Path == runPath && r.Method == http.MethodPost:
		if !s.begin() {
			http.Error(w, "the runner is stopping", http.StatusServiceUnavailable)
			return
		}
		defer s.end()
		s.run(w, r)
	default:
		http.Error(w, "not found", http.StatusNotFound)
	}
}

// begin counts a run in, unless the server is draining.
func (s *RunnerServer) begin() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return false
	}
	s.inFlight++
	return true
}

// end counts a run out.
func (s *RunnerServer) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inFlight--
	if s.draining && s.inFlight == 0 {
		close(s.idle)
	}
}

// drain refuses new runs and returns a channel closed when none is left.
func (s *RunnerServer) drain() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.draining {
		s.draining = true
		s.idle = make(chan struct{})
		if s.inFlight == 0 {
			close(s.idle)
		}
	}
	return s.idle
}

// run runs one task for as long as its request lasts.
func (s *RunnerServer) run(w http.ResponseWriter, r *http.Request) {
	var req runRequest
	body := http.MaxBytesReader(w, r.Body, maxRunRequestBytes)
	if err := json.NewDecoder(body).Decode(&req); err != nil {
		http.Error(w, fmt.Sprintf("invalid run request: %v", err), http.StatusBadRequest)
		return
	}
	ctx := r.Context()
	if req.HeartbeatIntervalMs > 0 {
		ctx = WithHeartbeat(ctx, time.Duration(req.HeartbeatIntervalMs)*time.Millisecond, heartbeatLines(w))
	}
	out, err := s.Registry.Run(ctx, Task{CommandType: req.CommandType, Payload: req.Payload})
	resp := runResponse{Output: wireOutput(out)}
	if err != nil {
		resp.Error = err.Error()
	}
	writeJSON(w, resp)
}

// heartbeatLines writes each heartbeat of a run as one line of its answer,
// at once. The heartbeats of a run end before its answer is written
// (watchHeartbeat's stop waits for them).
func heartbeatLines(w http.ResponseWriter) Heartbeat {
	return func(progress string) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(heartbeatFrame{Heartbeat: progress})
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
}

// writeJSON answers v; a client that went away does not read it.
func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// RunnerQuietPeriod is how long a worker that lost its runner accepts no
// connection: the processes of the lost runner's tasks are gone by then.
const RunnerQuietPeriod = time.Second

// runnerSocketMode is the mode of the worker's socket: the runner, the same
// user or group, connects to it; the directory keeps others out.
const runnerSocketMode = 0o660

// dialRunnerSocket connects to the worker's socket.
func dialRunnerSocket(ctx context.Context, socket string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", socket)
}

// runnerCloseGrace bounds how long a stopping runner waits, once its runs
// ended, for the worker to read their answers before it closes the
// connection.
const runnerCloseGrace = 2 * time.Second

// ServeRunner connects to the worker's socket, trying again every retry
// until the worker answers or ctx ends, and serves s on that connection. It
// returns an error when the connection is lost: the runner then exits, and
// its tasks with it. When ctx ends it refuses new runs and waits up to drain
// for the runs in flight (the worker finishes or cancels them within its own
// grace period) and for their answers to be written before it closes the
// connection.
func ServeRunner(ctx context.Context, socket string, s *RunnerServer, drain, retry time.Duration) error {
	var conn net.Conn
	for {
		var err error
		if conn, err = dialRunnerSocket(ctx, socket); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("connect to the worker at %s: %w", socket, err)
		case <-time.After(retry):
		}
	}
	runs, stopRuns := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRuns()
	// The HTTP/2 server is configured onto an http.Server only so that its
	// Shutdown closes the connection gracefully (GOAWAY once the answers in
	// flight are written), never cutting an answer short.
	base := &http.Server{}
	h2 := &http2.Server{}
	if err := http2.ConfigureServer(base, h2); err != nil {
		_ = conn.Close()
		return err
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		h2.ServeConn(conn, &http2.ServeConnOpts{Context: runs, Handler: s, BaseConfig: base})
	}()
	select {
	case <-served:
		return errors.New("lost the connection to the worker")
	case <-ctx.Done():
	}
	idle := s.drain()
	var err error
	select {
	case <-idle:
		// The last answer's frames may still be on their way out: close
		// after they are written, or after the grace if the worker does not
		// read them.
		_ = base.Shutdown(context.Background())
		select {
		case <-served:
		case <-time.After(runnerCloseGrace):
		}
	case <-served:
	case <-time.After(drain):
		err = fmt.Errorf("runner: runs still in flight after %s", drain)
	}
	_ = conn.Close()
	stopRuns() // stops the runs still in flight
	<-served
	return err
}

// Runner runs tasks in the runner connected to the worker's socket.
type Runner struct {
	client *http.Client
	// maxOutput bounds each of stdout and stderr the worker keeps of a
	// runner's answer, whatever the runner sends.
	maxOutput int

	mu sync.Mutex
	// conn is the connected runner's, nil while none is.
	conn *http2.ClientConn
	// quietUntil is the end of the quiet period after a lost runner.
	quietUntil time.Time
	// refused counts the connections closed because a runner was connected
	// or in a quiet period.
	refused int
}

// errNoRunner is the error of a call while no runner is connected.
var errNoRunner = errors.New("no runner is connected")

// ListenRunner listens on the unix socket path (replacing a socket a worker
// that did not stop cleanly left there) for the runner, until ctx ends, and
// returns the client of the runner that connects. It keeps at most
// maxOutput bytes of each output stream of an answer (0 means
// DefaultMaxOutputBytes).
func ListenRunner(ctx context.Context, socket string, maxOutput int) (*Runner, error) {
	if info, err := os.Lstat(socket); err == nil && info.Mode().Type() == os.ModeSocket {
		if err := os.Remove(socket); err != nil {
			return nil, fmt.Errorf("remove the stale socket %s: %w", socket, err)
		}
	}
	l, err := net.Listen("unix", socket)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", socket, err)
	}
	if err := os.Chmod(socket, runnerSocketMode); err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("set the mode of %s: %w", socket, err)
	}
	if maxOutput <= 0 {
		maxOutput = DefaultMaxOutputBytes
	}
	r := &Runner{maxOutput: maxOutput}
	r.client = &http.Client{Transport: runnerTransport{r}}
	go func() {
		<-ctx.Done()
		_ = l.Close()
	}()
	go r.accept(l)
	return r, nil
}

// accept takes the runner's connections until l is closed.
func (r *Runner) accept(l net.Listener) {
	for {
		c, err := l.Accept()
		if errors.Is(err, net.ErrClosed) {
			r.mu.Lock()
			if r.conn != nil {
				_ = r.conn.Close()
			}
			r.mu.Unlock()
			return
		}
		if err != nil {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		r.adopt(c)
	}
}

// adopt makes c the runner's connection, unless a runner is connected or
// was lost less than RunnerQuietPeriod ago: then c is closed.
func (r *Runner) adopt(c net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conn != nil || time.Now().Before(r.quietUntil) {
		r.refused++
		_ = c.Close()
		return
	}
	wc := &watchedConn{Conn: c, lost: make(chan struct{})}
	cc, err := (&http2.Transport{}).NewClientConn(wc)
	if err != nil {
		_ = c.Close()
		return
	}
	r.conn = cc
	go func() {
		<-wc.lost
		_ = cc.Close()
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.conn == cc {
			r.conn = nil
			r.quietUntil = time.Now().Add(RunnerQuietPeriod)
		}
	}()
}

// Refused counts the connections to the worker's socket that were closed
// because a runner was connected or had just been lost.
func (r *Runner) Refused() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refused
}

// runnerTransport sends a request to the connected runner.
type runnerTransport struct{ r *Runner }

func (t runnerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.r.mu.Lock()
	cc := t.r.conn
	t.r.mu.Unlock()
	if cc == nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, errNoRunner
	}
	return cc.RoundTrip(req)
}

// watchedConn closes lost when a read or write fails or it is closed.
type watchedConn struct {
	net.Conn
	once sync.Once
	lost chan struct{}
}

func (c *watchedConn) gone(err error) {
	if err != nil {
		c.once.Do(func() { close(c.lost) })
	}
}

func (c *watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.gone(err)
	return n, err
}

func (c *watchedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.gone(err)
	return n, err
}

func (c *watchedConn) Close() error {
	c.gone(net.ErrClosed)
	return c.Conn.Close()
}

// maxResponseBytes bounds a runner's answer: two streams at the limit with
// every byte escaped, and room for the rest.
func (r *Runner) maxResponseBytes() int64 { return int64(r.maxOutput)*12 + 64<<10 }

// CommandTypes asks the runner which command types it runs.
func (r *Runner) CommandTypes(ctx context.Context) ([]string, error) {
	var resp commandTypesResponse
	if err := r.call(ctx, http.MethodGet, commandTypesPath, nil, &resp); err != nil {
		return nil, fmt.Errorf("ask the runner for its command types: %w", err)
	}
	return resp.CommandTypes, nil
}

// Registry waits until the runner answers, retrying every interval until ctx
// ends, and returns a Registry of its command types, each run by the runner.
func (r *Runner) Registry(ctx context.Context, interval time.Duration) (*Registry, error) {
	for {
		types, err := r.CommandTypes(ctx)
		if err == nil {
			reg := emptyRegistry(nil)
			for _, t := range types {
				reg.Register(t, &remoteExecutor{runner: r, commandType: t})
			}
			return reg, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (gave up: %w)", err, context.Cause(ctx))
		case <-time.After(interval):
		}
	}
}

// Run runs t in the runner. When ctx ends first the request is closed, which
// stops the task, and the error wraps ctx's cause.
func (r *Runner) Run(ctx context.Context, t Task) (Output, error) {
	var resp runResponse
	req := runRequest{CommandType: t.CommandType, Payload: t.Payload}
	hb, beats := ctx.Value(heartbeatKey{}).(heartbeatConfig)
	if beats {
		req.HeartbeatIntervalMs = max(hb.interval.Milliseconds(), 1)
	}
	err := r.call(ctx, http.MethodPost, runPath, req, &resp)
	if err != nil {
		if cause := context.Cause(ctx); cause != nil {
			return Output{ExitCode: -1}, fmt.Errorf("process stopped: %w", cause)
		}
		return Output{}, fmt.Errorf("run in the runner: %w", err)
	}
	out := Output(resp.Output)
	out.Stdout, out.Truncated = r.cut(out.Stdout, out.Truncated)
	out.Stderr, out.Truncated = r.cut(out.Stderr, out.Truncated)
	if resp.Error != "" {
		return out, errors.New(resp.Error)
	}
	return out, nil
}

// cut bounds s at the worker's output limit.
func (r *Runner) cut(s string, truncated bool) (string, bool) {
	if len(s) <= r.maxOutput {
		return s, truncated
	}
	return string(cutRunes([]byte(s[:r.maxOutput]))), true
}

// call sends one request with a JSON body (unless nil) and decodes the
// JSON answer into out.
func (r *Runner) call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode the request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://runner"+path, body)
	if err != nil {
		return fmt.Errorf("build the request: %w", err)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	limited := io.LimitReader(resp.Body, r.maxResponseBytes())
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(limited, 1024))
		return fmt.Errorf("runner answered %s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	if run, ok := out.(*runResponse); ok {
		return r.readRun(ctx, resp.Body, run)
	}
	if err := json.NewDecoder(limited).Decode(out); err != nil {
		return fmt.Errorf("decode the runner's answer: %w", err)
	}
	return nil
}

// readRun reads a run's answer: its heartbeat lines, each handed to the
// context's Heartbeat, then the answer, bounded as any answer is.
func (r *Runner) readRun(ctx context.Context, body io.Reader, out *runResponse) error {
	hb, _ := ctx.Value(heartbeatKey{}).(heartbeatConfig)
	br := bufio.NewReaderSize(body, maxHeartbeatLine)
	for {
		line, err := br.ReadSlice('\n')
		if err == nil && bytes.HasPrefix(line, []byte(`{"heartbeat"`)) {
			var f heartbeatFrame
			if json.Unmarshal(line, &f) == nil && hb.beat != nil {
				hb.beat(f.Heartbeat)
			}
			continue
		}
		// The answer: what was read of it, then the rest.
		rest := io.MultiReader(bytes.NewReader(slices.Clone(line)), br)
		if derr := json.NewDecoder(io.LimitReader(rest, r.maxResponseBytes())).Decode(out); derr != nil {
			return fmt.Errorf("decode the runner's answer: %w", derr)
		}
		return nil
	}
}

// remoteExecutor runs one command type in a runner.
type remoteExecutor struct {
	runner      *Runner
	commandType string
}

var _ Executor = &remoteExecutor{}

// Execute runs the payload in the runner.
func (e *remoteExecutor) Execute(ctx context.Context, payload json.RawMessage) (Output, error) {
	return e.runner.Run(ctx, Task{CommandType: e.commandType, Payload: payload})
}
