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
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// tokenReviews authenticates every token as the user of its name, counts
// the reviews and, when hold is set, holds each until release lets it go.
type tokenReviews struct {
	client.Client
	count   atomic.Int32
	hold    bool
	started chan struct{}
	release chan struct{}
}

func (r *tokenReviews) Create(_ context.Context, obj client.Object, _ ...client.CreateOption) error {
	r.count.Add(1)
	if r.hold {
		r.started <- struct{}{}
		<-r.release
	}
	tr := obj.(*authenticationv1.TokenReview)
	tr.Status.Authenticated = true
	tr.Status.User.Username = "user-of-" + tr.Spec.Token
	return nil
}

func requestFrom(addr, token string) *http.Request {
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = addr + ":40000"
	r.Header.Set("Authorization", "Bearer "+token)
	return r
}

// TestReviewsInFlightAreBounded: past the bound on reviews in flight, in
// all or for one address, a request that needs a review is refused 429
// RateLimited at once; a slot given back admits the next.
func TestReviewsInFlightAreBounded(t *testing.T) {
	reviews := &tokenReviews{hold: true, started: make(chan struct{}, 16), release: make(chan struct{}, 16)}
	a := &KubeAuthorizer{Client: reviews, MaxReviewsInFlight: 3, MaxReviewsInFlightPerAddress: 2}
	var wg sync.WaitGroup
	authenticate := func(addr, token string) error {
		_, err := a.Authenticate(withAdmission(context.Background(), &reviewAdmission{addr: addr}), requestFrom(addr, token))
		return err
	}
	hold := func(addr, token string) {
		wg.Go(func() {
			if err := authenticate(addr, token); err != nil {
				t.Errorf("%s %s: %v", addr, token, err)
			}
		})
		guard(t, reviews.started, "review of "+token)
	}
	hold("10.0.0.1", "a1")
	hold("10.0.0.1", "a2")
	err := authenticate("10.0.0.1", "a3")
	if !sessionapi.IsCode(err, sessionapi.CodeRateLimited) {
		t.Fatalf("a third review for one address: %v, want RateLimited", err)
	}
	hold("10.0.0.2", "b1")
	err = authenticate("10.0.0.3", "c1")
	if !sessionapi.IsCode(err, sessionapi.CodeRateLimited) {
		t.Fatalf("a fourth review in all: %v, want RateLimited", err)
	}
	if n := a.reviewsInFlight(); n != 3 {
		t.Fatalf("%d reviews in flight, want 3", n)
	}
	for range 3 {
		reviews.release <- struct{}{}
	}
	wg.Wait()
	reviews.release <- struct{}{}
	if err := authenticate("10.0.0.3", "c1"); err != nil {
		t.Fatalf("a review once slots are free: %v", err)
	}
	if n := reviews.count.Load(); n != 4 {
		t.Errorf("%d reviews made, want 4 (refused requests make none)", n)
	}
}

// TestConcurrentRequestsShareOneReview: concurrent requests with one new
// token cost one TokenReview.
func TestConcurrentRequestsShareOneReview(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reviews := &tokenReviews{hold: true, started: make(chan struct{}, 1), release: make(chan struct{}, 1)}
		a := &KubeAuthorizer{Client: reviews}
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				c, err := a.Authenticate(context.Background(), requestFrom("10.0.0.1", "t"))
				if err != nil || c.Username != "user-of-t" {
					t.Errorf("Authenticate = %+v, %v", c, err)
				}
			})
		}
		synctest.Wait() // one review is held, every other request waits for it
		reviews.release <- struct{}{}
		wg.Wait()
		if n := reviews.count.Load(); n != 1 {
			t.Errorf("%d TokenReviews for 20 concurrent requests with one token, want 1", n)
		}
	})
}

// TestCallerCacheEvictsLeastRecentlyUsed: a full cache of callers forgets
// the least recently used answer, not every answer.
func TestCallerCacheEvictsLeastRecentlyUsed(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1_000_000, 0))
	reviews := &tokenReviews{}
	a := &KubeAuthorizer{Client: reviews, Clock: clk}
	authenticate := func(token string) {
		t.Helper()
		if _, err := a.Authenticate(context.Background(), requestFrom("10.0.0.1", token)); err != nil {
			t.Fatal(err)
		}
	}
	authenticate("busy")
	authenticate("idle")
	for i := range maxCached - 2 {
		authenticate(fmt.Sprintf("t%d", i))
		if i%1000 == 0 {
			authenticate("busy") // the busy caller keeps coming
		}
	}
	before := reviews.count.Load()
	authenticate("one-more") // the cache is full: one answer goes
	authenticate("busy")
	if got := reviews.count.Load() - before; got != 1 {
		t.Errorf("%d reviews for one new token and the busy caller, want 1: the busy caller's answer was dropped", got)
	}
	if n := a.callers.Len(); n != maxCached {
		t.Errorf("the cache keeps %d callers, want %d", n, maxCached)
	}
	before = reviews.count.Load()
	authenticate("idle")
	if got := reviews.count.Load() - before; got != 1 {
		t.Errorf("the least recently used answer was kept (%d reviews), want it evicted", got)
	}
}

// TestKnownTokenIsNotChargedToItsAddress: once an address's failed
// authentications are over their rate, a new token of that address is
// refused before its review, while a token that proved valid before is
// reviewed again when its answer expires, without a charge.
func TestKnownTokenIsNotChargedToItsAddress(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1_000_000, 0))
	reviews := &tokenReviews{}
	a := &KubeAuthorizer{Client: reviews, Clock: clk}
	failed := newKeyedLimiter(0.0001, 1, 0, clk)
	authenticate := func(token string) error {
		adm := &reviewAdmission{addr: "10.0.0.1", failedAuth: failed}
		_, err := a.Authenticate(withAdmission(context.Background(), adm), requestFrom("10.0.0.1", token))
		return err
	}
	if err := authenticate("runtime"); err != nil {
		t.Fatalf("first review of a valid token: %v", err)
	}
	if _, ok, _ := failed.hold("10.0.0.1"); !ok {
		t.Fatal("the valid token's review was charged to its address")
	}
	// The address's one token is now taken: it is over its rate.
	if err := authenticate("stranger"); !sessionapi.IsCode(err, sessionapi.CodeRateLimited) {
		t.Fatalf("a new token of an address over its rate: %v, want RateLimited", err)
	}
	clk.SetTime(clk.Now().Add(2 * DefaultReviewTTL))
	if err := authenticate("runtime"); err != nil {
		t.Fatalf("the known token once its answer expired: %v", err)
	}
	if n := reviews.count.Load(); n != 2 {
		t.Errorf("%d TokenReviews, want 2 (the known token twice, the refused one none)", n)
	}
}
