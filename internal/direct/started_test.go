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
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/agentlane/agentlane/internal/workerproto"
)

// startCount is how many starts the start histogram observed.
func startCount(t *testing.T) uint64 {
	t.Helper()
	var m dto.Metric
	if err := StartSeconds.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

// A worker's start time is believed only between the sending of its attempt
// and the receipt of its Result (the hub's clock): a worker that lies, or
// whose clock is off, moves the measurement within those bounds and nothing
// else. A Result without one leaves Task.Started alone.
func TestStartedAtClamped(t *testing.T) {
	e := newEnv(t)
	sent := e.clk.Now()
	sentinel := time.Date(1999, 1, 1, 0, 0, 0, 0, time.UTC)
	type attempt struct {
		id        string
		startedAt int64
		want      time.Time
	}
	const run = 10 * time.Millisecond
	attempts := []attempt{
		{"honest", sent.Add(4 * time.Millisecond).UnixNano(), sent.Add(4 * time.Millisecond)},
		{"before-sent", sent.Add(-time.Hour).UnixNano(), sent},
		{"after-result", sent.Add(time.Hour).UnixNano(), sent.Add(run)},
		{"negative", -5, sentinel},
		{"none", 0, sentinel},
	}
	h := hello("w1")
	h.Capacity = len(attempts)
	w, _ := e.dial(h)
	started := make([]time.Time, len(attempts))
	outs := make([]<-chan ran, len(attempts))
	for i, a := range attempts {
		tk := task(a.id)
		started[i] = sentinel
		tk.Started = &started[i]
		outs[i] = e.start(context.Background(), tk, 1)
	}
	for range attempts {
		w.nextTask()
	}
	before := startCount(t)
	e.clk.Step(run)
	for _, a := range attempts {
		_ = w.send(workerproto.WorkerFrame{Result: &workerproto.DirectResult{ID: a.id, Attempt: 1, Success: true, StartedAt: a.startedAt}})
	}
	for i, a := range attempts {
		if r := wait(t, outs[i]); r.err != nil || !r.res.Success {
			t.Fatalf("%s: %+v", a.id, r)
		}
		if !started[i].Equal(a.want) {
			t.Errorf("%s: Started %v, want %v", a.id, started[i], a.want)
		}
	}
	if got := startCount(t) - before; got != 3 {
		t.Errorf("starts observed: %d, want 3 (the Results that gave one)", got)
	}
}
