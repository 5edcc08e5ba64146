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
	"fmt"
	"io"
	"net/url"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// timeoutErr is a net.Error timeout, as a leader that cannot renew its
// Lease reports the writes it holds back.
type timeoutErr struct{}

func (timeoutErr) Error() string   { return "held back" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// TestUnanswered: the API server's silence is told apart from its answers.
func TestUnanswered(t *testing.T) {
	gr := schema.GroupResource{Group: "agentlane.io", Resource: "externaltasks"}
	for name, tc := range map[string]struct {
		err  error
		want bool
	}{
		"connection refused": {fmt.Errorf("write status: Patch: dial tcp: %w", syscall.ECONNREFUSED), true},
		"connection reset":   {fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		"cut mid-request":    {fmt.Errorf("write status: %w", &url.Error{Op: "Patch", URL: "https://127.0.0.1:6443", Err: errors.New("http2: client connection lost")}), true},
		"cut response":       {fmt.Errorf("unexpected error when reading response body: %w", io.ErrUnexpectedEOF), true},
		"timeout":            {fmt.Errorf("write status: %w", timeoutErr{}), true},
		"deadline":           {fmt.Errorf("write status: %w", context.DeadlineExceeded), true},
		"503":                {apierrors.NewServiceUnavailable("starting"), true},
		"504":                {apierrors.NewTimeoutError("slow", 1), true},
		"cancelled":          {context.Canceled, false},
		"403":                {apierrors.NewForbidden(gr, "t", errors.New("RBAC")), false},
		"409":                {apierrors.NewConflict(gr, "t", errors.New("modified")), false},
		"422":                {apierrors.NewInvalid(schema.GroupKind{Group: "agentlane.io", Kind: "ExternalTask"}, "t", nil), false},
		"429":                {apierrors.NewTooManyRequests("slow down", 1), false},
		"not the API server": {errors.New("no scheduler for the queue"), false},
	} {
		if got := unanswered(tc.err); got != tc.want {
			t.Errorf("%s: unanswered(%v) = %v, want %v", name, tc.err, got, tc.want)
		}
	}
}

// scripted is a reconciler that answers with errs in turn; a nil one is a
// success that asks to look again in a minute.
type scripted struct{ errs []error }

func (s *scripted) Reconcile(context.Context, reconcile.Request) (ctrl.Result, error) {
	err := s.errs[0]
	s.errs = s.errs[1:]
	if err == nil {
		return ctrl.Result{RequeueAfter: time.Minute}, nil
	}
	return ctrl.Result{}, err
}

// TestRetryUnanswered: a pass the API server did not answer is tried again
// after 50ms doubling to at most a second, without an error (so that the
// controller's own backoff does not grow); a success resets the doubling.
func TestRetryUnanswered(t *testing.T) {
	refused := fmt.Errorf("dial: %w", syscall.ECONNREFUSED)
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "externaltasks"}, "t", errors.New("RBAC"))
	var errs []error
	for range 12 {
		errs = append(errs, refused)
	}
	inner := &scripted{errs: append(errs, nil, refused, forbidden)}
	r := retryUnanswered(inner)
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "t"}}
	ctx := context.Background()

	var delays []time.Duration
	for range 12 {
		res, err := r.Reconcile(ctx, req)
		if err != nil {
			t.Fatalf("unanswered pass returned the error %v", err)
		}
		delays = append(delays, res.RequeueAfter)
	}
	ms := time.Millisecond
	want := []time.Duration{50 * ms, 100 * ms, 200 * ms, 400 * ms, 800 * ms, time.Second, time.Second, time.Second,
		time.Second, time.Second, time.Second, time.Second}
	for i := range want {
		if delays[i] != want[i] {
			t.Fatalf("delays %v, want %v", delays, want)
		}
	}
	if res, err := r.Reconcile(ctx, req); err != nil || res.RequeueAfter != time.Minute {
		t.Fatalf("success: %v, %v; want the inner result", res, err)
	}
	if res, _ := r.Reconcile(ctx, req); res.RequeueAfter != 50*time.Millisecond {
		t.Fatalf("first unanswered pass after a success: retry after %v, want 50ms", res.RequeueAfter)
	}
	if res, err := r.Reconcile(ctx, req); err != nil || res.RequeueAfter != 100*time.Millisecond {
		t.Fatalf("403 right after the API server did not answer: %v, %v; want it retried after 100ms", res, err)
	}
}

// TestRetryUnansweredForbidden: a 403 is a refusal that keeps the
// controller's backoff, unless the API server failed to answer less than
// a minute ago (a restarted API server's authorizer is not ready yet).
func TestRetryUnansweredForbidden(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "externaltasks"}, "t", errors.New("RBAC"))
	refused := fmt.Errorf("dial: %w", syscall.ECONNREFUSED)
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	inner := &scripted{errs: []error{forbidden, refused, forbidden, forbidden}}
	r := retryUnanswered(inner).(*unansweredRetry)
	r.clock = clk
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "t"}}
	ctx := context.Background()
	if _, err := r.Reconcile(ctx, req); !apierrors.IsForbidden(err) {
		t.Fatalf("403 of an API server that always answered: %v, want it returned to the controller", err)
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatalf("no answer: %v", err)
	}
	clk.Step(restartingAuthorizer - time.Second)
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatalf("403 soon after the API server did not answer: %v, want it retried", err)
	}
	clk.Step(time.Second)
	if _, err := r.Reconcile(ctx, req); !apierrors.IsForbidden(err) {
		t.Fatalf("403 a minute after the API server last failed to answer: %v, want it returned", err)
	}
}
