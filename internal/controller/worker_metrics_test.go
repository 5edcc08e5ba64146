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
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/agentlane/agentlane/internal/workerproto"
)

// TestWorkerPoolMetrics: the manager exports its own judgement of the
// workers, as dispatch uses it: a worker that keeps renewing is live (its
// capacity counts), one that marked itself draining is draining, one that
// stopped renewing is unresponsive.
func TestWorkerPoolMetrics(t *testing.T) {
	rig := newLivenessRig(t, "a", "b", "c")
	ctx := context.Background()
	l := &coordinationv1.Lease{}
	if err := rig.r.Get(ctx, client.ObjectKey{Namespace: "ns", Name: workerproto.LeaseName("b")}, l); err != nil {
		t.Fatal(err)
	}
	old := l.DeepCopy()
	l.Annotations[workerproto.DrainingAnnotation] = "true"
	if err := rig.r.Update(ctx, l); err != nil {
		t.Fatal(err)
	}
	rig.r.leaseHandler().Update(ctx, event.UpdateEvent{ObjectOld: old, ObjectNew: l}, rig.queue)
	for range 4 { // a and b renew every 5s; c stopped 20s ago, past its 15s
		rig.clk.Step(5 * time.Second)
		rig.renew("a")
		rig.renew("b")
	}

	reg := prometheus.NewPedanticRegistry()
	if err := (&Controllers{Tasks: rig.r}).RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP agentlane_worker_pool_capacity Tasks the live workers of a namespace run at most at once: the sum of their advertised capacities.
# TYPE agentlane_worker_pool_capacity gauge
agentlane_worker_pool_capacity{worker_namespace="ns"} 1
# HELP agentlane_workers Workers with a heartbeat Lease, by the namespace whose tasks they run (worker_namespace) and state: live, draining, unresponsive.
# TYPE agentlane_workers gauge
agentlane_workers{state="draining",worker_namespace="ns"} 1
agentlane_workers{state="live",worker_namespace="ns"} 1
agentlane_workers{state="unresponsive",worker_namespace="ns"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
