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

package sessionstore

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/clock"
)

// Defaults of a WriteBudget.
const (
	// DefaultNamespaceWriteRate is the bytes per second the store may
	// write to the API server for the sessions of one namespace, their
	// checkpoints and inbox records together, sustained.
	DefaultNamespaceWriteRate = 64 << 10
	// DefaultNamespaceWriteBurst is how many bytes it may write at once
	// above that rate: at least the largest object the store writes.
	DefaultNamespaceWriteBurst = 1 << 20
	// maxBudgetNamespaces bounds the buckets kept; a bucket that has
	// refilled is the same as a new one and is dropped first.
	maxBudgetNamespaces = 10000
)

// ErrRateLimited: the namespace has written as much as its write budget
// allows for now; RateLimitedError says when to try again.
var ErrRateLimited = errors.New("session store write budget exhausted")

// RateLimitedError is ErrRateLimited with the time until the write fits.
type RateLimitedError struct {
	Namespace  string
	Bytes      int
	RetryAfter time.Duration
}

func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("%v: namespace %s may write %d more bytes to the API server in %s",
		ErrRateLimited, e.Namespace, e.Bytes, e.RetryAfter.Round(time.Millisecond))
}

func (e *RateLimitedError) Unwrap() error { return ErrRateLimited }

// WriteBudget is a token bucket of bytes per namespace: every object the
// store creates or updates takes its encoded size from the bucket of its
// namespace before it is written, and is not written when the bucket lacks
// it. So whatever a namespace's sessions do, the store writes at most
// Burst + Rate*t bytes for them in any t seconds.
type WriteBudget struct {
	limit rate.Limit
	burst int
	clock clock.PassiveClock

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
	// written counts the bytes taken, per namespace, for metrics and tests.
	written map[string]int64
}

// NewWriteBudget returns a budget of perSecond bytes per namespace with
// bursts of burst bytes; perSecond <= 0 means no limit. clk is the real
// clock when nil.
func NewWriteBudget(perSecond float64, burst int, clk clock.PassiveClock) *WriteBudget {
	if clk == nil {
		clk = clock.RealClock{}
	}
	b := &WriteBudget{limit: rate.Limit(perSecond), burst: max(burst, 1), clock: clk,
		buckets: map[string]*rate.Limiter{}, written: map[string]int64{}}
	if perSecond <= 0 {
		b.limit = rate.Inf
	}
	return b
}

// Take takes n bytes from namespace's bucket, or returns a
// RateLimitedError saying when they will be there and takes nothing. A
// write larger than the burst is refused for good (RetryAfter is the
// largest duration).
func (b *WriteBudget) Take(namespace string, n int) error {
	if b == nil {
		return nil
	}
	now := b.clock.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.limit != rate.Inf {
		lim := b.buckets[namespace]
		if lim == nil {
			if len(b.buckets) >= maxBudgetNamespaces {
				b.evictLocked(now)
			}
			lim = rate.NewLimiter(b.limit, b.burst)
			b.buckets[namespace] = lim
		}
		r := lim.ReserveN(now, n)
		if !r.OK() {
			return &RateLimitedError{Namespace: namespace, Bytes: n, RetryAfter: time.Duration(math.MaxInt64)}
		}
		if d := r.DelayFrom(now); d > 0 {
			r.CancelAt(now)
			return &RateLimitedError{Namespace: namespace, Bytes: n, RetryAfter: d}
		}
	}
	b.written[namespace] += int64(n)
	return nil
}

// Written returns the bytes the namespace's writes took so far.
func (b *WriteBudget) Written(namespace string) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.written[namespace]
}

// evictLocked drops the buckets that are full again.
func (b *WriteBudget) evictLocked(now time.Time) {
	for ns, lim := range b.buckets {
		if lim.TokensAt(now) >= float64(b.burst) {
			delete(b.buckets, ns)
			delete(b.written, ns)
		}
	}
}

// Charge takes n bytes from the namespace's write budget for a write the
// caller makes itself beside the store's (the session's status after a
// save), or returns a RateLimitedError.
func (s *ConfigMaps) Charge(namespace string, n int) error {
	return s.Budget.Take(namespace, n)
}
