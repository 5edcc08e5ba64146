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

// Package e2e runs the manager and several workers as separate operating
// system processes (the built cmd/manager and cmd/worker binaries, each
// worker with its own identity and node name) against a real kube-apiserver
// and etcd, and checks what the cluster sees: lane order and caps across
// workers, exactly-once completion, retries after a worker dies, dead
// letters, fencing of late completions, a manager restart, a leader
// failover between two managers (failover_test.go), and Job-target lanes.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/testenv"
)

// The identities the processes run as. Neither is an administrator: each
// holds only the role generated from the RBAC markers, so the suite also
// proves that those roles grant enough.
const (
	managerUser = "agentlane-manager"
	workerUser  = "agentlane-worker"
)

var (
	testEnv   *envtest.Environment
	cfg       *rest.Config
	k8sClient client.Client
	suiteCtx  context.Context
	scheme    = runtime.NewScheme()

	// workDir holds the binaries, kubeconfigs and process logs.
	workDir string
	// managerBin and workerBin are the built binaries.
	managerBin, workerBin string
	// managerKubeconfig and workerKubeconfig authenticate as managerUser
	// and workerUser.
	managerKubeconfig, workerKubeconfig string
	// manager is the running manager process.
	manager *process
	// sessionAPI is the base URL of the manager's Session API.
	sessionAPI string
	// sessionAPIAddr is the address the Session API listens on; a restarted
	// manager listens there again.
	sessionAPIAddr string
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "agentlane multi-process suite")
}

var _ = BeforeSuite(func() {
	Expect(os.Getenv("KUBEBUILDER_ASSETS")).NotTo(BeEmpty(),
		"KUBEBUILDER_ASSETS is not set: run `make test`, or set it to $(hack/envtest-assets.sh)")
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	suiteCtx = context.Background()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(agentlanev1alpha1.AddToScheme(scheme))

	workDir = GinkgoT().TempDir()
	By("building the manager and worker binaries")
	managerBin = goBuild("./cmd/manager", "manager")
	workerBin = goBuild("./cmd/worker", "worker")

	By("starting the control plane")
	var err error
	testEnv, cfg, k8sClient, err = testenv.Start(scheme)
	Expect(err).NotTo(HaveOccurred())

	managerKubeconfig = userKubeconfig(managerUser, filepath.Join("..", "..", "config", "rbac", "role.yaml"))
	workerKubeconfig = userKubeconfig(workerUser, filepath.Join("..", "..", "config", "rbac", "worker", "role.yaml"))

	sessionAPIAddr = freeAddress()
	sessionAPI = "http://" + sessionAPIAddr
	manager = startManager()
})

var _ = AfterSuite(func() {
	if manager != nil {
		manager.stop()
	}
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

// goBuild builds the main package pkg (relative to the repository root)
// into workDir.
func goBuild(pkg, name string) string {
	out := filepath.Join(workDir, name)
	Expect(testenv.GoBuild(filepath.Join("..", ".."), pkg, out)).To(Succeed())
	return out
}

// userKubeconfig creates a user bound cluster-wide to the ClusterRole in
// roleFile and returns the path of a kubeconfig that authenticates as it.
func userKubeconfig(user, roleFile string) string {
	GinkgoHelper()
	path, err := testenv.User(suiteCtx, testEnv, k8sClient, workDir, user, roleFile, "")
	Expect(err).NotTo(HaveOccurred())
	return path
}

// process is a manager or worker process started by the suite.
type process struct {
	*testenv.Process
	name string
}

// startProcess starts bin with args, authenticated by kubeconfig; its
// output goes to a log file, shown when a spec fails.
func startProcess(name, bin, kubeconfig string, args ...string) *process {
	GinkgoHelper()
	logPath := filepath.Join(workDir, fmt.Sprintf("%s-%d.log", name, time.Now().UnixNano()))
	p, err := testenv.StartProcess(logPath, bin, kubeconfig, args...)
	Expect(err).NotTo(HaveOccurred())
	return &process{Process: p, name: name}
}

// startManager starts the manager process.
func startManager() *process {
	GinkgoHelper()
	return startProcess("manager", managerBin, managerKubeconfig,
		"--metrics-bind-address=0", "--health-probe-bind-address=0", "--session-api-bind-address="+sessionAPIAddr,
		// The processes talk over loopback; internal/sessionserver and
		// test/cluster cover the API's TLS.
		"--session-api-insecure-http")
}

// exited tells whether the process has exited.
func (p *process) exited() bool { return p.Exited() }

// signal sends sig to the process.
func (p *process) signal(sig syscall.Signal) {
	GinkgoHelper()
	Expect(p.Cmd.Process.Signal(sig)).To(Succeed())
}

// kill ends the process at once, as a crashed pod or a lost node would.
func (p *process) kill() { p.Kill() }

// stop sends SIGTERM and waits, killing the process after 20s.
func (p *process) stop() { p.Stop(20 * time.Second) }

// logTail returns the end of the process log.
func (p *process) logTail() string { return p.LogTail(8000) }

// Worker defaults: quick heartbeats (a Lease lapses after 1s) keep the
// specs that lose a worker fast.
const (
	workerHeartbeat = "300ms"
	workerGrace     = "2s"
)

// workerProc is a worker process on its own simulated node.
type workerProc struct {
	*process
	name, node  string
	metricsAddr string
}

// startWorker starts a worker process serving namespace ns, with extra
// flags; the spec stops it when it ends and shows its log if it failed.
func startWorker(ns, name, node string, extra ...string) *workerProc {
	GinkgoHelper()
	addr := freeAddress()
	args := append([]string{
		"--name=" + name, "--node-name=" + node, "--namespace=" + ns,
		"--heartbeat-interval=" + workerHeartbeat, "--grace-period=" + workerGrace,
		"--metrics-bind-address=" + addr, "--metrics-secure=false",
	}, extra...)
	w := &workerProc{process: startProcess(name, workerBin, workerKubeconfig, args...), name: name, node: node, metricsAddr: addr}
	DeferCleanup(func() {
		w.stop()
		if CurrentSpecReport().Failed() {
			GinkgoWriter.Printf("---- log of %s ----\n%s\n", name, w.logTail())
		}
	})
	return w
}

// metrics returns the worker's Prometheus metrics text.
func (w *workerProc) metrics() (string, error) {
	resp, err := http.Get("http://" + w.metricsAddr + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, err = io.Copy(&buf, resp.Body)
	return buf.String(), err
}

// freeAddress returns a loopback address with a free port.
func freeAddress() string {
	GinkgoHelper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer l.Close()
	return l.Addr().String()
}

// showManagerLogOnFailure prints the manager log when the current spec
// fails.
func showManagerLogOnFailure() {
	DeferCleanup(func() {
		if CurrentSpecReport().Failed() && manager != nil {
			GinkgoWriter.Printf("---- log of the manager ----\n%s\n", manager.logTail())
		}
	})
}
