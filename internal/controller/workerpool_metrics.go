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

// workerPoolMetrics are the agentlane_workerpool_* series, one set per
// pool (labels pool_namespace, not namespace, which a scrape of the
// manager's pod would rename, and workerpool; the pools a namespace runs are
// bounded by WorkerPoolOptions.PerNamespace). A deleted pool's series go
// with it.
type workerPoolMetrics struct {
	desired *prometheus.GaugeVec
	ready   *prometheus.GaugeVec
	busy    *prometheus.GaugeVec
	backlog *prometheus.GaugeVec
	scales  *prometheus.CounterVec
}

func newWorkerPoolMetrics() *workerPoolMetrics {
	labels := []string{"pool_namespace", "workerpool"}
	return &workerPoolMetrics{
		desired: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "agentlane", Subsystem: "workerpool", Name: "desired_replicas",
			Help: "Workers the manager asks of the pool's Deployment."}, labels),
		ready: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "agentlane", Subsystem: "workerpool", Name: "ready_replicas",
			Help: "Ready workers of the pool."}, labels),
		busy: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "agentlane", Subsystem: "workerpool", Name: "busy_replicas",
			Help: "Workers of the pool holding at least one task."}, labels),
		backlog: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "agentlane", Subsystem: "workerpool", Name: "backlog",
			Help: "Queued and running commands of the Workers-target lanes the pool serves, as last counted."}, labels),
		scales: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "agentlane", Subsystem: "workerpool", Name: "scale_events_total",
			Help: "Changes of a pool's size by the manager, by direction: up or down."}, append(labels, "direction")),
	}
}

// Register adds the series to reg.
func (m *workerPoolMetrics) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.desired, m.ready, m.busy, m.backlog, m.scales} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

func (m *workerPoolMetrics) observe(p *agentlanev1alpha1.WorkerPool) {
	m.desired.WithLabelValues(p.Namespace, p.Name).Set(float64(p.Status.DesiredReplicas))
	m.ready.WithLabelValues(p.Namespace, p.Name).Set(float64(p.Status.ReadyReplicas))
	m.busy.WithLabelValues(p.Namespace, p.Name).Set(float64(p.Status.BusyReplicas))
	m.backlog.WithLabelValues(p.Namespace, p.Name).Set(float64(p.Status.Backlog))
}

func (m *workerPoolMetrics) scaled(p *agentlanev1alpha1.WorkerPool, from, to int32) {
	dir := "up"
	if to < from {
		dir = "down"
	}
	m.scales.WithLabelValues(p.Namespace, p.Name, dir).Inc()
}

func (m *workerPoolMetrics) forget(key types.NamespacedName) {
	for _, g := range []*prometheus.GaugeVec{m.desired, m.ready, m.busy, m.backlog} {
		g.DeleteLabelValues(key.Namespace, key.Name)
	}
	m.scales.DeletePartialMatch(prometheus.Labels{"pool_namespace": key.Namespace, "workerpool": key.Name})
}
