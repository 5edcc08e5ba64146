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

package steadywatch

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
	testingclock "k8s.io/utils/clock/testing"
)

var gr = schema.GroupResource{Group: "agentlane.io", Resource: "externaltasks"}

// errRefused is what a client gets while the API server is down.
var errRefused = fmt.Errorf("dial tcp 127.0.0.1:6443: connect: %w", syscall.ECONNREFUSED)

// flaky is a ListerWatcher whose lists and watches fail with errs[i] on
// the i-th try, and succeed once errs runs out.
type flaky struct {
	errs  []error
	tries int
}

func (f *flaky) next() error {
	f.tries++
	if f.tries <= len(f.errs) {
		return f.errs[f.tries-1]
	}
	return nil
}

func (f *flaky) List(metav1.ListOptions) (runtime.Object, error) {
	if err := f.next(); err != nil {
		return nil, err
	}
	return &metav1.List{}, nil
}

func (f *flaky) Watch(metav1.ListOptions) (watch.Interface, error) {
	if err := f.next(); err != nil {
		return nil, err
	}
	return watch.NewFake(), nil
}

func repeat(err error, n int) []error {
	out := make([]error, n)
	for i := range out {
		out[i] = err
	}
	return out
}

// drive runs call and steps clk by step whenever call waits, until it
// returns; it returns the fake time that passed and call's error.
func drive(t *testing.T, clk *testingclock.FakeClock, step time.Duration, call func() error) (time.Duration, error) {
	t.Helper()
	start := clk.Now()
	done := make(chan error, 1)
	go func() { done <- call() }()
	for {
		select {
		case err := <-done:
			return clk.Since(start), err
		default:
		}
		if clk.HasWaiters() {
			clk.Step(step)
		}
		time.Sleep(time.Millisecond) // lets the caller reach its timer
	}
}

func TestRetriesAnOutageAtAStepNoLongerThanMaxDelay(t *testing.T) {
	// 15 failed tries: a reflector's own backoff would be at its 30s cap
	// by now. Each wait here must end within MaxDelay plus its jitter.
	maxWait := time.Duration(float64(MaxDelay) * (1 + backoff.Jitter))
	for name, errs := range map[string][]error{
		"connection refused":              repeat(errRefused, 15),
		"429, 503, then a warming-up 403": append(append(repeat(apierrors.NewTooManyRequests("slow down", 1), 5), repeat(apierrors.NewServiceUnavailable("starting"), 5)...), repeat(apierrors.NewForbidden(gr, "", errors.New("RBAC: not ready")), 5)...),
	} {
		t.Run(name, func(t *testing.T) {
			for _, op := range []string{"list", "watch"} {
				clk := testingclock.NewFakeClock(time.Date(2026, 11, 24, 3, 0, 0, 0, time.UTC))
				f := &flaky{errs: errs}
				lw := Wrap(f, clk).(toolscache.ListerWatcherWithContext)
				waited, err := drive(t, clk, maxWait, func() error {
					if op == "list" {
						_, err := lw.ListWithContext(context.Background(), metav1.ListOptions{})
						return err
					}
					_, err := lw.WatchWithContext(context.Background(), metav1.ListOptions{})
					return err
				})
				if err != nil {
					t.Fatalf("%s: got %v, want success after the outage", op, err)
				}
				if f.tries != len(errs)+1 {
					t.Errorf("%s: %d tries, want %d", op, f.tries, len(errs)+1)
				}
				if limit := time.Duration(len(errs)) * maxWait; waited > limit {
					t.Errorf("%s: waited %s for %d failures, more than %s at most %s apart", op, waited, len(errs), limit, maxWait)
				}
			}
		})
	}
}

func TestPassesOnWhatWaitingCannotCure(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for name, c := range map[string]struct {
		ctx context.Context
		err error
	}{
		"410 Gone":           {context.Background(), apierrors.NewResourceExpired("too old resource version")},
		"404":                {context.Background(), apierrors.NewNotFound(gr, "")},
		"a stopped informer": {ctx, errRefused},
	} {
		t.Run(name, func(t *testing.T) {
			clk := testingclock.NewFakeClock(time.Now())
			f := &flaky{errs: []error{c.err}}
			_, err := Wrap(f, clk).(toolscache.ListerWatcherWithContext).WatchWithContext(c.ctx, metav1.ListOptions{})
			if !errors.Is(err, c.err) || f.tries != 1 {
				t.Errorf("got %v after %d tries, want %v after 1", err, f.tries, c.err)
			}
		})
	}
}

func TestHandsALongOutageToTheReflectorAfterMaxRetrying(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	f := &flaky{errs: repeat(errRefused, 1000)}
	waited, err := drive(t, clk, MaxDelay, func() error {
		_, err := Wrap(f, clk).List(metav1.ListOptions{}) //nolint:staticcheck // List is still part of the ListerWatcher that Wrap returns
		return err
	})
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("got %v, want the last failure", err)
	}
	if waited < MaxRetrying || waited > MaxRetrying+2*MaxDelay {
		t.Errorf("gave up after %s, want about %s", waited, MaxRetrying)
	}
}

type noWatchList struct{ flaky }

func (noWatchList) IsWatchListSemanticsUnSupported() bool { return true }

func TestKeepsTheWatchListSemanticsOfTheWrapped(t *testing.T) {
	if watchlist.DoesClientNotSupportWatchListSemantics(Wrap(&flaky{}, testingclock.NewFakeClock(time.Now()))) {
		t.Error("a ListerWatcher that supports watch lists lost the support")
	}
	if !watchlist.DoesClientNotSupportWatchListSemantics(Wrap(&noWatchList{}, testingclock.NewFakeClock(time.Now()))) {
		t.Error("a ListerWatcher without watch lists gained them")
	}
}
