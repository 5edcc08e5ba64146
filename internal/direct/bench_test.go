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
	"context"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"

	"k8s.io/utils/clock"

	"github.com/agentlane/agentlane/internal/lanequeue"
)

// BenchmarkRunRoundTrip runs attempts through one stream to a worker that
// answers each at once: the hub's cost per task, plus the test worker's
// and HTTP/2's, with up to 64 attempts in flight.
func BenchmarkRunRoundTrip(b *testing.B) {
	e := newEnv(b, func(o *Options, _ *httptest.Server) { o.Clock = clock.RealClock{} })
	h := hello("w1")
	h.Capacity = 64
	w, _ := e.dial(h)
	w.serve()
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(64 / max(1, testingProcs()))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		tk := task("")
		for pb.Next() {
			t := *tk
			t.ID = "c" + strconv.FormatInt(n.Add(1), 10)
			if _, err := e.hub.Run(context.Background(), &t, lanequeue.Attempt{Number: 1}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkRunRoundTripSerial runs one attempt at a time through one
// stream: the latency of a round trip.
func BenchmarkRunRoundTripSerial(b *testing.B) {
	e := newEnv(b, func(o *Options, _ *httptest.Server) { o.Clock = clock.RealClock{} })
	w, _ := e.dial(hello("w1"))
	w.serve()
	b.ReportAllocs()
	tk := task("")
	for i := 0; b.Loop(); i++ {
		t := *tk
		t.ID = "c" + strconv.Itoa(i)
		if _, err := e.hub.Run(context.Background(), &t, lanequeue.Attempt{Number: 1}); err != nil {
			b.Fatal(err)
		}
	}
}
