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
	crand "crypto/rand"
	"io"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/oklog/ulid/v2"
	"k8s.io/utils/clock"
)

// IDGenerator names commands that arrive without an ID. Implementations must
// be safe for concurrent use and must never return the same ID twice.
type IDGenerator interface {
	NewID() string
}

// ULIDGenerator is the default IDGenerator. It produces 26-character ULIDs in
// lowercase, so an ID can name a Kubernetes object, and it takes the time part
// from the queue's clock, so IDs sort in submit order within one process.
type ULIDGenerator struct {
	clock clock.PassiveClock

	mu      sync.Mutex // guards entropy; MonotonicEntropy is not safe for concurrent use
	entropy *ulid.MonotonicEntropy
}

var _ IDGenerator = &ULIDGenerator{}

// NewULIDGenerator returns a generator reading time from c. If entropy is nil
// a fast generator seeded from crypto/rand is used; pass a fixed reader to get
// reproducible IDs.
func NewULIDGenerator(c clock.PassiveClock, entropy io.Reader) *ULIDGenerator {
	if c == nil {
		c = clock.RealClock{}
	}
	if entropy == nil {
		var seed [32]byte
		_, _ = crand.Read(seed[:]) // crypto/rand.Read never fails on supported platforms
		entropy = rand.NewChaCha8(seed)
	}
	return &ULIDGenerator{clock: c, entropy: ulid.Monotonic(entropy, 0)}
}

// NewID returns a new lowercase ULID.
func (g *ULIDGenerator) NewID() string {
	ms := ulid.Timestamp(g.clock.Now())
	g.mu.Lock()
	id, err := ulid.New(ms, g.entropy)
	g.mu.Unlock()
	if err != nil {
		// Only a monotonic overflow (about 2^48 IDs within one millisecond)
		// gets here; fall back to fresh randomness rather than failing.
		id = ulid.MustNew(ms, crand.Reader)
	}
	var buf [ulid.EncodedSize]byte
	_ = id.MarshalTextTo(buf[:]) // cannot fail: buf has the exact size
	for i, c := range buf {
		if c >= 'A' && c <= 'Z' {
			buf[i] = c + ('a' - 'A')
		}
	}
	return string(buf[:])
}

// SequentialIDs hands out "<prefix>-0000000001", "<prefix>-0000000002", ...
// Paired with a fake clock it makes a run replay to identical IDs. The zero
// value uses the prefix "cmd".
type SequentialIDs struct {
	Prefix string
	n      atomic.Uint64
}

var _ IDGenerator = &SequentialIDs{}

// NewID returns the next ID in sequence.
func (s *SequentialIDs) NewID() string {
	n := s.n.Add(1)
	prefix := s.Prefix
	if prefix == "" {
		prefix = "cmd"
	}
	buf := make([]byte, 0, len(prefix)+12)
	buf = append(buf, prefix...)
	buf = append(buf, '-')
	digits := strconv.AppendUint(nil, n, 10)
	for i := len(digits); i < 10; i++ {
		buf = append(buf, '0')
	}
	buf = append(buf, digits...)
	return string(buf)
}
