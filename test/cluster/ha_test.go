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

package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// managersSplit returns the leading manager pod and the standby, once there
// are exactly two manager pods and only the leader is ready.
func managersSplit() (leader, standby corev1.Pod) {
	GinkgoHelper()
	leader = managerPod()
	Eventually(func(g Gomega) {
		pods := podsOf("manager")
		g.Expect(pods).To(HaveLen(managerReplicas))
		for i := range pods {
			if pods[i].Name == leader.Name {
				continue
			}
			g.Expect(ready(&pods[i])).To(BeFalse(), "the standby %s is ready", pods[i].Name)
			standby = pods[i]
		}
		g.Expect(leaseHolder(g)).To(Equal(leader.Name))
	}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
	return leader, standby
}

// callThroughService GETs a session's stats through the Session API
// Service's ClusterIP, from inside a node's network namespace (where
// kube-proxy serves ClusterIPs), as a runtime pod would, and returns the
// HTTP status, or curl's error (while the Service has no ready endpoint,
// kube-proxy refuses the connection). curl opens a new connection each
// time, so kube-proxy picks an endpoint afresh.
func callThroughService(session string) string {
	GinkgoHelper()
	secret := &corev1.Secret{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: systemNamespace, Name: "agentlane-session-api-tls"}, secret)).To(Succeed())
	ca := filepath.Join(GinkgoT().TempDir(), "ca.crt")
	Expect(os.WriteFile(ca, secret.Data["ca.crt"], 0o600)).To(Succeed())
	url := fmt.Sprintf("https://%s:%d/%s/namespaces/%s/sessions/%s/stats", sessionAPIServiceIP, sessionAPIPort, sessionapi.Version, ns, session)
	out, err := run("nsenter", "--net=/run/netns/agentlane-node-1", "curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}",
		"--max-time", "10", "--cacert", ca, "-H", "Authorization: Bearer "+tenantToken, url)
	if err != nil {
		return err.Error()
	}
	return out
}

// expectServiceReachesLeader calls the Session API through its Service ten
// times; each succeeds only on the leader (a standby answers 503 NotLeader),
// so the Service must send none to the standby.
func expectServiceReachesLeader(session string) {
	GinkgoHelper()
	Eventually(func() string { return callThroughService(session) }).
		WithTimeout(time.Minute).WithPolling(time.Second).Should(Equal("200"))
	for range 10 {
		Expect(callThroughService(session)).To(Equal("200"))
	}
}

// dispatchWatch records when the suite first saw each task of a session
// leave Queued.
type dispatchWatch struct {
	mu   sync.Mutex
	left map[string]time.Time
}

func watchDispatches(session string) *dispatchWatch {
	GinkgoHelper()
	w, err := k8sWatcher().Watch(ctx, &agentlanev1alpha1.ExternalTaskList{}, client.InNamespace(ns),
		client.MatchingLabels{agentlanev1alpha1.SessionLabel: session})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(w.Stop)
	dw := &dispatchWatch{left: map[string]time.Time{}}
	go func() {
		for ev := range w.ResultChan() {
			t, ok := ev.Object.(*agentlanev1alpha1.ExternalTask)
			if !ok || ev.Type == watch.Error {
				continue
			}
			if p := t.Status.Phase; p != "" && p != agentlanev1alpha1.ExternalTaskQueued {
				dw.mu.Lock()
				if _, seen := dw.left[t.Name]; !seen {
					dw.left[t.Name] = time.Now()
				}
				dw.mu.Unlock()
			}
		}
	}()
	return dw
}

// firstOf is the earliest time one of names left Queued, zero if none has.
func (dw *dispatchWatch) firstOf(names map[string]bool) time.Time {
	dw.mu.Lock()
	defer dw.mu.Unlock()
	var first time.Time
	for name := range names {
		if at, ok := dw.left[name]; ok && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	return first
}

func k8sWatcher() client.WithWatch {
	GinkgoHelper()
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: k8sClient.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	return c
}

// failover stops the leader with stop while the session's tasks flow and
// measures, from the stop: how long until the standby is ready, and how
// long until it dispatched a task that was still queued when the old leader
// let go of the Lease (which only the new leader can move).
func failover(session string, stop func(leader corev1.Pod)) (readyAfter, dispatchAfter time.Duration) {
	GinkgoHelper()
	leader, standby := managersSplit()
	dw := watchDispatches(session)
	began := time.Now()
	stop(leader)
	GinkgoWriter.Printf("stopped the leader %s at %s\n", leader.Name, began.UTC().Format(time.RFC3339Nano))
	DeferCleanup(saveManagerLogs, session, standby.Name)

	By("waiting for the Lease to leave " + leader.Name)
	Eventually(func(g Gomega) {
		g.Expect(leaseHolder(g)).NotTo(Equal(leader.Name))
	}).WithTimeout(time.Minute).WithPolling(100 * time.Millisecond).Should(Succeed())
	queued := map[string]bool{}
	for _, t := range tasksOf(session) {
		if p := t.Status.Phase; p == "" || p == agentlanev1alpha1.ExternalTaskQueued {
			queued[t.Name] = true
		}
	}
	// Tasks created once the old leader let go of the Lease: only the next
	// leader can dispatch them, however many of the first ones the old
	// leader handed out before it let go (a loaded machine can run them
	// all).
	By(fmt.Sprintf("creating %d tasks after the old leader let go (%d of the first were still queued)", leaderlessTasks, len(queued)))
	createTasks(session, session+"-late", "bulk", leaderlessTasks, func(i int) string { return fmt.Sprintf("echo %s-late-%d", session, i) })
	for i := 1; i <= leaderlessTasks; i++ {
		queued[fmt.Sprintf("%s-late-%d", session, i)] = true
	}

	By("waiting for a manager other than " + leader.Name + " to lead and be ready (the standby " + standby.Name + " is expected)")
	var next corev1.Pod
	Eventually(func(g Gomega) {
		holder := leaseHolder(g)
		g.Expect(holder).NotTo(BeEmpty(), "no manager holds the Lease")
		g.Expect(holder).NotTo(Equal(leader.Name), "the stopped leader holds the Lease again")
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: systemNamespace, Name: holder}, &next)).To(Succeed())
		g.Expect(ready(&next)).To(BeTrue(), "the new leader %s is not ready: %s", holder, describePodConditions(&next))
	}).WithTimeout(time.Minute).WithPolling(100 * time.Millisecond).Should(Succeed())
	readyAfter = time.Since(began)
	if next.Name != standby.Name {
		// The Deployment's replacement pod won the Lease before the
		// standby: a failover all the same, from a cold start.
		GinkgoWriter.Printf("the replacement pod %s leads, not the standby %s\n", next.Name, standby.Name)
	}
	var first time.Time
	Eventually(func() time.Time {
		first = dw.firstOf(queued)
		return first
	}).WithTimeout(time.Minute).WithPolling(100*time.Millisecond).ShouldNot(BeZero(),
		"none of the %d tasks queued at the failover was dispatched by the new leader %s", len(queued), next.Name)
	return readyAfter, first.Sub(began)
}

// leaderlessTasks is how many tasks a failover spec creates once the old
// leader let go of the Lease.
const leaderlessTasks = 4

// describePodConditions says a pod's phase and conditions, for a failure
// message.
func describePodConditions(p *corev1.Pod) string {
	out := string(p.Status.Phase)
	for _, c := range p.Status.Conditions {
		out += fmt.Sprintf(" %s=%s", c.Type, c.Status)
		if c.Message != "" {
			out += " (" + c.Message + ")"
		}
	}
	return out
}

// saveManagerLogs writes the new leader's log, with the kubelet's
// timestamps, to the artifacts: where a failover's time went.
func saveManagerLogs(session, pod string) {
	out, err := run(kubectlBin, "logs", "-n", systemNamespace, pod, "--timestamps")
	if err != nil {
		out += "\n" + err.Error()
	}
	_ = os.WriteFile(filepath.Join(artifacts, "failover-"+session+"-"+pod+".log"), []byte(out), 0o644)
}

// startFailoverTasks creates a plain session and n tasks on the bulk lane,
// more than the workers run at once, and waits until a few run.
func startFailoverTasks(session string, n int) {
	GinkgoHelper()
	apply(fmt.Sprintf(plainSessionYAML, session))
	createTasks(session, session, "bulk", n, func(i int) string { return fmt.Sprintf("sleep 3; echo %s-%d", session, i) })
	Eventually(func(g Gomega) {
		running := 0
		for _, t := range tasksOf(session) {
			if t.Status.Phase == agentlanev1alpha1.ExternalTaskRunning {
				running++
			}
		}
		g.Expect(running).To(BeNumerically(">=", 4))
	}).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
}

// reportFailover prints a failover's measurements and keeps them in the
// report.
func reportFailover(how string, readyAfter, dispatchAfter time.Duration) {
	line := fmt.Sprintf("failover after %s: standby ready after %s, first dispatch after %s (load average %s)",
		how, readyAfter.Round(time.Millisecond), dispatchAfter.Round(time.Millisecond), loadAverage())
	AddReportEntry("failover after "+how, line)
	GinkgoWriter.Println(line)
	fmt.Fprintln(os.Stderr, line)
}

// failoverTasks is how many tasks a failover spec runs: four waves of the
// worker pool's 12 slots, so that some are queued while the leader goes.
const failoverTasks = 48

// expectFailoverOnDelete is the HA spec: two managers, one ready and behind
// the Service; the leader's pod deleted (SIGTERM, the Lease released) while
// tasks flow; the standby takes over; every task runs once.
func expectFailoverOnDelete() {
	leader, standby := managersSplit()
	By(fmt.Sprintf("leader %s on %s, standby %s on %s", leader.Name, leader.Spec.NodeName, standby.Name, standby.Spec.NodeName))
	apply(fmt.Sprintf(plainSessionYAML, "ha-term"))
	By("calls through the Session API Service reach the leader, never the standby")
	expectServiceReachesLeader("ha-term")

	startFailoverTasks("ha-term", failoverTasks)
	readyAfter, dispatchAfter := failover("ha-term", func(leader corev1.Pod) {
		kubectl("delete", "pod", "-n", systemNamespace, leader.Name, "--wait=false")
	})
	reportFailover("the leader's pod was deleted (SIGTERM)", readyAfter, dispatchAfter)
	By("the Service follows the new leader")
	expectServiceReachesLeader("ha-term")
	expectRanOnce(waitForTasks("ha-term", failoverTasks+leaderlessTasks, 4*time.Minute))
	waitForManagers()
}

// expectFailoverOnKill is expectFailoverOnDelete with the leader's process
// killed by SIGKILL from the host, as a crash: the Lease is not released;
// the standby takes it once the kubelet reports the leader's container
// restarted (well before the lease duration is out), and the killed
// container restarts as a standby.
func expectFailoverOnKill() {
	startFailoverTasks("ha-kill", failoverTasks)
	readyAfter, dispatchAfter := failover("ha-kill", func(leader corev1.Pod) {
		killContainerProcess(leader, "manager")
	})
	reportFailover("the leader's process was killed (SIGKILL)", readyAfter, dispatchAfter)
	expectRanOnce(waitForTasks("ha-kill", failoverTasks+leaderlessTasks, 4*time.Minute))
	waitForManagers()
}

// killContainerProcess sends SIGKILL to the process named comm of a pod:
// the host sees every node's processes, and a pod's are in cgroups named
// after its UID (kubelet's cgroupfs driver).
func killContainerProcess(pod corev1.Pod, comm string) {
	GinkgoHelper()
	procs, err := filepath.Glob("/proc/[0-9]*")
	Expect(err).NotTo(HaveOccurred())
	var killed []int
	for _, dir := range procs {
		name, err1 := os.ReadFile(filepath.Join(dir, "comm"))
		cgroup, err2 := os.ReadFile(filepath.Join(dir, "cgroup"))
		if err1 != nil || err2 != nil || strings.TrimSpace(string(name)) != comm ||
			!strings.Contains(string(cgroup), "pod"+string(pod.UID)) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(dir))
		Expect(err).NotTo(HaveOccurred())
		Expect(syscall.Kill(pid, syscall.SIGKILL)).To(Succeed())
		killed = append(killed, pid)
	}
	Expect(killed).To(HaveLen(1), "the %s process of pod %s", comm, pod.Name)
	By(fmt.Sprintf("killed %s (pid %d on the host) of %s", comm, killed[0], pod.Name))
}

// loadAverage is the machine's 1-minute load average, for the report.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Fields(string(b))[0]
}
