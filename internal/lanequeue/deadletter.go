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

package lanequeue

import (
	"fmt"
	"time"
)

// DefaultDeadLetterSize bounds the dead-letter list when MaxSize is 0.
const DefaultDeadLetterSize = 1000

// DeadLetterConfig configures the dead-letter list.
type DeadLetterConfig struct {
	// Disabled turns the list off: commands that run out of retries end
	// Failed (or TimedOut) instead of DeadLettered, and nothing is kept.
	Disabled bool
	// MaxSize bounds the list; when full the oldest entry is dropped.
	// 0 means 1000.
	MaxSize int
}

func (d DeadLetterConfig) validate(path string) []error {
	if d.MaxSize < 0 {
		return []error{fmt.Errorf("%s.maxSize: must be >= 0, got %d", path, d.MaxSize)}
	}
	return nil
}

func (d DeadLetterConfig) size() int {
	if d.MaxSize == 0 {
		return DefaultDeadLetterSize
	}
	return d.MaxSize
}

// DeadLetter records a command that failed for good after using up its
// retries, including when its last attempt timed out. Permanent failures and
// cancellations are not dead-lettered: retrying them cannot help.
type DeadLetter struct {
	ID          string
	CommandType string
	Lane        string
	SessionKey  string
	RunID       string
	Payload     []byte
	Error       string
	Attempts    int
	FailedAt    time.Time
	Labels      Identity
}

// deadLetters is a bounded ring of dead letters, oldest first.
type deadLetters struct {
	buf     []DeadLetter // ring storage; len(buf) is the current capacity
	start   int          // index of the oldest entry
	n       int          // number of entries
	max     int          // configured bound
	dropped uint64       // entries evicted to make room
}

func (d *deadLetters) add(dl DeadLetter) {
	if d.max <= 0 {
		return
	}
	if d.n == d.max {
		d.buf[d.start] = dl
		d.start = (d.start + 1) % len(d.buf)
		d.dropped++
		return
	}
	if d.n == len(d.buf) {
		d.grow(min(max(2*len(d.buf), 16), d.max))
	}
	d.buf[(d.start+d.n)%len(d.buf)] = dl
	d.n++
}

func (d *deadLetters) grow(c int) {
	nb := make([]DeadLetter, c)
	d.copyTo(nb)
	d.buf, d.start = nb, 0
}

func (d *deadLetters) copyTo(dst []DeadLetter) int {
	for i := 0; i < d.n && i < len(dst); i++ {
		dst[i] = d.buf[(d.start+i)%len(d.buf)]
	}
	return min(d.n, len(dst))
}

// resize changes the bound, dropping the oldest entries that no longer fit.
func (d *deadLetters) resize(m int) {
	if m < d.n {
		drop := d.n - m
		d.start = (d.start + drop) % max(len(d.buf), 1)
		d.n = m
		d.dropped += uint64(drop)
	}
	d.max = m
	if len(d.buf) > m || d.n == 0 {
		nb := make([]DeadLetter, min(len(d.buf), m))
		d.copyTo(nb)
		d.buf, d.start = nb, 0
	}
}

func (d *deadLetters) list() []DeadLetter {
	out := make([]DeadLetter, d.n)
	d.copyTo(out)
	return out
}
