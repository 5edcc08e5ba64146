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

package bench

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// requestLatency is how long one kind of request took inside the API server
// between two scrapes, from its own histograms: how many there were, the
// share slower than 25, 50 and 100 ms, and the bucket bound under which 99%
// of them fall.
type requestLatency struct {
	name                    string
	count                   float64
	over25, over50, over100 float64
	p99                     float64 // seconds, a bucket bound
}

// apiLatencies are the requests of the ExternalTask path whose latency the
// half-load run reports: the API server's handling of the task's create and
// status patches, and the storage layer's create and update below them
// (etcd, with the API server's encoding).
func apiLatencies(before, after metrics) []requestLatency {
	task := func(l map[string]string) bool { return l["resource"] == "externaltasks" }
	storage := func(op string) func(map[string]string) bool {
		return func(l map[string]string) bool {
			return l["operation"] == op && strings.Contains(l["resource"]+l["type"]+l["group"], "externaltasks")
		}
	}
	return []requestLatency{
		histogramLatency("externaltasks POST", before, after, "apiserver_request_duration_seconds_bucket", func(l map[string]string) bool {
			return task(l) && l["subresource"] == "" && l["verb"] == "POST"
		}),
		histogramLatency("externaltasks/status PATCH", before, after, "apiserver_request_duration_seconds_bucket", func(l map[string]string) bool {
			return task(l) && l["subresource"] == "status" && l["verb"] == "PATCH"
		}),
		histogramLatency("storage create (externaltasks)", before, after, "etcd_request_duration_seconds_bucket", storage("create")),
		histogramLatency("storage update (externaltasks)", before, after, "etcd_request_duration_seconds_bucket", storage("update")),
	}
}

// histogramLatency reads the histogram name's buckets, summed over the
// series that match, as their growth from before to after.
func histogramLatency(label string, before, after metrics, name string, match func(map[string]string) bool) requestLatency {
	cumulative := map[float64]float64{}
	add := func(m metrics, sign float64) {
		for _, s := range m[name] {
			if !match(s.labels) {
				continue
			}
			le, err := strconv.ParseFloat(s.labels["le"], 64)
			if err != nil {
				continue
			}
			cumulative[le] += sign * s.value
		}
	}
	add(after, 1)
	add(before, -1)
	r := requestLatency{name: label, count: cumulative[math.Inf(1)], p99: math.NaN()}
	if r.count <= 0 {
		return r
	}
	bounds := make([]float64, 0, len(cumulative))
	for le := range cumulative {
		bounds = append(bounds, le)
	}
	sort.Float64s(bounds)
	for _, le := range bounds {
		if math.IsNaN(r.p99) && cumulative[le] >= 0.99*r.count {
			r.p99 = le
		}
	}
	over := func(sec float64) float64 {
		if n, ok := cumulative[sec]; ok {
			return 1 - n/r.count
		}
		return math.NaN()
	}
	r.over25, r.over50, r.over100 = over(0.025), over(0.05), over(0.1)
	return r
}

// printAPILatencies prints what the API server says of its own latency.
func printAPILatencies(w io.Writer, ls []requestLatency) {
	fmt.Fprintf(w, "  inside the API server during the run (its histograms): requests, p99 <= bucket, share over 25 / 50 / 100 ms\n")
	for _, l := range ls {
		if l.count <= 0 {
			fmt.Fprintf(w, "    %-32s none seen\n", l.name)
			continue
		}
		fmt.Fprintf(w, "    %-32s %6.0f  p99 <= %4.0f ms  %5.1f%% %5.1f%% %5.1f%%\n",
			l.name, l.count, l.p99*1000, 100*l.over25, 100*l.over50, 100*l.over100)
	}
}

// TestHistogramLatency checks the reading of a latency histogram between
// two scrapes: only the matching series, only what grew in between.
func TestHistogramLatency(t *testing.T) {
	scrape := func(post []float64, patch float64) metrics {
		m := metrics{}
		for i, le := range []string{"0.005", "0.025", "0.05", "0.1", "+Inf"} {
			m["apiserver_request_duration_seconds_bucket"] = append(m["apiserver_request_duration_seconds_bucket"],
				series{labels: map[string]string{"resource": "externaltasks", "verb": "POST", "le": le}, value: post[i]},
				series{labels: map[string]string{"resource": "externaltasks", "verb": "PATCH", "subresource": "status", "le": le}, value: patch})
		}
		return m
	}
	before := scrape([]float64{10, 20, 20, 20, 20}, 5)
	// 200 more POSTs: 150 under 5 ms, 40 under 25 ms, 8 under 50 ms, 2 under 100 ms.
	after := scrape([]float64{160, 210, 218, 220, 220}, 5)
	got := apiLatencies(before, after)
	post := got[0]
	if post.count != 200 || post.p99 != 0.05 {
		t.Errorf("POST: count %v p99 %v, want 200 and 0.05", post.count, post.p99)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	if !near(post.over25, 0.05) || !near(post.over50, 0.01) || !near(post.over100, 0) {
		t.Errorf("POST: over 25/50/100 ms %v %v %v, want 0.05 0.01 0", post.over25, post.over50, post.over100)
	}
	if got[1].count != 0 {
		t.Errorf("PATCH: count %v, want 0 (nothing grew)", got[1].count)
	}
}
