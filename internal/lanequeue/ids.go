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
	"encoding/binary"
	"io"
	"math/bits"
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
// Within one millisecond the random part of each ID is the previous one's
// plus a random increment in [1, 2^32), as oklog/ulid's monotonic entropy
// does, so IDs stay ordered and hard to guess.
type ULIDGenerator struct {
	clock clock.PassiveClock

	mu sync.Mutex // guards everything below
	// entropy supplies the random part; chacha is set when it is the
	// generator's own ChaCha8, read without going through io.Reader.
	entropy io.Reader
	chacha  *rand.ChaCha8
	buf     [64]byte // unread bytes of entropy are buf[off:]
	off     int
	// The last ID's time (ms since the epoch) and random part (80 bits:
	// hi holds the top 16).
	last   uint64
	hi     uint64
	lo     uint64
	issued bool
}

var _ IDGenerator = &ULIDGenerator{}

// NewULIDGenerator returns a generator reading time from c. If entropy is nil
// a fast generator seeded from crypto/rand is used; pass a fixed reader to get
// reproducible IDs.
func NewULIDGenerator(c clock.PassiveClock, entropy io.Reader) *ULIDGenerator {
	if c == nil {
		c = clock.RealClock{}
	}
	g := &ULIDGenerator{clock: c, entropy: entropy}
	if entropy == nil {
		var seed [32]byte
		_, _ = crand.Read(seed[:]) // crypto/rand.Read never fails on supported platforms
		g.chacha = rand.NewChaCha8(seed)
		g.entropy = g.chacha
	}
	g.off = len(g.buf)
	return g
}

// NewID returns a new lowercase ULID.
func (g *ULIDGenerator) NewID() string {
	return g.newIDAt(ulid.Timestamp(g.clock.Now()))
}

// newIDAt returns a new lowercase ULID for the time ms (milliseconds since
// the epoch).
func (g *ULIDGenerator) newIDAt(ms uint64) string {
	g.mu.Lock()
	hi, lo, ok := g.nextLocked(ms)
	g.mu.Unlock()
	if !ok {
		// Only a monotonic overflow (about 2^48 IDs within one millisecond)
		// or a failing entropy reader gets here; fall back to fresh
		// randomness rather than failing.
		var b [10]byte
		_, _ = crand.Read(b[:])
		hi, lo = uint64(binary.BigEndian.Uint16(b[:2])), binary.BigEndian.Uint64(b[2:])
	}
	return encodeULID(ms&(1<<48-1)<<16|hi, lo)
}

// nextLocked returns the random part of the next ID at ms.
func (g *ULIDGenerator) nextLocked(ms uint64) (hi, lo uint64, ok bool) {
	if g.issued && ms == g.last {
		var r [4]byte
		if !g.readLocked(r[:]) {
			return 0, 0, false
		}
		inc := uint64(binary.BigEndian.Uint32(r[:]))%(1<<32-1) + 1
		lo, carry := bits.Add64(g.lo, inc, 0)
		hi := g.hi + carry
		if hi >= 1<<16 {
			return 0, 0, false
		}
		g.hi, g.lo = hi, lo
		return hi, lo, true
	}
	var r [10]byte
	if !g.readLocked(r[:]) {
		return 0, 0, false
	}
	g.last, g.issued = ms, true
	g.hi, g.lo = uint64(binary.BigEndian.Uint16(r[:2])), binary.BigEndian.Uint64(r[2:])
	return g.hi, g.lo, true
}

// readLocked fills p from the entropy, through buf.
func (g *ULIDGenerator) readLocked(p []byte) bool {
	for len(p) > 0 {
		if g.off == len(g.buf) {
			if g.chacha != nil {
				for i := 0; i < len(g.buf); i += 8 {
					binary.LittleEndian.PutUint64(g.buf[i:], g.chacha.Uint64())
				}
			} else if _, err := io.ReadFull(g.entropy, g.buf[:]); err != nil {
				return false
			}
			g.off = 0
		}
		n := copy(p, g.buf[g.off:])
		g.off += n
		p = p[n:]
	}
	return true
}

// encodeULID writes the 128-bit ULID hi:lo in lowercase Crockford base32:
// 26 characters of 5 bits each, the first holding the top 3 bits.
func encodeULID(hi, lo uint64) string {
	const alphabet = "0123456789abcdefghjkmnpqrstvwxyz"
	var b [ulid.EncodedSize]byte
	for i := range b {
		var v uint64
		switch s := uint(125 - 5*i); {
		case s >= 64:
			v = hi >> (s - 64)
		case s == 0:
			v = lo
		default:
			v = lo>>s | hi<<(64-s)
		}
		b[i] = alphabet[v&31]
	}
	return string(b[:])
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
