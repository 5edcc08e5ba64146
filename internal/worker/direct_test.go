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

package worker

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/agentlane/agentlane/internal/executor"
	"github.com/agentlane/agentlane/internal/workerproto"
)

// fakeManager serves the manager's side of the Direct stream for the
// tests: it checks the bearer token, reads the Hello, welcomes the worker,
// pings it, and hands each stream to the test.
type fakeManager struct {
	srv       *httptest.Server
	caFile    string
	tokenFile string
	// token is the bearer token it accepts.
	token atomic.Value
	// refusals are the statuses the next connections are answered with.
	refusalsMu sync.Mutex
	refusals   []int
	// connects counts the requests of the stream's path.
	connects atomic.Int32
	// stolen counts the requests elsewhere that carried a token.
	stolen atomic.Int32
	// silent stops the pings of new streams.
	silent  atomic.Bool
	streams chan *fakeStream
}

// fakeStream is one Direct stream the fake manager accepted.
type fakeStream struct {
	hello workerproto.DirectHello
	// frames are the worker's frames after the Hello; closed when its
	// body ends.
	frames chan workerproto.WorkerFrame
	mu     sync.Mutex
	w      http.ResponseWriter
	rc     *http.ResponseController
	end    chan struct{}
	once   sync.Once
}

func newFakeManager(t *testing.T) *fakeManager {
	t.Helper()
	m := &fakeManager{streams: make(chan *fakeStream, 16)}
	m.token.Store("good-token")
	serveTLS(t, m, m)
	return m
}

// serveTLS serves h over HTTP/2 and TLS, and writes the files the worker
// needs to reach it (its CA, the token good-token) in m.
func serveTLS(t testing.TB, m *fakeManager, h http.Handler) {
	t.Helper()
	m.srv = httptest.NewUnstartedServer(h)
	m.srv.EnableHTTP2 = true
	m.srv.StartTLS()
	t.Cleanup(m.srv.Close)
	dir := t.TempDir()
	m.caFile = filepath.Join(dir, "ca.crt")
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: m.srv.Certificate().Raw})
	if err := os.WriteFile(m.caFile, ca, 0o600); err != nil {
		t.Fatal(err)
	}
	m.tokenFile = filepath.Join(dir, "token")
	if err := os.WriteFile(m.tokenFile, []byte("good-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// refuse answers the next connections with these statuses, in order.
func (m *fakeManager) refuse(statuses ...int) {
	m.refusalsMu.Lock()
	defer m.refusalsMu.Unlock()
	m.refusals = append(m.refusals, statuses...)
}

func (m *fakeManager) nextRefusal() int {
	m.refusalsMu.Lock()
	defer m.refusalsMu.Unlock()
	if len(m.refusals) == 0 {
		return 0
	}
	s := m.refusals[0]
	m.refusals = m.refusals[1:]
	return s
}

func apiError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"code": code, "message": msg})
}

func (m *fakeManager) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/steal" && r.Header.Get("Authorization") != "" {
		m.stolen.Add(1)
	}
	if r.URL.Path != workerproto.DirectPath || r.Method != http.MethodPost {
		apiError(w, http.StatusNotFound, "NotFound", "no such route")
		return
	}
	m.connects.Add(1)
	switch status := m.nextRefusal(); status {
	case 0:
	case http.StatusFound:
		http.Redirect(w, r, "/steal", status)
		return
	case http.StatusServiceUnavailable:
		apiError(w, status, "NotLeader", "this replica is a standby")
		return
	default:
		apiError(w, status, "Forbidden", "refused by the test")
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+m.token.Load().(string) {
		apiError(w, http.StatusUnauthorized, "Unauthenticated", "not a valid token")
		return
	}
	body := bufio.NewReader(r.Body)
	line, err := body.ReadBytes('\n')
	var first workerproto.WorkerFrame
	if err != nil || json.Unmarshal(line, &first) != nil || first.Hello == nil {
		apiError(w, http.StatusBadRequest, "InvalidRequest", "the first frame must be a Hello")
		return
	}
	w.Header().Set("Content-Type", workerproto.DirectContentType)
	w.WriteHeader(http.StatusOK)
	s := &fakeStream{hello: *first.Hello, frames: make(chan workerproto.WorkerFrame, 64), w: w,
		rc: http.NewResponseController(w), end: make(chan struct{})}
	// No write after the handler returned.
	defer s.close()
	if err := s.send(workerproto.ManagerFrame{Welcome: &workerproto.DirectWelcome{Manager: "fake", RunID: "run-1"}}); err != nil {
		return
	}
	bodyDone := make(chan struct{})
	go func() {
		defer close(bodyDone)
		defer close(s.frames)
		for {
			line, err := body.ReadBytes('\n')
			if err != nil {
				return
			}
			var f workerproto.WorkerFrame
			if json.Unmarshal(line, &f) == nil && !f.Ping {
				s.frames <- f
			}
		}
	}()
	m.streams <- s
	ping := time.NewTicker(50 * time.Millisecond)
	defer ping.Stop()
	silent := m.silent.Load()
	for {
		select {
		case <-ping.C:
			if !silent {
				_ = s.send(workerproto.ManagerFrame{Ping: true})
			}
		case <-s.end:
			return
		case <-bodyDone:
			return
		case <-r.Context().Done():
			return
		}
	}
}

// send writes one frame to the worker.
func (s *fakeStream) send(f workerproto.ManagerFrame) error {
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	return s.sendRaw(append(b, '\n'))
}

func (s *fakeStream) sendRaw(b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.end:
		return errors.New("stream ended")
	default:
	}
	if _, err := s.w.Write(b); err != nil {
		return err
	}
	return s.rc.Flush()
}

// close ends the response, as a manager that loses its leadership does.
func (s *fakeStream) close() {
	s.once.Do(func() {
		s.mu.Lock()
		close(s.end)
		s.mu.Unlock()
	})
}

// result waits for the next Result frame of the stream.
func (s *fakeStream) result(t *testing.T) workerproto.DirectResult {
	t.Helper()
	for {
		select {
		case f, ok := <-s.frames:
			if !ok {
				t.Fatal("the stream ended before a Result")
			}
			if f.Result != nil {
				return *f.Result
			}
		case <-time.After(20 * time.Second):
			t.Fatal("no Result")
		}
	}
}

// nextStream waits for the worker's next stream.
func (m *fakeManager) nextStream(t *testing.T) *fakeStream {
	t.Helper()
	select {
	case s := <-m.streams:
		return s
	case <-time.After(20 * time.Second):
		t.Fatal("the worker did not open a Direct stream")
		return nil
	}
}

// directWorker runs a DirectClient against m until the test ends.
type directWorker struct {
	client *DirectClient
	cancel context.CancelFunc
	// done is closed when Run returned err.
	done chan struct{}
	err  error
}

// stop ends the client's context and waits for Run to return.
func (d *directWorker) stop(t *testing.T) {
	t.Helper()
	d.cancel()
	select {
	case <-d.done:
		if d.err != nil {
			t.Errorf("Run: %v", d.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return")
	}
}

// startDirect runs a client of capacity 2 with short timings against m;
// edit changes its settings before it runs.
func startDirect(t *testing.T, m *fakeManager, edit func(*DirectClient)) *directWorker {
	t.Helper()
	registry := executor.NewSandboxedRegistry(0, executor.Sandbox{Root: t.TempDir()})
	registry.Register(executor.NoopCommandType, executor.NoopExecutor{})
	opts := DirectOptions{
		Server: m.srv.URL, CAFile: m.caFile, TokenFile: m.tokenFile,
		Name: "w1", NodeName: "node-a", Namespace: "agents", Capacity: 2,
		Labels: map[string]string{"zone": "z1"}, GracePeriod: 200 * time.Millisecond,
		Registry: registry, Log: testr.New(t),
	}
	c, err := NewDirectClient(opts)
	if err != nil {
		t.Fatal(err)
	}
	c.pingInterval, c.deadAfter = 100*time.Millisecond, 2*time.Second
	c.backoff = wait.Backoff{Duration: 10 * time.Millisecond, Factor: 2, Steps: 1 << 30, Cap: 50 * time.Millisecond}
	c.refusedRetry = 50 * time.Millisecond
	if edit != nil {
		edit(c)
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &directWorker{client: c, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(d.done)
		d.err = c.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-d.done
	})
	return d
}

// task builds a Direct task of the worker's namespace.
func task(id, commandType string, payload any) *workerproto.DirectTask {
	raw, _ := json.Marshal(payload)
	return &workerproto.DirectTask{ID: id, Attempt: 1, Namespace: "agents", Queue: "q", Lane: "tools", Session: "s1",
		CommandType: commandType, Payload: raw}
}

// startedTask is a bash task that writes its shell's pid to a file of dir
// and then sleeps; pidOf waits for the file.
func startedTask(dir, id string) *workerproto.DirectTask {
	return task(id, "bash", executor.ProcessPayload{Command: fmt.Sprintf("echo $$ > %s.tmp && mv %s.tmp %s && exec sleep 30",
		filepath.Join(dir, id), filepath.Join(dir, id), filepath.Join(dir, id))})
}

func pidOf(t *testing.T, dir, id string) int {
	t.Helper()
	g := NewWithT(t)
	var pid int
	g.Eventually(func() error {
		b, err := os.ReadFile(filepath.Join(dir, id))
		if err != nil {
			return err
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err
	}, 20*time.Second, 20*time.Millisecond).Should(Succeed())
	return pid
}

// gone tells whether no process has pid.
func gone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

func TestDirectHelloAndRoundTrip(t *testing.T) {
	g := NewWithT(t)
	m := newFakeManager(t)
	d := startDirect(t, m, func(c *DirectClient) {
		c.opts.Queues, c.opts.Lanes = []string{"q"}, []string{"tools"}
	})
	s := m.nextStream(t)
	want := workerproto.DirectHello{
		Worker: "w1", Node: "node-a", Namespace: "agents", Incarnation: d.client.opts.Incarnation, Capacity: 2,
		Queues: []string{"q"}, Lanes: []string{"tools"}, CommandTypes: []string{"bash", "exec", "noop", "read"},
		Labels: map[string]string{"zone": "z1", workerproto.WorkerLabel: "true", workerproto.NodeLabel: "node-a"},
	}
	g.Expect(s.hello).To(Equal(want))
	g.Expect(workerproto.ValidIncarnation(s.hello.Incarnation)).To(BeTrue())
	g.Eventually(func() float64 { return testutil.ToFloat64(directConnected) }).Should(Equal(1.0))
	started, succeeded := testutil.ToFloat64(directTasksStarted), testutil.ToFloat64(directTasksFinished.WithLabelValues(outcomeSucceeded))
	allStarted := testutil.ToFloat64(tasksStarted)
	defer func() {
		g.Expect(testutil.ToFloat64(directTasksStarted) - started).To(Equal(5.0))
		g.Expect(testutil.ToFloat64(tasksStarted)-allStarted).To(Equal(5.0), "the worker's task counters count Direct attempts too")
		d.stop(t)
		g.Expect(testutil.ToFloat64(directTasksFinished.WithLabelValues(outcomeSucceeded)) - succeeded).To(Equal(2.0))
		g.Expect(testutil.ToFloat64(directConnected)).To(Equal(0.0))
	}()

	cases := map[string]struct {
		task        *workerproto.DirectTask
		wantSuccess bool
		wantExit    int
		wantOutput  string
		wantError   string
	}{
		"bash": {task: task("t-bash", "bash", executor.ProcessPayload{Command: "echo hello"}),
			wantSuccess: true, wantOutput: `{"exitCode":0,"stdout":"hello\n"}`},
		"exec that fails": {task: task("t-exec", "exec", executor.ProcessPayload{Args: []string{"sh", "-c", "echo oops >&2; exit 3"}}),
			wantExit: 3, wantOutput: `{"exitCode":3,"stdout":"","stderr":"oops\n"}`, wantError: "exit code 3: oops"},
		"noop":                 {task: task("t-noop", "noop", nil), wantSuccess: true, wantOutput: `{}`},
		"unknown command type": {task: task("t-unknown", "teleport", nil), wantError: `no executor for command type "teleport"`},
		"invalid payload": {task: task("t-invalid", "bash", map[string]string{"cmd": "ls"}),
			wantError: "invalid payload"},
	}
	registry := d.client.opts.Registry
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			sent := time.Now()
			g.Expect(s.send(workerproto.ManagerFrame{Task: tc.task})).To(Succeed())
			got := s.result(t)
			// The worker tells when it started the run: after the Task was
			// sent, before its Result arrived (the same clock here).
			g.Expect(got.StartedAt).To(BeNumerically(">=", sent.UnixNano()))
			g.Expect(got.StartedAt).To(BeNumerically("<=", time.Now().UnixNano()))
			g.Expect(got.ID).To(Equal(tc.task.ID))
			g.Expect(got.Attempt).To(Equal(1))
			g.Expect(got.Success).To(Equal(tc.wantSuccess), "error %q", got.Error)
			g.Expect(got.ExitCode).To(Equal(tc.wantExit))
			g.Expect(got.Error).To(ContainSubstring(tc.wantError))
			g.Expect(got.Cancelled).To(BeFalse())
			if tc.wantOutput == "" {
				g.Expect(got.Output).To(BeEmpty())
			} else {
				g.Expect(string(got.Output)).To(MatchJSON(tc.wantOutput))
			}
			// The ExternalTask path reports the same run the same way.
			out, err := runCommand(t.Context(), registry, executor.Task{CommandType: tc.task.CommandType, Payload: tc.task.Payload}, 0)
			cr := taskResult(out, err)
			g.Expect(got.Success).To(Equal(cr.Success))
			g.Expect(got.Error).To(Equal(cr.Error))
			if cr.Result == nil {
				g.Expect(got.Output).To(BeNil())
			} else {
				g.Expect(string(got.Output)).To(Equal(string(cr.Result.Raw)))
			}
		})
	}
}

func TestDirectCancelStopsTheRun(t *testing.T) {
	g := NewWithT(t)
	m := newFakeManager(t)
	startDirect(t, m, nil)
	s := m.nextStream(t)
	cancelled := testutil.ToFloat64(directTasksFinished.WithLabelValues(outcomeCancelled))
	dir := t.TempDir()
	g.Expect(s.send(workerproto.ManagerFrame{Task: startedTask(dir, "long")})).To(Succeed())
	pid := pidOf(t, dir, "long")
	g.Expect(s.send(workerproto.ManagerFrame{Cancel: &workerproto.DirectCancel{ID: "long", Attempt: 1, Reason: "timed out"}})).To(Succeed())
	got := s.result(t)
	g.Expect(got.ID).To(Equal("long"))
	g.Expect(got.Success).To(BeFalse())
	g.Expect(got.Cancelled).To(BeTrue())
	g.Expect(got.Error).To(ContainSubstring("cancelled by the manager: timed out"))
	g.Expect(gone(pid)).To(BeTrue(), "the sleep was killed")
	g.Eventually(func() float64 {
		return testutil.ToFloat64(directTasksFinished.WithLabelValues(outcomeCancelled)) - cancelled
	}).Should(Equal(1.0))
}

func TestDirectTimeoutBoundsTheRun(t *testing.T) {
	g := NewWithT(t)
	m := newFakeManager(t)
	startDirect(t, m, nil)
	s := m.nextStream(t)
	tk := task("slow", "bash", executor.ProcessPayload{Command: "exec sleep 30"})
	tk.TimeoutMillis = 200
	g.Expect(s.send(workerproto.ManagerFrame{Task: tk})).To(Succeed())
	got := s.result(t)
	g.Expect(got.Success).To(BeFalse())
	g.Expect(got.Cancelled).To(BeFalse(), "a timeout is a failure, not a cancellation")
	g.Expect(got.Error).To(ContainSubstring("attempt timed out after 200ms"))
}

func TestDirectStreamLossStopsRunsAndReconnects(t *testing.T) {
	cases := map[string]func(*testing.T, *fakeStream){
		"the manager ends the stream": func(_ *testing.T, s *fakeStream) { s.close() },
		"the manager sends a frame over the bound": func(t *testing.T, s *fakeStream) {
			big := append([]byte(`{"ping":true,"pad":"`), make([]byte, workerproto.MaxDirectFrameBytes)...)
			for i := 20; i < len(big); i++ {
				big[i] = 'x'
			}
			_ = s.sendRaw(append(big, '"', '}', '\n'))
		},
		"the manager sends a malformed frame": func(t *testing.T, s *fakeStream) {
			_ = s.sendRaw([]byte("{\"task\":{\"id\":\"x\"},\"ping\":true}\n"))
		},
	}
	for name, lose := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			m := newFakeManager(t)
			d := startDirect(t, m, nil)
			s := m.nextStream(t)
			dir := t.TempDir()
			g.Expect(s.send(workerproto.ManagerFrame{Task: startedTask(dir, "a")})).To(Succeed())
			g.Expect(s.send(workerproto.ManagerFrame{Task: startedTask(dir, "b")})).To(Succeed())
			pids := []int{pidOf(t, dir, "a"), pidOf(t, dir, "b")}

			lose(t, s)
			again := m.nextStream(t)
			g.Expect(again.hello.Incarnation).To(Equal(d.client.opts.Incarnation))
			for _, pid := range pids {
				g.Expect(gone(pid)).To(BeTrue(), "the runs of the lost stream were stopped before the worker connected again")
			}
			for f := range s.frames {
				g.Expect(f.Result).To(BeNil(), "no result is sent for a run of a lost stream")
			}
			// The new stream has every slot free.
			g.Expect(again.send(workerproto.ManagerFrame{Task: startedTask(dir, "c")})).To(Succeed())
			g.Expect(again.send(workerproto.ManagerFrame{Task: startedTask(dir, "d")})).To(Succeed())
			pidOf(t, dir, "c")
			pidOf(t, dir, "d")
		})
	}
}

func TestDirectSilentManagerIsTakenAsLost(t *testing.T) {
	g := NewWithT(t)
	m := newFakeManager(t)
	m.silent.Store(true)
	startDirect(t, m, func(c *DirectClient) { c.deadAfter = 300 * time.Millisecond })
	s := m.nextStream(t)
	m.silent.Store(false)
	m.nextStream(t)
	g.Expect(m.connects.Load()).To(BeNumerically(">=", 2))
	// The worker ended the silent stream's request.
	g.Eventually(func() bool {
		select {
		case _, ok := <-s.frames:
			return !ok
		default:
			return false
		}
	}, 10*time.Second).Should(BeTrue())
}

// The reader starts Task frames' runs itself: a manager that sends only
// Tasks, no Ping, for longer than deadAfter is still heard.
func TestDirectTasksKeepTheStreamAlive(t *testing.T) {
	g := NewWithT(t)
	m := newFakeManager(t)
	m.silent.Store(true)
	d := startDirect(t, m, nil)
	s := m.nextStream(t)
	start := time.Now()
	for i := 0; time.Since(start) < 2*d.client.deadAfter+d.client.deadAfter/2; i++ {
		g.Expect(s.send(workerproto.ManagerFrame{Task: task(fmt.Sprintf("t-%d", i), "noop", nil)})).To(Succeed())
		got := s.result(t)
		g.Expect(got.ID).To(Equal(fmt.Sprintf("t-%d", i)))
		g.Expect(got.Success).To(BeTrue(), "error %q", got.Error)
		time.Sleep(d.client.pingInterval)
	}
	g.Expect(m.connects.Load()).To(BeEquivalentTo(1), "the stream was never taken as lost")
}

func TestDirectRefusesTasksItMustNotRun(t *testing.T) {
	g := NewWithT(t)
	m := newFakeManager(t)
	startDirect(t, m, func(c *DirectClient) { c.opts.Lanes = []string{"tools"} })
	s := m.nextStream(t)
	dir := t.TempDir()
	g.Expect(s.send(workerproto.ManagerFrame{Task: startedTask(dir, "a")})).To(Succeed())
	pidA := pidOf(t, dir, "a")

	foreign := task("foreign", "bash", executor.ProcessPayload{Command: "touch " + filepath.Join(dir, "foreign")})
	foreign.Namespace = "other"
	otherLane := task("other-lane", "bash", executor.ProcessPayload{Command: "touch " + filepath.Join(dir, "other-lane")})
	otherLane.Lane = "llm"
	refusals := []struct {
		task      *workerproto.DirectTask
		wantError string
	}{
		{foreign, "serves namespace agents, not other"},
		{otherLane, "does not serve queue q, lane llm"},
		{startedTask(dir, "a"), "already runs this attempt"},
		{&workerproto.DirectTask{Namespace: "agents", Queue: "q", Lane: "tools", CommandType: "noop"}, "needs an id"},
	}
	reasons := []string{refusedNamespace, refusedNotServed, refusedDuplicate, refusedInvalid, refusedCapacity}
	refused := map[string]float64{}
	for _, r := range reasons {
		refused[r] = testutil.ToFloat64(directTasksRefused.WithLabelValues(r))
	}
	for _, r := range refusals {
		g.Expect(s.send(workerproto.ManagerFrame{Task: r.task})).To(Succeed())
		got := s.result(t)
		g.Expect(got.ID).To(Equal(r.task.ID))
		g.Expect(got.Success).To(BeFalse())
		g.Expect(got.Error).To(ContainSubstring(r.wantError))
		g.Expect(got.StartedAt).To(BeZero(), "a refused task did not start")
	}
	g.Expect(filepath.Join(dir, "foreign")).NotTo(BeAnExistingFile(), "another namespace's task did not run")
	g.Expect(filepath.Join(dir, "other-lane")).NotTo(BeAnExistingFile())

	// Capacity 2: the second runs, the third is refused at once.
	g.Expect(s.send(workerproto.ManagerFrame{Task: startedTask(dir, "b")})).To(Succeed())
	pidB := pidOf(t, dir, "b")
	g.Expect(s.send(workerproto.ManagerFrame{Task: startedTask(dir, "c")})).To(Succeed())
	got := s.result(t)
	g.Expect(got.ID).To(Equal("c"))
	g.Expect(got.Error).To(ContainSubstring("already runs its capacity of 2 attempts"))
	g.Expect(filepath.Join(dir, "c")).NotTo(BeAnExistingFile())

	for _, r := range reasons {
		g.Expect(testutil.ToFloat64(directTasksRefused.WithLabelValues(r))-refused[r]).To(Equal(1.0), "refusals for %s", r)
	}

	// A refusal does not disturb the runs.
	g.Expect(gone(pidA)).To(BeFalse())
	g.Expect(gone(pidB)).To(BeFalse())
	g.Expect(s.send(workerproto.ManagerFrame{Cancel: &workerproto.DirectCancel{ID: "a", Attempt: 1}})).To(Succeed())
	got = s.result(t)
	g.Expect(got.ID).To(Equal("a"))
	g.Expect(got.Cancelled).To(BeTrue())
	// A slot is free again.
	g.Expect(s.send(workerproto.ManagerFrame{Task: task("d", "noop", nil)})).To(Succeed())
	got = s.result(t)
	g.Expect(got.ID).To(Equal("d"))
	g.Expect(got.Success).To(BeTrue())
}

func TestDirectRefusedConnection(t *testing.T) {
	cases := map[string]struct {
		status int
		// slowRetry is set when the worker must wait refusedRetry, not
		// the backoff.
		slowRetry bool
	}{
		"403 is retried slowly":               {status: http.StatusForbidden, slowRetry: true},
		"400 is retried slowly":               {status: http.StatusBadRequest, slowRetry: true},
		"503 NotLeader is retried at backoff": {status: http.StatusServiceUnavailable},
		// The token is never sent elsewhere.
		"a redirect is not followed": {status: http.StatusFound},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			m := newFakeManager(t)
			m.refuse(tc.status)
			startDirect(t, m, func(c *DirectClient) {
				// The other delay is too long for the test to see a
				// second connection.
				if tc.slowRetry {
					c.backoff.Duration, c.backoff.Cap = time.Hour, time.Hour
				} else {
					c.refusedRetry = time.Hour
				}
			})
			s := m.nextStream(t)
			g.Expect(s.hello.Worker).To(Equal("w1"))
			g.Expect(m.connects.Load()).To(Equal(int32(2)))
			g.Expect(m.stolen.Load()).To(BeZero(), "the token went only to the stream's path")
		})
	}
}

func TestDirectRereadsARotatedToken(t *testing.T) {
	g := NewWithT(t)
	m := newFakeManager(t)
	m.token.Store("rotated-token")
	d := startDirect(t, m, nil)
	g.Eventually(m.connects.Load, 10*time.Second).Should(BeNumerically(">=", 1))
	select {
	case <-m.streams:
		t.Fatal("a stream with a token the manager does not accept")
	default:
	}
	g.Expect(os.WriteFile(m.tokenFile, []byte("rotated-token"), 0o600)).To(Succeed())
	m.nextStream(t)
	d.stop(t)
}

func TestDirectTasksSeeNoneOfTheWorkersCredentials(t *testing.T) {
	g := NewWithT(t)
	m := newFakeManager(t)
	// As in a worker pod that has the token's path in its environment.
	t.Setenv("AGENTLANE_SESSION_API_TOKEN_FILE", m.tokenFile)
	startDirect(t, m, nil)
	s := m.nextStream(t)
	g.Expect(s.send(workerproto.ManagerFrame{Task: task("env", "bash", executor.ProcessPayload{Command: "env; cat " + m.tokenFile})})).To(Succeed())
	got := s.result(t)
	var out executor.Output
	g.Expect(json.Unmarshal(got.Output, &out)).To(Succeed())
	g.Expect(out.Stdout).NotTo(ContainSubstring("AGENTLANE_SESSION_API_TOKEN_FILE"))
	g.Expect(out.Stdout).NotTo(ContainSubstring(m.tokenFile + "\n"))
	g.Expect(out.Stdout).To(ContainSubstring("good-token"), "the sandbox leaves file access to the runner's isolation; the path is what it must not learn")
}

func TestDirectDrain(t *testing.T) {
	g := NewWithT(t)
	m := newFakeManager(t)
	d := startDirect(t, m, func(c *DirectClient) { c.opts.GracePeriod = 10 * time.Second })
	s := m.nextStream(t)
	dir := t.TempDir()
	marker := filepath.Join(dir, "go")
	// The run ends once the test creates marker.
	g.Expect(s.send(workerproto.ManagerFrame{Task: task("finishing", "bash", executor.ProcessPayload{
		Command: fmt.Sprintf("touch %s/started; while [ ! -e %s ]; do sleep 0.05; done; echo finished", dir, marker)})})).To(Succeed())
	g.Eventually(func() string { return filepath.Join(dir, "started") }, 20*time.Second).Should(BeAnExistingFile())

	d.cancel()
	f := <-s.frames
	g.Expect(f.Drain).To(BeTrue(), "Drain first")
	// A task that crossed the Drain is refused.
	g.Expect(s.send(workerproto.ManagerFrame{Task: task("late", "noop", nil)})).To(Succeed())
	got := s.result(t)
	g.Expect(got.ID).To(Equal("late"))
	g.Expect(got.Error).To(ContainSubstring("is stopping"))
	g.Expect(os.WriteFile(marker, nil, 0o600)).To(Succeed())
	got = s.result(t)
	g.Expect(got.ID).To(Equal("finishing"))
	g.Expect(got.Success).To(BeTrue(), "the running attempt finished within the grace period")
	_, open := <-s.frames
	g.Expect(open).To(BeFalse(), "the worker closed the stream")
	d.stop(t)
}

func TestDirectDrainStopsWhatOutlivesTheGracePeriod(t *testing.T) {
	g := NewWithT(t)
	m := newFakeManager(t)
	d := startDirect(t, m, func(c *DirectClient) { c.opts.GracePeriod = 100 * time.Millisecond })
	s := m.nextStream(t)
	dir := t.TempDir()
	g.Expect(s.send(workerproto.ManagerFrame{Task: startedTask(dir, "long")})).To(Succeed())
	pid := pidOf(t, dir, "long")
	d.cancel()
	f := <-s.frames
	g.Expect(f.Drain).To(BeTrue())
	got := s.result(t)
	g.Expect(got.ID).To(Equal("long"))
	g.Expect(got.Cancelled).To(BeTrue())
	g.Expect(got.Error).To(HavePrefix("interrupted: w1 stopped the command at shutdown"))
	g.Expect(gone(pid)).To(BeTrue())
	d.stop(t)
}

func TestDirectOptionsValidate(t *testing.T) {
	valid := DirectOptions{Server: "https://api.agentlane-system.svc:8443", TokenFile: "/var/run/token", Name: "w1", Namespace: "ns", Capacity: 4}
	cases := map[string]struct {
		edit     func(*DirectOptions)
		wantFlag []string
	}{
		"valid":             {edit: func(*DirectOptions) {}},
		"no server":         {edit: func(o *DirectOptions) { o.Server = "" }, wantFlag: []string{"direct-server"}},
		"plain http":        {edit: func(o *DirectOptions) { o.Server = "http://api:8080" }, wantFlag: []string{"direct-server"}},
		"a query":           {edit: func(o *DirectOptions) { o.Server = "https://api?x=1" }, wantFlag: []string{"direct-server"}},
		"no token file":     {edit: func(o *DirectOptions) { o.TokenFile = "" }, wantFlag: []string{"direct-token-file"}},
		"capacity 0":        {edit: func(o *DirectOptions) { o.Capacity = 0 }, wantFlag: []string{"direct-capacity"}},
		"capacity too high": {edit: func(o *DirectOptions) { o.Capacity = workerproto.MaxDirectCapacity + 1 }, wantFlag: []string{"direct-capacity"}},
		"everything wrong": {edit: func(o *DirectOptions) { *o = DirectOptions{GracePeriod: -1} },
			wantFlag: []string{"direct-server", "direct-token-file", "direct-capacity", "name", "namespace", "grace-period"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := valid
			tc.edit(&o)
			var got []string
			for _, e := range OptionErrors(o.Validate()) {
				got = append(got, e.Flag)
			}
			g := NewWithT(t)
			g.Expect(got).To(Equal(tc.wantFlag))
		})
	}
}

// otherCA returns the PEM of a CA that signed nothing the tests serve.
func otherCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "not the Session API's CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func TestDirectVerifiesTheServerWithTheCAFile(t *testing.T) {
	g := NewWithT(t)
	m := newFakeManager(t)
	right, err := os.ReadFile(m.caFile)
	g.Expect(err).NotTo(HaveOccurred())
	// A server the CA did not sign gets no Hello, and no token.
	g.Expect(os.WriteFile(m.caFile, otherCA(t), 0o600)).To(Succeed())
	startDirect(t, m, nil)
	g.Consistently(m.connects.Load, 300*time.Millisecond).Should(BeZero())
	// The rotated CA is read at the next connection.
	g.Expect(os.WriteFile(m.caFile, right, 0o600)).To(Succeed())
	s := m.nextStream(t)
	g.Expect(s.hello.Worker).To(Equal("w1"))
}
