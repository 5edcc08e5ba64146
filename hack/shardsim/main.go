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

// Command shardsim runs 1, 2 and 4 shards of Direct-lane scheduling in one
// process and reports what they sustain (docs/scaling.md, "Figures").
//
//	go run ./hack/shardsim [-modes=engine,stream,api,api-proxy] [-shards=1,2,4] [-runs=3] ...
//
// Each shard stands for one manager replica leading one shard Lease: the
// real lane engine (internal/lanequeue) of each LaneQueue hashed to it
// (shardOf), every command InHandler as Direct commands are, and what runs
// a granted attempt, by mode:
//
//   - engine: nothing; the handler answers at once. The submitters call the
//     engine in this process.
//   - stream: a model of the Direct hub hands the attempt to an in-process
//     worker over in-memory pipes carrying the workerproto frames (NDJSON)
//     and waits for its Result. The submitters call the engine in this
//     process.
//   - api: each shard serves HTTPS (HTTP/2, TLS): POST /submit, answered as
//     the Session API answers a Direct command's submission (decode,
//     submit, wait for the end, answer JSON), and the manager's Direct hub
//     (internal/direct) at workerproto.DirectPath. The submitters and the
//     workers (one stream to every shard each) run in a second process,
//     this binary with -role=client, so that this process's CPU is the
//     shards' alone. Submitters call their session's shard.
//   - api-proxy: as api, but submitter i calls shard i mod S, which proxies
//     the calls of other shards' sessions to their shard over HTTP/2.
//
// Not run: the Session API's token and access reviews, pending ledger,
// event hub and budget check, and the workers' executors (a no-op that
// reports when it started).
//
// For each mode, shard count and run: -clients closed-loop submitters,
// each waiting for its command's end before the next, for -duration after
// -warmup, with the process's CPU time (user+system) per task over the
// same window; then commands submitted at half that rate for -duration:
// from the submission (in the api modes, the request's arrival at the
// owning shard) to the grant (the handler runs) and to the worker's start,
// and in the api modes the client's round trip. Figures are medians over
// -runs runs. All shards share this machine's cores: on a 2-core machine
// shards in one process cannot add CPU, so what sharding buys is stated by
// the extrapolation line (its formula is printed) and the write model, not
// shown by the measured throughput.
package main

import (
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentlane/agentlane/internal/lanequeue"
)

type options struct {
	modes       []string
	shards      []int
	runs        int
	queues      int
	sessions    int // per queue
	clients     int
	workers     int
	capacity    int // per worker, split over the shards' streams
	warmup      time.Duration
	duration    time.Duration
	materialize float64
	failed      float64
	cores       float64
	// client is set in the client process of the api modes.
	client *clientArgs
}

// modes are the ways a shard's work is run; see the package comment.
var modes = []string{"engine", "stream", "api", "api-proxy"}

func parseFlags(args []string) (options, error) {
	fs := flag.NewFlagSet("shardsim", flag.ContinueOnError)
	var o options
	shards := fs.String("shards", "1,2,4", "shard counts to run, comma-separated")
	modeList := fs.String("modes", strings.Join(modes, ","), "modes to run, comma-separated: "+strings.Join(modes, ", "))
	role := fs.String("role", "", "internal: client runs the submitters of the api modes")
	urls := fs.String("urls", "", "internal: the shards' URLs, for -role=client")
	ca := fs.String("ca", "", "internal: the shards' certificate, for -role=client")
	proxy := fs.Bool("proxy", false, "internal: send calls to any shard, for -role=client")
	fs.IntVar(&o.runs, "runs", 3, "runs per shard count; medians are reported")
	fs.IntVar(&o.queues, "queues", 64, "LaneQueues, hashed to shards")
	fs.IntVar(&o.sessions, "sessions", 4, "sessions per LaneQueue")
	fs.IntVar(&o.clients, "clients", 32, "closed-loop submitters")
	fs.IntVar(&o.workers, "workers", 4, "worker processes, each streaming to every shard")
	fs.IntVar(&o.capacity, "capacity", 64, "slots per worker, split evenly over its streams")
	fs.DurationVar(&o.warmup, "warmup", 500*time.Millisecond, "time before the throughput window")
	fs.DurationVar(&o.duration, "duration", 3*time.Second, "length of each measured window")
	fs.Float64Var(&o.materialize, "materialized", 0.05, "write model: fraction of Direct tasks recorded (waited or ran past materializeAfter)")
	fs.Float64Var(&o.failed, "failed", 0.01, "write model: fraction of Direct tasks that fail for good without having been recorded")
	fs.Float64Var(&o.cores, "cores-per-shard", 2, "extrapolation: cores each shard's manager gets")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	for m := range strings.SplitSeq(*modeList, ",") {
		if !slices.Contains(modes, m) {
			return o, fmt.Errorf("-modes: %q is not one of %s", m, strings.Join(modes, ", "))
		}
		o.modes = append(o.modes, m)
	}
	if *role == "client" {
		o.client = &clientArgs{urls: strings.Split(*urls, ","), ca: *ca, proxy: *proxy, queues: o.queues,
			sessions: o.sessions, clients: o.clients, workers: o.workers, capacity: o.capacity, warmup: o.warmup, duration: o.duration}
	}
	for f := range strings.SplitSeq(*shards, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return o, fmt.Errorf("-shards: %q is not a shard count", f)
		}
		o.shards = append(o.shards, n)
	}
	if o.runs < 1 || o.queues < 1 || o.sessions < 1 || o.clients < 1 || o.workers < 1 || o.capacity < 1 ||
		o.duration <= 0 || o.warmup < 0 {
		return o, fmt.Errorf("-runs, -queues, -sessions, -clients, -workers, -capacity and -duration must be positive")
	}
	return o, nil
}

// cluster is the shards of one run and the routing of sessions to them.
type cluster struct {
	shards   []*shard
	sessions []session
	// servers are the shards' HTTPS servers in the api modes.
	servers []*httptest.Server
}

type session struct {
	queue, name string
	shard       int
}

// sessionsOf is the sessions of queues LaneQueues of perQueue sessions
// each, with the shard of their queue among shards.
func sessionsOf(queues, perQueue, shards int) []session {
	var out []session
	for q := range queues {
		name := fmt.Sprintf("queue-%03d", q)
		sh := shardOf("default", name, shards)
		for s := range perQueue {
			out = append(out, session{queue: name, name: fmt.Sprintf("%s-s%d", name, s), shard: sh})
		}
	}
	return out
}

func newCluster(o options, n int, mode dispatchMode) (*cluster, error) {
	byShard := make([][]string, n)
	c := &cluster{sessions: sessionsOf(o.queues, o.sessions, n)}
	for _, s := range c.sessions {
		if q := byShard[s.shard]; len(q) == 0 || q[len(q)-1] != s.queue {
			byShard[s.shard] = append(q, s.queue)
		}
	}
	perStream := max(1, o.capacity/n)
	for i := range n {
		s, err := newShard(i, byShard[i], o.workers, perStream, mode)
		if err != nil {
			c.close()
			return nil, err
		}
		c.shards = append(c.shards, s)
	}
	return c, nil
}

// submit routes a command of s to its shard, as the Session API routes a
// session's call to its shard's leader.
func (c *cluster) submit(s session, observe func(grant, start time.Duration)) (*lanequeue.Ticket, error) {
	return c.shards[s.shard].submit(s.queue, s.name, observe)
}

// close stops the shards first: a hub ends its workers' streams, which a
// server's Close would otherwise wait for.
func (c *cluster) close() {
	for _, s := range c.shards {
		s.close()
	}
	for _, s := range c.servers {
		s.CloseClientConnections()
		s.Close()
	}
}

// result is one run's figures.
type result struct {
	tasksPerSec, cpuPerTask                float64 // cpuPerTask in seconds
	grantP50, grantP99, startP50, startP99 time.Duration
	rttP50, rttP99                         time.Duration // api modes: the client's round trip
	reconnects                             int64         // api modes: worker streams opened again
	perShard                               []int         // queues per shard
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// throughput runs closed-loop clients over c's sessions for warmup and
// then duration, and returns the tasks finished per second and the CPU
// per task of the measured window.
func throughput(c *cluster, clients int, warmup, duration time.Duration) (float64, float64, error) {
	var done atomic.Int64
	var measuring atomic.Bool
	stop := make(chan struct{})
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			for k := i; ; k += clients {
				select {
				case <-stop:
					return
				default:
				}
				tk, err := c.submit(c.sessions[k%len(c.sessions)], nil)
				if err != nil {
					errs <- err
					return
				}
				<-tk.Done()
				if o, _ := tk.Outcome(); o.State != lanequeue.StateSucceeded {
					errs <- fmt.Errorf("command %s ended %s: %w", tk.ID(), o.State, o.Err)
					return
				}
				if measuring.Load() {
					done.Add(1)
				}
			}
		})
	}
	time.Sleep(warmup)
	measuring.Store(true)
	cpu0, t0 := cpuTime(), time.Now()
	time.Sleep(duration)
	n := done.Load()
	cpu, elapsed := cpuTime()-cpu0, time.Since(t0)
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		return 0, 0, err
	default:
	}
	if n == 0 {
		return 0, 0, fmt.Errorf("no command finished in %s", duration)
	}
	return float64(n) / elapsed.Seconds(), cpu.Seconds() / float64(n), nil
}

// latency submits at rate per second for duration, round robin over c's
// sessions, and returns the sorted grant and start latencies.
func latency(c *cluster, rate float64, duration time.Duration) (grants, starts []time.Duration, err error) {
	var mu sync.Mutex
	observe := func(g, s time.Duration) {
		mu.Lock()
		grants, starts = append(grants, g), append(starts, s)
		mu.Unlock()
	}
	var tickets []*lanequeue.Ticket
	t0 := time.Now()
	for sent := 0; ; {
		elapsed := time.Since(t0)
		if elapsed >= duration {
			break
		}
		for due := int(elapsed.Seconds() * rate); sent < due; sent++ {
			tk, err := c.submit(c.sessions[sent%len(c.sessions)], observe)
			if err != nil {
				return nil, nil, err
			}
			tickets = append(tickets, tk)
		}
		time.Sleep(200 * time.Microsecond)
	}
	for _, tk := range tickets {
		<-tk.Done()
		if o, _ := tk.Outcome(); o.State != lanequeue.StateSucceeded {
			return nil, nil, fmt.Errorf("command %s ended %s: %w", tk.ID(), o.State, o.Err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(grants)
	slices.Sort(starts)
	return grants, starts, nil
}

func runOnce(o options, n int, mode string) (result, error) {
	dm := map[string]dispatchMode{"engine": dispatchNone, "stream": dispatchPipes, "api": dispatchHub, "api-proxy": dispatchHub}[mode]
	c, err := newCluster(o, n, dm)
	if err != nil {
		return result{}, err
	}
	defer c.close()
	var r result
	for _, s := range c.shards {
		r.perShard = append(r.perShard, len(s.queues))
	}
	if mode == "api" || mode == "api-proxy" {
		if err := c.listen(mode == "api-proxy"); err != nil {
			return r, err
		}
		rep, cpu, err := spawnClient(o, c, mode == "api-proxy")
		if err != nil {
			return r, err
		}
		for _, s := range c.shards {
			if f := s.failures.Load(); f > 0 {
				return r, fmt.Errorf("%d commands did not succeed", f)
			}
		}
		us := func(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
		r.tasksPerSec, r.cpuPerTask = rep.TasksPerSec, cpu.Seconds()/float64(rep.Finished)
		r.grantP50, r.grantP99, r.startP50, r.startP99 = us(rep.GrantP50), us(rep.GrantP99), us(rep.StartP50), us(rep.StartP99)
		r.rttP50, r.rttP99 = us(rep.RTTP50), us(rep.RTTP99)
		r.reconnects = rep.Reconnects
		return r, nil
	}
	r.tasksPerSec, r.cpuPerTask, err = throughput(c, o.clients, o.warmup, o.duration)
	if err != nil {
		return r, err
	}
	grants, starts, err := latency(c, r.tasksPerSec/2, o.duration)
	if err != nil {
		return r, err
	}
	r.grantP50, r.grantP99 = percentile(grants, 50), percentile(grants, 99)
	r.startP50, r.startP99 = percentile(starts, 50), percentile(starts, 99)
	return r, nil
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f", float64(d)/float64(time.Millisecond)) }

func medianOf(rs []result, f func(result) float64) float64 {
	vs := make([]float64, len(rs))
	for i, r := range rs {
		vs[i] = f(r)
	}
	return median(vs)
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if o.client != nil {
		if err := runClient(*o.client, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "client:", err)
			os.Exit(1)
		}
		return
	}
	fmt.Printf("shardsim: GOMAXPROCS=%d, %d LaneQueues x %d sessions, %d clients, %d workers x %d slots, %d runs of %s; load average before: %s\n",
		runtime.GOMAXPROCS(0), o.queues, o.sessions, o.clients, o.workers, o.capacity, o.runs, o.duration, loadavg())
	fmt.Printf("write model: %.0f%% of Direct tasks recorded (%d writes each), %.0f%% failed unrecorded (%d each), every session and queue busy (<= 1 status write/s each), %d Lease renewals/s per shard\n",
		o.materialize*100, writesPerMaterialized, o.failed*100, writesPerFailed, leaseRenewalsPerSecond)
	cpuAt1 := map[string]float64{}
	for _, mode := range o.modes {
		fmt.Printf("\nmode %s\n", mode)
		fmt.Println("shards queues/shard   tasks/s (runs)              cpu-us/task  grant p50/p99 ms  start p50/p99 ms  rtt p50/p99 ms   API writes/s (tasks+sessions+queues+leases)  CR path")
		for _, n := range o.shards {
			var rs []result
			failed := 0
			for len(rs) < o.runs {
				r, err := runOnce(o, n, mode)
				if err != nil {
					// A run can fail on a machine so loaded that a simulated
					// worker's stream is lost; it is run again, and counted.
					fmt.Fprintf(os.Stderr, "%s, %d shards: a run failed: %v\n", mode, n, err)
					if failed++; failed > o.runs {
						os.Exit(1)
					}
					continue
				}
				rs = append(rs, r)
			}
			var reconnects int64
			for _, r := range rs {
				reconnects += r.reconnects
			}
			if failed > 0 || reconnects > 0 {
				fmt.Printf("(%s, %d shards: %d failed runs run again, %d worker streams opened again)\n", mode, n, failed, reconnects)
			}
			tps := medianOf(rs, func(r result) float64 { return r.tasksPerSec })
			cpu := medianOf(rs, func(r result) float64 { return r.cpuPerTask })
			if n == 1 {
				cpuAt1[mode] = cpu
			}
			var runs []string
			for _, r := range rs {
				runs = append(runs, fmt.Sprintf("%.0f", r.tasksPerSec))
			}
			w, err := apiWrites(load{Shards: n, TasksPerSec: tps, Materialized: o.materialize, Failed: o.failed,
				BusySessions: o.queues * o.sessions, BusyQueues: o.queues})
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			cr := tps*writesPerCRTask + w.Sessions + w.Queues + leaseRenewalsPerSecond
			dur := func(f func(result) time.Duration) string {
				return ms(time.Duration(medianOf(rs, func(r result) float64 { return float64(f(r)) })))
			}
			rtt := "-"
			if mode == "api" || mode == "api-proxy" {
				rtt = dur(func(r result) time.Duration { return r.rttP50 }) + " / " + dur(func(r result) time.Duration { return r.rttP99 })
			}
			fmt.Printf("%-6d %-13s %7.0f (%-18s %11.1f  %6s / %-7s  %6s / %-7s  %-15s  %8.1f (%.1f+%.0f+%.0f+%.0f)  %8.0f\n",
				n, fmt.Sprint(rs[0].perShard), tps, strings.Join(runs, ", ")+")", cpu*1e6,
				dur(func(r result) time.Duration { return r.grantP50 }), dur(func(r result) time.Duration { return r.grantP99 }),
				dur(func(r result) time.Duration { return r.startP50 }), dur(func(r result) time.Duration { return r.startP99 }),
				rtt, w.Total(), w.Tasks, w.Sessions, w.Queues, w.Leases, cr)
		}
	}
	for _, mode := range o.modes {
		c, ok := cpuAt1[mode]
		if !ok {
			continue
		}
		fmt.Printf("\nextrapolation (%s), each shard's manager on its own %g cores: tasks/s = shards x %g / %.1f us (cpu per task at 1 shard)\n",
			mode, o.cores, o.cores, c*1e6)
		for _, n := range o.shards {
			t := extrapolate(n, o.cores, c)
			w, _ := apiWrites(load{Shards: n, TasksPerSec: t, Materialized: o.materialize, Failed: o.failed,
				BusySessions: o.queues * o.sessions, BusyQueues: o.queues})
			fmt.Printf("  %d shards: %.0f tasks/s, %.0f API writes/s\n", n, t, w.Total())
		}
	}
	fmt.Printf("load average after: %s\n", loadavg())
}
