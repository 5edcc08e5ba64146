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
// Every metric is created once per lane name (and outcome) when the lane
// first appears, so that every series exists from the start; updates happen
// under the queue lock, so implementations must be cheap and must not call
// back into the queue.
//
// Commands and attempts are counted apart. A command is submitted once and
// ends once, with one CommandOutcome; in between it runs zero or more
// attempts (none when it is cancelled or refused before it starts), each of
// which starts once and ends once with one AttemptOutcome. So, per lane:
//
//	submitted = sum of command outcomes + commands pending or running
//	attempts started = sum of attempt outcomes + attempts running
//	retries <= attempts failed + attempts timed out

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

// CommandOutcome is how a command ended.
type CommandOutcome string

const (
	// CommandSucceeded: an attempt succeeded.
	CommandSucceeded CommandOutcome = "succeeded"
	// CommandFailed: a permanent error, or out of retries (or timed out for
	// good) where the queue keeps no dead letters.
	CommandFailed CommandOutcome = "failed"
	// CommandDeadLettered: out of retries, moved to the dead letters.
	CommandDeadLettered CommandOutcome = "dead_lettered"
	// CommandCancelled: cancelled, queued or running.
	CommandCancelled CommandOutcome = "cancelled"
)

// CommandOutcomes lists every CommandOutcome.
var CommandOutcomes = []CommandOutcome{CommandSucceeded, CommandFailed, CommandDeadLettered, CommandCancelled}

// AttemptOutcome is how one attempt of a command ended.
type AttemptOutcome string

const (
	// AttemptSucceeded: the attempt reported success.
	AttemptSucceeded AttemptOutcome = "succeeded"
	// AttemptFailed: the attempt reported a failure (retried or not).
	AttemptFailed AttemptOutcome = "failed"
	// AttemptTimedOut: the attempt outlived its timeout (retried or not).
	AttemptTimedOut AttemptOutcome = "timed_out"
	// AttemptCancelled: the command was cancelled while the attempt ran.
	AttemptCancelled AttemptOutcome = "cancelled"
)

// AttemptOutcomes lists every AttemptOutcome.
var AttemptOutcomes = []AttemptOutcome{AttemptSucceeded, AttemptFailed, AttemptTimedOut, AttemptCancelled}

// MetricsProvider creates the metrics of one lane. Each method is called at
// most once per lane name (and outcome) over the life of a queue.
type MetricsProvider interface {
	// NewPendingMetric: commands waiting to start (queued or backing off).
	NewPendingMetric(lane string) GaugeMetric
	// NewActiveMetric: commands running.
	NewActiveMetric(lane string) GaugeMetric
	// NewSubmittedMetric: commands accepted.
	NewSubmittedMetric(lane string) CounterMetric
	// NewCommandsFinishedMetric: commands that ended with outcome.
	NewCommandsFinishedMetric(lane string, outcome CommandOutcome) CounterMetric
	// NewAttemptsStartedMetric: attempts started.
	NewAttemptsStartedMetric(lane string) CounterMetric
	// NewAttemptsFinishedMetric: attempts that ended with outcome.
	NewAttemptsFinishedMetric(lane string, outcome AttemptOutcome) CounterMetric
	// NewRetriesMetric: failed or timed-out attempts whose command was
	// scheduled to run again.
	NewRetriesMetric(lane string) CounterMetric
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

func (NoopMetricsProvider) NewPendingMetric(string) GaugeMetric     { return noopMetric{} }
func (NoopMetricsProvider) NewActiveMetric(string) GaugeMetric      { return noopMetric{} }
func (NoopMetricsProvider) NewSubmittedMetric(string) CounterMetric { return noopMetric{} }
func (NoopMetricsProvider) NewRetriesMetric(string) CounterMetric   { return noopMetric{} }
func (NoopMetricsProvider) NewAttemptsStartedMetric(string) CounterMetric {
	return noopMetric{}
}
func (NoopMetricsProvider) NewCommandsFinishedMetric(string, CommandOutcome) CounterMetric {
	return noopMetric{}
}
func (NoopMetricsProvider) NewAttemptsFinishedMetric(string, AttemptOutcome) CounterMetric {
	return noopMetric{}
}
func (NoopMetricsProvider) NewWaitDurationMetric(string) HistogramMetric { return noopMetric{} }
func (NoopMetricsProvider) NewRunDurationMetric(string) HistogramMetric  { return noopMetric{} }

// laneMetrics holds one lane's metrics.
type laneMetrics struct {
	pending, active         GaugeMetric
	submitted, retries      CounterMetric
	attemptsStarted         CounterMetric
	commandsFinished        map[CommandOutcome]CounterMetric
	attemptsFinished        map[AttemptOutcome]CounterMetric
	waitSeconds, runSeconds HistogramMetric
}

func newLaneMetrics(p MetricsProvider, lane string) *laneMetrics {
	m := &laneMetrics{
		pending:          p.NewPendingMetric(lane),
		active:           p.NewActiveMetric(lane),
		submitted:        p.NewSubmittedMetric(lane),
		retries:          p.NewRetriesMetric(lane),
		attemptsStarted:  p.NewAttemptsStartedMetric(lane),
		commandsFinished: make(map[CommandOutcome]CounterMetric, len(CommandOutcomes)),
		attemptsFinished: make(map[AttemptOutcome]CounterMetric, len(AttemptOutcomes)),
		waitSeconds:      p.NewWaitDurationMetric(lane),
		runSeconds:       p.NewRunDurationMetric(lane),
	}
	for _, o := range CommandOutcomes {
		m.commandsFinished[o] = p.NewCommandsFinishedMetric(lane, o)
	}
	for _, o := range AttemptOutcomes {
		m.attemptsFinished[o] = p.NewAttemptsFinishedMetric(lane, o)
	}
	return m
}
