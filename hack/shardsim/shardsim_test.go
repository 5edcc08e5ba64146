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

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentlane/agentlane/internal/lanequeue"
)

// Every replica must compute the same shard from a LaneQueue's name, and
// a change of the function moves queues between shards: the values are
// pinned.
func TestShardOf(t *testing.T) {
	cases := map[string]struct {
		namespace, name string
		shards, want    int
	}{
		"one shard":      {"default", "queue-000", 1, 0},
		"no shard count": {"default", "queue-000", 0, 0},
		// FNV-1a of "default/queue-000" is 0x73294cef.
		"four shards":  {"default", "queue-000", 4, 0x73294cef % 4},
		"65536 shards": {"default", "queue-000", 1 << 16, 0x73294cef % (1 << 16)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := shardOf(tc.namespace, tc.name, tc.shards); got != tc.want {
				t.Errorf("shardOf(%q, %q, %d) = %d, want %d", tc.namespace, tc.name, tc.shards, got, tc.want)
			}
		})
	}
	used := map[int]int{}
	for _, s := range sessionsOf(64, 1, 4) {
		if s.shard < 0 || s.shard >= 4 || s.shard != shardOf("default", s.queue, 4) {
			t.Fatalf("session %+v has a shard other than its queue's", s)
		}
		used[s.shard]++
	}
	if len(used) != 4 {
		t.Errorf("64 queues over 4 shards used %d shards: %v", len(used), used)
	}
}

func TestPercentileAndMedian(t *testing.T) {
	ms := func(vs ...int) []time.Duration {
		var out []time.Duration
		for _, v := range vs {
			out = append(out, time.Duration(v)*time.Millisecond)
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	cases := map[string]struct {
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		"empty":      {nil, 50, 0},
		"one":        {ms(7), 99, 7 * time.Millisecond},
		"p50 of 100": {ms(hundred...), 50, 50 * time.Millisecond},
		"p99 of 100": {ms(hundred...), 99, 99 * time.Millisecond},
		"p99 of 10":  {ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 99, 10 * time.Millisecond},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := percentile(tc.sorted, tc.p); got != tc.want {
				t.Errorf("percentile(p%g) = %s, want %s", tc.p, got, tc.want)
			}
		})
	}
	if got := median([]float64{30, 10, 20}); got != 20 {
		t.Errorf("median(30, 10, 20) = %g, want 20", got)
	}
	if got := median(nil); got != 0 {
		t.Errorf("median() = %g, want 0", got)
	}
}

func TestAPIWrites(t *testing.T) {
	cases := map[string]struct {
		load    load
		want    writes
		wantErr bool
	}{
		"nothing recorded, idle": {load: load{Shards: 1}, want: writes{Leases: 2}},
		"5% recorded, 1% failed, 2,000 tasks/s over 256 sessions, 4 shards": {
			load: load{Shards: 4, TasksPerSec: 2000, Materialized: 0.05, Failed: 0.01, BusySessions: 256, BusyQueues: 64},
			want: writes{Tasks: 2000 * (0.05*3 + 0.01*2), Sessions: 256, Queues: 64, Leases: 8},
		},
		"sessions finish fewer tasks than one a second": {
			load: load{Shards: 1, TasksPerSec: 10, BusySessions: 100, BusyQueues: 20},
			want: writes{Sessions: 10, Queues: 10, Leases: 2},
		},
		"every task recorded": {
			load: load{Shards: 2, TasksPerSec: 100, Materialized: 1},
			want: writes{Tasks: 300, Leases: 4},
		},
		"no shard":                    {load: load{}, wantErr: true},
		"fractions over one":          {load: load{Shards: 1, Materialized: 0.7, Failed: 0.4}, wantErr: true},
		"negative task rate":          {load: load{Shards: 1, TasksPerSec: -1}, wantErr: true},
		"negative busy session count": {load: load{Shards: 1, BusySessions: -1}, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := apiWrites(tc.load)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %t", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(writes{})); diff != "" {
				t.Errorf("writes (-want,+got):\n%s", diff)
			}
		})
	}
	if got := extrapolate(4, 2, 100e-6); got != 80000 {
		t.Errorf("extrapolate(4 shards, 2 cores, 100us) = %g, want 80000", got)
	}
	if got := extrapolate(4, 2, 0); got != 0 {
		t.Errorf("extrapolate with no CPU measured = %g, want 0", got)
	}
}

// Each session's command runs in its own shard's engine, over a worker
// stream of that shard, and a shard refuses a queue it does not own.
func TestClusterRoutesEachSessionToItsShard(t *testing.T) {
	o := options{queues: 8, sessions: 2, workers: 2, capacity: 4}
	c, err := newCluster(o, 2, dispatchPipes)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	for i, s := range c.shards {
		for q := range s.queues {
			if shardOf("default", q, 2) != i {
				t.Errorf("shard %d owns %s, whose shard is %d", i, q, shardOf("default", q, 2))
			}
		}
	}
	if len(c.shards[0].queues)+len(c.shards[1].queues) != 8 {
		t.Fatalf("the shards own %d and %d queues, want 8 in all", len(c.shards[0].queues), len(c.shards[1].queues))
	}
	var tickets []*lanequeue.Ticket
	for _, s := range c.sessions {
		tk, err := c.submit(s, func(grant, start time.Duration) {
			if start < grant {
				t.Errorf("session %s: started %s after submission, before its grant at %s", s.name, start, grant)
			}
		})
		if err != nil {
			t.Fatalf("submit to %s: %v", s.name, err)
		}
		tickets = append(tickets, tk)
		other := c.shards[1-s.shard]
		if _, err := other.submit(s.queue, s.name, nil); !errors.Is(err, errUnknownQueue) {
			t.Errorf("shard %d took a command of %s (shard %d): %v", 1-s.shard, s.queue, s.shard, err)
		}
	}
	for _, tk := range tickets {
		select {
		case <-tk.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("command %s did not end", tk.ID())
		}
		if o, _ := tk.Outcome(); o.State != lanequeue.StateSucceeded || o.Attempts != 1 || !bytes.Contains(o.Result.Output, []byte("startedAt")) {
			t.Errorf("command %s: %+v, want succeeded at its first attempt with the worker's output", tk.ID(), o)
		}
	}
	for i, s := range c.shards {
		s.mu.Lock()
		if len(s.attempts) != 0 {
			t.Errorf("shard %d still holds %d attempts", i, len(s.attempts))
		}
		for _, st := range s.streams {
			if st.busy != 0 {
				t.Errorf("shard %d: a stream has %d busy slots after every command ended", i, st.busy)
			}
		}
		s.mu.Unlock()
	}
}

// A call that reaches a shard other than its queue's is refused as
// misdirected, or forwarded to the owner when the shards proxy; the owner
// runs it on a worker streaming to its Direct hub.
func TestAPIRoutesToTheOwner(t *testing.T) {
	for _, proxy := range []bool{false, true} {
		c, err := newCluster(options{queues: 8, sessions: 1, workers: 1, capacity: 2}, 2, dispatchHub)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.listen(proxy); err != nil {
			c.close()
			t.Fatal(err)
		}
		stop, _, err := startWorkers(c.servers[0].Client(), []string{c.servers[0].URL, c.servers[1].URL}, 1, 2)
		if err != nil {
			c.close()
			t.Fatal(err)
		}
		s := c.sessions[0]
		body, _ := json.Marshal(submitRequest{Type: "read", Payload: json.RawMessage(`{}`)})
		for _, to := range []int{s.shard, 1 - s.shard} {
			u := c.servers[to].URL + "/submit?queue=" + url.QueryEscape(s.queue) + "&session=" + url.QueryEscape(s.name)
			resp, err := c.servers[to].Client().Post(u, "application/json", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			var ans submitAnswer
			_ = json.NewDecoder(resp.Body).Decode(&ans)
			resp.Body.Close()
			want := http.StatusOK
			if to != s.shard && !proxy {
				want = http.StatusMisdirectedRequest
			}
			if resp.StatusCode != want {
				t.Errorf("proxy %t, call to shard %d for a queue of shard %d: %s, want %d", proxy, to, s.shard, resp.Status, want)
			}
			if want == http.StatusOK && (ans.State != string(lanequeue.StateSucceeded) || ans.StartUS < ans.GrantUS) {
				t.Errorf("proxy %t, call to shard %d: answer %+v, want Succeeded, started after its grant", proxy, to, ans)
			}
		}
		stop()
		c.close()
		for i, s := range c.shards {
			if f := s.failures.Load(); f != 0 {
				t.Errorf("proxy %t: shard %d saw %d commands fail", proxy, i, f)
			}
		}
	}
}

// A worker's output without its start time is refused, so that no latency
// is measured from a zero time.
func TestStartedAt(t *testing.T) {
	now := time.Unix(1700000000, 123456789)
	got, err := startedAt(workerOutput(now))
	if err != nil || !got.Equal(now) {
		t.Errorf("startedAt(workerOutput(%s)) = %s, %v", now, got, err)
	}
	for _, out := range []string{`{}`, `"c1"`, ``} {
		if _, err := startedAt([]byte(out)); err == nil {
			t.Errorf("startedAt(%q) took it", out)
		}
	}
}
