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
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// These tests run the queue as in production, with its own goroutines,
// runners and timer, inside a synctest bubble whose clock only moves when
// every goroutine is blocked, so they are exact and never sleep for real.

func TestRealRunnersRespectCaps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.MaxConcurrent = 5
		release := make(chan struct{})
		var running, peak atomic.Int32
		h := HandlerFunc(func(ctx context.Context, a Attempt) (Result, error) {
			n := running.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			<-release
			running.Add(-1)
			return Result{Success: true}, nil
		})
		q, err := New(cfg, Options{Handler: h})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		var tickets []*Ticket
		for i := range 40 {
			tk, err := q.Submit(Command{SessionKey: []string{"a", "b"}[i%2], Type: []string{"read", "bash", "llm"}[i%3]})
			if err != nil {
				t.Fatal(err)
			}
			tickets = append(tickets, tk)
		}
		synctest.Wait()
		if got := running.Load(); got != 5 {
			t.Fatalf("running = %d, want the queue cap 5", got)
		}
		close(release)
		for _, tk := range tickets {
			if o, err := tk.Wait(context.Background()); err != nil || o.State != StateSucceeded {
				t.Fatalf("%s: %+v %v", tk.ID(), o, err)
			}
		}
		if peak.Load() != 5 {
			t.Errorf("peak concurrency = %d, want 5", peak.Load())
		}
	})
}

func TestRealTimerTimesOutHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := oneLane(LaneConfig{Timeout: time.Second, Retry: &RetryPolicy{Strategy: RetryFixed, FixedDelay: 500 * time.Millisecond, MaxRetries: 1}})
		var calls atomic.Int32
		h := HandlerFunc(func(ctx context.Context, a Attempt) (Result, error) {
			calls.Add(1)
			<-ctx.Done() // a well-behaved handler gives up when told
			return Result{}, ctx.Err()
		})
		q, err := New(cfg, Options{Handler: h})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		start := time.Now()
		tk, err := q.Submit(Command{SessionKey: "s"})
		if err != nil {
			t.Fatal(err)
		}
		o, err := tk.Wait(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if o.State != StateDeadLettered || o.Attempts != 2 || calls.Load() != 2 {
			t.Errorf("outcome = %+v after %d calls, want DeadLettered after 2", o, calls.Load())
		}
		if took := time.Since(start); took != 2500*time.Millisecond {
			t.Errorf("took %v, want 1s + 0.5s + 1s", took)
		}
	})
}

func TestRealTimerWakesRateLimitedLane(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := oneLane(LaneConfig{RateLimit: &RateLimit{Window: PerSecond, MaxOperations: 1}})
		start := time.Now()
		var mu sync.Mutex
		var at []time.Duration
		h := HandlerFunc(func(context.Context, Attempt) (Result, error) {
			mu.Lock()
			at = append(at, time.Since(start))
			mu.Unlock()
			return Result{Success: true}, nil
		})
		q, err := New(cfg, Options{Handler: h})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		var last *Ticket
		for range 3 {
			if last, err = q.Submit(Command{SessionKey: "s"}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := last.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		want := []time.Duration{0, time.Second, 2 * time.Second}
		if diff := cmp.Diff(want, at, cmp.Comparer(func(a, b time.Duration) bool {
			d := a - b
			return d < time.Microsecond && d > -time.Microsecond
		})); diff != "" {
			t.Errorf("start times (-want,+got):\n%s", diff)
		}
	})
}

// Events reach subscribers in order even when many runner goroutines
// produce them concurrently.
func TestRealEventsInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := oneLane(LaneConfig{MaxConcurrency: 8})
		cfg.Alerts.Disabled = true
		q, err := New(cfg, Options{
			Handler: HandlerFunc(func(context.Context, Attempt) (Result, error) { return Result{Success: true}, nil }),
		})
		if err != nil {
			t.Fatal(err)
		}
		sub := q.Subscribe(10_000)
		var tickets []*Ticket
		for i := range 500 {
			tk, err := q.Submit(Command{SessionKey: string(rune('a' + i%7))})
			if err != nil {
				t.Fatal(err)
			}
			tickets = append(tickets, tk)
		}
		for _, tk := range tickets {
			<-tk.Done()
		}
		q.Close()
		var n uint64
		for e := range sub.Events() {
			n++
			if e.Seq != n {
				t.Fatalf("event %d has seq %d", n, e.Seq)
			}
		}
		if n != 1500 || sub.Dropped() != 0 {
			t.Errorf("got %d events, %d dropped; want 1500, 0", n, sub.Dropped())
		}
	})
}

// A handler may submit follow-up work and wait for it without deadlocking,
// as long as the lanes have room for both.
func TestRealHandlerSubmitsFollowUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var q *Queue
		child := HandlerFunc(func(context.Context, Attempt) (Result, error) {
			return Result{Success: true, Output: []byte(`"child"`)}, nil
		})
		parent := HandlerFunc(func(ctx context.Context, a Attempt) (Result, error) {
			tk, err := q.Submit(Command{SessionKey: a.SessionKey, Type: "read", Handler: child})
			if err != nil {
				return Result{}, err
			}
			o, err := tk.Wait(ctx)
			if err != nil {
				return Result{}, err
			}
			return o.Result, nil
		})
		var err error
		q, err = New(DefaultConfig(), Options{Handler: parent})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		tk, err := q.Submit(Command{SessionKey: "s", Type: "llm"})
		if err != nil {
			t.Fatal(err)
		}
		o, err := tk.Wait(context.Background())
		if err != nil || o.State != StateSucceeded || string(o.Result.Output) != `"child"` {
			t.Errorf("outcome = %+v, %v", o, err)
		}
	})
}
