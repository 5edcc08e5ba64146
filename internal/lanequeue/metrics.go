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

package lanequeue

// This file defines the metric hooks the queue reports to. The library does
// not depend on a metrics system: a binary plugs one in by implementing
// MetricsProvider (the manager adapts these to Prometheus collectors).
// Every metric is created once per lane name; updates happen under the queue
// lock, so implementations must be cheap and must not call back into the queue.

// GaugeMetric records a value that goes up and down, such as a lane's depth.
type GaugeMetric interface {
	Set(float64)
}

// CounterMetric records a monotonically increasing count.
type CounterMetric interface {
	Inc()
}

// HistogramMetric records observations, in seconds for latencies.
type HistogramMetric interface {
	Observe(float64)
}

// MetricsProvider creates the metrics of one lane. Each method is called at
// most once per lane name over the life of a queue.
type MetricsProvider interface {
	// NewPendingMetric: commands waiting to start (queued or backing off).
	NewPendingMetric(lane string) GaugeMetric
	// NewActiveMetric: commands running.
	NewActiveMetric(lane string) GaugeMetric
	// NewSubmittedMetric: commands accepted.
	NewSubmittedMetric(lane string) CounterMetric
	// NewCompletedMetric: commands that succeeded.
	NewCompletedMetric(lane string) CounterMetric
	// NewFailedMetric: commands that ended Failed or TimedOut.
	NewFailedMetric(lane string) CounterMetric
	// NewRetriesMetric: retries scheduled.
	NewRetriesMetric(lane string) CounterMetric
	// NewTimeoutsMetric: attempts that ran past their timeout.
	NewTimeoutsMetric(lane string) CounterMetric
	// NewDeadLetteredMetric: commands moved to the dead-letter list.
	NewDeadLetteredMetric(lane string) CounterMetric
	// NewCancelledMetric: commands cancelled.
	NewCancelledMetric(lane string) CounterMetric
	// NewWaitDurationMetric: seconds from becoming ready to starting.
	NewWaitDurationMetric(lane string) HistogramMetric
	// NewRunDurationMetric: seconds from starting to the end of the attempt.
	NewRunDurationMetric(lane string) HistogramMetric
}

type noopMetric struct{}

func (noopMetric) Set(float64)     {}
func (noopMetric) Inc()            {}
func (noopMetric) Observe(float64) {}

// NoopMetricsProvider discards everything; it is the default.
type NoopMetricsProvider struct{}

var _ MetricsProvider = NoopMetricsProvider{}

func (NoopMetricsProvider) NewPendingMetric(string) GaugeMetric          { return noopMetric{} }
func (NoopMetricsProvider) NewActiveMetric(string) GaugeMetric           { return noopMetric{} }
func (NoopMetricsProvider) NewSubmittedMetric(string) CounterMetric      { return noopMetric{} }
func (NoopMetricsProvider) NewCompletedMetric(string) CounterMetric      { return noopMetric{} }
func (NoopMetricsProvider) NewFailedMetric(string) CounterMetric         { return noopMetric{} }
func (NoopMetricsProvider) NewRetriesMetric(string) CounterMetric        { return noopMetric{} }
func (NoopMetricsProvider) NewTimeoutsMetric(string) CounterMetric       { return noopMetric{} }
func (NoopMetricsProvider) NewDeadLetteredMetric(string) CounterMetric   { return noopMetric{} }
func (NoopMetricsProvider) NewCancelledMetric(string) CounterMetric      { return noopMetric{} }
func (NoopMetricsProvider) NewWaitDurationMetric(string) HistogramMetric { return noopMetric{} }
func (NoopMetricsProvider) NewRunDurationMetric(string) HistogramMetric  { return noopMetric{} }

// laneMetrics holds one lane's metrics.
type laneMetrics struct {
	pending, active                       GaugeMetric
	submitted, completed, failed, retries CounterMetric
	timeouts, deadLettered, cancelled     CounterMetric
	waitSeconds, runSeconds               HistogramMetric
}

func newLaneMetrics(p MetricsProvider, lane string) *laneMetrics {
	return &laneMetrics{
		pending:      p.NewPendingMetric(lane),
		active:       p.NewActiveMetric(lane),
		submitted:    p.NewSubmittedMetric(lane),
		completed:    p.NewCompletedMetric(lane),
		failed:       p.NewFailedMetric(lane),
		retries:      p.NewRetriesMetric(lane),
		timeouts:     p.NewTimeoutsMetric(lane),
		deadLettered: p.NewDeadLetteredMetric(lane),
		cancelled:    p.NewCancelledMetric(lane),
		waitSeconds:  p.NewWaitDurationMetric(lane),
		runSeconds:   p.NewRunDurationMetric(lane),
	}
}
