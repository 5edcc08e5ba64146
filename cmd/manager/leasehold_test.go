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

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

var (
	errRefused  = fmt.Errorf("dial tcp 127.0.0.1:6443: connect: %w", syscall.ECONNREFUSED)
	leaseGR     = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
	errConflict = apierrors.NewConflict(leaseGR, "manager.agentlane.io", errors.New("the object has been modified"))
)

// fakeLock is a Lease lock whose next answers the test sets: err fails
// every call while set; otherwise Update and Create store the record.
type fakeLock struct {
	id      string
	rec     resourcelock.LeaderElectionRecord
	err     error
	updates int
}

func (f *fakeLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	if f.err != nil {
		return nil, nil, f.err
	}
	rec := f.rec
	return &rec, []byte(fmt.Sprintf("%s/%d", rec.HolderIdentity, rec.RenewTime.UnixNano())), nil
}

func (f *fakeLock) Create(_ context.Context, rec resourcelock.LeaderElectionRecord) error {
	return f.Update(context.Background(), rec)
}

func (f *fakeLock) Update(_ context.Context, rec resourcelock.LeaderElectionRecord) error {
	f.updates++
	if f.err != nil {
		return f.err
	}
	f.rec = rec
	return nil
}

func (f *fakeLock) RecordEvent(string) {}
func (f *fakeLock) Identity() string   { return f.id }
func (f *fakeLock) Describe() string   { return "agentlane-system/manager.agentlane.io" }
func (f *fakeLock) holder(id string) resourcelock.LeaderElectionRecord {
	return resourcelock.LeaderElectionRecord{HolderIdentity: id, LeaseDurationSeconds: 4}
}

const (
	renewDeadline = 3 * time.Second
	outageHold    = 30 * time.Second
)

func newTestHold(id string) (*leaseHold, *fakeLock, *testingclock.FakeClock) {
	lock := &fakeLock{id: id}
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	return newLeaseHold(lock, renewDeadline, outageHold, clk), lock, clk
}

// TestLeaseHoldKeepsLeadingWithoutWriting: through an outage the leader's
// renewals are reported done to the election, but the manager writes
// nothing from the renew deadline on; the first renewal the API server
// accepts again lets it write at once.
func TestLeaseHoldKeepsLeadingWithoutWriting(t *testing.T) {
	ctx := context.Background()
	h, lock, clk := newTestHold("a")
	if !h.mayWrite() {
		t.Fatal("a replica that never led may not write (its setup writes before the election)")
	}
	if err := h.Create(ctx, lock.holder("a")); err != nil {
		t.Fatal(err)
	}
	if !h.mayWrite() {
		t.Fatal("the new leader may not write")
	}

	lock.err = errRefused
	for elapsed := time.Duration(0); elapsed < 20*time.Second; elapsed += 500 * time.Millisecond {
		clk.Step(500 * time.Millisecond)
		if err := h.Update(ctx, lock.holder("a")); err != nil {
			t.Fatalf("renewal %s into the outage: %v, want it reported done", elapsed, err)
		}
		if want := elapsed+500*time.Millisecond < renewDeadline; h.mayWrite() != want {
			t.Fatalf("%s into the outage: mayWrite %v, want %v", elapsed+500*time.Millisecond, !want, want)
		}
	}
	// A restarted API server answers 403 until its authorizer is ready.
	lock.err = apierrors.NewForbidden(leaseGR, "manager.agentlane.io", errors.New("RBAC: not ready"))
	if err := h.Update(ctx, lock.holder("a")); err != nil || h.mayWrite() {
		t.Fatalf("renewal refused by a starting API server: err %v, mayWrite %v; want reported done, no writes", err, h.mayWrite())
	}
	lock.err = nil
	if err := h.Update(ctx, lock.holder("a")); err != nil || !h.mayWrite() {
		t.Fatalf("renewal accepted after the outage: err %v, mayWrite %v; want nil, true", err, h.mayWrite())
	}
}

// TestLeaseHoldTakenByStandby: a standby that took the Lease during the
// outage makes the old leader's renewal fail (a conflict): the election
// hears it, and the old leader never writes again, even if the API server
// then stops answering once more.
func TestLeaseHoldTakenByStandby(t *testing.T) {
	ctx := context.Background()
	h, lock, clk := newTestHold("a")
	if err := h.Create(ctx, lock.holder("a")); err != nil {
		t.Fatal(err)
	}
	lock.err = errRefused
	clk.Step(5 * time.Second)
	if err := h.Update(ctx, lock.holder("a")); err != nil {
		t.Fatal(err)
	}
	lock.err = errConflict
	if err := h.Update(ctx, lock.holder("a")); !apierrors.IsConflict(err) {
		t.Fatalf("renewal after a standby took the Lease: %v, want the conflict", err)
	}
	lock.err = errRefused
	if err := h.Update(ctx, lock.holder("a")); err == nil {
		t.Fatal("a renewal without answer after losing the Lease was reported done")
	}
	lock.err = nil
	lock.rec = lock.holder("b")
	if _, _, err := h.Get(ctx); err != nil {
		t.Fatal(err)
	}
	if h.mayWrite() {
		t.Fatal("the old leader may write after a standby took the Lease")
	}
}

// TestLeaseHoldBounded: past the hold, renewals without an answer go to
// the election again, which stops leading; a release (no holder) is never
// reported done.
func TestLeaseHoldBounded(t *testing.T) {
	ctx := context.Background()
	h, lock, clk := newTestHold("a")
	if err := h.Create(ctx, lock.holder("a")); err != nil {
		t.Fatal(err)
	}
	lock.err = errRefused
	clk.Step(outageHold - time.Millisecond)
	if err := h.Update(ctx, lock.holder("a")); err != nil {
		t.Fatalf("renewal within the hold: %v", err)
	}
	clk.Step(time.Millisecond)
	if err := h.Update(ctx, lock.holder("a")); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("renewal past the hold: %v, want the error", err)
	}
	if err := h.Update(ctx, lock.holder("")); err == nil {
		t.Fatal("a release without answer was reported done")
	}

	none := newLeaseHold(&fakeLock{id: "a"}, renewDeadline, 0, clk)
	if err := none.Create(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "a"}); err != nil {
		t.Fatal(err)
	}
	none.Interface.(*fakeLock).err = errRefused
	if err := none.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "a"}); err == nil {
		t.Fatal("--leader-elect-outage-hold=0 reported a renewal without answer done")
	}
}

// TestLeaseHoldStandby: a standby's failed attempts are never reported
// done (it would lead without holding the Lease), and after reads that got
// no answer for the renew deadline it reports the Lease changed, so that
// the election waits a whole lease duration before taking it.
func TestLeaseHoldStandby(t *testing.T) {
	ctx := context.Background()
	h, lock, clk := newTestHold("b")
	lock.rec = lock.holder("a")
	_, before, err := h.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, again, _ := h.Get(ctx)
	if string(again) != string(before) {
		t.Fatal("an unchanged Lease read as changed while the API server answers")
	}
	// A lone timeout of a slow API server changes nothing.
	lock.err = context.DeadlineExceeded
	if _, _, err := h.Get(ctx); err == nil {
		t.Fatal("a read without answer reported a Lease")
	}
	clk.Step(time.Second)
	lock.err = nil
	if _, raw, _ := h.Get(ctx); string(raw) != string(before) {
		t.Fatal("a lone timed-out read made the standby wait a new lease duration")
	}
	// An outage does.
	lock.err = errRefused
	if _, _, err := h.Get(ctx); err == nil {
		t.Fatal("a read without answer reported a Lease")
	}
	clk.Step(renewDeadline)
	if _, _, err := h.Get(ctx); err == nil {
		t.Fatal("a read without answer reported a Lease")
	}
	if err := h.Update(ctx, lock.holder("b")); err == nil {
		t.Fatal("a standby's takeover without answer was reported done")
	}
	lock.err = nil
	_, after, err := h.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(after) == string(before) {
		t.Fatal("the first read after an outage shows the Lease unchanged: the standby could take it at once, on stale caches")
	}
	if !h.mayWrite() {
		t.Fatal("a standby that never led may not write")
	}
	if err := h.Update(ctx, lock.holder("b")); err != nil || !h.mayWrite() {
		t.Fatalf("standby takes the Lease: err %v, mayWrite %v", err, h.mayWrite())
	}
}

// TestGatedClient: while the hold is in doubt every write is refused with
// a timeout (so controllers try it again soon) and nothing reaches the API
// server; reads still work.
func TestGatedClient(t *testing.T) {
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
	may := false
	newClient := func(_ *rest.Config, _ client.Options) (client.Client, error) {
		return fake.NewClientBuilder().WithObjects(cm.DeepCopy(), pod.DeepCopy()).WithStatusSubresource(pod).Build(), nil
	}
	h := &leaseHold{}
	c, err := h.gate(newClient)(nil, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c.(*gatedClient).may = func() bool { return may }

	patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"x":"y"}}}`))
	writes := map[string]func() error{
		"create": func() error {
			return c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "new"}})
		},
		"update":        func() error { return c.Update(ctx, cm.DeepCopy()) },
		"patch":         func() error { return c.Patch(ctx, cm.DeepCopy(), patch) },
		"delete":        func() error { return c.Delete(ctx, cm.DeepCopy()) },
		"delete all of": func() error { return c.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace("ns")) },
		"status update": func() error { return c.Status().Update(ctx, pod.DeepCopy()) },
		"status patch":  func() error { return c.Status().Patch(ctx, pod.DeepCopy(), patch) },
		"subresource patch": func() error {
			return c.SubResource("status").Patch(ctx, pod.DeepCopy(), patch)
		},
	}
	for name, write := range writes {
		err := write()
		var timeout interface{ Timeout() bool }
		if !errors.As(err, &timeout) || !timeout.Timeout() || !errors.Is(err, errLeaseInDoubt) {
			t.Errorf("%s while the Lease is in doubt: %v, want errLeaseInDoubt", name, err)
		}
	}
	got := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(cm), got); err != nil || len(got.Labels) != 0 {
		t.Fatalf("read while in doubt: %v, labels %v; want the untouched ConfigMap", err, got.Labels)
	}
	list := &corev1.ConfigMapList{}
	if err := c.List(ctx, list); err != nil || len(list.Items) != 1 {
		t.Fatalf("list while in doubt: %v, %d items; want 1 (nothing created)", err, len(list.Items))
	}

	may = true
	for name, write := range writes {
		if err := write(); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("%s once the Lease is renewed: %v", name, err)
		}
	}
}

// TestNoAnswer: what the API server did not answer (a request cut by its
// death included) is held through; its answers about the Lease are not.
func TestNoAnswer(t *testing.T) {
	for err, want := range map[error]bool{
		errRefused:               true,
		context.DeadlineExceeded: true,
		apierrors.NewServiceUnavailable("starting"):              true,
		apierrors.NewTooManyRequests("slow down", 1):             true,
		apierrors.NewForbidden(leaseGR, "x", errors.New("RBAC")): true,
		apierrors.NewInternalError(errors.New("etcd")):           true,
		errConflict:                                false,
		apierrors.NewNotFound(leaseGR, "x"):        false,
		apierrors.NewUnauthorized("token expired"): false,
		apierrors.NewBadRequest("bad"):             false,
		fmt.Errorf("Put: %w", io.ErrUnexpectedEOF): true,
		context.Canceled:                           false,
	} {
		if got := noAnswer(err); got != want {
			t.Errorf("noAnswer(%v) = %v, want %v", err, got, want)
		}
	}
}
