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
	"sync/atomic"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// accessReviews answers SubjectAccessReviews with allowed, counts them, and
// holds each one until release lets it go.
type accessReviews struct {
	client.Client
	allowed atomic.Bool
	count   atomic.Int32
	started chan struct{}
	release chan struct{}
}

func (r *accessReviews) Create(_ context.Context, obj client.Object, _ ...client.CreateOption) error {
	r.count.Add(1)
	r.started <- struct{}{}
	<-r.release
	obj.(*authorizationv1.SubjectAccessReview).Status.Allowed = r.allowed.Load()
	return nil
}

// guard fails the test if ch yields nothing soon; it is a bound on a hang,
// not a timing the test depends on.
func guard(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not happen", what)
	}
}

// TestAuthorizeRefreshesAheadOfExpiry: a request that uses an answer in the
// last quarter of its TTL gets it at once and the answer is asked again in
// the background, so the next request after the old expiry waits for no
// review; a revoked permission still ends within TTL of the last review.
func TestAuthorizeRefreshesAheadOfExpiry(t *testing.T) {
	start := time.Unix(1_000_000, 0)
	clk := clocktesting.NewFakePassiveClock(start)
	reviews := &accessReviews{started: make(chan struct{}, 4), release: make(chan struct{}, 4)}
	reviews.allowed.Store(true)
	a := &KubeAuthorizer{Client: reviews, TTL: 10 * time.Second, Clock: clk}
	caller := Caller{Username: "runtime"}
	authorize := func() error { return a.Authorize(context.Background(), caller, "ns", "s1", "create") }

	reviews.release <- struct{}{}
	if err := authorize(); err != nil {
		t.Fatalf("first call: %v", err)
	}
	<-reviews.started

	clk.SetTime(start.Add(5 * time.Second)) // half the TTL left: no review
	if err := authorize(); err != nil || reviews.count.Load() != 1 {
		t.Fatalf("mid-TTL call: err %v, reviews %d, want nil and 1", err, reviews.count.Load())
	}

	// 2 s left: the cached answer serves at once while a review runs.
	clk.SetTime(start.Add(8 * time.Second))
	reviews.allowed.Store(false) // the permission is revoked meanwhile
	returned := make(chan struct{})
	go func() {
		if err := authorize(); err != nil {
			t.Errorf("call near expiry: %v", err)
		}
		close(returned)
	}()
	guard(t, reviews.started, "a background review")
	guard(t, returned, "the call's answer while the review runs")
	if err := authorize(); err != nil || reviews.count.Load() != 2 {
		t.Fatalf("second call near expiry: err %v, reviews %d, want nil and 2 (one review in flight)", err, reviews.count.Load())
	}
	reviews.release <- struct{}{}
	a.refreshes.Wait()

	// Past the first answer's expiry the refreshed one (denied) is used
	// without a new review.
	clk.SetTime(start.Add(11 * time.Second))
	if err := authorize(); err == nil {
		t.Fatal("the refreshed answer revoked the permission, yet the call was allowed")
	}
	if n := reviews.count.Load(); n != 2 {
		t.Fatalf("reviews %d after the refresh, want 2", n)
	}
}
