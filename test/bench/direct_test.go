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
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/testenv"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// The Direct runs: the same manager, workers, sessions and clients as the
// ExternalTask path's 100-session runs, submitting to the tenant's Direct
// lane instead of its Workers lane.
var (
	flagDirectTasks            = flag.Int("direct-tasks", 20000, "noop tasks of the Direct throughput run")
	flagDirectExecTasks        = flag.Int("direct-exec-tasks", 2000, "date tasks of the Direct throughput run")
	flagDirectLatencyTasks     = flag.Int("direct-latency-tasks", 5000, "noop tasks of the Direct half-load run")
	flagDirectExecLatencyTasks = flag.Int("direct-exec-latency-tasks", 400, "date tasks of the Direct half-load run")
	flagDirectLoads            = flag.String("direct-loads", "0.5", "comma-separated fractions of the noop throughput at which the noop latency run is repeated (0.5 is the half-load run; 0.1,0.25,0.5 shows how the tail grows with the load)")
	flagDirectCapacity         = flag.Int("direct-capacity", 16, "Direct attempts each worker runs at once")
	flagDirectWarmup           = flag.Int("direct-warmup", 1000, "noop tasks run before the Direct runs and not measured")
	flagDirectProfile          = flag.Duration("direct-cpu-profile", 5*time.Second, "with -profile-dir, length of the CPU profiles of the manager and of the benchmark taken from the start of each Direct throughput run (cpu-direct-<type>.pb.gz, cpu-bench-direct-<type>.pb.gz)")
)

// Command types of the Direct runs: noop measures the scheduling path
// alone (the worker runs nothing), date a process like the ExternalTask
// path's tasks.
const (
	directNoop = "noop"
	directDate = "date"
)

// warmupPrefix names the commands of the warm-up run, which is not
// profiled.
const warmupPrefix = "dw"

// workerAudience is the token audience the manager's Session API accepts by
// default (--session-api-audiences), which the Direct stream checks.
const workerAudience = "agentlane"

// directWaitMetric is the manager's histogram of how long a Direct attempt
// waited for a free worker before it was sent.
const directWaitMetric = "agentlane_direct_wait_duration_seconds"

// directStartMetric is the manager's histogram of how long after its grant a
// Direct attempt started on its worker (the worker's start time, clamped
// between the attempt's sending and its Result).
const directStartMetric = "agentlane_direct_start_duration_seconds"

// directRun is what one Direct throughput run measured.
type directRun struct {
	kind    string // directNoop or directDate
	tasks   int
	rate    float64 // tasks answered per second
	elapsed time.Duration
	cores   float64       // the manager's
	cpu     time.Duration // the manager's CPU time during the run
	// apiCores, benchCores and workerCores are the API server's, the
	// benchmark's (its clients') and the workers' CPU during the run, in
	// cores.
	apiCores, benchCores, workerCores float64
	// writes is every API write from the run's start to 2 s after its end
	// (the sessions' status writes that follow a burst).
	writes map[string]float64
	// recorded is how many of the run's tasks were recorded as
	// ExternalTasks.
	recorded int
	failed   int
	// answer is the submit-to-answer time of the run's calls (p50, p99).
	answer [2]time.Duration
	// start is from the submit call to the command's start on its worker
	// (p50, p99): the answer's startedAt, which the worker reported.
	start [2]time.Duration
	// wait is the manager's wait for a free worker (p50, p99), from its
	// histogram.
	wait [2]time.Duration
	// grantStart is from the attempt's grant to its start on the worker
	// (p50, p99), from the manager's histogram.
	grantStart [2]time.Duration
}

// directLatency is a Direct latency run at a fraction of the throughput.
type directLatency struct {
	kind  string
	load  float64 // the fraction of the throughput run's rate asked for
	rate  float64 // achieved submissions per second
	tasks int
	// answer is from the submit call to its answer (p50, p99).
	answer [2]time.Duration
	// start is from the submit call to the command's start on the worker
	// (p50, p99): the answer's startedAt, when the worker started the run.
	start [2]time.Duration
	// exec is, for date, from the submit call to the process's start, which
	// the command prints (fork and exec of the sandbox included); zero for
	// noop.
	exec [2]time.Duration
	// wait is the manager's wait for a free worker and grantStart the time
	// from the attempt's grant to its start on the worker (p50, p99), from
	// the manager's histograms.
	wait, grantStart [2]time.Duration
	failed           int
	writes           map[string]float64
	// recorded is how many of the run's tasks were recorded as
	// ExternalTasks.
	recorded int
}

// directReport is the Direct part's result.
type directReport struct {
	workers, capacity int
	runs              []directRun
	latency           []directLatency
}

// directWorkerToken makes the token the tenant's workers open their Direct
// stream with: a service account of ns bound to the workers' ClusterRole
// (config/rbac/worker, the ExternalTask path's access), for audience
// agentlane, as a projected token would be. It returns the token's file.
func (e *env) directWorkerToken(ns string) string {
	e.t.Helper()
	token, err := testenv.ServiceAccountToken(e.ctx, e.c, ns, "worker", rbacv1.RoleRef{Kind: "ClusterRole", Name: "worker-role"},
		workerAudience)
	if err != nil {
		e.t.Fatal(err)
	}
	path := filepath.Join(e.dir, ns+"-worker.token")
	if err := os.WriteFile(path, []byte(token), 0o600); err != nil {
		e.t.Fatal(err)
	}
	return path
}

// directRuns runs the Direct part on the tenant, whose workers hold Direct
// streams: noop and date throughput, then each at half its rate.
func (e *env) directRuns(tn *tenant) directReport {
	loads := directLoads(e.t) // a bad -direct-loads fails before the runs
	rep := directReport{workers: len(tn.workers), capacity: *flagDirectCapacity}
	if *flagDirectWarmup > 0 {
		e.directThroughput(tn, directNoop, warmupPrefix, *flagDirectWarmup)
	}
	noop := e.directThroughput(tn, directNoop, "dn", *flagDirectTasks)
	rep.runs = append(rep.runs, noop)
	var date directRun
	if *flagDirectExecTasks > 0 {
		date = e.directThroughput(tn, directDate, "dd", *flagDirectExecTasks)
		rep.runs = append(rep.runs, date)
	}
	if *flagDirectLatencyTasks > 0 {
		for i, load := range loads {
			rep.latency = append(rep.latency, e.directLoadRun(tn, directNoop, fmt.Sprintf("ln%d", i), load, noop.rate, *flagDirectLatencyTasks))
		}
	}
	if *flagDirectExecTasks > 0 && *flagDirectExecLatencyTasks > 0 {
		rep.latency = append(rep.latency, e.directLoadRun(tn, directDate, "ld", 0.5, date.rate, *flagDirectExecLatencyTasks))
	}
	return rep
}

// directSubmit submits command id of kind to the Direct lane and waits for
// its answer, which a Direct command gets when it ended.
func (e *env) directSubmit(c *sessionapi.Client, ns, session, id, kind string) (*sessionapi.Command, error) {
	req := sessionapi.SubmitRequest{ID: id, Type: directNoop, Lane: laneDirect, Payload: json.RawMessage(`{}`),
		Wait: &metav1.Duration{Duration: time.Minute}}
	if kind == directDate {
		req.Type, req.Payload = "bash", json.RawMessage(`{"command":"date +%s%N"}`)
	}
	sc := c.Session(ns, session)
	cmd, err := sc.Submit(e.ctx, req)
	if err == nil && !cmd.Final() {
		cmd, err = sc.AwaitFinal(e.ctx, id)
	}
	if err == nil && cmd.State != sessionapi.StateSucceeded {
		err = fmt.Errorf("command %s ended %s: %s", id, cmd.State, cmd.Error)
	}
	return cmd, err
}

// workerStart is when a command's last attempt started on its worker, as
// the answer tells it.
func workerStart(cmd *sessionapi.Command) (time.Time, bool) {
	if cmd == nil || cmd.StartedAt.IsZero() {
		return time.Time{}, false
	}
	return cmd.StartedAt, true
}

// startedAt is when a date command's process started on its worker, from
// its output.
func startedAt(cmd *sessionapi.Command) (time.Time, bool) {
	if cmd == nil || cmd.Result == nil {
		return time.Time{}, false
	}
	var out struct{ Stdout string }
	if json.Unmarshal(cmd.Result.Output, &out) != nil {
		return time.Time{}, false
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(out.Stdout), 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, ns), true
}

// directThroughput submits n commands of kind, named prefix-NNNNNN, to the
// tenant's Direct lane from its clients, each waiting for its answer before
// it submits the next, spread over the tenant's sessions.
func (e *env) directThroughput(tn *tenant, kind, prefix string, n int) directRun {
	e.t.Helper()
	time.Sleep(3 * time.Second)
	answers := make([][]time.Duration, len(tn.clients))
	starts := make([][]time.Duration, len(tn.clients))
	var failed atomic.Int64
	before := e.snapshot()
	waitProfiles := func() {}
	if prefix != warmupPrefix {
		waitProfiles = e.profileRun("direct-"+kind, *flagDirectProfile)
	}
	defer waitProfiles()
	parallelBy(len(tn.clients), n, func(w, i int) {
		t0 := time.Now()
		cmd, err := e.directSubmit(tn.clients[w], tn.ns, sessionName(i%tn.sessions), fmt.Sprintf("%s-%06d", prefix, i), kind)
		answers[w] = append(answers[w], time.Since(t0))
		if s, ok := workerStart(cmd); ok && err == nil {
			starts[w] = append(starts[w], s.Sub(t0))
		}
		if err != nil {
			if failed.Add(1) <= 10 {
				e.t.Logf("Direct %s %d: %v", kind, i, err)
			}
		}
	})
	end := e.snapshot()
	time.Sleep(2 * time.Second)
	settled := e.snapshot()
	run := directRun{
		kind: kind, tasks: n, failed: int(failed.Load()),
		elapsed: end.usage.at.Sub(before.usage.at),
		cores:   cores(before.usage, end.usage), cpu: end.usage.cpu - before.usage.cpu,
		writes:     writeCounts(before.api, settled.api),
		recorded:   e.recorded(tn.ns, prefix+"-"),
		wait:       histogramQuantiles(before.manager, end.manager, directWaitMetric),
		grantStart: histogramQuantiles(before.manager, end.manager, directStartMetric),
	}
	run.rate = float64(n) / run.elapsed.Seconds()
	run.apiCores, run.benchCores = otherCores(before, end)
	run.workerCores = workerCores(before, end)
	var all, allStarts []time.Duration
	for w, a := range answers {
		all = append(all, a...)
		allStarts = append(allStarts, starts[w]...)
	}
	run.answer[0], run.answer[1] = percentiles(all)
	run.start[0], run.start[1] = percentiles(allStarts)
	if run.failed > 0 {
		e.t.Errorf("Direct %s run: %d of %d commands did not succeed", kind, run.failed, n)
	}
	return run
}

// directLoads parses -direct-loads.
func directLoads(t *testing.T) []float64 {
	var out []float64
	for f := range strings.SplitSeq(*flagDirectLoads, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v <= 0 || v > 1 {
			t.Fatalf("-direct-loads: %q is no fraction in (0, 1]", f)
		}
		out = append(out, v)
	}
	return out
}

// directLoadRun submits n commands of kind to the tenant's Direct lane at
// load times full per second (half the throughput run's rate full for the
// half-load run), round robin over its clients, and measures each from its
// submission to its answer and, for date, to its start on the worker.
func (e *env) directLoadRun(tn *tenant, kind, prefix string, load, full float64, n int) directLatency {
	e.t.Helper()
	rate := load * full
	time.Sleep(3 * time.Second)
	var mu sync.Mutex
	var answers, starts, execs []time.Duration
	var failed atomic.Int64
	var wg sync.WaitGroup
	before := e.snapshot()
	// Command i is due at i/rate from the start: a command whose time
	// passed while the loop slept goes at once, so that the rate is kept
	// (a ticker drops the ticks its reader misses, and fell short of the
	// rate by half on this machine).
	interval := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	for i := range n {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		c := tn.clients[i%len(tn.clients)]
		wg.Go(func() {
			t0 := time.Now()
			cmd, err := e.directSubmit(c, tn.ns, sessionName(i%tn.sessions), fmt.Sprintf("%s-%06d", prefix, i), kind)
			d := time.Since(t0)
			if err != nil {
				if failed.Add(1) <= 10 {
					e.t.Logf("Direct %s %d: %v", kind, i, err)
				}
				return
			}
			mu.Lock()
			defer mu.Unlock()
			answers = append(answers, d)
			if s, ok := workerStart(cmd); ok {
				starts = append(starts, s.Sub(t0))
			}
			if s, ok := startedAt(cmd); ok {
				execs = append(execs, s.Sub(t0))
			}
		})
	}
	sentIn := time.Since(before.usage.at)
	wg.Wait()
	after := e.snapshot()
	l := directLatency{kind: kind, load: load, rate: float64(n) / sentIn.Seconds(), tasks: n, failed: int(failed.Load()),
		wait:       histogramQuantiles(before.manager, after.manager, directWaitMetric),
		grantStart: histogramQuantiles(before.manager, after.manager, directStartMetric),
		writes:     writeCounts(before.api, after.api)}
	l.recorded = e.recorded(tn.ns, prefix+"-")
	l.answer[0], l.answer[1] = percentiles(answers)
	l.start[0], l.start[1] = percentiles(starts)
	l.exec[0], l.exec[1] = percentiles(execs)
	if l.failed > 0 {
		e.t.Errorf("Direct %s %s run: %d of %d commands did not succeed", kind, l.loadName(), l.failed, n)
	}
	return l
}

// recorded counts the ExternalTasks of ns the manager recorded for a
// Direct command whose id starts with prefix.
func (e *env) recorded(ns, prefix string) int {
	e.t.Helper()
	list := &agentlanev1alpha1.ExternalTaskList{}
	if err := e.c.List(e.ctx, list, client.InNamespace(ns), client.MatchingLabels{agentlanev1alpha1.TargetLabel: string(agentlanev1alpha1.ExternalTargetDirect)}); err != nil {
		e.t.Fatal(err)
	}
	n := 0
	for _, t := range list.Items {
		if strings.HasPrefix(t.Name, prefix) {
			n++
		}
	}
	return n
}

// histogramQuantiles estimates the median and the 99th percentile of what
// the histogram name observed between two scrapes, interpolating within a
// bucket as Prometheus's histogram_quantile does; zero when it observed
// nothing (or the manager has no such histogram).
func histogramQuantiles(before, after metrics, name string) [2]time.Duration {
	counts := map[float64]float64{}
	for sign, m := range map[float64]metrics{-1: before, 1: after} {
		for _, s := range m[name+"_bucket"] {
			le, err := strconv.ParseFloat(s.labels["le"], 64)
			if err != nil {
				continue
			}
			counts[le] += sign * s.value
		}
	}
	var bounds []float64
	for le := range counts {
		bounds = append(bounds, le)
	}
	sort.Float64s(bounds)
	if len(bounds) == 0 || counts[bounds[len(bounds)-1]] <= 0 {
		return [2]time.Duration{}
	}
	total := counts[bounds[len(bounds)-1]]
	q := func(p float64) time.Duration {
		rank := p * total
		lower, below := 0.0, 0.0
		for _, le := range bounds {
			if counts[le] >= rank {
				if math.IsInf(le, 1) {
					break // beyond the last bucket: its lower bound
				}
				frac := 0.0
				if in := counts[le] - below; in > 0 {
					frac = (rank - below) / in
				}
				return time.Duration((lower + (le-lower)*frac) * float64(time.Second))
			}
			lower, below = le, counts[le]
		}
		return time.Duration(lower * float64(time.Second))
	}
	return [2]time.Duration{q(0.5), q(0.99)}
}

// crReference is the rate of the ExternalTask path's run on the same
// sessions (100), the Direct ratios' denominator; zero without it.
func (r report) crReference() float64 {
	for _, run := range r.runs {
		if run.name == "100 sessions" {
			return run.rate
		}
	}
	return 0
}

// directWrites splits a run's API writes per task: ExternalTask writes
// (creates and status of recorded tasks; the TTL deletes of finished
// records, which are cleanup and may be an earlier run's, are left out),
// the other writes that are stored (sessions' and queues' status, leases,
// events, those deletes) and the TokenReviews and SubjectAccessReviews of
// the Session API, which are requests the API server answers without
// storing anything.
func directWrites(writes map[string]float64, tasks int) (tasksWrites, other, reviews float64) {
	all := 0.0
	for k, v := range writes {
		all += v
		if resource, _, _ := strings.Cut(k, " "); strings.HasSuffix(resource, "reviews") {
			reviews += v
		}
	}
	xt := protocolWrites(writes)
	n := float64(tasks)
	return xt / n, (all - xt - reviews) / n, reviews / n
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

func (r report) printDirect(w io.Writer) {
	d := r.direct
	cr := r.crReference()
	fmt.Fprintf(w, "\nDirect lane, %d workers x %d Direct slots, %d clients waiting for each answer, 100 sessions:\n",
		d.workers, d.capacity, *flagClients)
	fmt.Fprintf(w, "%-6s %8s %9s %8s %7s %9s %9s %9s %9s %7s %9s %9s %9s %9s %21s %21s %19s %21s\n",
		"type", "tasks", "tasks/s", "x CR", "ratio", "xtW/task", "othW/task", "rvw/task", "recorded", "cores", "cpu µs/t", "apiCores", "wkCores", "bchCores",
		"answer p50/p99", "start p50/p99", "wait p50/p99", "grant-start p50/p99")
	for _, run := range d.runs {
		xt, other, reviews := directWrites(run.writes, run.tasks)
		x := 0.0
		if cr > 0 {
			x = run.rate / cr
		}
		fmt.Fprintf(w, "%-6s %8d %9.1f %8.1f %7.2f %9.3f %9.3f %9.3f %9d %7.2f %9.0f %9.2f %9.2f %9.2f %21s %21s %19s %21s\n",
			run.kind, run.tasks, run.rate, x, run.rate/r.small, xt, other, reviews, run.recorded, run.cores,
			float64(cpuPerTask(run.cpu, run.tasks).Microseconds()), run.apiCores, run.workerCores, run.benchCores,
			ms(run.answer[0])+" / "+ms(run.answer[1]), ms(run.start[0])+" / "+ms(run.start[1]),
			ms(run.wait[0])+" / "+ms(run.wait[1]), ms(run.grantStart[0])+" / "+ms(run.grantStart[1]))
	}
	for _, run := range d.runs {
		fmt.Fprintf(w, "\nAPI writes per task, Direct %s (all resources, by verb, until 2 s after the run):\n", run.kind)
		for _, k := range sortedKeys(run.writes) {
			fmt.Fprintf(w, "  %-40s %8.4f\n", k, run.writes[k]/float64(run.tasks))
		}
	}
	for _, l := range d.latency {
		fmt.Fprintf(w, "\nDirect %s at %s (%.0f/s, %d tasks): submit to start on the worker p50 %s  p99 %s; submit to answer p50 %s  p99 %s",
			l.kind, l.loadName(), l.rate, l.tasks, ms(l.start[0]), ms(l.start[1]), ms(l.answer[0]), ms(l.answer[1]))
		if l.exec[1] > 0 {
			fmt.Fprintf(w, "; submit to the process's start p50 %s  p99 %s", ms(l.exec[0]), ms(l.exec[1]))
		}
		fmt.Fprintf(w, "\n  the manager's wait for a free worker (%s): p50 %s  p99 %s\n", directWaitMetric, ms(l.wait[0]), ms(l.wait[1]))
		fmt.Fprintf(w, "  from the grant to the start on the worker (%s): p50 %s  p99 %s\n", directStartMetric, ms(l.grantStart[0]), ms(l.grantStart[1]))
		xt, other, reviews := directWrites(l.writes, l.tasks)
		fmt.Fprintf(w, "  API writes per task: %.3f ExternalTask (%d tasks recorded), %.3f other stored, %.3f reviews; by verb:", xt, l.recorded, other, reviews)
		for _, k := range sortedKeys(l.writes) {
			fmt.Fprintf(w, " %s %.3f;", k, l.writes[k]/float64(l.tasks))
		}
		fmt.Fprintln(w)
	}
}

func (r report) printDirectSummary(row func(k, v string)) {
	cr := r.crReference()
	for _, run := range r.direct.runs {
		xt, other, reviews := directWrites(run.writes, run.tasks)
		x := "-"
		if cr > 0 {
			x = fmt.Sprintf("%.1fx", run.rate/cr)
		}
		row("Direct "+run.kind+": tasks/s (x CR, ratio)", fmt.Sprintf("%.0f (%s, %.2f)", run.rate, x, run.rate/r.small))
		row("Direct "+run.kind+": writes/task xt + other (+ reviews)", fmt.Sprintf("%.3f + %.3f (+ %.3f; %d recorded)", xt, other, reviews, run.recorded))
		row("Direct "+run.kind+": manager CPU/task", fmt.Sprintf("%s (%.2f cores)", cpuPerTask(run.cpu, run.tasks).Round(time.Microsecond), run.cores))
		row("Direct "+run.kind+": API server / workers / bench cores", fmt.Sprintf("%.2f / %.2f / %.2f", run.apiCores, run.workerCores, run.benchCores))
	}
	for _, l := range r.direct.latency {
		row(fmt.Sprintf("Direct %s %s: submit-to-start p50 / p99", l.kind, l.loadName()), fmt.Sprintf("%s / %s (%.0f/s)", ms(l.start[0]), ms(l.start[1]), l.rate))
		row(fmt.Sprintf("Direct %s %s: answer p50 / p99", l.kind, l.loadName()), fmt.Sprintf("%s / %s", ms(l.answer[0]), ms(l.answer[1])))
		if l.exec[1] > 0 {
			row(fmt.Sprintf("Direct %s %s: process start p50 / p99", l.kind, l.loadName()), fmt.Sprintf("%s / %s", ms(l.exec[0]), ms(l.exec[1])))
		}
		row(fmt.Sprintf("Direct %s %s: grant-to-start p50 / p99", l.kind, l.loadName()), fmt.Sprintf("%s / %s", ms(l.grantStart[0]), ms(l.grantStart[1])))
		row(fmt.Sprintf("Direct %s %s: wait p50 / p99", l.kind, l.loadName()), fmt.Sprintf("%s / %s", ms(l.wait[0]), ms(l.wait[1])))
	}
}

// loadName names the run's load: "half load", or the percentage of the
// throughput.
func (l directLatency) loadName() string {
	if l.load == 0.5 {
		return "half load"
	}
	return fmt.Sprintf("%.0f%% load", l.load*100)
}
