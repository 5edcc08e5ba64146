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

// Package chaos runs the manager and a pool of workers as separate
// operating system processes against a real kube-apiserver and etcd, puts a
// few hundred ExternalTasks in flight, and breaks things while they run:
// SIGKILL of half the workers (with and without restarting them), SIGKILL
// of the leading manager and of a single manager, an outage of the API
// server, and SIGTERM of workers with and without a grace period. After
// each scenario it audits the cluster's tasks and lane counters against the
// workers' own record of every command they actually started: nothing lost
// or stuck, no completion counted twice, no attempt counted that never ran,
// and every double execution recorded in the task's status.
//
// The scenarios draw every random choice (which tasks fail, how long each
// runs, which workers die, when) from one seed: CHAOS_SEED (printed at the
// start; a new one each run when unset) replays a run, and CHAOS_TASKS sets
// the number of tasks per scenario.
package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/agentlane/agentlane/internal/testenv"
)

// The identities the processes run as, each holding only the role generated
// for it (and the manager the leader-election Role in leaderNamespace).
const (
	managerUser     = "agentlane-manager"
	workerUser      = "agentlane-worker"
	leaderNamespace = "agentlane-system"
)

// defaultTasks is the number of tasks of each scenario when CHAOS_TASKS is
// not set: enough that many are in flight whenever something breaks, few
// enough for the whole suite to finish in a few minutes on two cores.
const defaultTasks = 200

var (
	testEnv   *envtest.Environment
	cfg       *rest.Config
	k8sClient client.Client
	suiteCtx  = context.Background()
	scheme    *runtime.Scheme

	// workDir holds the binaries, kubeconfigs, process logs and run records.
	workDir                             string
	managerBin, workerBin               string
	managerKubeconfig, workerKubeconfig string

	// seed and taskCount come from CHAOS_SEED and CHAOS_TASKS.
	seed      int64
	taskCount int
)

func TestChaos(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "agentlane chaos suite")
}

var _ = BeforeSuite(func() {
	Expect(os.Getenv("KUBEBUILDER_ASSETS")).NotTo(BeEmpty(),
		"KUBEBUILDER_ASSETS is not set: run `make test-chaos`, or set it to $(hack/envtest-assets.sh)")
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	seed, taskCount = settings()
	fmt.Fprintf(os.Stderr, "chaos suite: CHAOS_SEED=%d CHAOS_TASKS=%d\n", seed, taskCount)
	AddReportEntry("CHAOS_SEED", seed, ReportEntryVisibilityAlways)
	scheme = testenv.Scheme()

	var err error
	workDir, err = os.MkdirTemp("", "agentlane-chaos-")
	Expect(err).NotTo(HaveOccurred())
	By("building the manager and worker binaries")
	managerBin = goBuild("./cmd/manager", "manager")
	workerBin = goBuild("./cmd/worker", "worker")

	By("starting the control plane, with certificates kept for API server restarts")
	testEnv, cfg, k8sClient, err = testenv.Start(scheme, restartableAPIServer(filepath.Join(workDir, "apiserver")))
	Expect(err).NotTo(HaveOccurred())

	managerKubeconfig = userKubeconfig(managerUser, filepath.Join("..", "..", "config", "rbac", "role.yaml"))
	workerKubeconfig = userKubeconfig(workerUser, filepath.Join("..", "..", "config", "rbac", "worker", "role.yaml"))
	grantLeaderElection(managerUser, filepath.Join("..", "..", "config", "rbac", "leader_election_role.yaml"))
})

var _ = AfterSuite(func() {
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
	if specFailed {
		fmt.Fprintf(os.Stderr, "chaos suite: process logs and run records kept in %s\n", workDir)
		return
	}
	Expect(os.RemoveAll(workDir)).To(Succeed())
})

// specFailed keeps workDir, with every process log and run record, for a
// look after a failed run.
var specFailed bool

var _ = ReportAfterEach(func(r SpecReport) {
	if r.Failed() {
		specFailed = true
	}
})

var _ = ReportAfterSuite("chaos table", func(r Report) {
	printTable(os.Stdout, collectedRows())
})

// settings reads CHAOS_SEED and CHAOS_TASKS; without a seed it picks one
// from the clock.
func settings() (int64, int) {
	GinkgoHelper()
	s := time.Now().UnixNano()
	if v := os.Getenv("CHAOS_SEED"); v != "" {
		var err error
		s, err = strconv.ParseInt(v, 10, 64)
		Expect(err).NotTo(HaveOccurred(), "CHAOS_SEED must be an integer")
	}
	n := defaultTasks
	if v := os.Getenv("CHAOS_TASKS"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		Expect(err).NotTo(HaveOccurred(), "CHAOS_TASKS must be an integer")
		Expect(n).To(And(BeNumerically(">=", 20), BeNumerically("<=", 10000)), "CHAOS_TASKS must be from 20 to 10000 (a session keeps at most 10000 finished tasks)")
	}
	return s, n
}

// restartableAPIServer gives the API server a certificate directory of our
// own: envtest then keeps its serving and client CAs when it is stopped, so
// that it can be started again on the same etcd and port and every
// kubeconfig still works.
func restartableAPIServer(certDir string) testenv.Option {
	return func(env *envtest.Environment) {
		Expect(os.MkdirAll(certDir, 0o700)).To(Succeed())
		env.ControlPlane.GetAPIServer().CertDir = certDir
	}
}

// goBuild builds the main package pkg (relative to the repository root)
// into workDir.
func goBuild(pkg, name string) string {
	GinkgoHelper()
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

// grantLeaderElection creates the leader-election Role of roleFile in
// leaderNamespace and binds user to it.
func grantLeaderElection(user, roleFile string) {
	GinkgoHelper()
	Expect(k8sClient.Create(suiteCtx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: leaderNamespace}})).To(Succeed())
	role := &rbacv1.Role{}
	readYAML(roleFile, role)
	role.Namespace = leaderNamespace
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: leaderNamespace, Name: user + "-leader-election"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	Expect(k8sClient.Create(suiteCtx, role)).To(Succeed())
	Expect(k8sClient.Create(suiteCtx, binding)).To(Succeed())
}

func readYAML(path string, into any) {
	GinkgoHelper()
	data, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred(), "read %s (run `make manifests`)", path)
	Expect(yaml.Unmarshal(data, into)).To(Succeed())
}
