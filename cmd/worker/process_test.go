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
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/executor"
	"github.com/agentlane/agentlane/internal/worker"
)

// workerUser is the identity the worker processes use. It is not an
// administrator: it holds only the generated worker-role, so the test also
// proves that the RBAC markers grant enough.
const workerUser = "agentlane-worker"

// TestWorkerProcess runs the real worker binary, as separate processes,
// against an API server.
func TestWorkerProcess(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run `make test`, or set it to $(hack/envtest-assets.sh)")
	}
	g := NewWithT(t)
	bin := buildWorker(t)

	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop the control plane: %v", err)
		}
	})
	ctx := t.Context()
	c, err := client.New(cfg, client.Options{Scheme: worker.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	grantWorkerRole(t, c)
	scraper, stranger := metricsTokens(t, c)
	user, err := env.ControlPlane.AddUser(envtest.User{Name: workerUser}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	kubeconfig, err := user.KubeConfig()
	g.Expect(err).NotTo(HaveOccurred())
	kubeconfigPath := filepath.Join(t.TempDir(), "kubeconfig")
	g.Expect(os.WriteFile(kubeconfigPath, kubeconfig, 0o600)).To(Succeed())

	t.Run("pool worker runs a dispatched task and exits 0 on SIGTERM", func(t *testing.T) {
		g := NewWithT(t)
		g.SetDefaultEventuallyTimeout(15 * time.Second)
		metricsAddr := freeAddress(t)
		p := startProcess(t, bin, kubeconfigPath, "--name=proc-w", "--node-name=node-p", "--namespace=default",
			"--heartbeat-interval=200ms", "--grace-period=1s", "--labels=zone=z1", "--zap-log-level=debug",
			"--metrics-bind-address="+metricsAddr, "--metrics-secure")

		lease := &coordinationv1.Lease{}
		leaseKey := client.ObjectKey{Namespace: "default", Name: "agentlane-worker-proc-w"}
		g.Eventually(func(g Gomega) {
			g.Expect(c.Get(ctx, leaseKey, lease)).To(Succeed())
			g.Expect(lease.Labels).To(HaveKeyWithValue("zone", "z1"))
			g.Expect(lease.Labels).To(HaveKeyWithValue("agentlane.io/node", "node-p"))
		}).Should(Succeed())

		hello := dispatched(t, c, "hello", "echo hello from a process", "proc-w", "")
		g.Eventually(func(g Gomega) {
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(hello), hello)).To(Succeed())
			g.Expect(hello.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskSucceeded))
		}).Should(Succeed())
		g.Expect(stdout(t, hello)).To(Equal("hello from a process\n"))
		metricsURL := "https://" + metricsAddr + "/metrics"
		g.Eventually(func() (string, error) { return get(metricsURL, scraper) }).
			Should(ContainSubstring(`agentlane_worker_tasks_finished_total{outcome="succeeded"} 1`))
		// Every outcome and write is exported from the start, at 0 until it
		// happens; the capacity and the build are exported too.
		body, err := get(metricsURL, scraper)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(body).To(And(
			ContainSubstring(`agentlane_worker_tasks_finished_total{outcome="handed_back"} 0`),
			ContainSubstring(`agentlane_worker_tasks_finished_total{outcome="lost"} 0`),
			ContainSubstring(`agentlane_worker_fenced_writes_rejected_total{write="claim"} 0`),
			ContainSubstring(`agentlane_worker_capacity 4`),
			MatchRegexp(`agentlane_build_info\{goversion="go[^"]+",revision="[^"]+",version="[^"]+"\} 1`)))
		g.Expect(get(metricsURL, "")).To(ContainSubstring("Unauthorized"), "metrics without a token")
		g.Expect(get(metricsURL, stranger)).To(ContainSubstring("Authorization denied"), "metrics for an account without metrics-reader")

		long := dispatched(t, c, "long", "sleep 30", "proc-w", "")
		g.Eventually(func(g Gomega) {
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(long), long)).To(Succeed())
			g.Expect(long.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskRunning))
		}).Should(Succeed())

		g.Expect(p.cmd.Process.Signal(syscall.SIGTERM)).To(Succeed())
		g.Eventually(p.exited).Should(Receive(BeNil()), "exit status 0")
		g.Expect(apierrors.IsNotFound(c.Get(ctx, leaseKey, lease))).To(BeTrue(), "Lease deleted")
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(long), long)).To(Succeed())
		g.Expect(long.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskRunning), "stopped after the grace period, reported for the retry policy")
		g.Expect(long.Status.Result).NotTo(BeNil())
		g.Expect(long.Status.Result.Error).To(HavePrefix("interrupted: proc-w stopped the command at shutdown"))
		g.Expect(long.Status.StartedAt).NotTo(BeNil(), "the attempt ran")
	})

	t.Run("a worker with a runner lets a running task finish within its grace period on SIGTERM", func(t *testing.T) {
		g := NewWithT(t)
		g.SetDefaultEventuallyTimeout(20 * time.Second)
		dir, err := os.MkdirTemp("", "agentlane-drain-") // short: a socket path is at most 107 bytes
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
		socket := filepath.Join(dir, "runner.sock")
		startProcess(t, bin, kubeconfigPath, "runner", "--socket="+socket, "--task-root="+filepath.Join(dir, "tasks"))
		p := startProcess(t, bin, kubeconfigPath, "--name=drain-w", "--namespace=default", "--heartbeat-interval=200ms",
			"--grace-period=20s", "--runner-socket="+socket)
		g.Eventually(func(g Gomega) {
			lease := &coordinationv1.Lease{}
			g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "agentlane-worker-drain-w"}, lease)).To(Succeed())
		}).Should(Succeed())
		task := dispatched(t, c, "drain-task", "sleep 2; echo finished", "drain-w", "")
		g.Eventually(func(g Gomega) {
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(task), task)).To(Succeed())
			g.Expect(task.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskRunning))
		}).Should(Succeed())

		// The runner's connection outlives the signal: the task finishes.
		g.Expect(p.cmd.Process.Signal(syscall.SIGTERM)).To(Succeed())
		g.Eventually(p.exited).Should(Receive(BeNil()), "exit status 0")
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(task), task)).To(Succeed())
		g.Expect(task.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskSucceeded), "result: %+v", task.Status.Result)
		g.Expect(stdout(t, task)).To(Equal("finished\n"))
	})

	t.Run("a worker with --direct-server holds the Direct stream beside the pool", func(t *testing.T) {
		testDirectProcess(t, c, bin, kubeconfigPath)
	})

	t.Run("tasks run in-process see nothing of the worker", func(t *testing.T) {
		testIsolation(t, c, bin, kubeconfigPath, false)
	})

	t.Run("tasks run in a runner process see nothing of the worker", func(t *testing.T) {
		testIsolation(t, c, bin, kubeconfigPath, true)
	})

	t.Run("one-shot worker runs its task and exits 0", func(t *testing.T) {
		g := NewWithT(t)
		task := dispatched(t, c, "job-task", "echo from a Job", "", "job-7")
		p := startProcess(t, bin, kubeconfigPath, "--task=job-task", "--name=job-7-pod", "--namespace=default", "--job-name=job-7")
		g.Eventually(p.exited, 15*time.Second).Should(Receive(BeNil()), "exit status 0")
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(task), task)).To(Succeed())
		g.Expect(task.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskSucceeded))
		g.Expect(task.Status.Worker).To(Equal("job-7-pod"))
		g.Expect(stdout(t, task)).To(Equal("from a Job\n"))
	})

	t.Run("one-shot worker exits non-zero when it cannot run its task", func(t *testing.T) {
		g := NewWithT(t)
		p := startProcess(t, bin, kubeconfigPath, "--task=missing", "--name=job-8-pod", "--namespace=default", "--wait-timeout=1s")
		var err error
		g.Eventually(p.exited, 15*time.Second).Should(Receive(&err))
		var exit *exec.ExitError
		g.Expect(errors.As(err, &exit)).To(BeTrue(), "exit status: %v", err)
		g.Expect(exit.ExitCode()).To(Equal(1))
	})
}

// freeAddress returns a local address nothing listens on.
func freeAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// get returns the body of a GET of url.
// get GETs url with token as the bearer token, when not empty. The
// worker's metrics certificate is self-signed: the tests check who may
// read, not the certificate.
func get(url, token string) (string, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	hc := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}}} //nolint:gosec // see above
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

// buildWorker builds cmd/worker into a temporary directory.
func buildWorker(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "worker")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// grantWorkerRole creates the generated worker-role and binds it to
// workerUser in the default namespace, as a deployment would.
func grantWorkerRole(t *testing.T, c client.Client) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "worker", "role.yaml"))
	if err != nil {
		t.Fatalf("read the worker role (run `make manifests`): %v", err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(data, role); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "agentlane-worker"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: workerUser}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := c.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
}

// process is a worker process started by a test.
type process struct {
	cmd    *exec.Cmd
	exited chan error
}

// startProcess starts the worker binary with args; its output goes to the
// test log when the test fails. A process still running when the test ends
// is killed.
func startProcess(t *testing.T, bin, kubeconfig string, args ...string) *process {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "worker.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, exited: make(chan error, 1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.exited <- cmd.Wait()
		logFile.Close()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			out, _ := os.ReadFile(logPath)
			t.Logf("worker %v output:\n%s", args, out)
		}
	})
	return p
}

// dispatched creates a bash task in the default namespace and dispatches
// attempt 1 either to a worker or to a Job, as the manager does.
func dispatched(t *testing.T, c client.Client, name, command, workerName, job string) *agentlanev1alpha1.ExternalTask {
	t.Helper()
	ctx := context.WithoutCancel(t.Context())
	payload, _ := json.Marshal(executor.ProcessPayload{Command: command})
	task := &agentlanev1alpha1.ExternalTask{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: agentlanev1alpha1.ExternalTaskSpec{
			QueueRef:    &agentlanev1alpha1.LaneQueueReference{Name: "q1"},
			CommandType: "bash",
			Payload:     &runtime.RawExtension{Raw: payload},
		},
	}
	if err := c.Create(ctx, task); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	task.Status = agentlanev1alpha1.ExternalTaskStatus{
		Phase: agentlanev1alpha1.ExternalTaskDispatched, Lane: "tools", Attempt: 1,
		Worker: workerName, JobName: job, QueuedAt: &now, DispatchedAt: &now,
	}
	if err := c.Status().Update(ctx, task); err != nil {
		t.Fatal(err)
	}
	return task
}

// stdout returns the stdout the worker reported for task.
func stdout(t *testing.T, task *agentlanev1alpha1.ExternalTask) string {
	t.Helper()
	if task.Status.Result == nil || task.Status.Result.Result == nil {
		t.Fatalf("task %s has no result output: %+v", task.Name, task.Status.Result)
	}
	var out executor.Output
	if err := json.Unmarshal(task.Status.Result.Result.Raw, &out); err != nil {
		t.Fatal(err)
	}
	return out.Stdout
}
