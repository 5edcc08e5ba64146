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

func (p *recordingProvider) m(lane, name string) recorded { return recorded{p, lane + "/" + name} }

func (p *recordingProvider) NewPendingMetric(l string) GaugeMetric     { return p.m(l, "pending") }
func (p *recordingProvider) NewActiveMetric(l string) GaugeMetric      { return p.m(l, "active") }
func (p *recordingProvider) NewSubmittedMetric(l string) CounterMetric { return p.m(l, "submitted") }
func (p *recordingProvider) NewCompletedMetric(l string) CounterMetric { return p.m(l, "completed") }
func (p *recordingProvider) NewFailedMetric(l string) CounterMetric    { return p.m(l, "failed") }
func (p *recordingProvider) NewRetriesMetric(l string) CounterMetric   { return p.m(l, "retries") }
func (p *recordingProvider) NewTimeoutsMetric(l string) CounterMetric  { return p.m(l, "timeouts") }
func (p *recordingProvider) NewDeadLetteredMetric(l string) CounterMetric {
	return p.m(l, "dead_lettered")
}
func (p *recordingProvider) NewCancelledMetric(l string) CounterMetric { return p.m(l, "cancelled") }
func (p *recordingProvider) NewWaitDurationMetric(l string) HistogramMetric {
	return p.m(l, "wait_seconds")
}
func (p *recordingProvider) NewRunDurationMetric(l string) HistogramMetric {
	return p.m(l, "run_seconds")
}

var _ MetricsProvider = &recordingProvider{}

func TestMetrics(t *testing.T) {
	p := &recordingProvider{values: map[string]float64{}}
	h := newHarness(t, oneLane(LaneConfig{MaxConcurrency: 1}), func(o *Options) { o.Metrics = p })
	h.submit(Command{ID: "a", SessionKey: "s"})
	h.submit(Command{ID: "b", SessionKey: "s"})
	h.submit(Command{ID: "c", SessionKey: "s"})
	h.fail("a", errBoom) // retry: a waits, b starts
	if err := h.q.Cancel("c"); err != nil {
		t.Fatal(err)
	}
	h.succeed("b")
	want := map[string]float64{
		"work/submitted": 3, "work/completed": 1, "work/retries": 1, "work/cancelled": 1,
		"work/pending": 1, "work/active": 0,
		"work/wait_seconds_count": 2, "work/run_seconds_count": 2,
	}
	if diff := cmp.Diff(want, p.values); diff != "" {
		t.Errorf("metrics (-want,+got):\n%s", diff)
	}
}
