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
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// throughputRun is what one throughput run measured.
type throughputRun struct {
	name, ns        string
	tasks           int
	rate            float64 // tasks finished per second
	writes          map[string]float64
	sessionRecs     float64 // AgentSession reconciles
	taskRecs        float64 // ExternalTask reconciles
	queueStatusRate float64 // LaneQueue status writes per second
	elapsed         time.Duration
	cores           float64
	cpu             time.Duration // the manager's CPU time during the run
	rssBytes        int64
	// apiCores, benchCores and workerCores are the API server's, the
	// benchmark's and the workers' CPU during the run, in cores.
	apiCores, benchCores, workerCores float64
}

// throughput submits n trivial tasks spread over the tenant's sessions
// with its flagClients clients and waits for all of them to finish.
func (e *env) throughput(tn *tenant, name string, n int) throughputRun {
	ns, sessions := tn.ns, tn.sessions
	f := e.watchFinished(ns)
	defer f.stop()
	before := e.snapshot()
	var failed atomic.Int64
	parallelBy(len(tn.clients), n, func(w, i int) {
		if err := e.submit(tn.clients[w], ns, sessionName(i%sessions), fmt.Sprintf("t-%05d", i)); err != nil {
			failed.Add(1)
			e.t.Logf("submit %d: %v", i, err)
		}
	})
	if failed.Load() > 0 {
		e.t.Fatalf("%d submissions failed", failed.Load())
	}
	e.waitFor(fmt.Sprintf("%d tasks of %s finished", n, name), 10*time.Minute, func() bool { return f.count() >= n })
	after := e.snapshot()
	elapsed := f.last().Sub(before.usage.at)
	counts := writeCounts(before.api, after.api)
	run := throughputRun{
		name: name, ns: ns, tasks: n, rate: float64(n) / elapsed.Seconds(), writes: counts, elapsed: elapsed,
		sessionRecs:     reconciles(before, after, "agentsession"),
		taskRecs:        reconciles(before, after, "externaltask"),
		queueStatusRate: writesOf(counts, "lanequeues/status ") / after.usage.at.Sub(before.usage.at).Seconds(),
		cores:           cores(before.usage, after.usage),
		cpu:             after.usage.cpu - before.usage.cpu,
		rssBytes:        after.usage.rssBytes,
	}
	run.apiCores, run.benchCores = otherCores(before, after)
	run.workerCores = workerCores(before, after)
	if f.failed > 0 {
		e.t.Errorf("%s: %d tasks did not succeed", name, f.failed)
	}
	return run
}

// latencyRun is the create-to-start latency at a fixed submission rate.
type latencyRun struct {
	rate     float64
	tasks    int
	p50, p99 time.Duration
	// toDispatch is from the submit call to the moment a watch showed the
	// task dispatched to a worker (p50, p99); fromDispatch, from then to
	// the start of the command on the worker.
	toDispatch, fromDispatch [2]time.Duration
	// writes is the ExternalTask writes per task but deletes: at half
	// load few tasks wait long enough to be written Queued.
	writes float64
	// api is the API server's own latency for the task's requests.
	api []requestLatency
	// allWrites is every API write during the run, by resource and verb.
	allWrites map[string]float64
}

// halfLoadLatency submits n tasks to the tenant's Workers lane at rate per
// second, round robin over its clients, and measures from each submission
// to its command's start.
func (e *env) halfLoadLatency(tn *tenant, rate float64, n int) latencyRun {
	ns, sessions := tn.ns, tn.sessions
	time.Sleep(3 * time.Second)
	f := e.watchFinished(ns)
	defer f.stop()
	before := e.snapshot()
	var mu sync.Mutex
	sent := map[string]time.Time{}
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	for i := range n {
		<-tick.C
		id := fmt.Sprintf("l-%05d", i)
		c := tn.clients[i%len(tn.clients)]
		wg.Go(func() {
			mu.Lock()
			sent[id] = time.Now()
			mu.Unlock()
			if err := e.submit(c, ns, sessionName(i%sessions), id); err != nil {
				e.t.Errorf("submit %s: %v", id, err)
			}
		})
	}
	wg.Wait()
	e.waitFor("the latency run's tasks finished", 5*time.Minute, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		done := 0
		for id := range sent {
			if _, ok := f.at[id]; ok {
				done++
			}
		}
		return done == n
	})
	after := e.snapshot()
	counts := writeCounts(before.api, after.api)
	writes := writesOf(counts, "externaltasks POST") + writesOf(counts, "externaltasks/status ")
	var lat, toDispatch, fromDispatch []time.Duration
	f.mu.Lock()
	for id, at := range sent {
		s, ok := f.started[id]
		if !ok {
			continue
		}
		lat = append(lat, s.Sub(at))
		if d, ok := f.dispatched[id]; ok {
			toDispatch, fromDispatch = append(toDispatch, d.Sub(at)), append(fromDispatch, s.Sub(d))
		}
	}
	f.mu.Unlock()
	if len(lat) == 0 {
		e.t.Fatal("no latency measured")
	}
	run := latencyRun{rate: rate, tasks: n, writes: writes / float64(n), api: apiLatencies(before.api, after.api), allWrites: counts}
	run.p50, run.p99 = percentiles(lat)
	run.toDispatch[0], run.toDispatch[1] = percentiles(toDispatch)
	run.fromDispatch[0], run.fromDispatch[1] = percentiles(fromDispatch)
	return run
}

// percentiles returns the median and the 99th percentile of ds (zero when
// it is empty).
func percentiles(ds []time.Duration) (p50, p99 time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	slices.Sort(ds)
	return ds[len(ds)/2], ds[len(ds)*99/100]
}

// idleRun is the memory and idle CPU of a manager holding queued work.
type idleRun struct {
	sessions, tasks       int
	accept, settle        time.Duration
	rssBefore, rssAfter   int64
	heapBefore, heapAfter int64 // Go heap in use (after a GC with -profile-dir)
	idleCores             float64
	sessionRecsWhileIdle  float64
	externalRecsWhileIdle float64
	queueRecsWhileIdle    float64
	// goMemory is the manager's Go runtime memory after the idle period.
	goMemory string
}

// queuedAndIdle creates sessions sessions on a queue whose lane runs one
// task at a time and has no worker, submits tasks tasks through the Session
// API and measures how fast they are accepted, the manager's memory per
// queued task and its CPU while nothing changes.
func (e *env) queuedAndIdle(sessions, tasks int) idleRun {
	ns := e.namespace("bench-idle")
	clients := e.sessionClients(e.queueWithSessions(ns, sessions, 1, false), *flagClients)
	time.Sleep(3 * time.Second)
	run := idleRun{sessions: sessions, tasks: tasks}
	run.heapBefore = e.heapProfile("before")
	before := e.snapshot()
	run.rssBefore = before.usage.rssBytes
	start := time.Now()
	parallelBy(len(clients), tasks, func(w, i int) {
		if err := e.submit(clients[w], ns, sessionName(i%sessions), fmt.Sprintf("q-%05d", i)); err != nil {
			e.t.Errorf("submit %d: %v", i, err)
		}
	})
	run.accept = time.Since(start)
	// Settled: the manager's work queues are empty.
	e.waitFor("the manager to settle", 10*time.Minute, func() bool {
		m, err := e.managerMetrics()
		return err == nil && m.sum("workqueue_depth", nil) == 0
	})
	run.settle = time.Since(start)
	time.Sleep(2 * time.Second)
	idleStart := e.snapshot()
	time.Sleep(*flagIdle)
	idleEnd := e.snapshot()
	run.idleCores = cores(idleStart.usage, idleEnd.usage)
	run.rssAfter = idleEnd.usage.rssBytes
	run.sessionRecsWhileIdle = reconciles(idleStart, idleEnd, "agentsession")
	run.externalRecsWhileIdle = reconciles(idleStart, idleEnd, "externaltask")
	run.queueRecsWhileIdle = reconciles(idleStart, idleEnd, "lanequeue")
	run.heapAfter = e.heapProfile("after")
	if m, err := e.managerMetrics(); err == nil {
		mib := func(name string) float64 { return m.sum(name, nil) / (1 << 20) }
		run.goMemory = fmt.Sprintf("heap in use %.0f MiB, idle %.0f MiB (released %.0f), next GC at %.0f MiB, stacks %.0f MiB, other runtime %.0f MiB",
			mib("go_memstats_heap_inuse_bytes"), mib("go_memstats_heap_idle_bytes"), mib("go_memstats_heap_released_bytes"),
			mib("go_memstats_next_gc_bytes"), mib("go_memstats_stack_sys_bytes"),
			mib("go_memstats_sys_bytes")-mib("go_memstats_heap_sys_bytes")-mib("go_memstats_stack_sys_bytes"))
	}
	e.cpuProfile("idle", *flagCPUProfile)
	return run
}

// report is the benchmark's result.
type report struct {
	// raw is the LaneQueue create rate, small the yardstick's (a custom
	// resource with a tiny schema); ratios divide by small.
	raw, small float64
	runs       []throughputRun
	latency    latencyRun
	direct     directReport
	idle       idleRun
	// loadStart is the machine's load average when the benchmark started.
	loadStart string
}

// loadAverage is the machine's 1, 5 and 15 minute load averages.
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func (r report) print(w io.Writer) {
	fmt.Fprintf(w, "\n== agentlane bench-e2e (%s) ==\n", time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "load average (1, 5, 15 min): %s at the start, %s now; %d CPUs\n", r.loadStart, loadAverage(), runtime.NumCPU())
	if r.small > 0 {
		fmt.Fprintf(w, "raw creates, %d clients: %.0f/s of a custom resource with a tiny schema (the yardstick of every ratio), %.0f/s of LaneQueues\n",
			*flagClients, r.small, r.raw)
	}
	if len(r.runs) > 0 {
		r.printThroughput(w)
	}
	if len(r.direct.runs) > 0 {
		r.printDirect(w)
	}
	if r.idle.tasks > 0 {
		r.printIdle(w)
	}
	r.printSummary(w)
}

// cpuPerTask is the manager's CPU time per task of a run.
func cpuPerTask(cpu time.Duration, tasks int) time.Duration {
	return cpu / time.Duration(max(tasks, 1))
}

func (r report) printThroughput(w io.Writer) {
	fmt.Fprintf(w, "\n%-14s %8s %8s %7s %10s %10s %10s %10s %9s %7s %9s %8s\n",
		"run", "tasks", "tasks/s", "ratio", "writes/xt", "ttlDel/xt", "asnRec/xt", "xtRec/xt", "lqSt/s", "cores", "cpu µs/xt", "RSS MiB")
	for _, run := range r.runs {
		n := float64(run.tasks)
		fmt.Fprintf(w, "%-14s %8d %8.1f %7.3f %10.2f %10.2f %10.2f %10.2f %9.2f %7.2f %9.0f %8.0f\n",
			run.name, run.tasks, run.rate, run.rate/r.small,
			protocolWrites(run.writes)/n, writesOf(run.writes, "externaltasks DELETE")/n, run.sessionRecs/n, run.taskRecs/n,
			run.queueStatusRate, run.cores, float64(cpuPerTask(run.cpu, run.tasks).Microseconds()), float64(run.rssBytes)/(1<<20))
	}
	for _, run := range r.runs {
		fmt.Fprintf(w, "\nAPI writes per task, %s (all resources, by verb):\n", run.name)
		for _, k := range sortedKeys(run.writes) {
			fmt.Fprintf(w, "  %-40s %8.3f\n", k, run.writes[k]/float64(run.tasks))
		}
	}
	l := r.latency
	if l.tasks == 0 {
		return
	}
	fmt.Fprintf(w, "\ncreate-to-start at half load (%.0f/s, %d tasks, 100 sessions): p50 %s  p99 %s; %.2f ExternalTask writes per task (creates and status, no deletes)\n",
		l.rate, l.tasks, l.p50.Round(100*time.Microsecond), l.p99.Round(100*time.Microsecond), l.writes)
	fmt.Fprintf(w, "  submit to dispatch seen: p50 %s  p99 %s; dispatch seen to start on the worker: p50 %s  p99 %s\n",
		l.toDispatch[0].Round(100*time.Microsecond), l.toDispatch[1].Round(100*time.Microsecond),
		l.fromDispatch[0].Round(100*time.Microsecond), l.fromDispatch[1].Round(100*time.Microsecond))
	printAPILatencies(w, l.api)
	fmt.Fprintf(w, "  API writes per task during the run (all resources, by verb):")
	for _, k := range sortedKeys(l.allWrites) {
		fmt.Fprintf(w, " %s %.2f;", k, l.allWrites[k]/float64(l.tasks))
	}
	fmt.Fprintln(w)
}

// protocolWrites is the ExternalTask writes of the task protocol: every
// ExternalTask write but the TTL deletes, which are cleanup.
func protocolWrites(counts map[string]float64) float64 {
	return writesOf(counts, "externaltasks") - writesOf(counts, "externaltasks DELETE")
}

func (r report) printIdle(w io.Writer) {
	i := r.idle
	perTask := float64(i.rssAfter-i.rssBefore) / float64(i.tasks)
	fmt.Fprintf(w, "\n%d sessions + %d queued tasks: accepted in %s (%.0f/s), settled in %s\n",
		i.sessions, i.tasks, i.accept.Round(time.Millisecond), float64(i.tasks)/i.accept.Seconds(), i.settle.Round(time.Millisecond))
	fmt.Fprintf(w, "  manager RSS %.0f MiB (%.0f before the tasks; %.1f KiB per queued task)\n",
		float64(i.rssAfter)/(1<<20), float64(i.rssBefore)/(1<<20), perTask/1024)
	fmt.Fprintf(w, "  manager Go heap %.0f MiB (%.0f before the tasks; %.1f KiB per queued task)\n",
		float64(i.heapAfter)/(1<<20), float64(i.heapBefore)/(1<<20), float64(i.heapAfter-i.heapBefore)/float64(i.tasks)/1024)
	fmt.Fprintf(w, "  Go runtime: %s\n", i.goMemory)
	fmt.Fprintf(w, "  idle over %s: %.3f cores, %.0f AgentSession, %.0f ExternalTask and %.0f LaneQueue reconciles\n",
		*flagIdle, i.idleCores, i.sessionRecsWhileIdle, i.externalRecsWhileIdle, i.queueRecsWhileIdle)
}

// printSummary prints the run's key numbers, one a line, so that several
// runs can be laid side by side.
func (r report) printSummary(w io.Writer) {
	fmt.Fprintf(w, "\nsummary:\n")
	row := func(k, v string) { fmt.Fprintf(w, "  %-52s %s\n", k, v) }
	if r.small > 0 {
		row("raw creates/s, small CR (LaneQueue)", fmt.Sprintf("%.0f (%.0f)", r.small, r.raw))
	}
	for _, run := range r.runs {
		n := float64(run.tasks)
		row("tasks/s (ratio), "+run.name, fmt.Sprintf("%.1f (%.3f)", run.rate, run.rate/r.small))
		row("writes/xt + TTL deletes, "+run.name, fmt.Sprintf("%.2f + %.2f", protocolWrites(run.writes)/n, writesOf(run.writes, "externaltasks DELETE")/n))
		row("asnRec/xt, "+run.name, fmt.Sprintf("%.2f", run.sessionRecs/n))
		row("manager CPU/task, "+run.name, fmt.Sprintf("%s (%.2f cores)", cpuPerTask(run.cpu, run.tasks).Round(time.Microsecond), run.cores))
		row("API server / workers / bench cores, "+run.name, fmt.Sprintf("%.2f / %.2f / %.2f", run.apiCores, run.workerCores, run.benchCores))
	}
	if r.latency.tasks > 0 {
		row("create-to-start p50 / p99", fmt.Sprintf("%s / %s", r.latency.p50.Round(100*time.Microsecond), r.latency.p99.Round(100*time.Microsecond)))
	}
	if len(r.direct.runs) > 0 {
		r.printDirectSummary(row)
	}
	if i := r.idle; i.tasks > 0 {
		row("queued: accepted in", fmt.Sprintf("%s (%.0f/s)", i.accept.Round(time.Second), float64(i.tasks)/i.accept.Seconds()))
		row("queued: RSS MiB after (before)", fmt.Sprintf("%.0f (%.0f)", float64(i.rssAfter)/(1<<20), float64(i.rssBefore)/(1<<20)))
		row("queued: heap MiB after (before)", fmt.Sprintf("%.0f (%.0f)", float64(i.heapAfter)/(1<<20), float64(i.heapBefore)/(1<<20)))
		row("queued: RSS / heap KiB per task", fmt.Sprintf("%.1f / %.1f", float64(i.rssAfter-i.rssBefore)/float64(i.tasks)/1024, float64(i.heapAfter-i.heapBefore)/float64(i.tasks)/1024))
		row("queued: idle cores", fmt.Sprintf("%.3f", i.idleCores))
	}
}
