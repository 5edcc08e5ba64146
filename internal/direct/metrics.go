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

package direct

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// The hub's metrics, served on the manager's metrics endpoint once
// RegisterMetrics added them. Per-namespace series carry the worker's
// namespace as "worker_namespace" (scrapes add a namespace target label of
// their own).
const (
	LabelWorkerNamespace = "worker_namespace"
	LabelState           = "state"
	LabelOutcome         = "outcome"
	LabelReason          = "reason"
)

// Values of the outcome label of ResultsTotal.
const (
	OutcomeSucceeded = "succeeded"
	OutcomeFailed    = "failed"
	OutcomeCancelled = "cancelled"
)

// Values of the reason label of ResultsDropped.
const (
	// DropUnknownAttempt: no stream holds that id and attempt (never sent,
	// already answered, or of another namespace).
	DropUnknownAttempt = "unknown_attempt"
	// DropWrongStream: another stream holds that attempt.
	DropWrongStream = "wrong_stream"
	// DropLate: the attempt's Run already returned (timeout or cancel); the
	// Result only frees the worker's slot.
	DropLate = "late"
)

// Values of the reason label of StreamsEnded.
const (
	EndEOF        = "eof"         // the worker closed its body
	EndRead       = "read_error"  // reading the worker's body failed
	EndWrite      = "write_error" // writing to the worker failed
	EndDead       = "dead"        // nothing heard for DeadAfter
	EndContext    = "context"     // the request's context ended
	EndTooLarge   = "too_large"   // a frame over workerproto.MaxDirectFrameBytes, or a token over MaxDirectTokenBytes
	EndProtocol   = "protocol"    // a frame that is not valid JSON, or a second Hello
	EndReplaced   = "replaced"    // a newer stream of the same worker
	EndClosed     = "closed"      // the hub stopped leading
	EndWorkerDone = "drained"     // the worker drained and closed its body
	// EndTokenRefused: a Token frame's token is not valid, names another
	// identity than the stream's, or may not serve its namespace.
	EndTokenRefused = "token_refused"
	// EndTokenFlood: a Token frame came sooner than
	// workerproto.DirectMinTokenInterval after the previous one.
	EndTokenFlood = "token_flood"
)

// WaitBuckets are the wait histogram's buckets, in seconds: from 100µs (a
// free worker) to 5 minutes.
var WaitBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}

// StartBuckets are the start histogram's buckets, in seconds: from 50µs to
// 30 seconds.
var StartBuckets = []float64{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

var (
	Workers = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "agentlane_direct_workers",
		Help: "Workers connected over a Direct stream, by the namespace they serve.",
	}, []string{LabelWorkerNamespace})
	Slots = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "agentlane_direct_slots",
		Help: "Slots of the connected Direct workers by state: free (usable now; a draining worker's are not) or busy (an attempt was sent and its Result has not arrived).",
	}, []string{LabelWorkerNamespace, LabelState})
	AttemptsSent = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "agentlane_direct_attempts_sent_total",
		Help: "Attempts handed to a Direct worker.",
	})
	ResultsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentlane_direct_results_total",
		Help: "Results accepted from Direct workers, each attempt at most once, by outcome: succeeded, failed, cancelled.",
	}, []string{LabelOutcome})
	ResultsDropped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentlane_direct_results_dropped_total",
		Help: "Results from Direct workers that were not counted, by reason: unknown_attempt, wrong_stream, late.",
	}, []string{LabelReason})
	StreamsRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentlane_direct_streams_refused_total",
		Help: "Direct streams refused before the Welcome, by reason: the Session API error code of the refusal (NotLeader, InvalidRequest, TooLarge, Unauthenticated, Forbidden, QueueFull, Internal).",
	}, []string{LabelReason})
	StreamsEnded = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentlane_direct_streams_ended_total",
		Help: "Admitted Direct streams that ended, by reason: eof, drained, read_error, write_error, dead, context, too_large, protocol, replaced, closed, token_refused (a rotated token refused), token_flood (Token frames too often).",
	}, []string{LabelReason})
	WaitSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "agentlane_direct_wait_duration_seconds",
		Help:    "How long an attempt waited in the hub for a free Direct worker, observed when it is sent.",
		Buckets: WaitBuckets,
	})
	StartSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "agentlane_direct_start_duration_seconds",
		Help:    "How long after its grant an attempt started on its Direct worker, as the worker reports the start, clamped between the sending of the attempt and the receipt of its Result; observed when the Result is accepted. A measurement only: the worker's clock, which nothing else trusts.",
		Buckets: StartBuckets,
	})
)

var (
	resultSucceeded = ResultsTotal.WithLabelValues(OutcomeSucceeded)
	resultFailed    = ResultsTotal.WithLabelValues(OutcomeFailed)
	resultCancelled = ResultsTotal.WithLabelValues(OutcomeCancelled)
	dropUnknown     = ResultsDropped.WithLabelValues(DropUnknownAttempt)
	dropWrongStream = ResultsDropped.WithLabelValues(DropWrongStream)
	dropLate        = ResultsDropped.WithLabelValues(DropLate)
)

// RegisterMetrics registers the hub's collectors on reg. It is called once,
// by the binary; the metrics are shared by every Hub of the process.
func RegisterMetrics(reg prometheus.Registerer) error {
	var errs []error
	for _, c := range []prometheus.Collector{Workers, Slots, AttemptsSent, ResultsTotal, ResultsDropped, StreamsRefused, StreamsEnded, WaitSeconds, StartSeconds} {
		errs = append(errs, reg.Register(c))
	}
	return errors.Join(errs...)
}

// nsGauges are one namespace's gauge series, looked up once.
type nsGauges struct {
	workers, free, busy prometheus.Gauge
}

func newNSGauges(ns string) nsGauges {
	return nsGauges{
		workers: Workers.WithLabelValues(ns),
		free:    Slots.WithLabelValues(ns, "free"),
		busy:    Slots.WithLabelValues(ns, "busy"),
	}
}

// deleteNSGauges drops a namespace's series once no worker serves it.
func deleteNSGauges(ns string) {
	Workers.DeleteLabelValues(ns)
	Slots.DeleteLabelValues(ns, "free")
	Slots.DeleteLabelValues(ns, "busy")
}
