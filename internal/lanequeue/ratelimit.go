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
	"math"
	"time"

	"golang.org/x/time/rate"
)

// RateWindow is the period a RateLimit counts over.
type RateWindow string

const (
	PerSecond RateWindow = "Second"
	PerMinute RateWindow = "Minute"
	PerHour   RateWindow = "Hour"
)

func (w RateWindow) duration() time.Duration {
	switch w {
	case PerMinute:
		return time.Minute
	case PerHour:
		return time.Hour
	default:
		return time.Second
	}
}

// RateLimit is a token bucket: MaxOperations tokens refill evenly over each
// Window, and up to Burst (default MaxOperations) can be saved up. One token
// is spent when a command starts and at no other time, so a queue that sits
// idle keeps a full bucket. A nil *RateLimit means unlimited.
type RateLimit struct {
	Window        RateWindow
	MaxOperations int
	Burst         int
}

func (r *RateLimit) validate(path string) []error {
	if r == nil {
		return nil
	}
	var errs []error
	switch r.Window {
	case PerSecond, PerMinute, PerHour:
	default:
		errs = append(errs, fmt.Errorf("%s.window: unknown window %q (want Second, Minute or Hour)", path, r.Window))
	}
	if r.MaxOperations <= 0 {
		errs = append(errs, fmt.Errorf("%s.maxOperations: must be > 0, got %d", path, r.MaxOperations))
	}
	if r.Burst < 0 {
		errs = append(errs, fmt.Errorf("%s.burst: must be >= 0, got %d", path, r.Burst))
	}
	return errs
}

func (r *RateLimit) limit() rate.Limit {
	return rate.Limit(float64(r.MaxOperations) / r.Window.duration().Seconds())
}

func (r *RateLimit) burst() int {
	if r.Burst > 0 {
		return r.Burst
	}
	return r.MaxOperations
}

// bucket is a token bucket read at explicit times from the queue's clock, so
// fake clocks drive it exactly.
type bucket struct {
	cfg RateLimit
	lim *rate.Limiter
}

func newBucket(r *RateLimit) *bucket {
	if r == nil {
		return nil
	}
	return &bucket{cfg: *r, lim: rate.NewLimiter(r.limit(), r.burst())}
}

// reconfigure returns a bucket for r, keeping the saved tokens of b when the
// bucket survives the change so a reconfiguration does not refill it.
func (b *bucket) reconfigure(r *RateLimit, now int64) *bucket {
	switch {
	case r == nil:
		return nil
	case b == nil:
		return newBucket(r)
	}
	if b.cfg != *r {
		t := time.Unix(0, now)
		b.lim.SetLimitAt(t, r.limit())
		b.lim.SetBurstAt(t, r.burst())
		b.cfg = *r
	}
	return b
}

// ready reports whether a token is available at now, without spending it.
func (b *bucket) ready(now int64) bool {
	return b == nil || b.lim.TokensAt(time.Unix(0, now)) >= 1
}

// take spends one token at now.
func (b *bucket) take(now int64) {
	if b != nil {
		b.lim.AllowN(time.Unix(0, now), 1)
	}
}

// nextAt returns when the next whole token will be available.
func (b *bucket) nextAt(now int64) int64 {
	missing := 1 - b.lim.TokensAt(time.Unix(0, now))
	if missing <= 0 {
		return now
	}
	wait := math.Ceil(missing / float64(b.lim.Limit()) * 1e9)
	return now + int64(wait) + 1
}
