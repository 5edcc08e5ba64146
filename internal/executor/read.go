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
	"io/fs"
	"os"
	"path/filepath"
)

// ReadPayload is the payload of "read" tasks.
type ReadPayload struct {
	// Path is the file to read. In a sandbox (Sandbox) it is relative to the
	// attempt's directory and may not leave it, not even through a symbolic
	// link; without one it is relative to the program's working directory
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

// files is where a read looks: an attempt's directory (an os.Root) or the
// host's filesystem.
type files interface {
	Stat(name string) (fs.FileInfo, error)
	Open(name string) (*os.File, error)
}

// hostFiles reads the program's own filesystem, for reads outside a sandbox.
type hostFiles struct{}

func (hostFiles) Stat(name string) (fs.FileInfo, error) { return os.Stat(name) }
func (hostFiles) Open(name string) (*os.File, error)    { return os.Open(name) }

// parseRead reads a read payload and returns the byte limit it gets.
func (e *ReadExecutor) parseRead(raw json.RawMessage) (ReadPayload, int, error) {
	var pl ReadPayload
	if len(raw) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&pl); err != nil {
			return pl, 0, fmt.Errorf("invalid payload: %w", err)
		}
	}
	switch {
	case pl.Path == "":
		return pl, 0, errors.New("invalid payload: path is required")
	case pl.MaxBytes < 0:
		return pl, 0, fmt.Errorf("invalid payload: maxBytes must not be negative, got %d", pl.MaxBytes)
	}
	limit := e.MaxBytes
	if limit <= 0 {
		limit = DefaultMaxOutputBytes
	}
	if pl.MaxBytes > 0 && pl.MaxBytes < limit {
		limit = pl.MaxBytes
	}
	return pl, limit, nil
}

// Execute reads the payload's file: inside the attempt's directory when ctx
// carries an Attempt, anywhere the program can read otherwise.
func (e *ReadExecutor) Execute(ctx context.Context, raw json.RawMessage) (Output, error) {
	pl, limit, err := e.parseRead(raw)
	if err != nil {
		return Output{}, err
	}
	if err := context.Cause(ctx); err != nil {
		return Output{}, fmt.Errorf("read stopped: %w", err)
	}
	var from files = hostFiles{}
	if a, ok := AttemptFrom(ctx); ok {
		if !filepath.IsLocal(pl.Path) {
			return Output{}, fmt.Errorf("invalid payload: path %q must be relative to the task directory and stay inside it", pl.Path)
		}
		root, err := os.OpenRoot(a.Dir)
		if err != nil {
			return Output{}, fmt.Errorf("open the task directory: %w", err)
		}
		defer func() { _ = root.Close() }()
		from = root
	}
	return readFile(from, pl.Path, limit)
}

// readFile reads up to limit bytes of the regular file path.
func readFile(from files, path string, limit int) (Output, error) {
	// Stat before opening: opening a FIFO would block.
	info, err := from.Stat(path)
	switch {
	case err != nil:
		return Output{}, readError(path, err)
	case info.IsDir():
		return Output{}, readError(path, errors.New("is a directory"))
	case !info.Mode().IsRegular():
		return Output{}, readError(path, fmt.Errorf("not a regular file (%s)", info.Mode().Type()))
	}
	f, err := from.Open(path)
	if err != nil {
		return Output{}, readError(path, err)
	}
	defer func() { _ = f.Close() }()
	// One byte past the limit tells a file that fills it exactly from a
	// longer one, also where the size is unknown (procfs reports 0).
	buf, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return Output{}, readError(path, err)
	}
	out := ReadOutput{Bytes: max(info.Size(), int64(len(buf)))}
	if len(buf) > limit {
		buf, out.Truncated = cutRunes(buf[:limit]), true
	}
	out.Content = string(buf)
	result, err := json.Marshal(out)
	if err != nil {
		return Output{}, fmt.Errorf("encode the read of %s: %w", path, err)
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
