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

// Package executor runs the command types of External-lane tasks: a Registry
// maps each command type ("bash", "exec", "read", and any a program adds) to
// an Executor. Workers (internal/worker) and the scripted agent runtime
// (internal/agentscript) build their own Registry; the package has no
// Kubernetes dependencies, so an HTTP-only binary such as cmd/agent can link
// it without the API client.
//
// A Registry with a Sandbox (sandbox.go) runs every attempt in a private
// directory with an environment built from nothing, which is how workers run
// other people's tasks; with an Init (reaper_linux.go) each process task runs
// under an init that ends the task's whole process tree with its attempt. A
// RunnerServer (runner.go) serves a Registry over a connection to the unix
// socket a worker listens on, and the worker's Runner runs tasks through it,
// so that the tasks run in another process (in a worker pod, another
// container) than the one holding the worker's credentials.
package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"sort"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"
)

// ErrNotStarted is wrapped by the error of a task whose command was never
// started because the attempt was stopped first: nothing of it ran.
var ErrNotStarted = errors.New("the command was not started")

// DefaultMaxOutputBytes bounds the stdout and stderr a task result keeps.
const DefaultMaxOutputBytes = 64 * 1024

// Task is what an executor needs to run one attempt of an ExternalTask.
type Task struct {
	// CommandType selects the executor, for example "bash" or "exec".
	CommandType string
	// Payload is the command's JSON payload.
	Payload json.RawMessage
	// Traceparent, when set, is the W3C traceparent of the worker's run of
	// the task: processes find it as $TRACEPARENT (TraceparentEnv), set
	// after the payload's variables so that a payload cannot replace it.
	// The caller passes only a value it formatted itself.
	Traceparent string
}

// TraceparentEnv is the variable a process finds its run's traceparent in.
const TraceparentEnv = "TRACEPARENT"

type traceparentKey struct{}

// WithTraceparent returns a context whose processes see tp as
// $TRACEPARENT.
func WithTraceparent(ctx context.Context, tp string) context.Context {
	return context.WithValue(ctx, traceparentKey{}, tp)
}

// Output is the result of running a task. A task that ran to completion has
// Success set when its exit code is 0; Error explains any failure.
type Output struct {
	Success  bool   `json:"-"`
	ExitCode int    `json:"exitCode"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr,omitempty"`
	// Truncated is set when the output was cut at the output limit.
	Truncated bool   `json:"truncated,omitempty"`
	Error     string `json:"-"`
	// Result, when set, is the output JSON of a command that runs no
	// process (such as "read"): it is reported instead of exitCode, stdout
	// and stderr.
	Result json.RawMessage `json:"-"`
}

// MarshalJSON encodes the output as it is reported in a task result: Result
// when it is set, the process fields otherwise.
func (o Output) MarshalJSON() ([]byte, error) {
	if o.Result != nil {
		return o.Result, nil
	}
	type process Output // the same fields without this method
	return json.Marshal(process(o))
}

// Executor runs one command type.
type Executor interface {
	Execute(ctx context.Context, payload json.RawMessage) (Output, error)
}

// ExecutorFunc adapts a function to Executor.
type ExecutorFunc func(ctx context.Context, payload json.RawMessage) (Output, error)

// Execute calls f.
func (f ExecutorFunc) Execute(ctx context.Context, payload json.RawMessage) (Output, error) {
	return f(ctx, payload)
}

// ErrUnknownCommandType is returned for a command type no executor handles.
var ErrUnknownCommandType = errors.New("no executor for command type")

// Registry maps command types to executors. It is safe for concurrent use.
type Registry struct {
	mu        sync.RWMutex
	executors map[string]Executor
	// sandbox, when set, gives each Run a private Attempt; it is set when
	// the registry is made and never changed.
	sandbox *Sandbox
}

// NewRegistry returns a registry with the built-in executors: "bash" runs a
// shell command line, "exec" runs a program with arguments and "read" reads a
// file, all bounded by maxOutput bytes of output (per stream for processes);
// 0 means DefaultMaxOutputBytes.
//
// Its tasks run in the program's working directory with its environment and
// may read any file it can: it is for a program's own tools, such as the
// scripted agent runtime's. Workers, which run other people's tasks, use
// NewSandboxedRegistry.
func NewRegistry(maxOutput int) *Registry {
	return builtins(emptyRegistry(nil), maxOutput)
}

// NewSandboxedRegistry returns a registry with the built-in executors of
// NewRegistry that runs every task in an Attempt of its own (see Sandbox).
func NewSandboxedRegistry(maxOutput int, sandbox Sandbox) *Registry {
	sandbox.Env = slices.Clone(sandbox.Env)
	return builtins(emptyRegistry(&sandbox), maxOutput)
}

// builtins registers the built-in executors in r.
func builtins(r *Registry, maxOutput int) *Registry {
	r.Register("bash", &ProcessExecutor{Shell: true, MaxOutputBytes: maxOutput})
	r.Register("exec", &ProcessExecutor{MaxOutputBytes: maxOutput})
	r.Register("read", &ReadExecutor{MaxBytes: maxOutput})
	return r
}

// emptyRegistry returns a registry without executors.
func emptyRegistry(sandbox *Sandbox) *Registry {
	return &Registry{executors: map[string]Executor{}, sandbox: sandbox}
}

// Register adds or replaces the executor for a command type.
func (r *Registry) Register(commandType string, e Executor) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.executors[commandType] = e
}

// CommandTypes lists the registered command types in sorted order.
func (r *Registry) CommandTypes() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.executors))
	for t := range r.executors {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// Run executes t with the executor registered for its command type. In a
// sandboxed registry the executor runs in a new Attempt, whose directory is
// removed when it returns; an executor that runs nothing (noop) needs none.
func (r *Registry) Run(ctx context.Context, t Task) (out Output, err error) {
	r.mu.RLock()
	e, ok := r.executors[t.CommandType]
	r.mu.RUnlock()
	if !ok {
		return Output{}, fmt.Errorf("%w %q", ErrUnknownCommandType, t.CommandType)
	}
	if t.Traceparent != "" {
		ctx = WithTraceparent(ctx, t.Traceparent)
	}
	if _, runsNothing := e.(runsNothing); r.sandbox == nil || runsNothing {
		return e.Execute(ctx, t.Payload)
	}
	a, err := r.sandbox.newAttempt()
	if err != nil {
		return Output{}, err
	}
	defer func() {
		if rmErr := removeAttemptDir(a.Dir); rmErr != nil && err == nil {
			err = rmErr
		}
	}()
	return e.Execute(WithAttempt(ctx, a), t.Payload)
}

// ProcessPayload is the payload of "bash" and "exec" tasks.
type ProcessPayload struct {
	// Command is the shell command line ("bash" tasks).
	Command string `json:"command,omitempty"`
	// Args is the program and its arguments ("exec" tasks).
	Args []string `json:"args,omitempty"`
	// WorkingDir is the directory the process starts in. In a sandbox it is
	// relative to the attempt's directory (created when missing) and may not
	// leave it; empty means the attempt's directory. Without a sandbox empty
	// means the program's working directory.
	WorkingDir string `json:"workingDir,omitempty"`
	// Env adds variables to the task's environment: in a sandbox to the one
	// it builds, without one to the program's own.
	Env map[string]string `json:"env,omitempty"`
	// Stdin is written to the process's standard input.
	Stdin string `json:"stdin,omitempty"`
}

// ProcessExecutor runs a task as a child process. The process runs in its own
// process group so that a timeout or cancellation stops everything it started.
// In a sandbox with an Init the process runs under a task init (reaper_linux.go)
// that ends the task's whole process tree when the attempt ends, however it
// ends, also the processes that left the group.
type ProcessExecutor struct {
	// Shell runs Command through "bash -c" (falling back to "sh -c" when bash
	// is missing) instead of running Args directly.
	Shell bool
	// MaxOutputBytes bounds each of stdout and stderr; 0 means
	// DefaultMaxOutputBytes.
	MaxOutputBytes int
	// KillGrace is how long a cancelled process has between SIGTERM and
	// SIGKILL; 0 means two seconds.
	KillGrace time.Duration
}

var _ Executor = &ProcessExecutor{}

// parse reads a process payload and returns the command line it runs.
func (p *ProcessExecutor) parse(raw json.RawMessage) (ProcessPayload, []string, error) {
	var pl ProcessPayload
	if len(raw) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&pl); err != nil {
			return pl, nil, fmt.Errorf("invalid payload: %w", err)
		}
	}
	var argv []string
	switch {
	case p.Shell && pl.Command == "":
		return pl, nil, errors.New("invalid payload: command is required")
	case p.Shell:
		shell := "bash"
		if _, err := exec.LookPath(shell); err != nil {
			shell = "sh"
		}
		argv = []string{shell, "-c", pl.Command}
	case len(pl.Args) == 0:
		return pl, nil, errors.New("invalid payload: args is required")
	default:
		argv = pl.Args
	}
	return pl, argv, nil
}

// command builds the process of argv with the payload's working directory,
// input and environment (in key order, after the attempt's environment, or
// the program's own outside a sandbox), in a process group of its own.
func command(ctx context.Context, pl ProcessPayload, argv []string, stdout, stderr io.Writer) (*exec.Cmd, error) {
	extra, err := payloadEnv(pl.Env)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = pl.WorkingDir, os.Environ()
	if a, ok := AttemptFrom(ctx); ok {
		if cmd.Dir, err = a.workingDir(pl.WorkingDir); err != nil {
			return nil, err
		}
		cmd.Env = slices.Clone(a.Env)
	}
	cmd.Env = append(cmd.Env, extra...)
	if tp, _ := ctx.Value(traceparentKey{}).(string); tp != "" {
		// After the payload's variables: the last of a name wins.
		cmd.Env = append(cmd.Env, TraceparentEnv+"="+tp)
	}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if pl.Stdin != "" {
		cmd.Stdin = bytes.NewBufferString(pl.Stdin)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd, nil
}

// Execute runs the payload's process and waits for it. A process that exits
// non-zero is a completed run with Success false, not an error; an error means
// the process could not be run or was stopped by ctx.
func (p *ProcessExecutor) Execute(ctx context.Context, raw json.RawMessage) (Output, error) {
	pl, argv, err := p.parse(raw)
	if err != nil {
		return Output{}, err
	}
	limit := p.MaxOutputBytes
	if limit <= 0 {
		limit = DefaultMaxOutputBytes
	}
	grace := p.KillGrace
	if grace <= 0 {
		grace = 2 * time.Second
	}
	stdout := &limitedBuffer{limit: limit}
	stderr := &limitedBuffer{limit: limit}

	cmd, err := command(ctx, pl, argv, stdout, stderr)
	if err != nil {
		return Output{}, err
	}
	if hb := heartbeatPath(ctx); hb != "" {
		// After the payload's variables: a payload cannot point it elsewhere.
		cmd.Env = append(cmd.Env, HeartbeatEnv+"="+hb)
		defer watchHeartbeat(ctx, hb)()
	}

	if a, ok := AttemptFrom(ctx); ok && a.init != "" {
		if cmd.Err != nil {
			return Output{}, fmt.Errorf("start %s: %w", argv[0], cmd.Err)
		}
		return p.executeUnderInit(ctx, a.init, cmd, grace, stdout, stderr)
	}
	if err := cmd.Start(); err != nil {
		return Output{}, fmt.Errorf("start %s: %w", argv[0], err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()

	select {
	case err = <-waited:
	case <-ctx.Done():
		// Stop the whole process group: a shell's children must not outlive
		// the task.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-waited: //nolint:errcheck // the task was stopped: what Wait returns does not matter
		case <-time.After(grace):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-waited //nolint:errcheck // the task was killed: what Wait returns does not matter
		}
		return p.output(stdout, stderr, -1), fmt.Errorf("process stopped: %w", context.Cause(ctx))
	}

	out := p.output(stdout, stderr, cmd.ProcessState.ExitCode())
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		out.Success = true
	case errors.As(err, &exitErr):
		out.Error = fmt.Sprintf("exit code %d", out.ExitCode)
		if s := lastLine(out.Stderr); s != "" {
			out.Error += ": " + s
		}
	default:
		return out, err
	}
	return out, nil
}

func (p *ProcessExecutor) output(stdout, stderr *limitedBuffer, code int) Output {
	return Output{
		ExitCode:  code,
		Stdout:    stdout.String(),
		Stderr:    stderr.String(),
		Truncated: stdout.truncated || stderr.truncated,
	}
}

// cutRunes drops a UTF-8 character that b ends in the middle of, so that the
// cut does not turn into U+FFFD. Other invalid bytes are left alone.
func cutRunes(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			break
		}
	}
	return b
}

// lastLine returns the last non-empty line of s, at most 200 bytes of it.
func lastLine(s string) string {
	b := bytes.TrimRight([]byte(s), "\n\r\t ")
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[i+1:]
	}
	if len(b) > 200 {
		b = b[len(b)-200:]
	}
	return string(b)
}

// limitedBuffer keeps the first limit bytes written to it and drops the rest,
// remembering that it did. It never fails a write, so a chatty process is not
// killed by a closed pipe.
type limitedBuffer struct {
	mu        sync.Mutex
	buf       bytes.Buffer
	limit     int
	truncated bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	room := b.limit - b.buf.Len()
	if room < len(p) {
		b.truncated = true
		if room > 0 {
			b.buf.Write(p[:room])
		}
		return len(p), nil
	}
	b.buf.Write(p)
	return len(p), nil
}

func (b *limitedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
