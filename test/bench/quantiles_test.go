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
	"testing"
	"time"
)

// TestHistogramQuantiles checks the quantiles read from the difference of
// two scrapes of a histogram, interpolated within a bucket.
func TestHistogramQuantiles(t *testing.T) {
	before := parseMetrics(`
h_bucket{le="0.001"} 10
h_bucket{le="0.002"} 10
h_bucket{le="+Inf"} 10
`)
	after := parseMetrics(`
h_bucket{le="0.001"} 60
h_bucket{le="0.002"} 110
h_bucket{le="+Inf"} 110
`)
	got := histogramQuantiles(before, after, "h")
	if want := time.Millisecond; got[0] != want {
		t.Errorf("p50 = %s, want %s", got[0], want)
	}
	if want := 1980 * time.Microsecond; got[1] != want {
		t.Errorf("p99 = %s, want %s", got[1], want)
	}
	// Observations past the last bound: the quantile is that bound.
	beyond := parseMetrics(`
h_bucket{le="0.001"} 10
h_bucket{le="0.002"} 10
h_bucket{le="+Inf"} 110
`)
	if got := histogramQuantiles(before, beyond, "h"); got[0] != 2*time.Millisecond || got[1] != 2*time.Millisecond {
		t.Errorf("past the last bucket: %v, want 2ms both", got)
	}
	if got := histogramQuantiles(after, after, "h"); got != [2]time.Duration{} {
		t.Errorf("nothing observed: %v, want zero", got)
	}
	if got := histogramQuantiles(before, after, "missing"); got != [2]time.Duration{} {
		t.Errorf("no such histogram: %v, want zero", got)
	}
}
