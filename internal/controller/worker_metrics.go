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
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/agentlane/agentlane/internal/workerproto"
)

// Worker states, the values of the state label of agentlane_workers.
const (
	// workerLive: the manager saw the worker's Lease renewed within its
	// duration, and the worker is not draining; it gets new tasks.
	workerLive = "live"
	// workerDraining: renewed, but the worker is stopping; no new tasks.
	workerDraining = "draining"
	// workerUnresponsive: not renewed within its duration; no new tasks,
	// and once the manager is sure, its tasks go back through retry.
	workerUnresponsive = "unresponsive"
)

var workerStates = []string{workerLive, workerDraining, workerUnresponsive}

var (
	workersDesc = prometheus.NewDesc("agentlane_workers",
		"Workers with a heartbeat Lease, by the namespace whose tasks they run (worker_namespace) and state: live, draining, unresponsive.",
		[]string{"worker_namespace", "state"}, nil)
	workerPoolCapacityDesc = prometheus.NewDesc("agentlane_worker_pool_capacity",
		"Tasks the live workers of a namespace run at most at once: the sum of their advertised capacities.",
		[]string{"worker_namespace"}, nil)
)

// workerPools exports the worker pools as the manager judges them from
// their heartbeat Leases, the same judgement dispatch uses: source, the
// ExternalTask reconciler Setup built (Controllers.RegisterMetrics).
type workerPools struct {
	source *ExternalTaskReconciler
}

var _ prometheus.Collector = &workerPools{}

func (p *workerPools) Describe(ch chan<- *prometheus.Desc) {
	ch <- workersDesc
	ch <- workerPoolCapacityDesc
}

// Collect lists the worker Leases from the manager's cache.
func (p *workerPools) Collect(ch chan<- prometheus.Metric) {
	r := p.source
	if r == nil {
		return // registered without an ExternalTask controller: no pools to judge
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	leases := &coordinationv1.LeaseList{}
	if err := r.List(ctx, leases, client.MatchingLabels{workerproto.WorkerLabel: "true"}); err != nil {
		logf.Log.WithName("metrics").Error(err, "List worker Leases")
		return
	}
	for ns, pool := range r.workerPools(leases.Items) {
		for _, state := range workerStates {
			ch <- prometheus.MustNewConstMetric(workersDesc, prometheus.GaugeValue, float64(pool.count[state]), ns, state)
		}
		ch <- prometheus.MustNewConstMetric(workerPoolCapacityDesc, prometheus.GaugeValue, float64(pool.capacity), ns)
	}
}

// workerPool is the workers of one namespace by state, and the capacity of
// the live ones.
type workerPool struct {
	count    map[string]int
	capacity int
}

// workerPools judges each worker Lease now, by namespace.
func (r *ExternalTaskReconciler) workerPools(leases []coordinationv1.Lease) map[string]*workerPool {
	now := r.Clock.Now()
	out := map[string]*workerPool{}
	for i := range leases {
		w, ok := parseWorkerLease(&leases[i])
		if !ok {
			continue
		}
		pool := out[leases[i].Namespace]
		if pool == nil {
			pool = &workerPool{count: map[string]int{}}
			out[leases[i].Namespace] = pool
		}
		fresh, _, _ := r.sightings.state(&leases[i], now)
		switch {
		case !fresh:
			pool.count[workerUnresponsive]++
		case w.draining:
			pool.count[workerDraining]++
		default:
			pool.count[workerLive]++
			pool.capacity += w.capacity
		}
	}
	return out
}
