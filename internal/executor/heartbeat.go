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
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// A process task shows it is alive through its heartbeat file. When the
// program that runs it asks for heartbeats (WithHeartbeat), a process task
// in a sandbox finds the file's path in HeartbeatEnv: every write to the
// file (or touch: any change of its size or modification time) is a
// heartbeat, and the file's last line is the task's progress note, for
// example
//
//	echo "42/100 files" >> "$AGENTLANE_HEARTBEAT_FILE"
//
// The file is looked at once per interval while the process runs, so a
// task that writes it in a tight loop gives at most one heartbeat per
// interval. Only the file's last HeartbeatTail bytes are ever read, and
// only while it is a regular file.

// HeartbeatEnv is the variable that names a process task's heartbeat file.
const HeartbeatEnv = "AGENTLANE_HEARTBEAT_FILE"

// HeartbeatTail is how much of the end of the heartbeat file is read for
// the progress note.
const HeartbeatTail = 256

// heartbeatFile is the file's name in the attempt's directory.
const heartbeatFile = ".agentlane-heartbeat"

// Heartbeat is called with the task's progress note (the last line of its
// heartbeat file, possibly empty) for each look at the file that finds it
// changed. Calls come from one goroutine, one at a time.
type Heartbeat func(progress string)

type heartbeatKey struct{}

type heartbeatConfig struct {
	interval time.Duration
	beat     Heartbeat
}

// WithHeartbeat returns a context that makes a process task run in a
// sandbox get a heartbeat file, looked at every interval (at least 50ms).
func WithHeartbeat(ctx context.Context, interval time.Duration, beat Heartbeat) context.Context {
	return context.WithValue(ctx, heartbeatKey{}, heartbeatConfig{interval: max(interval, 50*time.Millisecond), beat: beat})
}

// heartbeatPath creates the heartbeat file of the attempt ctx runs in, when
// heartbeats are asked for, and returns its path; "" otherwise.
func heartbeatPath(ctx context.Context) string {
	a, ok := AttemptFrom(ctx)
	if _, want := ctx.Value(heartbeatKey{}).(heartbeatConfig); !ok || !want {
		return ""
	}
	path := filepath.Join(a.Dir, heartbeatFile)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return ""
	}
	_ = f.Close()
	return path
}

// watchHeartbeat looks at the heartbeat file at path every interval until
// the returned stop is called, and calls the context's Heartbeat for each
// change it sees since the call. Call it before the process starts.
func watchHeartbeat(ctx context.Context, path string) (stop func()) {
	cfg, ok := ctx.Value(heartbeatKey{}).(heartbeatConfig)
	if !ok || path == "" {
		return func() {}
	}
	done := make(chan struct{})
	ended := make(chan struct{})
	// Taken before the process starts, so that its first write is a change
	// however late the goroutine below first runs.
	last, _ := statHeartbeat(path)
	go func() {
		defer close(ended)
		t := time.NewTicker(cfg.interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			cur, ok := statHeartbeat(path)
			if !ok || cur == last {
				continue
			}
			last = cur
			cfg.beat(readProgress(path))
		}
	}()
	return func() {
		close(done)
		<-ended
	}
}

// fileMark is what tells two looks at the heartbeat file apart.
type fileMark struct {
	size int64
	mod  time.Time
}

func statHeartbeat(path string) (fileMark, bool) {
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return fileMark{}, false
	}
	return fileMark{size: fi.Size(), mod: fi.ModTime()}, true
}

// readProgress returns the last non-empty line of the heartbeat file's last
// HeartbeatTail bytes. It opens nothing but a regular file (no symlink, no
// FIFO that would block).
func readProgress(path string) string {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return ""
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	off := max(fi.Size()-HeartbeatTail, 0)
	buf, err := io.ReadAll(io.NewSectionReader(f, off, HeartbeatTail))
	if err != nil {
		return ""
	}
	buf = bytes.TrimRight(buf, "\n\r\t ")
	if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
		buf = buf[i+1:]
	}
	return string(bytes.ToValidUTF8(cutRunes(buf), nil))
}
