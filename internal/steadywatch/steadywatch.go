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

// Package steadywatch keeps the informers of a controller-runtime cache
// close behind an API server that comes back from an outage.
//
// A client-go reflector whose list or watch fails backs off on its own:
// 800ms doubling, with up to 100% jitter, to 30s. Through an outage of 10s
// to 15s its retries spread so far apart that the next one often comes 10s
// to 35s after the API server is back, and until then the cache shows the
// world as it was before the outage: the manager sees no worker renew and
// no result arrive, and a worker sees no task dispatched to it. NewInformer
// wraps an informer's lists and watches so that a failure that only waiting
// can cure (no answer, 429, 5xx, and the 403 a restarted API server answers
// until its authorizer is ready) is retried here, with a backoff capped at
// MaxDelay, for up to MaxRetrying, instead of being passed to the reflector.
package steadywatch

import (
	"context"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
	"k8s.io/utils/clock"
)

// MaxDelay is the longest wait between two tries of a list or watch: after
// an outage, an informer is listing or watching again within about this
// long (plus jitter) of the API server's return.
const MaxDelay = 2 * time.Second

// MaxRetrying bounds how long one list or watch is retried here; its last
// error then goes to the reflector, which logs it and calls again, so a long
// outage or a client that is truly forbidden still shows in the log.
const MaxRetrying = time.Minute

// backoff spaces the tries: 200ms doubling to MaxDelay, with jitter so that
// many clients do not come back in step.
var backoff = wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.5, Steps: 1 << 30, Cap: MaxDelay}

// NewInformer is a cache.Options.NewInformer: a shared index informer whose
// lists and watches retry transient failures themselves.
func NewInformer(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	return toolscache.NewSharedIndexInformer(Wrap(lw, clock.RealClock{}), obj, resync, indexers)
}

// Wrap returns lw with its lists and watches retried through transient
// failures on clk until they succeed, fail for good, or their context ends.
func Wrap(lw toolscache.ListerWatcher, clk clock.Clock) toolscache.ListerWatcher {
	return &steady{inner: toolscache.ToListerWatcherWithContext(lw), orig: lw, clock: clk}
}

type steady struct {
	inner toolscache.ListerWatcherWithContext
	orig  toolscache.ListerWatcher
	clock clock.Clock
}

func (s *steady) List(opts metav1.ListOptions) (runtime.Object, error) {
	return s.ListWithContext(context.Background(), opts)
}

func (s *steady) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return s.WatchWithContext(context.Background(), opts)
}

func (s *steady) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	return retry(ctx, s.clock, func() (runtime.Object, error) { return s.inner.ListWithContext(ctx, opts) })
}

func (s *steady) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return retry(ctx, s.clock, func() (watch.Interface, error) { return s.inner.WatchWithContext(ctx, opts) })
}

// IsWatchListSemanticsUnSupported answers for the wrapped ListerWatcher, so
// that the reflector streams lists exactly when it would without the wrap.
func (s *steady) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(s.orig)
}

// retry calls try until it succeeds or fails with an error that waiting
// cannot cure, MaxRetrying has passed, or ctx ends (then it returns try's
// last error).
func retry[T any](ctx context.Context, clk clock.Clock, try func() (T, error)) (T, error) {
	b := backoff
	giveUp := clk.Now().Add(MaxRetrying)
	for {
		v, err := try()
		if err == nil || !Transient(err) || ctx.Err() != nil || !clk.Now().Before(giveUp) {
			return v, err
		}
		t := clk.NewTimer(b.Step())
		select {
		case <-ctx.Done():
			t.Stop()
			return v, err
		case <-t.C():
		}
	}
}

// Transient tells whether a list or watch failed for a reason that may go
// away by itself: no answer from the API server, 429, 5xx, or 403 (which a
// restarted API server answers until its authorizer's caches are filled).
// A cancelled or expired context is not transient.
func Transient(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true
	}
	return apierrors.IsTooManyRequests(err) || apierrors.IsForbidden(err) || apierrors.IsServerTimeout(err) ||
		apierrors.IsTimeout(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) ||
		apierrors.IsUnexpectedServerError(err)
}
