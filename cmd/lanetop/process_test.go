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
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/testenv"
)

// viewerUser is the identity lanetop runs as: it holds only the
// queue-viewer ClusterRole, so the test also proves that the role grants
// enough.
const viewerUser = "lanetop-viewer"

// TestLanetopProcess runs the lanetop binary, headless, against an API
// server whose queue and task status the test writes, and reads what it
// prints.
func TestLanetopProcess(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run `make test`, or set it to $(hack/envtest-assets.sh)")
	}
	g := NewWithT(t)
	bin := buildLanetop(t)
	env, _, c, err := testenv.Start(testenv.Scheme())
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop the control plane: %v", err)
		}
	})
	ctx := t.Context()
	kubeconfig := viewerKubeconfig(t, env, c)

	now := time.Now().UTC().Truncate(time.Second)
	ago := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(-d)} }
	put(t, c, laneQueue(now))
	put(t, c, agentSession())
	put(t, c, externalTask("build-1", "make test", func(s *agentlanev1alpha1.ExternalTaskStatus) {
		running(s, "worker-b", "node-b", ago(30*time.Second))
	}))
	put(t, c, externalTask("build-2", "make build", func(s *agentlanev1alpha1.ExternalTaskStatus) {
		running(s, "worker-a", "node-a", ago(10*time.Second))
	}))
	put(t, c, externalTask("lint-1", "golangci-lint run", func(s *agentlanev1alpha1.ExternalTaskStatus) {
		s.Phase, s.Lane, s.QueuedAt = agentlanev1alpha1.ExternalTaskQueued, "execute", ago(5*time.Second)
	}))
	put(t, c, externalTask("test-1", "go test ./...", func(s *agentlanev1alpha1.ExternalTaskStatus) {
		running(s, "worker-a", "node-a", ago(150*time.Second))
		finish(s, ago(60*time.Second), true, `{"stdout":"PASS\n","stderr":""}`, "")
	}))
	put(t, c, externalTask("test-2", "go vet ./...", func(s *agentlanev1alpha1.ExternalTaskStatus) {
		running(s, "worker-c", "node-c", ago(110*time.Second))
		finish(s, ago(100*time.Second), false, `{"stdout":"","stderr":"x.go:3: unreachable code\n"}`, "exit status 1")
	}))

	t.Run("--once prints the strip", func(t *testing.T) {
		g := NewWithT(t)
		out := runOnce(t, bin, kubeconfig, "--view=strip")
		g.Expect(out).To(Equal("a3s ●3/∞ ○1 ✓6 ✗1 last: build-2 (bash)\n"))
		g.Expect(runOnce(t, bin, kubeconfig, "--view=strip", "--namespace=elsewhere")).
			To(Equal("no LaneQueues in namespace elsewhere\n"))
	})

	t.Run("--once prints the dashboard with the selected task's detail", func(t *testing.T) {
		g := NewWithT(t)
		out := runOnce(t, bin, kubeconfig, "--task=test-2")
		g.Expect(out).NotTo(ContainSubstring("\x1b"), "no ANSI escapes")
		g.Expect(out).To(HavePrefix("agentlane · all namespaces · "))
		lines := strings.Split(out, "\n")
		g.Expect(lines).To(ContainElements(
			MatchRegexp(`^── QUEUES \(1\) ─+$`),
			MatchRegexp(`^  a3s +●3/∞ +○1  ✓6  ✗1  ☠0  ready · 1 session$`),
			MatchRegexp(`^    query +P1  Internal  ●1/∞  +4/session  ○0  ✓5  ✗0  ☠0$`),
			MatchRegexp(`^    execute +P2  External  ●2/4  +2/session  ○1  ✓1  ✗1  ☠0$`),
			MatchRegexp(`^  reviewer-42  a3s  Active  node-a  acme-corp  ●3  ○1  ✓6  ✗1$`),
			MatchRegexp(`^── IN-FLIGHT \(2 \+ 1 internal\) ─+$`),
			MatchRegexp(`^  build-2  bash  execute  reviewer-42  Running  worker-a@node-a  \d+s  make build$`),
			MatchRegexp(`^── QUEUED \(1\) ─+$`),
			MatchRegexp(`^  lint-1 +bash  execute  reviewer-42  Queued  waiting \d+s +golangci-lint run$`),
			MatchRegexp(`^── RECENT \(2\) ─+$`),
			MatchRegexp(`^  ✓ test-1  bash  execute  worker-a@node-a  ran 1m30s  1m0\ds ago  +PASS$`),
			MatchRegexp(`^▸ ✗ test-2  bash  execute  worker-c@node-c  ran 10s    1m4\ds ago  +exit status 1$`),
			"── TASK test-2 "+strings.Repeat("─", 57),
			"  state       Failed · attempt 1",
			"  queue       a3s · lane execute · bash",
			"  session     reviewer-42 · Active on node-a · pod reviewer-42-pod",
			"  worker      worker-c on node-c",
			`  payload     {"command":"go vet ./..."}`,
			MatchRegexp(`^  finished    `+now.Add(-100*time.Second).Format(time.RFC3339)+` \(1m4\ds ago\)$`),
			"  result      failed · exit 1",
			"  stderr      x.go:3: unreachable code",
			"  error       exit status 1",
		))
	})

	t.Run("headless refreshes follow a task to its end; keys move the selection and quit", func(t *testing.T) {
		g := NewWithT(t)
		g.SetDefaultEventuallyTimeout(20 * time.Second)
		dash := start(t, bin, kubeconfig, "--headless", "--interval=200ms", "--task=build-2")
		strip := start(t, bin, kubeconfig, "--headless", "--interval=200ms", "--view=strip")

		g.Eventually(dash.lastFrame).Should(And(
			ContainSubstring("\n▸ build-2  bash  execute  reviewer-42  Running  worker-a@node-a  "),
			ContainSubstring("\n  state       Running · attempt 1 · for "),
			ContainSubstring("\n  identity    tenant acme-corp · principal user:42\n"),
			ContainSubstring("\n  worker      worker-a on node-a\n"),
			ContainSubstring("\n  result      —\n"),
		))
		g.Eventually(strip.lines).Should(ContainElement("a3s ●3/∞ ○1 ✓6 ✗1 last: build-2 (bash)"))

		// build-2 succeeds; the operator counts it.
		task := &agentlanev1alpha1.ExternalTask{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "build-2"}, task)).To(Succeed())
		finish(&task.Status, &metav1.Time{Time: time.Now()}, true, `{"stdout":"built ok\n","stderr":""}`, "")
		g.Expect(c.Status().Update(ctx, task)).To(Succeed())
		q := &agentlanev1alpha1.LaneQueue{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "a3s"}, q)).To(Succeed())
		q.Status.Active, q.Status.Lanes[1].Active, q.Status.Lanes[1].Completed = 2, 1, 2
		g.Expect(c.Status().Update(ctx, q)).To(Succeed())

		g.Eventually(dash.lastFrame).Should(And(
			MatchRegexp(`\n── IN-FLIGHT \(1 \+ 1 internal\) ─+\n  build-1 .*\n── QUEUED`),
			ContainSubstring("\n▸ ✓ build-2  bash  execute  worker-a@node-a  "),
			ContainSubstring("\n  state       Succeeded · attempt 1\n"),
			ContainSubstring("\n  result      ok · exit 0\n  stdout      built ok\n"),
		))
		g.Eventually(strip.lastLine).Should(Equal("a3s ●2/∞ ○1 ✓7 ✗1 last: build-1 (bash)"))
		// A strip line is written only when it changed: the first, perhaps
		// one between the two status writes, and the last.
		lines := strip.lines()
		g.Expect(lines[0]).To(Equal("a3s ●3/∞ ○1 ✓6 ✗1 last: build-2 (bash)"))
		g.Expect(len(lines)).To(BeNumerically("<=", 3), "lines: %q", lines)

		// RECENT lists build-2 (just finished), then test-1: n moves there.
		dash.send(t, "n")
		g.Eventually(dash.lastFrame).Should(And(
			ContainSubstring("\n▸ ✓ test-1  "),
			ContainSubstring("\n── TASK test-1 "),
			ContainSubstring("\n  stdout      PASS\n"),
		))
		// p moves back; a task name selects that task.
		dash.send(t, "p")
		g.Eventually(dash.lastFrame).Should(ContainSubstring("\n── TASK build-2 "))
		dash.send(t, "lint-1")
		g.Eventually(dash.lastFrame).Should(And(
			ContainSubstring("\n▸ lint-1 "),
			ContainSubstring("\n  state       Queued · waiting "),
		))

		dash.send(t, "q")
		g.Eventually(dash.exited).Should(Receive(BeNil()), "q exits with status 0")
		g.Expect(strip.cmd.Process.Signal(syscall.SIGINT)).To(Succeed())
		g.Eventually(strip.exited).Should(Receive(BeNil()), "Ctrl-C exits with status 0")
		g.Expect(dash.output()).NotTo(ContainSubstring("\x1b"), "headless: no ANSI escapes")
	})

	t.Run("on a terminal: the alternate screen, frames that fit, keys without Enter, the terminal restored", func(t *testing.T) {
		onTerminal(t, bin, kubeconfig)
	})

	t.Run("kubectl runs it as the plugin kubectl-lanetop, with kubectl's flags", func(t *testing.T) {
		g := NewWithT(t)
		kubectl := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl")
		if _, err := os.Stat(kubectl); err != nil {
			t.Skipf("no kubectl next to the envtest control plane: %v", err)
		}
		plugins := t.TempDir()
		g.Expect(os.Symlink(bin, filepath.Join(plugins, "kubectl-lanetop"))).To(Succeed())
		cmd := exec.CommandContext(ctx, kubectl, "lanetop", "--kubeconfig", kubeconfig, "-n", "default", "--view=strip", "--once")
		cmd.Env = append(os.Environ(), "PATH="+plugins+string(os.PathListSeparator)+os.Getenv("PATH"))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		g.Expect(err).NotTo(HaveOccurred(), stderr.String())
		g.Expect(string(out)).To(MatchRegexp(`^a3s ●\d/∞ ○1 ✓\d ✗1( last: \S+ \(bash\))?\n$`))

		cmd = exec.CommandContext(ctx, kubectl, "lanetop", "--help")
		cmd.Env = append(os.Environ(), "PATH="+plugins+string(os.PathListSeparator)+os.Getenv("PATH"))
		help, _ := cmd.CombinedOutput()
		g.Expect(string(help)).To(HavePrefix("Usage of kubectl-lanetop:"))
	})

	t.Run("--once fails when the cluster cannot be read", func(t *testing.T) {
		g := NewWithT(t)
		cmd := exec.CommandContext(ctx, bin, "--once", "--kubeconfig="+filepath.Join(t.TempDir(), "missing"))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		g.Expect(err).To(BeAssignableToTypeOf(exit))
		g.Expect(err.(*exec.ExitError).ExitCode()).To(Equal(1))
		g.Expect(stderr.String()).To(HavePrefix("lanetop: load a kubeconfig: "))
	})
}

func laneQueue(now time.Time) *agentlanev1alpha1.LaneQueue {
	q := &agentlanev1alpha1.LaneQueue{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "a3s"},
		Spec: agentlanev1alpha1.LaneQueueSpec{Lanes: []agentlanev1alpha1.Lane{
			{Name: "query", Priority: 1, MaxConcurrencyPerSession: 4},
			{Name: "execute", Priority: 2, HandlerMode: agentlanev1alpha1.HandlerModeExternal, MaxConcurrency: 4, MaxConcurrencyPerSession: 2},
		}},
	}
	q.Status = agentlanev1alpha1.LaneQueueStatus{
		Pending: 1, Active: 3, Sessions: 1,
		Lanes: []agentlanev1alpha1.LaneStatus{
			{Name: "query", Active: 1, Completed: 5},
			{Name: "execute", Pending: 1, Active: 2, Completed: 1, Failed: 1},
		},
		Conditions: []metav1.Condition{{
			Type: agentlanev1alpha1.LaneQueueReadyCondition, Status: metav1.ConditionTrue,
			Reason: agentlanev1alpha1.LaneQueueSchedulingReason, LastTransitionTime: metav1.NewTime(now),
		}},
	}
	return q
}

func agentSession() *agentlanev1alpha1.AgentSession {
	s := &agentlanev1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "reviewer-42"},
		Spec: agentlanev1alpha1.AgentSessionSpec{
			QueueRef: agentlanev1alpha1.LaneQueueReference{Name: "a3s"},
			Identity: &agentlanev1alpha1.Identity{TenantID: "acme-corp", Principal: "user:42"},
		},
	}
	s.Status.Phase, s.Status.NodeName, s.Status.PodName = agentlanev1alpha1.SessionActive, "node-a", "reviewer-42-pod"
	s.Status.Queue = agentlanev1alpha1.SessionQueueStatus{Pending: 1, Active: 3, Completed: 6, Failed: 1}
	return s
}

// externalTask is a bash task of reviewer-42 in lane execute, with the
// status status sets.
func externalTask(name, command string, status func(*agentlanev1alpha1.ExternalTaskStatus)) *agentlanev1alpha1.ExternalTask {
	t := &agentlanev1alpha1.ExternalTask{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: agentlanev1alpha1.ExternalTaskSpec{
			SessionRef:  &agentlanev1alpha1.AgentSessionReference{Name: "reviewer-42"},
			QueueRef:    &agentlanev1alpha1.LaneQueueReference{Name: "a3s"},
			Lane:        "execute",
			CommandType: "bash",
			Payload:     &runtime.RawExtension{Raw: []byte(`{"command":"` + command + `"}`)},
			Identity:    &agentlanev1alpha1.Identity{TenantID: "acme-corp", Principal: "user:42"},
		},
	}
	status(&t.Status)
	return t
}

// running sets the status a worker leaves when it starts an attempt.
func running(s *agentlanev1alpha1.ExternalTaskStatus, worker, node string, startedAt *metav1.Time) {
	s.Phase, s.Lane, s.Attempt, s.Worker, s.NodeName = agentlanev1alpha1.ExternalTaskRunning, "execute", 1, worker, node
	dispatched := metav1.NewTime(startedAt.Add(-time.Second))
	s.QueuedAt, s.DispatchedAt, s.StartedAt = &dispatched, &dispatched, startedAt
}

// finish ends the current attempt with its result.
func finish(s *agentlanev1alpha1.ExternalTaskStatus, at *metav1.Time, success bool, result, errText string) {
	exitCode := int32(0)
	s.Phase = agentlanev1alpha1.ExternalTaskSucceeded
	if !success {
		exitCode = 1
		s.Phase = agentlanev1alpha1.ExternalTaskFailed
	}
	s.FinishedAt = at
	s.Result = &agentlanev1alpha1.TaskResult{
		Success: success, Error: errText, ExitCode: &exitCode, Result: &runtime.RawExtension{Raw: []byte(result)},
	}
}

// put creates obj, then writes its status through the status subresource,
// as the operator and workers would.
func put(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	withStatus := obj.DeepCopyObject().(client.Object)
	if err := c.Create(t.Context(), obj); err != nil {
		t.Fatalf("create %s: %v", obj.GetName(), err)
	}
	withStatus.SetResourceVersion(obj.GetResourceVersion())
	if err := c.Status().Update(t.Context(), withStatus); err != nil {
		t.Fatalf("write the status of %s: %v", obj.GetName(), err)
	}
}

func buildLanetop(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "lanetop")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// viewerKubeconfig binds the generated queue-viewer ClusterRole to
// viewerUser in every namespace and returns the path of a kubeconfig for it.
func viewerKubeconfig(t *testing.T, env *envtest.Environment, c client.Client) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "queue_viewer_role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(data, role); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(t.Context(), role); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "lanetop-viewer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: viewerUser}},
	}
	if err := c.Create(t.Context(), binding); err != nil {
		t.Fatal(err)
	}
	user, err := env.ControlPlane.AddUser(envtest.User{Name: viewerUser}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// runOnce runs lanetop --once --headless and returns what it printed.
func runOnce(t *testing.T, bin, kubeconfig string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig=" + kubeconfig, "--once", "--headless"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("lanetop %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// process is a running lanetop.
type process struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *testenv.LockedBuffer
	exited chan error
}

func start(t *testing.T, bin, kubeconfig string, args ...string) *process {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--kubeconfig=" + kubeconfig}, args...)...)
	p := &process{cmd: cmd, out: &testenv.LockedBuffer{}, exited: make(chan error, 1)}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.stdin = stdin
	cmd.Stdout = p.out
	var stderr testenv.LockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("lanetop %s wrote to stderr:\n%s\nlast frame:\n%s", strings.Join(args, " "), stderr.String(), p.lastFrame())
		}
	})
	return p
}

// send writes one line to the process's stdin.
func (p *process) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		t.Fatal(err)
	}
}

func (p *process) output() string {
	return p.out.String()
}

// lastFrame is the last complete dashboard: frames are separated by a blank
// line, and the one being written may be incomplete.
func (p *process) lastFrame() string {
	frames := strings.Split(p.out.String(), "\n\n")
	if len(frames) < 2 {
		return ""
	}
	return frames[len(frames)-2] + "\n"
}

// lines are the complete lines written so far.
func (p *process) lines() []string {
	out := p.out.String()
	end := strings.LastIndex(out, "\n")
	if end < 0 {
		return nil
	}
	return strings.Split(out[:end], "\n")
}

// lastLine is the last complete line written.
func (p *process) lastLine() string {
	lines := p.lines()
	if len(lines) == 0 {
		return ""
	}
	return lines[len(lines)-1]
}
