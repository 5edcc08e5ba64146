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
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// A request's reviews are paid for before they are made: a TokenReview
// sets one token of the client address's failed-authentication bucket
// aside (taken if the token proves bad, put back if it is valid), and every review takes a slot
// of the reviews in flight, of which one address holds only its part. So
// a flood of bad tokens, however concurrent, costs the API server at most
// the bucket's burst of reviews, and never more than the slots at once.

// reviewAdmission is what one request pays its reviews with.
type reviewAdmission struct {
	// addr is the request's client address.
	addr string
	// failedAuth is the failed-authentication limiter charged before a
	// TokenReview; nil charges nothing.
	failedAuth *keyedLimiter

	mu sync.Mutex
	// charged tells that a TokenReview of this request was charged to
	// failedAuth.
	charged bool
}

type admissionKey struct{}

// withAdmission returns ctx carrying adm.
func withAdmission(ctx context.Context, adm *reviewAdmission) context.Context {
	return context.WithValue(ctx, admissionKey{}, adm)
}

// admissionFrom returns the admission ctx carries, or nil.
func admissionFrom(ctx context.Context) *reviewAdmission {
	adm, _ := ctx.Value(admissionKey{}).(*reviewAdmission)
	return adm
}

// key is what the request's reviews in flight are counted under: its
// client address, or fallback when it has none.
func (adm *reviewAdmission) key(fallback string) string {
	if adm == nil || adm.addr == "" {
		return fallback
	}
	return adm.addr
}

// charge sets one token of the address's failed-authentication bucket
// aside before a TokenReview, and returns the function that settles it
// once the review's outcome is known: charged takes the token (the review
// failed or could not be made sense of), else it goes back. Without a free
// token the review is not made: 429 RateLimited.
func (adm *reviewAdmission) charge() (settle func(charged bool), err error) {
	if adm == nil || adm.failedAuth == nil {
		return func(bool) {}, nil
	}
	held, ok, after := adm.failedAuth.hold(adm.addr)
	if !ok {
		return nil, failedAuthError(adm.addr, after)
	}
	return func(charged bool) {
		held(charged)
		if charged {
			adm.mu.Lock()
			adm.charged = true
			adm.mu.Unlock()
		}
	}, nil
}

// failedAuthError refuses a request of addr, whose failed authentications
// are over their rate, for after.
func failedAuthError(addr string, after time.Duration) error {
	return &sessionapi.Error{Status: http.StatusTooManyRequests, Code: sessionapi.CodeRateLimited, RetryAfter: after,
		Message: fmt.Sprintf("too many requests from %s failed authentication; retry after %ds", addr, retryAfterSeconds(after))}
}

// wasCharged tells whether a review of the request was charged.
func (adm *reviewAdmission) wasCharged() bool {
	adm.mu.Lock()
	defer adm.mu.Unlock()
	return adm.charged
}

// reviewGate counts the reviews in flight, in all and per key.
type reviewGate struct {
	mu    sync.Mutex
	total int
	byKey map[string]int
}

// admitReview takes a slot for one review caused by key, and returns the
// function that gives it back; past the bounds, 429 RateLimited.
func (a *KubeAuthorizer) admitReview(key string) (release func(), err error) {
	maxTotal := a.MaxReviewsInFlight
	if maxTotal <= 0 {
		maxTotal = DefaultMaxReviewsInFlight
	}
	perKey := a.MaxReviewsInFlightPerAddress
	if perKey <= 0 {
		perKey = DefaultMaxReviewsInFlightPerAddress
	}
	g := &a.inFlight
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.total >= maxTotal:
		return nil, &sessionapi.Error{Status: http.StatusTooManyRequests, Code: sessionapi.CodeRateLimited, RetryAfter: time.Second,
			Message: fmt.Sprintf("%d access reviews are in flight, the most the Session API makes at once (--session-api-max-reviews-in-flight); retry after 1s", maxTotal)}
	case g.byKey[key] >= perKey:
		return nil, &sessionapi.Error{Status: http.StatusTooManyRequests, Code: sessionapi.CodeRateLimited, RetryAfter: time.Second,
			Message: fmt.Sprintf("%d access reviews for %s are in flight, the most one client address may cause at once (--session-api-max-reviews-in-flight-per-address); retry after 1s", perKey, key)}
	}
	if g.byKey == nil {
		g.byKey = make(map[string]int)
	}
	g.total++
	g.byKey[key]++
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.total--
			if g.byKey[key]--; g.byKey[key] <= 0 {
				delete(g.byKey, key)
			}
		})
	}, nil
}

// reviewsInFlight returns the reviews in flight.
func (a *KubeAuthorizer) reviewsInFlight() int {
	a.inFlight.mu.Lock()
	defer a.inFlight.mu.Unlock()
	return a.inFlight.total
}

// flights are the reviews in flight by what they ask: a request that needs
// an answer being asked waits for it instead of asking again.
type flights[K comparable, V any] struct {
	mu sync.Mutex
	m  map[K]*flight[V]
}

type flight[V any] struct {
	done chan struct{}
	v    V
	err  error
}

// do returns fn's answer for key, calling fn unless a call for key is in
// flight, whose answer it then shares.
func (f *flights[K, V]) do(ctx context.Context, key K, fn func() (V, error)) (V, error) {
	f.mu.Lock()
	if fl, ok := f.m[key]; ok {
		f.mu.Unlock()
		select {
		case <-fl.done:
			return fl.v, fl.err
		case <-ctx.Done():
			var zero V
			return zero, apiError(http.StatusInternalServerError, sessionapi.CodeInternal, "the request ended while its access review was in flight")
		}
	}
	if f.m == nil {
		f.m = make(map[K]*flight[V])
	}
	fl := &flight[V]{done: make(chan struct{})}
	f.m[key] = fl
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.m, key)
		f.mu.Unlock()
		close(fl.done)
	}()
	fl.v, fl.err = fn()
	return fl.v, fl.err
}
