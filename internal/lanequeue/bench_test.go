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
	"context"
	"strconv"
	"testing"
	"time"
)

var noopHandler = HandlerFunc(func(context.Context, Attempt) (Result, error) {
	return Result{Success: true}, nil
})

func benchQueue(b *testing.B, cfg Config) *Queue {
	b.Helper()
	q, err := New(cfg, Options{Handler: noopHandler})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(q.Close)
	return q
}

// BenchmarkSubmitQueued measures Submit alone: commands pile up behind a
// lane whose only slot is taken.
func BenchmarkSubmitQueued(b *testing.B) {
	q := benchQueue(b, oneLane(LaneConfig{Mode: External, MaxConcurrency: 1, Timeout: time.Hour}))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := q.Submit(Command{SessionKey: "s"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSubmitRun measures submit, dispatch, run and finish of no-op
// Internal commands through one lane with a shared cap of 4.
func BenchmarkSubmitRun(b *testing.B) {
	q := benchQueue(b, oneLane(LaneConfig{MaxConcurrency: 4}))
	b.ReportAllocs()
	tickets := make([]*Ticket, 0, b.N)
	for b.Loop() {
		t, err := q.Submit(Command{SessionKey: "s"})
		if err != nil {
			b.Fatal(err)
		}
		tickets = append(tickets, t)
	}
	for _, t := range tickets {
		<-t.Done()
	}
}

// BenchmarkSubmitRunParallel submits from every P at once across 10 lanes.
func BenchmarkSubmitRunParallel(b *testing.B) {
	cfg := Config{DefaultLane: "l0"}
	for i := range 10 {
		cfg.Lanes = append(cfg.Lanes, LaneConfig{Name: "l" + strconv.Itoa(i), MaxConcurrency: 4})
	}
	q := benchQueue(b, cfg)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var last *Ticket
		i := 0
		for pb.Next() {
			t, err := q.Submit(Command{SessionKey: "s", Lane: cfg.Lanes[i%10].Name})
			if err != nil {
				b.Error(err)
				return
			}
			last = t
			i++
		}
		if last != nil {
			<-last.Done()
		}
	})
}

// BenchmarkSessions runs 1,000 sessions through a per-session cap of 1
// under a queue-wide cap of 8.
func BenchmarkSessions(b *testing.B) {
	q := benchQueue(b, Config{
		Lanes:         []LaneConfig{{Name: "work", MaxConcurrencyPerSession: 1}},
		DefaultLane:   "work",
		MaxConcurrent: 8,
	})
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = "session-" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	tickets := make([]*Ticket, 0, b.N)
	i := 0
	for b.Loop() {
		t, err := q.Submit(Command{SessionKey: keys[i%len(keys)]})
		if err != nil {
			b.Fatal(err)
		}
		tickets = append(tickets, t)
		i++
	}
	for _, t := range tickets {
		<-t.Done()
	}
}

// BenchmarkExternalRoundTrip submits an External command and completes it.
func BenchmarkExternalRoundTrip(b *testing.B) {
	q := benchQueue(b, oneLane(LaneConfig{Mode: External}))
	b.ReportAllocs()
	for b.Loop() {
		t, err := q.Submit(Command{SessionKey: "s"})
		if err != nil {
			b.Fatal(err)
		}
		if err := q.Complete(t.ID(), Result{Success: true}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIdleWait submits one command at a time into an idle lane and
// waits for it.
func BenchmarkIdleWait(b *testing.B) {
	q := benchQueue(b, oneLane(LaneConfig{MaxConcurrency: 4}))
	b.ReportAllocs()
	for b.Loop() {
		t, err := q.Submit(Command{SessionKey: "s"})
		if err != nil {
			b.Fatal(err)
		}
		<-t.Done()
	}
}

// BenchmarkSubmitWithSubscriber shows the cost of building and delivering
// events to one subscriber that keeps up.
func BenchmarkSubmitWithSubscriber(b *testing.B) {
	q := benchQueue(b, oneLane(LaneConfig{Mode: External, MaxConcurrency: 1, Timeout: time.Hour}))
	sub := q.Subscribe(1 << 16)
	go func() {
		for range sub.Events() {
		}
	}()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := q.Submit(Command{SessionKey: "s"}); err != nil {
			b.Fatal(err)
		}
	}
}
