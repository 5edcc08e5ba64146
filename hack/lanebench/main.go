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

// Command lanebench measures the lane scheduler (internal/lanequeue) through
// its public API and prints one JSON line per run.
//
//	go run ./hack/lanebench --workload=single|lanes|sessions|idle|memory [--tasks=N]
//	go run ./hack/lanebench --workload=single|lanes|sessions --peer [--rounds=3]
//
// Workloads (default --tasks in brackets):
//
//	single   [100000]  one lane with shared cap 4; no-op Internal commands
//	                   submitted back to back.
//	lanes    [100000]  10 lanes with shared cap 4 each; submissions interleaved
//	                   across lanes.
//	sessions [100000]  1,000 sessions; one lane with per-session cap 1 under a
//	                   queue-wide cap of 8.
//	idle     [20000]   one command at a time into an idle lane; wait is measured
//	                   end to end, from just before Submit until the handler runs.
//	memory   [1000000] commands queued behind a lane whose only slot is held by
//	                   an External task nobody completes; reports live heap bytes
//	                   per queued command after a full GC.
//
// For single, lanes and sessions, seconds covers submitting every command and
// waiting for every one to finish, and the wait percentiles are the queue's
// own (ready to start, from Stats).
//
// With --peer, a single, lanes or sessions run is compared with a port of
// OpenClaw's command queue to Node.js (peer/openclaw-queue.js, run by the
// node found on PATH) on the same workload: the two run alternately, rounds
// times each, and the line reports both medians and their ratio (see
// docs/performance.md).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/agentlane/agentlane/internal/lanequeue"
)

type report struct {
	Workload            string  `json:"workload"`
	Tasks               int     `json:"tasks"`
	Seconds             float64 `json:"seconds"`
	TasksPerSec         float64 `json:"tasks_per_sec"`
	P50WaitUS           float64 `json:"p50_wait_us"`
	P99WaitUS           float64 `json:"p99_wait_us"`
	HeapBytesPerCommand float64 `json:"heap_bytes_per_command,omitempty"`
	// CPUSeconds is the CPU time the process used (all threads, user and
	// system) over the same interval as Seconds.
	CPUSeconds float64 `json:"cpu_seconds,omitempty"`
}

var noop = lanequeue.HandlerFunc(func(context.Context, lanequeue.Attempt) (lanequeue.Result, error) {
	return lanequeue.Result{Success: true}, nil
})

func main() {
	workload := flag.String("workload", "single", "single, lanes, sessions, idle or memory")
	tasks := flag.Int("tasks", 0, "number of commands (0: the workload's default)")
	sessions := flag.Int("sessions", 1000, "sessions for the sessions and memory workloads")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile to this file")
	peer := flag.Bool("peer", false, "compare single, lanes or sessions with the OpenClaw queue port (needs node)")
	rounds := flag.Int("rounds", 3, "rounds of each side with --peer")
	flag.Parse()
	if *peer {
		if err := compare(*workload, *tasks, *sessions, *rounds); err != nil {
			fmt.Fprintln(os.Stderr, "lanebench:", err)
			os.Exit(1)
		}
		return
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "lanebench:", err)
			os.Exit(1)
		}
	}

	r, err := run(*workload, *tasks, *sessions)
	pprof.StopCPUProfile() // does nothing without --cpuprofile
	if err != nil {
		fmt.Fprintln(os.Stderr, "lanebench:", err)
		os.Exit(1)
	}
	out, _ := json.Marshal(r)
	fmt.Println(string(out))
}

// run runs one workload and names it in the report.
func run(workload string, tasks, sessions int) (r report, err error) {
	switch workload {
	case "single":
		r, err = throughput(orDefault(tasks, 100_000), singleConfig(), func(i int) lanequeue.Command {
			return lanequeue.Command{SessionKey: "s", Type: "work", Handler: noop}
		})
	case "lanes":
		cfg, names := lanesConfig(10)
		r, err = throughput(orDefault(tasks, 100_000), cfg, func(i int) lanequeue.Command {
			return lanequeue.Command{SessionKey: "s", Lane: names[i%len(names)], Handler: noop}
		})
	case "sessions":
		keys := sessionKeys(sessions)
		r, err = throughput(orDefault(tasks, 100_000), sessionsConfig(), func(i int) lanequeue.Command {
			return lanequeue.Command{SessionKey: keys[i%len(keys)], Type: "work", Handler: noop}
		})
	case "idle":
		r, err = idle(orDefault(tasks, 20_000))
	case "memory":
		r, err = memory(orDefault(tasks, 1_000_000), sessions)
	default:
		err = fmt.Errorf("unknown workload %q", workload)
	}
	r.Workload = workload
	return r, err
}

func orDefault(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

func singleConfig() lanequeue.Config {
	return lanequeue.Config{
		Lanes:       []lanequeue.LaneConfig{{Name: "work", MaxConcurrency: 4}},
		DefaultLane: "work",
	}
}

func lanesConfig(n int) (lanequeue.Config, []string) {
	cfg := lanequeue.Config{}
	names := make([]string, n)
	for i := range names {
		names[i] = "lane-" + strconv.Itoa(i)
		cfg.Lanes = append(cfg.Lanes, lanequeue.LaneConfig{Name: names[i], Priority: 1, MaxConcurrency: 4})
	}
	cfg.DefaultLane = names[0]
	return cfg, names
}

func sessionsConfig() lanequeue.Config {
	return lanequeue.Config{
		Lanes:         []lanequeue.LaneConfig{{Name: "work", MaxConcurrencyPerSession: 1}},
		DefaultLane:   "work",
		MaxConcurrent: 8,
	}
}

func sessionKeys(n int) []string {
	keys := make([]string, max(n, 1))
	for i := range keys {
		keys[i] = "session-" + strconv.Itoa(i)
	}
	return keys
}

// throughput submits n commands back to back and waits for all of them.
func throughput(n int, cfg lanequeue.Config, cmd func(int) lanequeue.Command) (report, error) {
	q, err := lanequeue.New(cfg, lanequeue.Options{})
	if err != nil {
		return report{}, err
	}
	defer q.Close()
	tickets := make([]*lanequeue.Ticket, n)
	cpu0 := cpuTime()
	start := time.Now()
	for i := range tickets {
		if tickets[i], err = q.Submit(cmd(i)); err != nil {
			return report{}, err
		}
	}
	for _, t := range tickets {
		<-t.Done()
	}
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0
	for _, t := range tickets {
		if o, _ := t.Outcome(); o.State != lanequeue.StateSucceeded {
			return report{}, fmt.Errorf("command %s ended %s: %w", t.ID(), o.State, o.Err)
		}
	}
	st := q.Stats()
	return report{
		Tasks:       n,
		Seconds:     elapsed.Seconds(),
		TasksPerSec: float64(n) / elapsed.Seconds(),
		P50WaitUS:   micros(st.Wait.P50),
		P99WaitUS:   micros(st.Wait.P99),
		CPUSeconds:  cpu.Seconds(),
	}, nil
}

// cpuTime returns the CPU time the process used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// idle submits one command at a time to an idle lane and measures how long
// each takes from Submit to its handler running.
func idle(n int) (report, error) {
	var startedAt time.Time
	h := lanequeue.HandlerFunc(func(context.Context, lanequeue.Attempt) (lanequeue.Result, error) {
		startedAt = time.Now()
		return lanequeue.Result{Success: true}, nil
	})
	q, err := lanequeue.New(singleConfig(), lanequeue.Options{})
	if err != nil {
		return report{}, err
	}
	defer q.Close()
	waits := make([]time.Duration, n)
	start := time.Now()
	for i := range waits {
		t0 := time.Now()
		t, err := q.Submit(lanequeue.Command{SessionKey: "s", Type: "work", Handler: h})
		if err != nil {
			return report{}, err
		}
		<-t.Done()
		waits[i] = startedAt.Sub(t0) // Done happens after the handler wrote startedAt
	}
	elapsed := time.Since(start)
	slices.Sort(waits)
	return report{
		Tasks:       n,
		Seconds:     elapsed.Seconds(),
		TasksPerSec: float64(n) / elapsed.Seconds(),
		P50WaitUS:   micros(waits[n/2]),
		P99WaitUS:   micros(waits[min(n*99/100, n-1)]),
	}, nil
}

// memory queues n commands behind a blocked lane and reports the live heap
// they take.
func memory(n, sessions int) (report, error) {
	cfg := lanequeue.Config{
		Lanes:       []lanequeue.LaneConfig{{Name: "blocked", Mode: lanequeue.External, MaxConcurrency: 1, Timeout: time.Hour}},
		DefaultLane: "blocked",
	}
	q, err := lanequeue.New(cfg, lanequeue.Options{})
	if err != nil {
		return report{}, err
	}
	defer q.Close()
	if _, err := q.Submit(lanequeue.Command{SessionKey: "holder", Type: "bash"}); err != nil {
		return report{}, err
	}
	keys := sessionKeys(sessions)
	before := liveHeap()
	start := time.Now()
	for i := range n {
		if _, err := q.Submit(lanequeue.Command{SessionKey: keys[i%len(keys)], Type: "bash"}); err != nil {
			return report{}, err
		}
	}
	elapsed := time.Since(start)
	after := liveHeap()
	st := q.Stats()
	if st.Pending != n {
		return report{}, fmt.Errorf("pending = %d, want %d", st.Pending, n)
	}
	runtime.KeepAlive(q)
	return report{
		Tasks:               n,
		Seconds:             elapsed.Seconds(),
		TasksPerSec:         float64(n) / elapsed.Seconds(),
		HeapBytesPerCommand: float64(after-before) / float64(n),
	}, nil
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
