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

// Package cluster is agentlane's end-to-end suite on a real multi-node
// cluster: real kubelets, containerd and runc, the real scheduler,
// controller-manager, PodDisruptionBudgets, Jobs and the Eviction API.
// `make test-e2e` brings the cluster up (hack/cluster.sh), loads the images
// of `make images`, runs this suite and tears the cluster down. The suite
// installs agentlane the way a user does (charts/agentlane rendered with the
// values beside this file, two manager replicas of which one leads, and
// applied with kubectl) and
// then drives it only from outside: kubectl, the Kubernetes API and the
// Session API. It also renders config/default (in the overlay beside this
// file, the same changes as the values) and applies it as a server-side dry
// run, so the kustomize install is checked against real admission too.
//
// Without AGENTLANE_E2E_KUBECONFIG the suite is skipped, so `go test ./...`
// passes on a machine with no cluster.
package cluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentlane/agentlane/internal/testenv"
)

const (
	// systemNamespace is where config/default installs agentlane.
	systemNamespace = "agentlane-system"
	// ns is where the suite's queues, sessions and tasks live: the
	// namespace the shipped worker Deployment serves.
	ns = "default"
	// sessionAPIPort is the manager's Session API port.
	sessionAPIPort = 8443
	// sessionAPIServiceIP is the Session API Service's ClusterIP, which the
	// values (and the overlay) pin: runtime pods reach the API there and
	// verify its certificate for that address.
	sessionAPIServiceIP = "10.96.100.100"
	// metricsPort is the manager's metrics port.
	metricsPort = 8080
	// workerReplicas is the worker Deployment's size in config/worker.
	workerReplicas = 3
	// managerReplicas is the manager Deployment's size in values.yaml: one
	// leader and one standby.
	managerReplicas = 2
	// leaderLease is the manager's leader-election Lease in systemNamespace.
	leaderLease = "manager.agentlane.io"
)

var (
	ctx        context.Context
	cancel     context.CancelFunc
	kubeconfig string
	cfg        *rest.Config
	k8sClient  client.Client
	clientset  *kubernetes.Clientset
	// kubectlBin, kustomizeBin and helmBin are the tools the suite runs, as
	// a user would.
	kubectlBin, kustomizeBin, helmBin string
	// artifacts is where the suite writes what it saw (pod listings, logs).
	artifacts string
	// tenantToken authenticates as the tenant service account "agent", bound
	// to agentlane's session-user ClusterRole in ns; it is for the audience
	// agentlane, as runtime pods' tokens are.
	tenantToken string
)

func TestCluster(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "agentlane on a real cluster")
}

var _ = BeforeSuite(func() {
	kubeconfig = os.Getenv("AGENTLANE_E2E_KUBECONFIG")
	if kubeconfig == "" {
		Skip("AGENTLANE_E2E_KUBECONFIG is not set: run `make test-e2e` (Linux, root) to bring up a cluster and run this suite")
	}
	ctx, cancel = context.WithCancel(context.Background())
	DeferCleanup(func() { cancel() })

	var err error
	cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	cfg.QPS, cfg.Burst = 50, 100
	k8sClient, err = client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	clientset, err = kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	kubectlBin = envOr("KUBECTL", "kubectl")
	kustomizeBin = envOr("KUSTOMIZE", "kustomize")
	helmBin = envOr("HELM", "helm")
	artifacts = envOr("AGENTLANE_E2E_ARTIFACTS", GinkgoT().TempDir())
	Expect(os.MkdirAll(artifacts, 0o755)).To(Succeed())

	By("installing agentlane from charts/agentlane (helm template, the values in test/cluster/values.yaml) with kubectl apply --server-side")
	began := time.Now()
	installChart()
	waitForManagers()
	waitForDeployment("agentlane-worker", workerReplicas)
	GinkgoWriter.Printf("agentlane installed and available in %s\n", time.Since(began).Round(time.Millisecond))

	By("applying config/default (test/cluster/overlay) over it as a server-side dry run")
	manifests, err := run(kustomizeBin, "build", "overlay")
	Expect(err).NotTo(HaveOccurred())
	// The chart's objects are helm's: the dry run takes their fields over,
	// as a user moving from the chart to kustomize would.
	_, err = runStdin(manifests, kubectlBin, "apply", "--server-side", "--force-conflicts", "--dry-run=server", "-f", "-")
	Expect(err).NotTo(HaveOccurred())

	By("creating the tenant service account 'agent', bound to agentlane-session-user")
	_, err = testenv.ServiceAccountToken(ctx, k8sClient, ns, "agent",
		rbacv1.RoleRef{Kind: "ClusterRole", Name: "agentlane-session-user"})
	Expect(err).NotTo(HaveOccurred())
	tenantToken = audienceToken(ns, "agent", "agentlane")

	By("letting ns's templates run as 'agent' (runtime pods) and 'job-worker' (Job lanes), as a cluster administrator would")
	_, err = run(kubectlBin, "annotate", "--overwrite", "namespace", ns, "agentlane.io/template-service-accounts=agent,job-worker")
	Expect(err).NotTo(HaveOccurred())
})

var _ = ReportAfterEach(func(r SpecReport) {
	if r.Failed() && kubeconfig != "" {
		dumpState(strings.ReplaceAll(r.LeafNodeText, " ", "_"))
	}
})

// installChart renders charts/agentlane, its CRDs included, with the
// suite's values, and applies it with server-side apply into
// systemNamespace, which it creates as helm --create-namespace would. Not
// helm install: the local cluster's API server is built without a version
// (it reports v0.0.0-master), which the chart's kubeVersion refuses, so the
// suite renders for the version the cluster is built from (KUBE_VERSION).
func installChart() {
	GinkgoHelper()
	// No repositories, plugins or cache of the user's: helm reads only the
	// chart.
	home := GinkgoT().TempDir()
	manifests, err := runEnv([]string{"HELM_CONFIG_HOME=" + home, "HELM_CACHE_HOME=" + home, "HELM_DATA_HOME=" + home},
		helmBin, "template", "agentlane", "../../charts/agentlane", "--namespace", systemNamespace,
		"--include-crds", "--kube-version", makefileVar("KUBE_VERSION"), "--values", "values.yaml")
	Expect(err).NotTo(HaveOccurred())
	namespace, err := run(kubectlBin, "create", "namespace", systemNamespace, "--dry-run=client", "-o", "yaml")
	Expect(err).NotTo(HaveOccurred())
	_, err = runStdin(namespace+"\n---\n"+manifests, kubectlBin, "apply", "--server-side", "-f", "-")
	Expect(err).NotTo(HaveOccurred())
}

// makefileVar returns the value the Makefile gives name with ?=.
func makefileVar(name string) string {
	GinkgoHelper()
	makefile, err := os.ReadFile("../../Makefile")
	Expect(err).NotTo(HaveOccurred())
	m := regexp.MustCompile(`(?m)^` + name + ` \?= (\S+)$`).FindSubmatch(makefile)
	Expect(m).NotTo(BeNil(), "the Makefile sets no %s", name)
	return string(m[1])
}

// waitForDeployment waits until the Deployment in systemNamespace has
// replicas available, updated pods.
func waitForDeployment(name string, replicas int32) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		d := &appsv1.Deployment{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: systemNamespace, Name: name}, d)).To(Succeed())
		g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation))
		g.Expect(d.Status.UpdatedReplicas).To(Equal(replicas))
		g.Expect(d.Status.AvailableReplicas).To(Equal(replicas))
		g.Expect(d.Status.Replicas).To(Equal(replicas))
	}).WithTimeout(3*time.Minute).WithPolling(time.Second).Should(Succeed(), "deployment %s", name)
}

// podsOf lists the running, not deleted pods of an agentlane component.
func podsOf(component string) []corev1.Pod {
	GinkgoHelper()
	pods := &corev1.PodList{}
	Expect(k8sClient.List(ctx, pods, client.InNamespace(systemNamespace),
		client.MatchingLabels{"app.kubernetes.io/name": "agentlane", "app.kubernetes.io/component": component})).To(Succeed())
	var live []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			live = append(live, p)
		}
	}
	return live
}

// waitForManagers waits until the manager Deployment runs its replicas,
// updated, and exactly one of them is ready: the leader (a standby's
// readiness probe fails).
func waitForManagers() {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		d := &appsv1.Deployment{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: systemNamespace, Name: "agentlane-controller-manager"}, d)).To(Succeed())
		g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation))
		g.Expect(d.Status.Replicas).To(Equal(int32(managerReplicas)))
		g.Expect(d.Status.UpdatedReplicas).To(Equal(int32(managerReplicas)))
		g.Expect(d.Status.ReadyReplicas).To(Equal(int32(1)))
	}).WithTimeout(3*time.Minute).WithPolling(time.Second).Should(Succeed(), "the manager Deployment")
}

// leaseHolder is the pod named by the leader-election Lease's holder
// identity (controller-runtime's is "<pod name>_<uuid>"), empty when no
// replica holds it.
func leaseHolder(g Gomega) string {
	lease := &coordinationv1.Lease{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: systemNamespace, Name: leaderLease}, lease)).To(Succeed())
	holder := ptr.Deref(lease.Spec.HolderIdentity, "")
	pod, _, _ := strings.Cut(holder, "_")
	return pod
}

// managerPod is the leading manager pod: the one the Lease names, once it is
// ready. The suite's "manager" is always the leader.
func managerPod() corev1.Pod {
	GinkgoHelper()
	var pod corev1.Pod
	Eventually(func(g Gomega) {
		holder := leaseHolder(g)
		pods := podsOf("manager")
		i := slices.IndexFunc(pods, func(p corev1.Pod) bool { return p.Name == holder })
		g.Expect(i).NotTo(Equal(-1), "the Lease holder %q among the manager pods", holder)
		g.Expect(ready(&pods[i])).To(BeTrue(), "the leader %s is ready", holder)
		g.Expect(pods[i].Status.PodIP).NotTo(BeEmpty())
		pod = pods[i]
	}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
	return pod
}

// sessionAPIURL is the Session API as this process reaches it: the leading
// manager pod's address, which the host routes to (the Service's ClusterIP
// is only served inside the nodes).
func sessionAPIURL() string {
	GinkgoHelper()
	return fmt.Sprintf("https://%s:%d", managerPod().Status.PodIP, sessionAPIPort)
}

// sessionAPIHTTP is an HTTP client that verifies the Session API's
// certificate as a runtime pod does: against the CA the manager generated
// (from its Secret) and for the Service's address, though it dials the pod.
func sessionAPIHTTP() *http.Client {
	GinkgoHelper()
	secret := &corev1.Secret{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: systemNamespace, Name: "agentlane-session-api-tls"}, secret)).To(Succeed())
	roots := x509.NewCertPool()
	Expect(roots.AppendCertsFromPEM(secret.Data["ca.crt"])).To(BeTrue(), "the Secret holds the CA")
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: roots, ServerName: sessionAPIServiceIP, MinVersion: tls.VersionTLS12}}}
}

// audienceToken returns a token of the service account for audiences.
func audienceToken(namespace, name string, audiences ...string) string {
	GinkgoHelper()
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences: audiences, ExpirationSeconds: ptr.To[int64](3600)}}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	Expect(k8sClient.SubResource("token").Create(ctx, sa, tr)).To(Succeed())
	return tr.Status.Token
}

// run runs a command and returns its standard output.
func run(name string, args ...string) (string, error) {
	return runStdin("", name, args...)
}

func runStdin(stdin, name string, args ...string) (string, error) {
	return runIn(stdin, nil, name, args...)
}

// runEnv runs a command with more environment variables.
func runEnv(env []string, name string, args ...string) (string, error) {
	return runIn("", env, name, args...)
}

func runIn(stdin string, env []string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(append(os.Environ(), "KUBECONFIG="+kubeconfig), env...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// kubectl runs kubectl against the cluster and fails the spec on error.
func kubectl(args ...string) string {
	GinkgoHelper()
	out, err := run(kubectlBin, args...)
	Expect(err).NotTo(HaveOccurred())
	return out
}

// snapshot writes `kubectl get pods -o wide -A` to the artifacts and to the
// spec's output.
func snapshot(name string) {
	GinkgoHelper()
	out := kubectl("get", "pods", "-o", "wide", "-A")
	GinkgoWriter.Printf("kubectl get pods -o wide -A (%s):\n%s\n", name, out)
	Expect(os.WriteFile(filepath.Join(artifacts, "pods-"+name+".txt"), []byte(out), 0o644)).To(Succeed())
}

// dumpState saves what explains a failure: pods, events, agentlane objects
// and the manager's and workers' logs.
func dumpState(name string) {
	dir := filepath.Join(artifacts, "failed-"+name)
	_ = os.MkdirAll(dir, 0o755)
	save := func(file string, args ...string) {
		out, err := run(kubectlBin, args...)
		if err != nil {
			out += "\n" + err.Error()
		}
		_ = os.WriteFile(filepath.Join(dir, file), []byte(out), 0o644)
	}
	save("pods.txt", "get", "pods", "-o", "wide", "-A")
	save("nodes.txt", "get", "nodes", "-o", "wide")
	save("events.txt", "get", "events", "-A", "--sort-by=.lastTimestamp")
	save("agentlane.yaml", "get", "lanequeues,agentsessions,externaltasks,jobs,pdb", "-n", ns, "-o", "yaml")
	save("manager.log", "logs", "-n", systemNamespace, "-l", "app.kubernetes.io/component=manager", "--tail=2000", "--prefix")
	save("lease.yaml", "get", "lease", "-n", systemNamespace, leaderLease, "-o", "yaml")
	save("workers.log", "logs", "-n", systemNamespace, "-l", "app.kubernetes.io/component=worker", "--tail=500", "--prefix")
	GinkgoWriter.Printf("cluster state saved in %s\n", dir)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
