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
		Help:      "Attempts the worker started running, of ExternalTasks and of the Direct stream alike (direct_tasks_started_total counts the latter).",
	})

	tasksFinished = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace,
		Subsystem: metricsSubsystem,
		Name:      "tasks_finished_total",
		Help: "Attempts the worker stopped holding, of ExternalTasks and of the Direct stream alike " +
			"(direct_tasks_finished_total counts the latter), by outcome: succeeded and failed (result reported), " +
			"lost (the manager took the attempt away, or the Direct stream it came on was lost; nothing or a rejected write was reported), " +
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
		Help:      "Attempts the worker runs now, of ExternalTasks and of the Direct stream.",
	})

	capacityGauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: metricsNamespace,
		Subsystem: metricsSubsystem,
		Name:      "capacity",
		Help:      "Attempts the worker runs at most at once (its --capacity); 0 until it registers.",
	})

	directTasksStarted = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: metricsNamespace,
		Subsystem: metricsSubsystem,
		Name:      "direct_tasks_started_total",
		Help:      "Attempts received on the Direct stream that the worker started running (also counted in tasks_started_total).",
	})

	directTasksFinished = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace,
		Subsystem: metricsSubsystem,
		Name:      "direct_tasks_finished_total",
		Help: "Attempts of the Direct stream that ended (also counted in tasks_finished_total), by outcome: " +
			"succeeded and failed (result sent), cancelled (stopped by the manager's Cancel or at shutdown; result sent), " +
			"lost (the stream was lost: the run was stopped and no result sent).",
	}, []string{"outcome"})

	directTasksRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace,
		Subsystem: metricsSubsystem,
		Name:      "direct_tasks_refused_total",
		Help: "Tasks of the Direct stream the worker answered with a failed result without running them, by reason: " +
			"capacity (every slot busy), duplicate (that attempt already runs), namespace (another namespace's task), " +
			"not_served (a queue, lane or command type the worker does not serve), draining (the worker is stopping), " +
			"invalid (no id or attempt).",
	}, []string{"reason"})

	directConnected = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: metricsNamespace,
		Subsystem: metricsSubsystem,
		Name:      "direct_stream_connected",
		Help:      "1 while the worker's Direct stream to the manager is open (welcomed), 0 otherwise.",
	})
	directTokenRotations = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: metricsNamespace,
		Subsystem: metricsSubsystem,
		Name:      "direct_token_rotations_total",
		Help:      "Rotated tokens the worker sent on its Direct stream (Token frames), so that the stream outlives the token it connected with.",
	})
)

// The label values exported from the start, at 0, so that a rate or an
// increase over any of them has a first sample.
var (
	outcomes       = []string{outcomeSucceeded, outcomeFailed, outcomeLost, outcomeHandedBack}
	writes         = []string{writeClaim, writeComplete, writeHandBack}
	directOutcomes = []string{outcomeSucceeded, outcomeFailed, outcomeCancelled, outcomeLost}
	refusals       = []string{refusedCapacity, refusedDuplicate, refusedNamespace, refusedNotServed, refusedDraining, refusedInvalid}
)

var registerOnce sync.Once

// RegisterMetrics adds the worker's metrics and agentlane_build_info to
// controller-runtime's registry, which the binary serves, every outcome,
// write and refusal label value at 0. Calling it again does nothing.
func RegisterMetrics() {
	registerOnce.Do(func() {
		ctrlmetrics.Registry.MustRegister(tasksStarted, tasksFinished, fencedWritesRejected, tasksRunning, capacityGauge,
			directTasksStarted, directTasksFinished, directTasksRefused, directConnected, directTokenRotations)
		buildinfo.Register(ctrlmetrics.Registry)
		for _, o := range outcomes {
			tasksFinished.WithLabelValues(o)
		}
		for _, w := range writes {
			fencedWritesRejected.WithLabelValues(w)
		}
		for _, o := range directOutcomes {
			directTasksFinished.WithLabelValues(o)
		}
		for _, r := range refusals {
			directTasksRefused.WithLabelValues(r)
		}
	})
}
