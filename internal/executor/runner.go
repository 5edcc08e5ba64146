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
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

// The runner protocol is HTTP/1.1 over a unix socket between a worker (the
// client, Runner) and a runner (the server, RunnerServer) that share nothing
// but the socket's directory:
//
//	GET  /v1/command-types  -> {"commandTypes": ["bash", ...]}
//	POST /v1/run            {"commandType": "bash", "payload": {...}}
//	                        -> {"output": {...}, "error": "..."}
//
// A run lasts as long as its request: the worker cancels an attempt by
// closing the request, and the runner then stops the task as a cancelled
// context stops it in-process (the process group is killed).
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
}

// wireOutput is an Output with every field, as the runner answers it.
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
}

var _ http.Handler = &RunnerServer{}

// ServeHTTP answers the runner protocol.
func (s *RunnerServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == commandTypesPath && r.Method == http.MethodGet:
		writeJSON(w, commandTypesResponse{CommandTypes: s.Registry.CommandTypes()})
	case r.URL.Path == runPath && r.Method == http.MethodPost:
		s.run(w, r)
	default:
		http.Error(w, "not found", http.StatusNotFound)
	}
}

// run runs one task for as long as its request lasts.
func (s *RunnerServer) run(w http.ResponseWriter, r *http.Request) {
	var req runRequest
	body := http.MaxBytesReader(w, r.Body, maxRunRequestBytes)
	if err := json.NewDecoder(body).Decode(&req); err != nil {
		http.Error(w, fmt.Sprintf("invalid run request: %v", err), http.StatusBadRequest)
		return
	}
	// Reading the body to its end lets the server notice a closed
	// connection, which cancels r.Context() and so the task.
	_, _ = io.Copy(io.Discard, body)
	out, err := s.Registry.Run(r.Context(), Task{CommandType: req.CommandType, Payload: req.Payload})
	resp := runResponse{Output: wireOutput{
		Success: out.Success, ExitCode: out.ExitCode, Stdout: out.Stdout, Stderr: out.Stderr,
		Truncated: out.Truncated, Error: out.Error, Result: out.Result,
	}}
	if err != nil {
		resp.Error = err.Error()
	}
	writeJSON(w, resp)
}

// writeJSON answers v; a client that went away does not read it.
func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// ListenUnix listens on the unix socket path, replacing a socket left by a
// runner that did not stop cleanly.
func ListenUnix(path string) (net.Listener, error) {
	if info, err := os.Lstat(path); err == nil && info.Mode().Type() == os.ModeSocket {
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove the stale socket %s: %w", path, err)
		}
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	return l, nil
}

// ServeRunner serves s on l until ctx ends, then stops taking connections
// and waits up to drain for the runs in flight to end (the worker finishes
// or cancels them within its own grace period).
func ServeRunner(ctx context.Context, l net.Listener, s *RunnerServer, drain time.Duration) error {
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	select {
	case err := <-served:
		return fmt.Errorf("runner server: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drain)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		_ = srv.Close() // stops the runs still in flight
		return fmt.Errorf("runner server: runs still in flight after %s: %w", drain, err)
	}
	return nil
}

// Runner runs tasks in a runner process through its unix socket.
type Runner struct {
	client *http.Client
	// maxOutput bounds each of stdout and stderr the worker keeps of a
	// runner's answer, whatever the runner sends.
	maxOutput int
}

// NewRunner returns the client of the runner listening on socket. It keeps
// at most maxOutput bytes of each output stream of an answer (0 means
// DefaultMaxOutputBytes).
func NewRunner(socket string, maxOutput int) *Runner {
	if maxOutput <= 0 {
		maxOutput = DefaultMaxOutputBytes
	}
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}
	return &Runner{client: &http.Client{Transport: &http.Transport{DialContext: dial}}, maxOutput: maxOutput}
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
	err := r.call(ctx, http.MethodPost, runPath, runRequest{CommandType: t.CommandType, Payload: t.Payload}, &resp)
	if err != nil {
		if cause := context.Cause(ctx); cause != nil {
			return Output{ExitCode: -1}, fmt.Errorf("process stopped: %w", cause)
		}
		return Output{}, fmt.Errorf("run in the runner: %w", err)
	}
	o := resp.Output
	out := Output{Success: o.Success, ExitCode: o.ExitCode, Stdout: o.Stdout, Stderr: o.Stderr,
		Truncated: o.Truncated, Error: o.Error, Result: o.Result}
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
	if err := json.NewDecoder(limited).Decode(out); err != nil {
		return fmt.Errorf("decode the runner's answer: %w", err)
	}
	return nil
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
