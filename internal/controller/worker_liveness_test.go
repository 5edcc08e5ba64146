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
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/testenv"
	"github.com/agentlane/agentlane/internal/workerproto"
)

// livenessRig is an ExternalTask reconciler on a fake client and a fake
// clock, with worker Leases of a 15s duration (5s heartbeats) and the
// manager's Lease watch played by calling its handler.
type livenessRig struct {
	t     *testing.T
	r     *ExternalTaskReconciler
	clk   *testingclock.FakeClock
	queue workqueue.TypedRateLimitingInterface[reconcile.Request]
}

func newLivenessRig(t *testing.T, workers ...string) *livenessRig {
	clk := testingclock.NewFakeClock(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	rig := &livenessRig{t: t, clk: clk,
		r:     &ExternalTaskReconciler{Client: fake.NewClientBuilder().WithScheme(testenv.Scheme()).Build(), Clock: clk},
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]()),
	}
	t.Cleanup(rig.queue.ShutDown)
	for _, w := range workers {
		now := metav1.NewMicroTime(clk.Now())
		l := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: workerproto.LeaseName(w),
				Labels:      map[string]string{workerproto.WorkerLabel: "true"},
				Annotations: map[string]string{workerproto.CapacityAnnotation: "1"}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(w), LeaseDurationSeconds: ptr.To[int32](15), RenewTime: &now},
		}
		if err := rig.r.Create(context.Background(), l); err != nil {
			t.Fatal(err)
		}
		rig.r.leaseHandler().Create(context.Background(), event.CreateEvent{Object: l}, rig.queue)
	}
	return rig
}

// renew renews worker w's Lease at the fake clock's time and delivers the
// watch event to the manager.
func (rig *livenessRig) renew(w string) {
	rig.t.Helper()
	rig.renewAt(w, rig.clk.Now())
}

// renewAt renews worker w's Lease with renewTime at, as read on the
// worker's clock.
func (rig *livenessRig) renewAt(w string, at time.Time) {
	rig.t.Helper()
	ctx := context.Background()
	l := &coordinationv1.Lease{}
	if err := rig.r.Get(ctx, client.ObjectKey{Namespace: "ns", Name: workerproto.LeaseName(w)}, l); err != nil {
		rig.t.Fatal(err)
	}
	old := l.DeepCopy()
	l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(at))
	if err := rig.r.Update(ctx, l); err != nil {
		rig.t.Fatal(err)
	}
	rig.r.leaseHandler().Update(ctx, event.UpdateEvent{ObjectOld: old, ObjectNew: l}, rig.queue)
}

// lost returns, for each worker, whether checkHeld closes an attempt it
// holds as WorkerLost now.
func (rig *livenessRig) lost(workers ...string) map[string]bool {
	rig.t.Helper()
	out := map[string]bool{}
	for _, w := range workers {
		task := &agentlanev1alpha1.ExternalTask{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "t-" + w}}
		task.Status = agentlanev1alpha1.ExternalTaskStatus{Phase: agentlanev1alpha1.ExternalTaskRunning, Worker: w, Attempt: 1}
		end, _, err := rig.r.checkHeld(context.Background(), task)
		if err != nil {
			rig.t.Fatal(err)
		}
		out[w] = end != nil && end.Outcome == agentlanev1alpha1.AttemptWorkerLost
	}
	return out
}

func TestWorkerLiveness(t *testing.T) {
	t.Run("an outage in which the manager sees nothing loses no worker", func(t *testing.T) {
		rig := newLivenessRig(t, "w1", "w2")
		rig.clk.Step(4 * time.Second)
		rig.renew("w2")
		// The API server goes away: no Lease changes reach the manager
		// for 30s, twice the lease duration, by its clock.
		for range 30 {
			rig.clk.Step(time.Second)
			if diff := cmp.Diff(map[string]bool{"w1": false, "w2": false}, rig.lost("w1", "w2")); diff != "" {
				t.Fatalf("lost at +%s in the outage (-want,+got):\n%s", rig.clk.Since(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)), diff)
			}
		}
		// It comes back; w2 renews first. w1 has a full lease duration
		// from then to be seen renewing.
		rig.renew("w2")
		for range 3 {
			rig.clk.Step(4 * time.Second)
			rig.renew("w2")
		}
		if diff := cmp.Diff(map[string]bool{"w1": false, "w2": false}, rig.lost("w1", "w2")); diff != "" {
			t.Errorf("lost 12s after the outage (-want,+got):\n%s", diff)
		}
		rig.clk.Step(4 * time.Second)
		rig.renew("w2")
		if diff := cmp.Diff(map[string]bool{"w1": true, "w2": false}, rig.lost("w1", "w2")); diff != "" {
			t.Errorf("lost 16s after the outage, w1 never renewed (-want,+got):\n%s", diff)
		}
	})

	t.Run("a worker whose Lease stops while others renew is lost", func(t *testing.T) {
		rig := newLivenessRig(t, "w1", "w2", "w3")
		for range 3 {
			rig.clk.Step(5 * time.Second)
			rig.renew("w2")
			rig.renew("w3")
		}
		if diff := cmp.Diff(map[string]bool{"w1": true, "w2": false, "w3": false}, rig.lost("w1", "w2", "w3")); diff != "" {
			t.Errorf("lost after 15s (-want,+got):\n%s", diff)
		}
	})

	t.Run("a worker seen renewing is never lost, whatever its clock says", func(t *testing.T) {
		rig := newLivenessRig(t, "w1", "w2")
		for range 4 {
			rig.clk.Step(5 * time.Second)
			rig.renewAt("w1", rig.clk.Now().Add(-time.Hour)) // w1's clock is an hour behind
			rig.renew("w2")
		}
		if diff := cmp.Diff(map[string]bool{"w1": false, "w2": false}, rig.lost("w1", "w2")); diff != "" {
			t.Errorf("lost after 20s (-want,+got):\n%s", diff)
		}
	})
}
