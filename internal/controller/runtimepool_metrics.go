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
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// Results of a session's look for a warm pod, the values of the label
// result of agentlane_runtime_pool_adoptions_total.
const (
	// adoptionAdopted: the session adopted a warm pod.
	adoptionAdopted = "adopted"
	// adoptionCold: a pool matched the session's template, but had no
	// ready warm pod to hand over; the session got a new pod.
	adoptionCold = "cold"
	// adoptionConflict: a warm pod changed under the adoption (another
	// session took it, its pool deleted it); the session looked further.
	adoptionConflict = "conflict"
)

// runtimePoolMetrics are the agentlane_runtime_pool_* series: the warm pods
// of each pool (labels pool_namespace and runtimepool; the pools a
// namespace runs are bounded by RuntimePoolOptions.PerNamespace; a deleted
// pool's series go with it) and the adoptions, by result only.
type runtimePoolMetrics struct {
	warm      *prometheus.GaugeVec
	ready     *prometheus.GaugeVec
	adoptions *prometheus.CounterVec
}

func newRuntimePoolMetrics() *runtimePoolMetrics {
	labels := []string{"pool_namespace", "runtimepool"}
	return &runtimePoolMetrics{
		warm: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "agentlane", Subsystem: "runtime_pool", Name: "warm_pods",
			Help: "Warm pods of the RuntimePool: unassigned and not being deleted."}, labels),
		ready: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "agentlane", Subsystem: "runtime_pool", Name: "ready_pods",
			Help: "Warm pods of the RuntimePool that are ready to be adopted."}, labels),
		adoptions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "agentlane", Subsystem: "runtime_pool", Name: "adoptions_total",
			Help: "Looks of sessions for a warm pod of a RuntimePool matching their template, by result: adopted, cold (no ready warm pod: a new pod) or conflict (the pod changed under the adoption; the session looked further)."},
			[]string{"result"}),
	}
}

// Register adds the series to reg.
func (m *runtimePoolMetrics) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.warm, m.ready, m.adoptions} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

func (m *runtimePoolMetrics) observe(p *agentlanev1alpha1.RuntimePool) {
	m.warm.WithLabelValues(p.Namespace, p.Name).Set(float64(p.Status.Replicas))
	m.ready.WithLabelValues(p.Namespace, p.Name).Set(float64(p.Status.ReadyReplicas))
}

func (m *runtimePoolMetrics) adoption(result string) {
	m.adoptions.WithLabelValues(result).Inc()
}

func (m *runtimePoolMetrics) forget(key types.NamespacedName) {
	m.warm.DeleteLabelValues(key.Namespace, key.Name)
	m.ready.DeleteLabelValues(key.Namespace, key.Name)
}
