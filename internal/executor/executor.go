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
	"sort"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"
)

// DefaultMaxOutputBytes bounds the stdout and stderr a task result keeps.
const DefaultMaxOutputBytes = 64 * 1024

// Task is what an executor needs to run one attempt of an ExternalTask.
type Task struct {
	// CommandType selects the executor, for example "bash" or "exec".
	CommandType string
	// Payload is the command's JSON payload.
	Payload json.RawMessage
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
}

// NewRegistry returns a registry with the built-in executors: "bash" runs a
// shell command line, "exec" runs a program with arguments and "read" reads a
// file, all bounded by maxOutput bytes of output (per stream for processes);
// 0 means DefaultMaxOutputBytes.
func NewRegistry(maxOutput int) *Registry {
	r := &Registry{executors: map[string]Executor{}}
	r.Register("bash", &ProcessExecutor{Shell: true, MaxOutputBytes: maxOutput})
	r.Register("exec", &ProcessExecutor{MaxOutputBytes: maxOutput})
	r.Register("read", &ReadExecutor{MaxBytes: maxOutput})
	return r
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

// Run executes t with the executor registered for its command type.
func (r *Registry) Run(ctx context.Context, t Task) (Output, error) {
	r.mu.RLock()
	e, ok := r.executors[t.CommandType]
	r.mu.RUnlock()
	if !ok {
		return Output{}, fmt.Errorf("%w %q", ErrUnknownCommandType, t.CommandType)
	}
	return e.Execute(ctx, t.Payload)
}

// ProcessPayload is the payload of "bash" and "exec" tasks.
type ProcessPayload struct {
	// Command is the shell command line ("bash" tasks).
	Command string `json:"command,omitempty"`
	// Args is the program and its arguments ("exec" tasks).
	Args []string `json:"args,omitempty"`
	// WorkingDir is the directory the process starts in; empty means the
	// worker's own working directory.
	WorkingDir string `json:"workingDir,omitempty"`
	// Env adds variables to the worker's environment.
	Env map[string]string `json:"env,omitempty"`
	// Stdin is written to the process's standard input.
	Stdin string `json:"stdin,omitempty"`
}

// ProcessExecutor runs a task as a child process. The process runs in its own
// process group so that a timeout or cancellation stops everything it started.
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

// command builds the process of argv with the payload's working
// directory, input and environment (added to the worker's own, in key
// order), in a process group of its own.
func command(pl ProcessPayload, argv []string, stdout, stderr io.Writer) *exec.Cmd {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = pl.WorkingDir
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if pl.Stdin != "" {
		cmd.Stdin = bytes.NewBufferString(pl.Stdin)
	}
	cmd.Env = os.Environ()
	keys := make([]string, 0, len(pl.Env))
	for k := range pl.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		cmd.Env = append(cmd.Env, k+"="+pl.Env[k])
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
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

	cmd := command(pl, argv, stdout, stderr)

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
		case <-waited:
		case <-time.After(grace):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-waited
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

// ReadPayload is the payload of "read" tasks.
type ReadPayload struct {
	// Path is the file to read, relative to the worker's working directory
	// unless absolute.
	Path string `json:"path"`
	// MaxBytes bounds the content returned; 0 means the executor's limit,
	// which is also the most it returns.
	MaxBytes int `json:"maxBytes,omitempty"`
}

// ReadOutput is the output JSON of a "read" task.
type ReadOutput struct {
	// Content is the start of the file, cut at the byte limit (and back to
	// the last whole UTF-8 character).
	Content string `json:"content"`
	// Bytes is the size of the whole file (the bytes read, for files that
	// report no size, such as those of procfs).
	Bytes int64 `json:"bytes"`
	// Truncated is set when Content is not the whole file.
	Truncated bool `json:"truncated"`
}

// ReadExecutor reads a regular file. Like a program that cannot be started,
// a file that is missing, unreadable, a directory or not a regular file
// fails the task with an error naming the path; nothing is read then.
type ReadExecutor struct {
	// MaxBytes bounds the content returned; 0 means DefaultMaxOutputBytes.
	MaxBytes int
}

var _ Executor = &ReadExecutor{}

// Execute reads the payload's file.
func (e *ReadExecutor) Execute(ctx context.Context, raw json.RawMessage) (Output, error) {
	var pl ReadPayload
	if len(raw) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&pl); err != nil {
			return Output{}, fmt.Errorf("invalid payload: %w", err)
		}
	}
	switch {
	case pl.Path == "":
		return Output{}, errors.New("invalid payload: path is required")
	case pl.MaxBytes < 0:
		return Output{}, fmt.Errorf("invalid payload: maxBytes must not be negative, got %d", pl.MaxBytes)
	}
	limit := e.MaxBytes
	if limit <= 0 {
		limit = DefaultMaxOutputBytes
	}
	if pl.MaxBytes > 0 && pl.MaxBytes < limit {
		limit = pl.MaxBytes
	}
	if err := context.Cause(ctx); err != nil {
		return Output{}, fmt.Errorf("read stopped: %w", err)
	}

	// Stat before opening: opening a FIFO would block.
	info, err := os.Stat(pl.Path)
	switch {
	case err != nil:
		return Output{}, readError(pl.Path, err)
	case info.IsDir():
		return Output{}, readError(pl.Path, errors.New("is a directory"))
	case !info.Mode().IsRegular():
		return Output{}, readError(pl.Path, fmt.Errorf("not a regular file (%s)", info.Mode().Type()))
	}
	f, err := os.Open(pl.Path)
	if err != nil {
		return Output{}, readError(pl.Path, err)
	}
	defer func() { _ = f.Close() }()
	// One byte past the limit tells a file that fills it exactly from a
	// longer one, also where the size is unknown (procfs reports 0).
	buf, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return Output{}, readError(pl.Path, err)
	}
	out := ReadOutput{Bytes: max(info.Size(), int64(len(buf)))}
	if len(buf) > limit {
		buf, out.Truncated = cutRunes(buf[:limit]), true
	}
	out.Content = string(buf)
	result, err := json.Marshal(out)
	if err != nil {
		return Output{}, err
	}
	return Output{Success: true, Truncated: out.Truncated, Result: result}, nil
}

// readError reports a failed read as "read <path>: <reason>", keeping the
// reason for errors.Is (fs.ErrNotExist, fs.ErrPermission).
func readError(path string, err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("read %s: %w", path, err)
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
