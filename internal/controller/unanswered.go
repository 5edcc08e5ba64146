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

package controller

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"sync"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Retries of a pass the API server did not answer: 50ms doubling to
// maxUnansweredDelay.
const (
	firstUnansweredDelay = 50 * time.Millisecond
	maxUnansweredDelay   = time.Second
	// restartingAuthorizer is how long after the API server last failed
	// to answer a 403 counts as no answer: a restarted API server
	// refuses every request until its authorizer has loaded the RBAC
	// rules, a second or two. Later, 403 is a refusal like any other.
	restartingAuthorizer = time.Minute
)

// retryUnanswered wraps a reconciler so that a pass that failed because the
// API server gave no answer (see unanswered) is tried again within
// maxUnansweredDelay, instead of after the controller's per-item backoff:
// 5ms doubling to 1000s, which grows through an outage of the API server
// (a task whose dispatch write failed for ten seconds is next tried up to
// ten seconds after the API server answers again, its lane slot held all
// that time; a LaneQueue's counters stale until its next change). So does
// the 403 of a restarted API server whose authorizer is not ready yet.
// Every other error keeps the controller's backoff. The ExternalTask,
// LaneQueue and AgentSession controllers are wrapped.
func retryUnanswered(r reconcile.Reconciler) reconcile.Reconciler {
	return &unansweredRetry{inner: r, clock: clock.RealClock{},
		backoff: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](firstUnansweredDelay, maxUnansweredDelay)}
}

type unansweredRetry struct {
	inner   reconcile.Reconciler
	clock   clock.PassiveClock
	backoff workqueue.TypedRateLimiter[reconcile.Request]

	mu sync.Mutex
	// silent is when the API server last failed to answer a pass.
	silent time.Time
}

func (u *unansweredRetry) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	res, err := u.inner.Reconcile(ctx, req)
	if err == nil || !u.unanswered(err) {
		u.backoff.Forget(req)
		return res, err
	}
	after := u.backoff.When(req)
	logf.FromContext(ctx).Error(err, "The API server did not answer; trying again", "after", after)
	return ctrl.Result{RequeueAfter: after}, nil
}

// unanswered tells whether err is no answer: unanswered(err), or a 403 of
// an API server that failed to answer less than restartingAuthorizer ago.
func (u *unansweredRetry) unanswered(err error) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	now := u.clock.Now()
	if unanswered(err) {
		u.silent = now
		return true
	}
	return apierrors.IsForbidden(err) && !u.silent.IsZero() && now.Sub(u.silent) < restartingAuthorizer
}

// unanswered tells whether a request failed without an answer from the API
// server: it got no response at all (the connection was refused, reset or
// cut, the request timed out: a net.Error's Timeout, which a leader that
// cannot renew its Lease also reports for the writes it holds back), or
// the API server said it cannot serve now (503, 504). Refusals (403, 409,
// 422, 429...) are answers, and so are errors that are not a request's.
func unanswered(err error) bool {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return apierrors.IsServiceUnavailable(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err)
	}
	if errors.Is(err, context.Canceled) {
		return false
	}
	var urlErr *url.Error
	var ne net.Error
	return errors.As(err, &urlErr) || (errors.As(err, &ne) && ne.Timeout()) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err)
}
