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

package scheduling

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentlane/agentlane/internal/lanequeue"
)

// The lane schedulers' metrics, served on the manager's metrics endpoint
// with controller-runtime's once RegisterMetrics adds them; docs/metrics.md
// describes each. Every series is labelled with the LaneQueue
// (queue_namespace, queue) and most with the lane. The LaneQueue's
// namespace is not called "namespace": scrapes add a namespace target label
// of their own (the manager pod's).
const (
	// LabelQueueNamespace is the namespace of the LaneQueue.
	LabelQueueNamespace = "queue_namespace"
	LabelQueue          = "queue"
	LabelLane           = "lane"
	LabelOutcome        = "outcome"
)

// DurationBuckets are the lane histograms' buckets, in seconds: from 5ms to
// an hour, so that an attempt that runs to a long timeout (5 minutes is
// common, the Session API waits as long) or a command that waits behind a
// long backlog still lands in a bucket of its own, not in +Inf.
var DurationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}

var (
	queueLabels = []string{LabelQueueNamespace, LabelQueue}
	laneLabels  = []string{LabelQueueNamespace, LabelQueue, LabelLane}

	LanePending = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "agentlane_lane_pending_commands",
		Help: "Commands waiting in a lane to start, queued or backing off before a retry.",
	}, laneLabels)
	LaneActive = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "agentlane_lane_active_commands",
		Help: "Commands running in a lane.",
	}, laneLabels)
	LaneSubmitted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentlane_lane_commands_submitted_total",
		Help: "Commands accepted into a lane.",
	}, laneLabels)
	LaneCommandsFinished = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentlane_lane_commands_finished_total",
		Help: "Commands that ended, each once, by outcome: succeeded, failed, dead_lettered, cancelled.",
	}, append(laneLabels, LabelOutcome))
	LaneAttemptsStarted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentlane_lane_attempts_started_total",
		Help: "Attempts started in a lane; a retried command starts several.",
	}, laneLabels)
	LaneAttemptsFinished = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentlane_lane_attempts_finished_total",
		Help: "Attempts that ended, each once, by outcome: succeeded, failed, timed_out, cancelled.",
	}, append(laneLabels, LabelOutcome))
	LaneRetries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentlane_lane_retries_total",
		Help: "Failed or timed-out attempts whose command was scheduled to run again.",
	}, laneLabels)
	LaneWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "agentlane_lane_wait_duration_seconds",
		Help:    "Seconds from a command becoming ready (submitted, or its retry delay over) to starting.",
		Buckets: DurationBuckets,
	}, laneLabels)
	LaneRun = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "agentlane_lane_run_duration_seconds",
		Help:    "Seconds from an attempt's start to its end, whatever its outcome.",
		Buckets: DurationBuckets,
	}, laneLabels)
	LaneMaxConcurrency = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "agentlane_lane_max_concurrency",
		Help: "A lane's configured maxConcurrency across all sessions; 0 is unlimited.",
	}, laneLabels)
	LaneMaxConcurrencyPerSession = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "agentlane_lane_max_concurrency_per_session",
		Help: "A lane's configured maxConcurrencyPerSession; 0 is unlimited.",
	}, laneLabels)
	QueueMaxConcurrent = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "agentlane_queue_max_concurrent",
		Help: "A LaneQueue's configured maxConcurrent across its lanes (isolated lanes excepted); 0 is unlimited.",
	}, queueLabels)

	laneVectors = []interface {
		prometheus.Collector
		DeletePartialMatch(prometheus.Labels) int
	}{LanePending, LaneActive, LaneSubmitted, LaneCommandsFinished, LaneAttemptsStarted,
		LaneAttemptsFinished, LaneRetries, LaneWait, LaneRun,
		LaneMaxConcurrency, LaneMaxConcurrencyPerSession, QueueMaxConcurrent, LanePaused, QueueDraining}
)

// RegisterMetrics adds the lane schedulers' metrics to reg (the manager's
// controller-runtime registry); cmd/manager calls it once. A Schedulers
// whose Options.Metrics is nil updates these series whether or not they
// are registered.
func RegisterMetrics(reg prometheus.Registerer) error {
	for _, v := range laneVectors {
		if err := reg.Register(v); err != nil {
			return fmt.Errorf("register the lane metrics: %w", err)
		}
	}
	return nil
}

// queueMetrics adapts one LaneQueue's scheduler metrics to Prometheus.
type queueMetrics struct {
	namespace, queue string
}

var _ lanequeue.MetricsProvider = queueMetrics{}

func (m queueMetrics) lane(lane string) []string { return []string{m.namespace, m.queue, lane} }

func (m queueMetrics) NewPendingMetric(lane string) lanequeue.GaugeMetric {
	return LanePending.WithLabelValues(m.lane(lane)...)
}

func (m queueMetrics) NewActiveMetric(lane string) lanequeue.GaugeMetric {
	return LaneActive.WithLabelValues(m.lane(lane)...)
}

func (m queueMetrics) NewSubmittedMetric(lane string) lanequeue.CounterMetric {
	return LaneSubmitted.WithLabelValues(m.lane(lane)...)
}

func (m queueMetrics) NewCommandsFinishedMetric(lane string, o lanequeue.CommandOutcome) lanequeue.CounterMetric {
	return LaneCommandsFinished.WithLabelValues(append(m.lane(lane), string(o))...)
}

func (m queueMetrics) NewAttemptsStartedMetric(lane string) lanequeue.CounterMetric {
	return LaneAttemptsStarted.WithLabelValues(m.lane(lane)...)
}

func (m queueMetrics) NewAttemptsFinishedMetric(lane string, o lanequeue.AttemptOutcome) lanequeue.CounterMetric {
	return LaneAttemptsFinished.WithLabelValues(append(m.lane(lane), string(o))...)
}

func (m queueMetrics) NewRetriesMetric(lane string) lanequeue.CounterMetric {
	return LaneRetries.WithLabelValues(m.lane(lane)...)
}

func (m queueMetrics) NewWaitDurationMetric(lane string) lanequeue.HistogramMetric {
	return LaneWait.WithLabelValues(m.lane(lane)...)
}

func (m queueMetrics) NewRunDurationMetric(lane string) lanequeue.HistogramMetric {
	return LaneRun.WithLabelValues(m.lane(lane)...)
}

// setCapacity exports cfg's caps, replacing those of a previous
// configuration (a removed lane's go away).
func (m queueMetrics) setCapacity(cfg lanequeue.Config) {
	match := prometheus.Labels{LabelQueueNamespace: m.namespace, LabelQueue: m.queue}
	LaneMaxConcurrency.DeletePartialMatch(match)
	LaneMaxConcurrencyPerSession.DeletePartialMatch(match)
	LanePaused.DeletePartialMatch(match)
	for _, l := range cfg.Lanes {
		LaneMaxConcurrency.WithLabelValues(m.lane(l.Name)...).Set(float64(l.MaxConcurrency))
		LaneMaxConcurrencyPerSession.WithLabelValues(m.lane(l.Name)...).Set(float64(l.MaxConcurrencyPerSession))
	}
	QueueMaxConcurrent.WithLabelValues(m.namespace, m.queue).Set(float64(cfg.MaxConcurrent))
	m.setLaneControl(cfg)
}

// forget removes the queue's series once its scheduler is gone.
func (m queueMetrics) forget() {
	match := prometheus.Labels{LabelQueueNamespace: m.namespace, LabelQueue: m.queue}
	for _, v := range laneVectors {
		v.DeletePartialMatch(match)
	}
}
