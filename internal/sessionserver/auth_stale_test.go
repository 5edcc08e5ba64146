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
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// outageReviews answers every review as allowed and authenticated, until
// down makes it fail with err.
type outageReviews struct {
	client.Client
	down atomic.Pointer[error]
}

func (r *outageReviews) Create(_ context.Context, obj client.Object, _ ...client.CreateOption) error {
	if err := r.down.Load(); err != nil {
		return *err
	}
	switch o := obj.(type) {
	case *authenticationv1.TokenReview:
		o.Status = authenticationv1.TokenReviewStatus{Authenticated: true, Audiences: o.Spec.Audiences,
			User: authenticationv1.UserInfo{Username: "runtime"}}
	case *authorizationv1.SubjectAccessReview:
		o.Status.Allowed = true
	}
	return nil
}

// TestAnswersOutliveTheirTTLWhileTheAPIServerIsDown: while the API server
// does not answer, an answer is reused up to StaleGrace past its TTL, then
// refused; an answer the API server refuses to give (403 on the review
// itself) is not stretched.
func TestAnswersOutliveTheirTTLWhileTheAPIServerIsDown(t *testing.T) {
	start := time.Unix(1_000_000, 0)
	clk := clocktesting.NewFakePassiveClock(start)
	reviews := &outageReviews{}
	a := &KubeAuthorizer{Client: reviews, TTL: 10 * time.Second, StaleGrace: 20 * time.Second, Clock: clk}
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.Header.Set("Authorization", "Bearer token")
	call := func() error {
		c, err := a.Authenticate(context.Background(), req)
		if err != nil {
			return err
		}
		return a.Authorize(context.Background(), c, "ns", "s1", VerbWrite)
	}
	if err := call(); err != nil {
		t.Fatal(err)
	}

	unreachable := errors.New("dial tcp 10.0.0.1:443: connect: connection refused")
	reviews.down.Store(&unreachable)
	clk.SetTime(start.Add(25 * time.Second)) // past the TTL, within the grace
	if err := call(); err != nil {
		t.Fatalf("within the grace, the API server down: %v", err)
	}
	clk.SetTime(start.Add(31 * time.Second)) // past TTL+grace
	if err := call(); !sessionapi.IsCode(err, sessionapi.CodeInternal) {
		t.Fatalf("past the grace: %v, want Internal", err)
	}

	forbidden := error(apierrors.NewForbidden(schema.GroupResource{Resource: "tokenreviews"}, "", errors.New("no")))
	reviews.down.Store(&forbidden)
	clk.SetTime(start.Add(15 * time.Second))
	a2 := &KubeAuthorizer{Client: reviews, TTL: 10 * time.Second, StaleGrace: 20 * time.Second, Clock: clk}
	reviews.down.Store(nil)
	c, err := a2.Authenticate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	reviews.down.Store(&forbidden)
	clk.SetTime(start.Add(26 * time.Second))
	if _, err := a2.Authenticate(context.Background(), req); err == nil {
		t.Fatal("an expired answer was reused although the API server answered (403 to the review)")
	}
	_ = c
}
