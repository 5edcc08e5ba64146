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
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/agentlane/agentlane/internal/lanequeue"
)

// The lane schedulers' metrics, served on the manager's metrics endpoint
// with controller-runtime's. Every series is labelled with the LaneQueue's
// namespace and name and the lane.
var (
	laneLabels = []string{"namespace", "queue", "lane"}

	LanePending = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "agentlane_lane_pending_commands",
		Help: "Commands waiting in a lane to start, queued or backing off before a retry.",
	}, laneLabels)
	LaneActive = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "agentlane_lane_active_commands",
		Help: "Commands running in a lane.",
	}, laneLabels)
	LaneCommands = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentlane_lane_commands_total",
		Help: "Commands of a lane by what happened to them: submitted, completed, failed, retried, timed_out, dead_lettered, cancelled.",
	}, append(laneLabels, "event"))
	LaneWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "agentlane_lane_wait_duration_seconds",
		Help:    "Seconds from a command becoming ready to starting.",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
	}, laneLabels)
	LaneRun = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "agentlane_lane_run_duration_seconds",
		Help:    "Seconds from a command's start to the end of the attempt.",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
	}, laneLabels)
)

func init() {
	metrics.Registry.MustRegister(LanePending, LaneActive, LaneCommands, LaneWait, LaneRun)
}

// queueMetrics adapts one LaneQueue's scheduler metrics to Prometheus.
type queueMetrics struct {
	namespace, queue string
}

var _ lanequeue.MetricsProvider = queueMetrics{}

func (m queueMetrics) counter(lane, event string) lanequeue.CounterMetric {
	return LaneCommands.WithLabelValues(m.namespace, m.queue, lane, event)
}

func (m queueMetrics) NewPendingMetric(lane string) lanequeue.GaugeMetric {
	return LanePending.WithLabelValues(m.namespace, m.queue, lane)
}

func (m queueMetrics) NewActiveMetric(lane string) lanequeue.GaugeMetric {
	return LaneActive.WithLabelValues(m.namespace, m.queue, lane)
}

func (m queueMetrics) NewSubmittedMetric(lane string) lanequeue.CounterMetric {
	return m.counter(lane, "submitted")
}

func (m queueMetrics) NewCompletedMetric(lane string) lanequeue.CounterMetric {
	return m.counter(lane, "completed")
}

func (m queueMetrics) NewFailedMetric(lane string) lanequeue.CounterMetric {
	return m.counter(lane, "failed")
}

func (m queueMetrics) NewRetriesMetric(lane string) lanequeue.CounterMetric {
	return m.counter(lane, "retried")
}

func (m queueMetrics) NewTimeoutsMetric(lane string) lanequeue.CounterMetric {
	return m.counter(lane, "timed_out")
}

func (m queueMetrics) NewDeadLetteredMetric(lane string) lanequeue.CounterMetric {
	return m.counter(lane, "dead_lettered")
}

func (m queueMetrics) NewCancelledMetric(lane string) lanequeue.CounterMetric {
	return m.counter(lane, "cancelled")
}

func (m queueMetrics) NewWaitDurationMetric(lane string) lanequeue.HistogramMetric {
	return LaneWait.WithLabelValues(m.namespace, m.queue, lane)
}

func (m queueMetrics) NewRunDurationMetric(lane string) lanequeue.HistogramMetric {
	return LaneRun.WithLabelValues(m.namespace, m.queue, lane)
}

// forget removes the queue's series once its scheduler is gone.
func (m queueMetrics) forget() {
	match := prometheus.Labels{"namespace": m.namespace, "queue": m.queue}
	LanePending.DeletePartialMatch(match)
	LaneActive.DeletePartialMatch(match)
	LaneCommands.DeletePartialMatch(match)
	LaneWait.DeletePartialMatch(match)
	LaneRun.DeletePartialMatch(match)
}
