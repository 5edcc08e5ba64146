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

package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/oklog/ulid/v2"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/servingcert"
	"github.com/agentlane/agentlane/internal/testenv"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// Direct lanes under chaos. The manager serves the Session API (TLS, a CA
// of the suite's own), the workers hold Direct streams to it, and
// directClients submitters, each with a connection of its own, submit the
// planned commands and wait for each answer, as agent runtimes would. Each
// command appends its name to its worker's run log when it starts, so the
// audit knows every execution; the submitters keep every answer. A
// submitter that is told Interrupted, or whose connection fails and who is
// then told Interrupted by GET /commands/{id}, submits the command again
// under a new id, the documented way to run it.
const (
	directLane     = "direct"
	directWorkers  = 4
	directCapacity = 4
	directSessions = 4
	// directAudience is the Session API's default token audience, which
	// the Direct stream checks.
	directAudience = "agentlane"
	// directCallTimeout bounds one call: a submitter left without an
	// answer that long was left hanging.
	directCallTimeout = time.Minute
	// directRunTimeout bounds a scenario: a command without a Succeeded
	// answer then is stuck.
	directRunTimeout = 3 * time.Minute
	// directRefusalPause spaces a submitter's calls after a refusal.
	directRefusalPause = 200 * time.Millisecond
)

var _ = Describe("Chaos: Direct lanes", func() {
	It("runs every Direct command to one counted success when half the Direct workers are killed with SIGKILL and restarted", func() {
		s := newDirectScenario("Direct: SIGKILL half the workers, restart them", 24, 200, 1000)
		m := s.startManager("manager", false)
		Eventually(m.ready, time.Minute).Should(BeTrue(), "the manager is ready")
		s.server = m.api
		s.prepare()
		s.run()
		s.waitForProgress(faultAfter)
		victims := s.half()
		for _, w := range victims {
			s.procs[w.name].kill()
		}
		time.Sleep(2 * time.Second)
		for _, w := range victims {
			s.startWorker(w)
		}
		s.wait()
		r := s.audit(directAllowance{victims: victims}, false)
		directReport(r)
	})

	It("tells every submitter of a Direct command in flight when the leading manager is killed with SIGKILL", func() {
		s := newDirectScenario("Direct: SIGKILL the leading manager", 24, 200, 1000)
		a := s.startManager("manager-a", true)
		Eventually(a.ready, time.Minute).Should(BeTrue(), "manager-a leads")
		b := s.startManager("manager-b", true)
		proxy := startLeaderProxy(a.backend(), b.backend())
		Eventually(proxy.ready).Should(Equal(a.api))
		s.server = proxy.addr()
		s.prepare()
		s.run()
		s.waitForProgress(faultAfter)
		Expect(proxy.ready()).To(Equal(a.api), "manager-a still leads")
		a.proc.kill()
		killed := time.Now()
		Eventually(proxy.ready, time.Minute).Should(Equal(b.api), "manager-b takes the lead")
		took := time.Now()
		s.wait()
		r := s.audit(directAllowance{interrupted: true, killed: killed}, true)
		inFlight, told := s.inFlightAt(killed)
		r.inFlight = inFlight
		AddReportEntry(s.title+": timeline", fmt.Sprintf("leader killed %s; manager-b ready +%s; %d submissions in flight at the kill, %d of them told Interrupted (%d on POST, %d by GET after the connection failed), the others answered Succeeded before the kill reached them",
			killed.Format(timeOfDay), took.Sub(killed).Round(time.Millisecond), inFlight, told, r.interruptedPost, r.interruptedGet), ReportEntryVisibilityAlways)
		directReport(r)
		Expect(r.interruptedPost+r.interruptedGet).To(BeNumerically(">", 0), "the kill caught commands in flight")
	})

	It("keeps Direct commands flowing while the API server is down for 10s", func() {
		// Longer commands and fewer submitters than the other scenarios, so
		// that commands run all through the outage.
		s := newDirectScenario("Direct: API server down 10s", 16, 500, 1500)
		m := s.startManager("manager", false)
		Eventually(m.ready, time.Minute).Should(BeTrue(), "the manager is ready")
		s.server = m.api
		s.prepare()
		s.run()
		s.waitForProgress(0.2)
		killed, restarting, back := directAPIServerOutage(10 * time.Second)
		s.wait()
		r := s.audit(directAllowance{}, false)
		o := s.outage(killed, restarting, back)
		r.duringOutage = o.completed
		AddReportEntry(s.title+": timeline", o.String(), ReportEntryVisibilityAlways)
		directReport(r)
		Expect(o.completed).To(BeNumerically(">", 0), "commands submitted and answered Succeeded while the API server was down, before it was started again")
	})
})

// directTask is one planned command: its name (which its run log lines
// and its output carry) and how long it sleeps.
type directTask struct {
	name  string
	sleep time.Duration
}

// Outcomes of one submission, as its submitter saw it.
const (
	outSucceeded = "Succeeded"
	// outInterrupted: POST answered 410 Interrupted.
	outInterrupted = "Interrupted"
	// outInterruptedGet: the connection failed and GET of the id answered
	// 410 Interrupted.
	outInterruptedGet = "InterruptedOnGet"
	// outRefused: an error answer before the command was taken (the code
	// follows).
	outRefused = "Refused"
	// outFailed: the command ended, but not Succeeded.
	outFailed = "Failed"
	// outUntold: no answer within directCallTimeout, or a connection error
	// that no GET resolved.
	outUntold = "Untold"
	// outWrongResult: answered Succeeded with another command's output.
	outWrongResult = "WrongResult"
)

// directSubmission is one call that submitted a planned command under id.
type directSubmission struct {
	task, id   string
	start, end time.Time
	outcome    string
	detail     string
}

// directManager is a manager process serving the Session API.
type directManager struct {
	proc        *process
	api, readyz string
}

func (m *directManager) backend() proxyBackend { return proxyBackend{addr: m.api, readyz: m.readyz} }

// ready tells whether the manager's readiness probe passes: it leads and
// serves the Session API.
func (m *directManager) ready() bool {
	resp, err := (&http.Client{Timeout: time.Second}).Get(m.readyz)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// directScenario is one Direct scenario: a namespace with a Direct lane
// and directSessions sessions, a pool of Direct workers, the planned
// commands and what the submitters saw.
type directScenario struct {
	title   string
	rng     *rand.Rand
	ns, dir string
	clients int
	tasks   []directTask
	workers []workerSpec
	procs   map[string]*process
	// server is host:port of the Session API the workers and clients use.
	server                  string
	workerToken, userToken  string
	started, faultAt, ended time.Time

	done    atomic.Int64
	running sync.WaitGroup
	mu      sync.Mutex
	subs    []directSubmission
}

// newDirectScenario plans taskCount commands sleeping from minSleep to
// maxSleep milliseconds, submitted by clients submitters.
func newDirectScenario(title string, clients, minSleep, maxSleep int) *directScenario {
	GinkgoHelper()
	h := fnv.New64a()
	h.Write([]byte(title))
	s := &directScenario{
		title:   title,
		rng:     rand.New(rand.NewPCG(uint64(seed), h.Sum64())),
		dir:     scenarioDir(title),
		clients: clients,
		procs:   map[string]*process{},
	}
	for i := range directWorkers {
		s.workers = append(s.workers, workerSpec{
			name: fmt.Sprintf("direct-worker-%d", i), node: fmt.Sprintf("node-%d", i),
			runLog: filepath.Join(s.dir, fmt.Sprintf("direct-worker-%d.runs", i)), capacity: directCapacity,
		})
	}
	for i := range taskCount {
		s.tasks = append(s.tasks, directTask{name: fmt.Sprintf("d-%04d", i),
			sleep: time.Duration(minSleep+s.rng.IntN(maxSleep-minSleep)) * time.Millisecond})
	}
	return s
}

// directCert is the Session API's serving certificate (for 127.0.0.1) and
// its CA, made once for every manager of the suite.
var directCert = sync.OnceValues(func() ([]string, string) {
	b, err := servingcert.Generate([]string{"127.0.0.1", "localhost"}, time.Now())
	if err != nil {
		panic(err)
	}
	dir := filepath.Join(workDir, "session-api-tls")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		panic(err)
	}
	for name, data := range map[string][]byte{"tls.crt": b.Cert, "tls.key": b.Key, "ca.crt": b.CACert} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			panic(err)
		}
	}
	ca := filepath.Join(dir, "ca.crt")
	return []string{"--session-api-cert-file=" + filepath.Join(dir, "tls.crt"),
		"--session-api-key-file=" + filepath.Join(dir, "tls.key"), "--session-api-ca-file=" + ca}, ca
})

// startManager starts a manager serving the Session API on a free port,
// electing a leader when leaderElect is set. The Session API's per-caller
// bounds are lifted: the submitters share one token and one address, where
// as many runtimes would have one each.
func (s *directScenario) startManager(name string, leaderElect bool) *directManager {
	GinkgoHelper()
	api, health := freeLoopback(), freeLoopback()
	certArgs, _ := directCert()
	args := append([]string{"--metrics-bind-address=0", "--health-probe-bind-address=" + health,
		"--session-api-bind-address=" + api,
		"--session-api-rate=-1", "--session-api-failed-auth-rate=-1",
		"--session-api-max-reviews-in-flight-per-address=1024", "--session-api-max-reviews-in-flight=1024"}, certArgs...)
	if leaderElect {
		args = append(args, "--leader-elect", "--leader-election-namespace="+leaderNamespace)
	}
	return &directManager{proc: startProcess(name, managerBin, managerKubeconfig, args...), api: api,
		readyz: "http://" + health + "/readyz"}
}

// freeLoopback returns a loopback address with a free port.
func freeLoopback() string {
	GinkgoHelper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer l.Close()
	return l.Addr().String()
}

// prepare creates the namespace, the queue, the sessions and the tokens,
// and starts the workers. Call it once a manager leads.
func (s *directScenario) prepare() {
	GinkgoHelper()
	s.createQueue()
	s.workerToken = filepath.Join(s.dir, "worker.token")
	token, err := testenv.ServiceAccountToken(suiteCtx, k8sClient, s.ns, "direct-worker",
		rbacv1.RoleRef{Kind: "ClusterRole", Name: "worker-role"}, directAudience)
	Expect(err).NotTo(HaveOccurred())
	Expect(os.WriteFile(s.workerToken, []byte(token), 0o600)).To(Succeed())
	ensureSessionUserRole()
	s.userToken, err = testenv.ServiceAccountToken(suiteCtx, k8sClient, s.ns, "agent",
		rbacv1.RoleRef{Kind: "ClusterRole", Name: "session-user"}, directAudience)
	Expect(err).NotTo(HaveOccurred())
	for _, w := range s.workers {
		s.startWorker(w)
	}
}

// ensureSessionUserRole creates the ClusterRole session runtimes get
// (config/rbac/session_user_role.yaml), once for the suite.
func ensureSessionUserRole() {
	GinkgoHelper()
	role := &rbacv1.ClusterRole{}
	readYAML(filepath.Join("..", "..", "config", "rbac", "session_user_role.yaml"), role)
	if err := k8sClient.Create(suiteCtx, role); err != nil && !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
}

// createQueue creates the namespace with LaneQueue q1, whose one lane is a
// Direct lane capped at the workers' Direct slots, and its sessions.
func (s *directScenario) createQueue() {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "chaos-direct-"}}
	Expect(k8sClient.Create(suiteCtx, ns)).To(Succeed())
	s.ns = ns.Name
	lq := &agentlanev1alpha1.LaneQueue{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "q1"},
		Spec: agentlanev1alpha1.LaneQueueSpec{
			DefaultLane: directLane,
			Lanes: []agentlanev1alpha1.Lane{{
				Name: directLane, HandlerMode: agentlanev1alpha1.HandlerModeExternal,
				MaxConcurrency: directWorkers * directCapacity,
				ExternalTarget: &agentlanev1alpha1.ExternalTarget{Type: agentlanev1alpha1.ExternalTargetDirect},
			}},
			RetryPolicy: &agentlanev1alpha1.RetryPolicy{Strategy: agentlanev1alpha1.RetryFixed,
				FixedDelay: &metav1.Duration{Duration: 200 * time.Millisecond}, MaxRetries: ptr.To[int32](maxRetries)},
		},
	}
	Expect(k8sClient.Create(suiteCtx, lq)).To(Succeed())
	for i := range directSessions {
		Expect(k8sClient.Create(suiteCtx, &agentlanev1alpha1.AgentSession{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: fmt.Sprintf("s%d", i)},
			Spec:       agentlanev1alpha1.AgentSessionSpec{QueueRef: agentlanev1alpha1.LaneQueueReference{Name: "q1"}},
		})).To(Succeed())
	}
	Eventually(func(g Gomega) {
		list := &agentlanev1alpha1.AgentSessionList{}
		g.Expect(k8sClient.List(suiteCtx, list, client.InNamespace(s.ns))).To(Succeed())
		g.Expect(list.Items).To(HaveLen(directSessions))
		for _, ss := range list.Items {
			g.Expect(ss.Status.Phase).To(Equal(agentlanev1alpha1.SessionActive))
		}
	}).Should(Succeed())
}

// startWorker starts (or restarts) a worker that serves the pool (one slot,
// unused here) and holds a Direct stream of directCapacity slots, and waits
// until the stream is open. Its commands see the run log as $CHAOS_RUNLOG.
func (s *directScenario) startWorker(w workerSpec) {
	GinkgoHelper()
	_, ca := directCert()
	p := startProcess(w.name, workerBin, workerKubeconfig,
		"--name="+w.name, "--node-name="+w.node, "--namespace="+s.ns, "--capacity=1",
		"--heartbeat-interval="+workerHeartbeat, "--grace-period="+workerGrace.String(),
		"--task-env=CHAOS_RUNLOG="+w.runLog,
		"--direct-server=https://"+s.server, "--direct-ca-file="+ca, "--direct-token-file="+s.workerToken,
		fmt.Sprintf("--direct-capacity=%d", w.capacity))
	s.procs[w.name] = p
	Eventually(func() string {
		Expect(p.exited()).To(BeFalse(), "worker %s exited:\n%s", w.name, p.logTail())
		b, _ := os.ReadFile(p.Log)
		return string(b)
	}, time.Minute).Should(ContainSubstring("Direct stream open"), "worker %s opens its Direct stream", w.name)
}

// half picks half of the workers at random.
func (s *directScenario) half() []workerSpec {
	picked := make([]workerSpec, len(s.workers))
	for i, j := range s.rng.Perm(len(s.workers)) {
		picked[i] = s.workers[j]
	}
	return picked[:len(picked)/2]
}

// command is t's shell command: it records its start in the worker's run
// log, sleeps, and prints its name.
func (t directTask) command() json.RawMessage {
	raw, _ := json.Marshal(map[string]string{
		"command": fmt.Sprintf(`echo %s >> "$CHAOS_RUNLOG"; sleep %.3f; echo done %s`, t.name, t.sleep.Seconds(), t.name)})
	return raw
}

// run starts the submitters: each takes the next planned command and
// carries it to a Succeeded answer (or to the scenario's deadline).
func (s *directScenario) run() {
	GinkgoHelper()
	_, caFile := directCert()
	ca, err := os.ReadFile(caFile)
	Expect(err).NotTo(HaveOccurred())
	next := make(chan directTask, len(s.tasks))
	for _, t := range s.tasks {
		next <- t
	}
	close(next)
	s.started = time.Now()
	for i := range s.clients {
		// A client of its own: its own connection, as a runtime has.
		c, err := sessionapi.NewClient("https://"+s.server, sessionapi.WithToken(s.userToken), sessionapi.WithCA(ca),
			sessionapi.WithNotLeaderRetries(0))
		Expect(err).NotTo(HaveOccurred())
		sc := c.Session(s.ns, fmt.Sprintf("s%d", i%directSessions))
		s.running.Add(1)
		go func() {
			defer GinkgoRecover()
			defer s.running.Done()
			for t := range next {
				s.carry(sc, t)
			}
		}()
	}
}

// wait waits for the submitters to end.
func (s *directScenario) wait() {
	s.running.Wait()
	s.ended = time.Now()
}

// waitForProgress waits until a fraction of the commands was answered
// Succeeded and marks the moment of the fault.
func (s *directScenario) waitForProgress(fraction float64) {
	GinkgoHelper()
	want := int64(float64(len(s.tasks)) * fraction)
	Eventually(s.done.Load, 2*time.Minute).Should(BeNumerically(">=", want))
	s.faultAt = time.Now()
}

// carry submits t until a submission is answered Succeeded, under a new id
// each time, and keeps every submission's outcome.
func (s *directScenario) carry(sc *sessionapi.SessionClient, t directTask) {
	deadline := s.started.Add(directRunTimeout)
	for time.Now().Before(deadline) {
		// An id of the submitter's own, made before the call: a submitter
		// whose connection fails still knows what to ask the server.
		id := strings.ToLower(ulid.Make().String())
		sub := directSubmission{task: t.name, id: id, start: time.Now()}
		ctx, cancel := context.WithTimeout(suiteCtx, directCallTimeout)
		cmd, err := sc.Submit(ctx, sessionapi.SubmitRequest{ID: id, Type: "bash", Lane: directLane, Payload: t.command(),
			Wait: &metav1.Duration{Duration: 2 * directCallTimeout}})
		cancel()
		sub.outcome, sub.detail = s.classify(sc, t, id, cmd, err)
		sub.end = time.Now()
		s.mu.Lock()
		s.subs = append(s.subs, sub)
		s.mu.Unlock()
		switch sub.outcome {
		case outSucceeded, outWrongResult:
			s.done.Add(1)
			return
		case outRefused:
			time.Sleep(directRefusalPause)
		}
	}
}

// classify tells what the answer to submission id of t was; after a
// connection error it asks the server (the new leader, after a failover)
// about id.
func (s *directScenario) classify(sc *sessionapi.SessionClient, t directTask, id string, cmd *sessionapi.Command, err error) (string, string) {
	var apiErr *sessionapi.Error
	switch {
	case err == nil && cmd.State == sessionapi.StateSucceeded:
		if cmd.Result == nil || !strings.Contains(string(cmd.Result.Output), "done "+t.name) {
			return outWrongResult, fmt.Sprintf("result %+v", cmd.Result)
		}
		return outSucceeded, ""
	case err == nil && !cmd.Final():
		return outUntold, "answered in state " + cmd.State + " before it ended"
	case err == nil:
		return outFailed, cmd.State + ": " + cmd.Error
	case sessionapi.IsCode(err, sessionapi.CodeInterrupted):
		return outInterrupted, ""
	case errors.As(err, &apiErr):
		return outRefused, apiErr.Code
	case errors.Is(err, context.DeadlineExceeded):
		return outUntold, "no answer within " + directCallTimeout.String()
	}
	return s.resolve(sc, t, id, err)
}

// resolve asks the server what became of id after its submission's
// connection failed (cause), until an answer or directCallTimeout.
func (s *directScenario) resolve(sc *sessionapi.SessionClient, t directTask, id string, cause error) (string, string) {
	deadline := time.Now().Add(directCallTimeout)
	last := cause
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(suiteCtx, 5*time.Second)
		cmd, err := sc.Get(ctx, id, 0)
		if err == nil && !cmd.Final() {
			cmd, err = sc.AwaitFinal(ctx, id)
		}
		cancel()
		var apiErr *sessionapi.Error
		switch {
		case sessionapi.IsCode(err, sessionapi.CodeInterrupted):
			return outInterruptedGet, ""
		case sessionapi.IsCode(err, sessionapi.CodeCommandNotFound):
			return outUntold, fmt.Sprintf("connection failed (%v), then GET answered CommandNotFound", cause)
		case err == nil:
			return s.classify(sc, t, id, cmd, nil)
		case errors.As(err, &apiErr) && apiErr.Code != sessionapi.CodeNotLeader && apiErr.Code != sessionapi.CodeSessionNotReady &&
			apiErr.Code != sessionapi.CodeInternal && apiErr.Code != sessionapi.CodeRateLimited:
			return outUntold, fmt.Sprintf("connection failed (%v), then GET answered %v", cause, err)
		}
		last = err
		time.Sleep(directRefusalPause)
	}
	return outUntold, fmt.Sprintf("connection failed (%v), and GET got no answer: %v", cause, last)
}

// submissions returns a copy of every submission so far.
func (s *directScenario) submissions() []directSubmission {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]directSubmission(nil), s.subs...)
}

// inFlightAt counts the submissions in flight at t, and those of them told
// Interrupted.
func (s *directScenario) inFlightAt(t time.Time) (inFlight, told int) {
	for _, sub := range s.submissions() {
		if sub.start.Before(t) && sub.end.After(t) {
			inFlight++
			if sub.outcome == outInterrupted || sub.outcome == outInterruptedGet {
				told++
			}
		}
	}
	return inFlight, told
}

// outageReport is what the submitters saw around an API server outage:
// from its kill to its start again (restarting) it was down; it answered
// again at back.
type outageReport struct {
	killed, restarting, back time.Time
	// completed: submitted after the kill and answered Succeeded before
	// the API server was started again; before: answered Succeeded in as
	// long a window before the kill.
	completed, before int
	// beforeWindow is the window before the kill before counts in: as
	// long as the outage, from the first submission at the earliest.
	beforeWindow time.Duration
	// refused counts the refusals in the outage window by code;
	// firstRefusal is the first one's time.
	refused      map[string]int
	firstRefusal time.Time
	// answered: Succeeded answers in the window, whenever submitted.
	answered int
	// lastSuccess is the last Succeeded answer in the window.
	lastSuccess time.Time
}

func (s *directScenario) outage(killed, restarting, back time.Time) outageReport {
	o := outageReport{killed: killed, restarting: restarting, back: back, refused: map[string]int{}}
	window := restarting.Sub(killed)
	o.beforeWindow = min(window, killed.Sub(s.started))
	for _, sub := range s.submissions() {
		in := !sub.end.Before(killed) && sub.end.Before(restarting)
		switch {
		case sub.outcome == outSucceeded && !sub.start.Before(killed) && sub.end.Before(restarting):
			o.completed++
		case sub.outcome == outSucceeded && sub.end.Before(killed) && sub.end.After(killed.Add(-o.beforeWindow)):
			o.before++
		case sub.outcome == outRefused && in:
			o.refused[sub.detail]++
			if o.firstRefusal.IsZero() || sub.end.Before(o.firstRefusal) {
				o.firstRefusal = sub.end
			}
		}
		if sub.outcome == outSucceeded && in {
			o.answered++
			if sub.end.After(o.lastSuccess) {
				o.lastSuccess = sub.end
			}
		}
	}
	return o
}

func (o outageReport) String() string {
	window := o.restarting.Sub(o.killed)
	rate := func(n int, in time.Duration) float64 { return float64(n) / in.Seconds() }
	first, last := "none", "none"
	if !o.firstRefusal.IsZero() {
		first = "+" + o.firstRefusal.Sub(o.killed).Round(time.Millisecond).String()
	}
	if !o.lastSuccess.IsZero() {
		last = "+" + o.lastSuccess.Sub(o.killed).Round(time.Millisecond).String()
	}
	return fmt.Sprintf("API server killed %s, started again +%s, answering again +%s; submitted and answered Succeeded while it was down (before it was started again): %d; Succeeded answers while it was down %d (%.1f/s; %.1f/s in the %s before); last Succeeded answer in the window %s; refusals in the window %v, first %s (the Session API reuses a token's and a grant's review up to 30s past its 10s TTL while the API server cannot be asked)",
		o.killed.Format(timeOfDay), window.Round(time.Millisecond), o.back.Sub(o.killed).Round(time.Millisecond), o.completed, o.answered, rate(o.answered, window),
		rate(o.before, o.beforeWindow), o.beforeWindow.Round(100*time.Millisecond), last, o.refused, first)
}

// directAPIServerOutage kills the API server with SIGKILL, keeps it down
// for downtime and starts it again on the same etcd, port and
// certificates; it returns when it killed it, started it again, and when
// it answered again.
func directAPIServerOutage(downtime time.Duration) (killed, restarting, back time.Time) {
	GinkgoHelper()
	apiServer := testEnv.ControlPlane.APIServer
	Expect(syscall.Kill(apiServerPID(apiServer.CertDir), syscall.SIGKILL)).To(Succeed())
	killed = time.Now()
	Eventually(apiServer.Stop).Should(Succeed())
	time.Sleep(downtime)
	restarting = time.Now()
	// A loaded two-core machine may take longer than envtest's default to
	// start it; the suite's own setting is restored after.
	defer func(d time.Duration) { apiServer.StartTimeout = d }(apiServer.StartTimeout)
	apiServer.StartTimeout = max(apiServer.StartTimeout, time.Minute)
	Expect(apiServer.Start()).To(Succeed())
	return killed, restarting, time.Now()
}
