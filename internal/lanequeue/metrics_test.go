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

import (
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// recordingProvider keeps the last value of every gauge and the total of
// every counter, by "lane/metric".
type recordingProvider struct {
	mu     sync.Mutex
	values map[string]float64
}

type recorded struct {
	p    *recordingProvider
	name string
}

func (r recorded) Set(v float64)     { r.p.mu.Lock(); r.p.values[r.name] = v; r.p.mu.Unlock() }
func (r recorded) Inc()              { r.p.mu.Lock(); r.p.values[r.name]++; r.p.mu.Unlock() }
func (r recorded) Observe(v float64) { r.p.mu.Lock(); r.p.values[r.name+"_count"]++; r.p.mu.Unlock() }

// m creates the metric at 0, as a Prometheus vector's child would be.
func (p *recordingProvider) m(lane, name string) recorded {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.values[lane+"/"+name] = 0
	return recorded{p, lane + "/" + name}
}

func (p *recordingProvider) NewPendingMetric(l string) GaugeMetric     { return p.m(l, "pending") }
func (p *recordingProvider) NewActiveMetric(l string) GaugeMetric      { return p.m(l, "active") }
func (p *recordingProvider) NewSubmittedMetric(l string) CounterMetric { return p.m(l, "submitted") }
func (p *recordingProvider) NewRetriesMetric(l string) CounterMetric   { return p.m(l, "retries") }
func (p *recordingProvider) NewAttemptsStartedMetric(l string) CounterMetric {
	return p.m(l, "attempts_started")
}
func (p *recordingProvider) NewCommandsFinishedMetric(l string, o CommandOutcome) CounterMetric {
	return p.m(l, "commands_"+string(o))
}
func (p *recordingProvider) NewAttemptsFinishedMetric(l string, o AttemptOutcome) CounterMetric {
	return p.m(l, "attempts_"+string(o))
}
func (p *recordingProvider) NewWaitDurationMetric(l string) HistogramMetric {
	p.m(l, "wait_seconds_count")
	return recorded{p, l + "/wait_seconds"}
}
func (p *recordingProvider) NewRunDurationMetric(l string) HistogramMetric {
	p.m(l, "run_seconds_count")
	return recorded{p, l + "/run_seconds"}
}

var _ MetricsProvider = &recordingProvider{}

// TestMetricsCountCommandsAndAttemptsApart runs one command of each
// outcome and checks that every command is counted once by how it ended,
// and every attempt once by how it ended.
func TestMetricsCountCommandsAndAttemptsApart(t *testing.T) {
	p := &recordingProvider{values: map[string]float64{}}
	cfg := oneLane(LaneConfig{MaxConcurrency: 4, Timeout: 10 * time.Second})
	cfg.Retry = RetryPolicy{Strategy: RetryFixed, FixedDelay: time.Second, MaxRetries: 1}
	h := newHarness(t, cfg, func(o *Options) { o.Metrics = p })
	for _, id := range []string{"retried", "timesout", "cancelled", "permanent", "queued"} {
		h.submit(Command{ID: id, SessionKey: id})
	}
	for _, id := range []string{"queued", "cancelled"} { // one waiting, one running
		if err := h.q.Cancel(id); err != nil {
			t.Fatal(err)
		}
	}
	h.fail("permanent", Permanent(errBoom))
	h.fail("retried", errBoom)
	h.step(10 * time.Second) // "timesout" times out; "retried" runs again
	h.succeed("retried")
	h.step(time.Second)      // "timesout" runs again
	h.step(10 * time.Second) // and times out for good: a dead letter

	want := map[string]float64{
		"work/submitted": 5,
		// Every command once, by how it ended.
		"work/commands_succeeded": 1, "work/commands_failed": 1,
		"work/commands_dead_lettered": 1, "work/commands_cancelled": 2,
		// Every attempt once: the queued command never started one.
		"work/attempts_started":   6,
		"work/attempts_succeeded": 1, "work/attempts_failed": 2,
		"work/attempts_timed_out": 2, "work/attempts_cancelled": 1,
		"work/retries": 2,
		"work/pending": 0, "work/active": 0,
		"work/wait_seconds_count": 6, "work/run_seconds_count": 6,
	}
	if diff := cmp.Diff(want, p.values); diff != "" {
		t.Errorf("metrics (-want,+got):\n%s", diff)
	}
}

// TestMetricsExistBeforeTheFirstCommand: every series of a lane, each
// outcome included, is created with the lane, so that a rate over it has a
// starting point.
func TestMetricsExistBeforeTheFirstCommand(t *testing.T) {
	p := &recordingProvider{values: map[string]float64{}}
	newHarness(t, oneLane(LaneConfig{}), func(o *Options) { o.Metrics = p })
	for _, name := range []string{"submitted", "commands_dead_lettered", "attempts_timed_out", "attempts_started", "retries", "wait_seconds_count"} {
		if v, ok := p.values["work/"+name]; !ok || v != 0 {
			t.Errorf("work/%s = %v, %v before any command; want 0, true", name, v, ok)
		}
	}
}
