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

// Package bench measures the ExternalTask path end to end: the built
// manager and worker binaries run as processes with their least-privilege
// identities against an envtest API server, tasks are submitted through the
// Session API, and the API server's and the manager's own metrics say what
// each task cost. `make bench-e2e` runs it; docs/performance.md explains the
// table it prints.
package bench

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/servingcert"
	"github.com/agentlane/agentlane/internal/testenv"
)

var (
	flagTasks          = flag.Int("tasks", 2000, "trivial tasks of each throughput run")
	flagLatencyTasks   = flag.Int("latency-tasks", 400, "tasks of the half-load latency run")
	flagQueued         = flag.Int("queued", 10000, "tasks left queued in the memory and idle run")
	flagQueuedSessions = flag.Int("queued-sessions", 1000, "sessions of the memory and idle run")
	flagWorkers        = flag.Int("workers", 4, "worker processes of each throughput run")
	flagCapacity       = flag.Int("capacity", 16, "tasks each worker runs at once")
	flagClients        = flag.Int("clients", 32, "concurrent clients of the raw create and submit loops")
	flagIdle           = flag.Duration("idle", 10*time.Second, "how long the manager's idle CPU is measured")
	flagOnlyQueued     = flag.Bool("only-queued", false, "run only the memory and idle part (no raw create, throughput or latency runs)")
	flagProfileDir     = flag.String("profile-dir", "", "directory for the manager's heap profiles before and after the queued tasks and a CPU profile of the idle manager (go tool pprof reads them)")
	flagCPUProfile     = flag.Duration("cpu-profile", 30*time.Second, "length of the idle manager's CPU profile, taken after the idle measurement, with -profile-dir")
	flagSkip           = flag.String("skip", "", "comma-separated parts to leave out: cr (the ExternalTask path's throughput and latency runs), direct (the Direct runs), queued (the memory and idle part)")
)

// skipped tells whether -skip names part.
func skipped(part string) bool {
	for _, p := range strings.Split(*flagSkip, ",") {
		if strings.TrimSpace(p) == part {
			return true
		}
	}
	return false
}

// env is the benchmark's cluster and processes.
type env struct {
	t         *testing.T
	ctx       context.Context
	dir       string
	testEnv   *envtest.Environment
	cfg       *rest.Config
	c         client.Client
	workerBin string
	workerKC  string
	manager   *process
	// startManager starts the manager process (again) as e.manager.
	startManager func()
	metricsURL   string
	sessionAPI   string
	// caPEM is the CA of the Session API's certificate; nil when it serves
	// plain HTTP.
	caPEM    []byte
	caFile   string
	pprofURL string // empty without -profile-dir
	// apiServerPid is the envtest API server's process, 0 when it was not
	// found.
	apiServerPid int
	// workers are the running tenant's workers, whose CPU snapshots sum.
	workers []*process
}

func TestBenchE2E(t *testing.T) {
	if os.Getenv("AGENTLANE_BENCH_E2E") == "" {
		t.Skip("set AGENTLANE_BENCH_E2E=1 (make bench-e2e) to run the end-to-end benchmark")
	}
	// The Session API serves TLS, as installed: the Direct stream needs it.
	e := setup(t, true, benchManagerArgs()...)
	rep := report{loadStart: loadAverage()}
	if *flagOnlyQueued {
		rep.idle = e.queuedAndIdle(*flagQueuedSessions, *flagQueued)
		rep.print(os.Stdout)
		return
	}
	rep.raw = e.rawCreateRate(*flagTasks)
	rep.small = e.smallCreateRate(*flagTasks)
	direct := !skipped("direct")
	var namespaces []string
	if !skipped("cr") {
		one := e.tenant("bench-tp-1", 1, direct)
		rep.runs = append(rep.runs, e.throughput(one, "1 session", *flagTasks))
		e.stopTenant(one)
		namespaces = append(namespaces, one.ns)
	}
	// The 100-session tenant's workers serve both its Workers lane and its
	// Direct lane, and its runtimes' 32 clients submit to both.
	hundred := e.tenant("bench-tp-100", 100, direct)
	namespaces = append(namespaces, hundred.ns)
	if !skipped("cr") {
		h := e.throughput(hundred, "100 sessions", *flagTasks)
		rep.runs = append(rep.runs, h)
		rep.latency = e.halfLoadLatency(hundred, h.rate/2, *flagLatencyTasks)
	}
	if direct {
		rep.direct = e.directRuns(hundred)
	}
	e.stopTenant(hundred)
	if !skipped("queued") {
		e.freshManager(namespaces...)
		rep.idle = e.queuedAndIdle(*flagQueuedSessions, *flagQueued)
	}
	rep.print(os.Stdout)
}

// benchManagerArgs lifts the Session API's per-caller bounds, which the
// throughput runs would otherwise measure instead of the task path, and
// its bound on the reviews one client address causes: the 32 clients share
// the loopback address, where 32 runtimes would have one each.
func benchManagerArgs() []string {
	return []string{"--session-api-rate=-1", "--session-api-failed-auth-rate=-1",
		fmt.Sprintf("--session-api-max-pending-per-session=%d", max(1000, *flagQueued)),
		"--session-api-max-reviews-in-flight-per-address=1024", "--session-api-max-reviews-in-flight=1024"}
}

// setup builds the binaries, starts the control plane and the manager with
// managerArgs added to its own. With tls the Session API serves HTTPS with
// a certificate of a CA the benchmark makes (e.caPEM), otherwise plain
// HTTP.
func setup(t *testing.T, tls bool, managerArgs ...string) *env {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(agentlanev1alpha1.AddToScheme(scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme))
	logf.SetLogger(logr.Discard()) // the processes log to their own files
	e := &env{t: t, ctx: context.Background(), dir: t.TempDir()}
	managerBin := goBuild(t, e.dir, "./cmd/manager")
	e.workerBin = goBuild(t, e.dir, "./cmd/worker")
	var err error
	e.testEnv, e.cfg, e.c, err = testenv.Start(scheme)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.testEnv.Stop() })
	if u, err := url.Parse(e.cfg.Host); err == nil {
		e.apiServerPid = findProc("--secure-port=" + u.Port())
	}
	rbac := filepath.Join("..", "..", "config", "rbac")
	managerKC := userKubeconfig(t, e.ctx, e.testEnv, e.c, e.dir, "agentlane-manager", filepath.Join(rbac, "role.yaml"))
	e.workerKC = userKubeconfig(t, e.ctx, e.testEnv, e.c, e.dir, "agentlane-worker", filepath.Join(rbac, "worker", "role.yaml"))
	e.createSessionUserRole()

	metricsAddr, apiAddr := freeAddress(t), freeAddress(t)
	e.metricsURL, e.sessionAPI = "http://"+metricsAddr+"/metrics", "http://"+apiAddr
	apiTLS := []string{"--session-api-insecure-http"}
	if tls {
		e.sessionAPI = "https://" + apiAddr
		apiTLS = e.sessionAPICertificate()
	}
	pprofAddr := "0"
	if *flagProfileDir != "" {
		pprofAddr = freeAddress(t)
		e.pprofURL = "http://" + pprofAddr + "/debug/pprof/"
	}
	e.startManager = func() {
		args := append([]string{
			"--pprof-bind-address=" + pprofAddr, "--metrics-bind-address=" + metricsAddr, "--metrics-secure=false", "--health-probe-bind-address=0",
			"--session-api-bind-address=" + apiAddr,
		}, append(apiTLS, managerArgs...)...)
		e.manager = startProcess(t, e.dir, "manager", managerBin, managerKC, args...)
		e.waitFor("the manager's metrics endpoint", time.Minute, func() bool {
			_, err := e.managerMetrics()
			return err == nil
		})
	}
	e.startManager()
	t.Cleanup(func() { e.manager.stop() })
	return e
}

// sessionAPICertificate makes a CA and a serving certificate of it for the
// loopback address, writes them into e.dir and returns the manager's flags
// that serve them.
func (e *env) sessionAPICertificate() []string {
	e.t.Helper()
	b, err := servingcert.Generate([]string{"127.0.0.1", "localhost"}, time.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	files := map[string][]byte{"session-api.crt": b.Cert, "session-api.key": b.Key, "session-api-ca.crt": b.CACert}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(e.dir, name), data, 0o600); err != nil {
			e.t.Fatal(err)
		}
	}
	e.caPEM, e.caFile = b.CACert, filepath.Join(e.dir, "session-api-ca.crt")
	return []string{"--session-api-cert-file=" + filepath.Join(e.dir, "session-api.crt"),
		"--session-api-key-file=" + filepath.Join(e.dir, "session-api.key"), "--session-api-ca-file=" + e.caFile}
}

// freshManager deletes the agentlane objects of the given namespaces (an
// envtest API server runs no namespace controller), waits until they are
// gone and restarts the manager, so that the next run measures a manager
// that holds only its own objects, not what earlier runs left behind.
func (e *env) freshManager(namespaces ...string) {
	e.t.Helper()
	kinds := []client.Object{&agentlanev1alpha1.ExternalTask{}, &agentlanev1alpha1.AgentSession{}, &agentlanev1alpha1.LaneQueue{}}
	for _, ns := range namespaces {
		for _, kind := range kinds {
			if err := e.c.DeleteAllOf(e.ctx, kind, client.InNamespace(ns)); err != nil {
				e.t.Fatalf("delete the %T objects of %s: %v", kind, ns, err)
			}
		}
	}
	e.waitFor("the earlier runs' objects to go", 5*time.Minute, func() bool {
		for _, ns := range namespaces {
			for _, list := range []client.ObjectList{&agentlanev1alpha1.ExternalTaskList{}, &agentlanev1alpha1.AgentSessionList{}} {
				if err := e.c.List(e.ctx, list, client.InNamespace(ns), client.Limit(1)); err != nil || meta.LenList(list) > 0 {
					return false
				}
			}
		}
		return true
	})
	e.manager.stop()
	e.startManager()
}

// createSessionUserRole creates the ClusterRole session runtimes get
// (config/rbac/session_user_role.yaml) under the name "session-user".
func (e *env) createSessionUserRole() {
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "session_user_role.yaml"))
	if err != nil {
		e.t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(raw, role); err != nil {
		e.t.Fatal(err)
	}
	role.Name = "session-user"
	if err := e.c.Create(e.ctx, role); err != nil {
		e.t.Fatal(err)
	}
}

// managerMetrics scrapes the manager's metrics endpoint.
func (e *env) managerMetrics() (metrics, error) {
	return scrape(e.ctx, http.DefaultClient, e.metricsURL)
}

// waitFor polls cond every 100ms until it holds, failing after timeout.
func (e *env) waitFor(what string, timeout time.Duration, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out after %s waiting for %s; manager log: %s", timeout, what, e.manager.Log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// snapshot is the counters a run compares before and after.
type snapshot struct {
	api     metrics
	manager metrics
	usage   usage
	// apiServer and bench are the API server's and the benchmark's own
	// process (its clients and watches); apiServer is zero when its
	// process was not found.
	apiServer, bench usage
	// workers is the CPU time of the workers in e.workers and of their
	// task processes that ended, summed.
	workers time.Duration
}

func (e *env) snapshot() snapshot {
	e.t.Helper()
	api, err := apiServerMetrics(e.ctx, e.cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	mgr, err := e.managerMetrics()
	if err != nil {
		e.t.Fatal(err)
	}
	u, err := e.manager.sample()
	if err != nil {
		e.t.Fatal(err)
	}
	s := snapshot{api: api, manager: mgr, usage: u}
	s.bench, _ = sampleProc(os.Getpid())
	if e.apiServerPid != 0 {
		s.apiServer, _ = sampleProc(e.apiServerPid)
	}
	for _, w := range e.workers {
		if u, err := w.sample(); err == nil {
			s.workers += u.cpu + u.children
		}
	}
	return s
}

// workerCores is the CPU e.workers used between two snapshots, in cores.
func workerCores(a, b snapshot) float64 {
	return (b.workers - a.workers).Seconds() / b.usage.at.Sub(a.usage.at).Seconds()
}

// otherCores is the CPU the API server and the benchmark itself used
// between two snapshots, in cores (the API server's is 0 when its process
// was not found).
func otherCores(a, b snapshot) (apiServer, bench float64) {
	if !a.apiServer.at.IsZero() && !b.apiServer.at.IsZero() {
		apiServer = cores(a.apiServer, b.apiServer)
	}
	return apiServer, cores(a.bench, b.bench)
}

// reconciles is how many reconciles controller ran between two snapshots.
func reconciles(before, after snapshot, controller string) float64 {
	want := map[string]string{"controller": controller}
	return after.manager.sum("controller_runtime_reconcile_total", want) - before.manager.sum("controller_runtime_reconcile_total", want)
}

// startWorkers starts n worker processes serving ns, each on its own node.
// With a directToken file they also hold a Direct stream to the manager
// (capacity -direct-capacity) and run the noop command type.
func (e *env) startWorkers(ns string, n int, directToken string) []*process {
	var ws []*process
	for i := range n {
		name := fmt.Sprintf("%s-w%d", ns, i)
		args := []string{"--name=" + name, "--node-name=node-" + fmt.Sprint(i), "--namespace=" + ns,
			fmt.Sprintf("--capacity=%d", *flagCapacity), "--heartbeat-interval=2s", "--grace-period=5s"}
		if directToken != "" {
			args = append(args, "--direct-server="+e.sessionAPI, "--direct-ca-file="+e.caFile,
				"--direct-token-file="+directToken, fmt.Sprintf("--direct-capacity=%d", *flagDirectCapacity), "--noop-executor")
		}
		w := startProcess(e.t, e.dir, name, e.workerBin, e.workerKC, args...)
		// Stopped when the test ends, however it ends (stop is idempotent).
		e.t.Cleanup(w.stop)
		ws = append(ws, w)
	}
	return ws
}

// stopAll stops the processes.
func stopAll(ps []*process) {
	for _, p := range ps {
		p.stop()
	}
}

// writesOf sums the write counts whose key starts with prefix.
func writesOf(counts map[string]float64, prefix string) float64 {
	total := 0.0
	for k, v := range counts {
		if strings.HasPrefix(k, prefix) {
			total += v
		}
	}
	return total
}
