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

package sessionserver

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/clock"
)

// Defaults of the Session API's rate limits.
const (
	// DefaultRate is the requests per second one caller may sustain.
	DefaultRate = 50
	// DefaultBurst is how many requests one caller may make at once.
	DefaultBurst = 200
	// DefaultMaxCallers bounds how many callers' buckets are kept.
	DefaultMaxCallers = 10000
	// DefaultFailedAuthRate is the rate at which one client address may
	// send requests that fail authentication; DefaultFailedAuthBurst how
	// many at once. Past them the address is refused before its token is
	// reviewed.
	DefaultFailedAuthRate  = 1
	DefaultFailedAuthBurst = 20
)

// keyedLimiter is a token bucket per key (a caller, a client address),
// bounded in size. A bucket left alone long enough to refill is the same as
// a new one, so such buckets are dropped first; when the map is full of
// busy buckets the least recently used goes, which can only make its key's
// next request more lenient, never stricter.
type keyedLimiter struct {
	limit rate.Limit
	burst int
	// max bounds len(buckets).
	max   int
	clock clock.PassiveClock

	mu sync.Mutex
	// buckets holds the keys seen recently; every bucket's last is the time
	// of its last request.
	buckets map[string]*bucket
}

type bucket struct {
	lim  *rate.Limiter
	last time.Time
	// held counts the tokens set aside (hold) and not yet settled.
	held int
}

// newKeyedLimiter returns a limiter of perSecond requests per key, with
// bursts of burst, keeping at most maxKeys keys. perSecond <= 0 means no
// limit.
func newKeyedLimiter(perSecond float64, burst, maxKeys int, clk clock.PassiveClock) *keyedLimiter {
	l := &keyedLimiter{limit: rate.Limit(perSecond), burst: max(burst, 1), max: maxKeys, clock: clk,
		buckets: make(map[string]*bucket)}
	if perSecond <= 0 {
		l.limit = rate.Inf
	}
	if l.max <= 0 {
		l.max = DefaultMaxCallers
	}
	return l
}

// refill is how long an untouched bucket takes to be full again.
func (l *keyedLimiter) refill() time.Duration {
	if l.limit == rate.Inf {
		return 0
	}
	return time.Duration(float64(l.burst) / float64(l.limit) * float64(time.Second))
}

// allow takes one token of key's bucket. When there is none it takes
// nothing and returns how long until there is one.
func (l *keyedLimiter) allow(key string) (bool, time.Duration) {
	if l.limit == rate.Inf {
		return true, 0
	}
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucket(key, now)
	r := b.lim.ReserveN(now, 1)
	if !r.OK() {
		return false, time.Duration(math.MaxInt64)
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// hold sets one token of key's bucket aside for an attempt whose cost is
// known only after it is made, such as a token review that may fail:
// tokens set aside count as taken for the next hold, and settle takes the
// token (charged) or puts it back. When every token is taken or set aside
// it holds nothing and returns how long until one is free.
func (l *keyedLimiter) hold(key string) (settle func(charged bool), ok bool, after time.Duration) {
	if l.limit == rate.Inf {
		return func(bool) {}, true, 0
	}
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucket(key, now)
	if free := b.lim.TokensAt(now) - float64(b.held); free < 1 {
		return nil, false, time.Duration((1 - free) / float64(l.limit) * float64(time.Second))
	}
	b.held++
	var once sync.Once
	return func(charged bool) {
		once.Do(func() {
			now := l.clock.Now()
			l.mu.Lock()
			defer l.mu.Unlock()
			b.held--
			if charged {
				b.lim.ReserveN(now, 1) // kept, even if it goes into debt
			}
		})
	}, true, 0
}

// bucket returns key's bucket, making room for it if it is new.
func (l *keyedLimiter) bucket(key string, now time.Time) *bucket {
	b, ok := l.buckets[key]
	if !ok {
		if len(l.buckets) >= l.max {
			l.evict(now)
		}
		b = &bucket{lim: rate.NewLimiter(l.limit, l.burst)}
		l.buckets[key] = b
	}
	b.last = now
	return b
}

// exhausted reports whether key's bucket has no token left, and how long
// until it has one, taking nothing.
func (l *keyedLimiter) exhausted(key string) (bool, time.Duration) {
	if l.limit == rate.Inf {
		return false, 0
	}
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[key]
	if !ok {
		return false, 0
	}
	tokens := b.lim.TokensAt(now)
	if tokens >= 1 {
		return false, 0
	}
	return true, time.Duration((1 - tokens) / float64(l.limit) * float64(time.Second))
}

// evict makes room for one bucket: it drops every bucket that has refilled
// and, if none has, the least recently used.
func (l *keyedLimiter) evict(now time.Time) {
	refill := l.refill()
	var oldest string
	var oldestAt time.Time
	for k, b := range l.buckets {
		if now.Sub(b.last) >= refill {
			delete(l.buckets, k)
			continue
		}
		if oldest == "" || b.last.Before(oldestAt) {
			oldest, oldestAt = k, b.last
		}
	}
	if len(l.buckets) >= l.max {
		delete(l.buckets, oldest)
	}
}

// size returns how many buckets are kept.
func (l *keyedLimiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}

// retryAfterSeconds is d as a Retry-After value: whole seconds, at least 1
// and at most an hour.
func retryAfterSeconds(d time.Duration) int {
	return int(min(max(math.Ceil(d.Seconds()), 1), 3600))
}
