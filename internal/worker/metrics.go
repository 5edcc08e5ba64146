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

package worker

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/agentlane/agentlane/internal/buildinfo"
)

const (
	metricsNamespace = "agentlane"
	metricsSubsystem = "worker"
)

var (
	tasksStarted = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: metricsNamespace,
		Subsystem: metricsSubsystem,
		Name:      "tasks_started_total",
		Help:      "Attempts the worker claimed and started running.",
	})

	tasksFinished = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace,
		Subsystem: metricsSubsystem,
		Name:      "tasks_finished_total",
		Help: "Attempts the worker stopped holding, by outcome: succeeded and failed (result reported), " +
			"lost (the manager took the attempt away; nothing or a rejected write was reported), " +
			"handed_back (stopped at the end of the shutdown grace period and returned to its lane).",
	}, []string{"outcome"})

	fencedWritesRejected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace,
		Subsystem: metricsSubsystem,
		Name:      "fenced_writes_rejected_total",
		Help: "Status writes the API server rejected because the attempt was no longer the worker's, " +
			"by write: claim, complete, hand_back.",
	}, []string{"write"})

	tasksRunning = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: metricsNamespace,
		Subsystem: metricsSubsystem,
		Name:      "tasks_running",
		Help:      "Attempts the worker runs now.",
	})

	capacityGauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: metricsNamespace,
		Subsystem: metricsSubsystem,
		Name:      "capacity",
		Help:      "Attempts the worker runs at most at once (its --capacity); 0 until it registers.",
	})
)

// The label values exported from the start, at 0, so that a rate or an
// increase over any of them has a first sample.
var (
	outcomes = []string{outcomeSucceeded, outcomeFailed, outcomeLost, outcomeHandedBack}
	writes   = []string{writeClaim, writeComplete, writeHandBack}
)

var registerOnce sync.Once

// RegisterMetrics adds the worker's metrics and agentlane_build_info to
// controller-runtime's registry, which the binary serves, every outcome and
// write label value at 0. Calling it again does nothing.
func RegisterMetrics() {
	registerOnce.Do(func() {
		ctrlmetrics.Registry.MustRegister(tasksStarted, tasksFinished, fencedWritesRejected, tasksRunning, capacityGauge)
		buildinfo.Register(ctrlmetrics.Registry)
		for _, o := range outcomes {
			tasksFinished.WithLabelValues(o)
		}
		for _, w := range writes {
			fencedWritesRejected.WithLabelValues(w)
		}
	})
}
