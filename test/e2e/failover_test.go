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

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// leaseDuration is the manager's default --leader-elect-lease-duration,
// which bounds a failover after the leader's SIGKILL.
const leaseDuration = 4 * time.Second

// replica is one manager process of a leader-elected pair.
type replica struct {
	*process
	probe, api string
}

// startReplica starts a manager with leader election, its Lease in ns.
func startReplica(name, ns string) *replica {
	GinkgoHelper()
	r := &replica{probe: freeAddress(), api: freeAddress()}
	r.process = startProcess(name, managerBin, managerKubeconfig,
		"--leader-elect", "--leader-election-namespace="+ns,
		"--metrics-bind-address=0", "--health-probe-bind-address="+r.probe,
		"--session-api-bind-address="+r.api, "--session-api-insecure-http")
	DeferCleanup(func() {
		r.stop()
		if CurrentSpecReport().Failed() {
			GinkgoWriter.Printf("---- log of %s ----\n%s\n", name, r.logTail())
		}
	})
	return r
}

// ready tells whether the replica's readyz passes.
func (r *replica) ready() bool {
	resp, err := http.Get("http://" + r.probe + "/readyz")
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// leaderOf waits until exactly one live replica is ready and returns it.
func leaderOf(replicas ...*replica) (leader *replica, standbys []*replica) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		leader, standbys = nil, nil
		for _, r := range replicas {
			switch {
			case r.exited():
			case r.ready():
				g.Expect(leader).To(BeNil(), "two replicas are ready at once")
				leader = r
			default:
				standbys = append(standbys, r)
			}
		}
		g.Expect(leader).NotTo(BeNil(), "no replica leads")
	}, time.Minute).Should(Succeed())
	return leader, standbys
}

// allowLeaderElection gives the manager's user the leader election Role of
// config/rbac in ns.
func allowLeaderElection(ns string) {
	GinkgoHelper()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "leader_election_role.yaml"))
	Expect(err).NotTo(HaveOccurred())
	role := &rbacv1.Role{}
	Expect(yaml.Unmarshal(data, role)).To(Succeed())
	role.Namespace = ns
	Expect(k8sClient.Create(suiteCtx, role)).To(Succeed())
	Expect(k8sClient.Create(suiteCtx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "leader-election"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: managerUser}},
	})).To(Succeed())
}

// dispatchWatch records when the test first saw each task of a namespace
// leave Queued.
type dispatchWatch struct {
	mu   sync.Mutex
	left map[string]time.Time
}

func watchDispatches(ns string) *dispatchWatch {
	GinkgoHelper()
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	w, err := wc.Watch(suiteCtx, &agentlanev1alpha1.ExternalTaskList{}, client.InNamespace(ns))
	Expect(err).NotTo(HaveOccurred())
	dw := &dispatchWatch{left: map[string]time.Time{}}
	go func() {
		for ev := range w.ResultChan() {
			t, ok := ev.Object.(*agentlanev1alpha1.ExternalTask)
			if !ok || ev.Type != watch.Modified {
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
	DeferCleanup(w.Stop)
	return dw
}

// handover stops the leader with stop and returns how long it took from
// then until the new leader dispatched a task: one of the tasks still
// queued once the old leader had exited, which only a new leader can move.
func handover(ns string, dw *dispatchWatch, stop func()) time.Duration {
	GinkgoHelper()
	from := time.Now()
	stop()
	queued := map[string]bool{}
	for _, t := range tasksIn(Default, ns) {
		if p := t.Status.Phase; p == "" || p == agentlanev1alpha1.ExternalTaskQueued {
			queued[t.Name] = true
		}
	}
	Expect(queued).NotTo(BeEmpty(), "no task was left queued to measure the handover with")
	var first time.Time
	Eventually(func(g Gomega) {
		dw.mu.Lock()
		defer dw.mu.Unlock()
		for name := range queued {
			if at, ok := dw.left[name]; ok && (first.IsZero() || at.Before(first)) {
				first = at
			}
		}
		g.Expect(first).NotTo(BeZero(), "no queued task was dispatched")
	}, time.Minute).Should(Succeed())
	return first.Sub(from)
}

// loadAverage is the machine's 1-minute load average, for the report.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Fields(string(b))[0]
}

var _ = Describe("Two managers with leader election", Ordered, func() {
	var ns string

	BeforeAll(func() {
		// The suite's manager would compete with the pair for the tasks.
		manager.stop()
		DeferCleanup(func() { manager = startManager() })
	})

	BeforeEach(func() {
		ns = newNamespace()
		allowLeaderElection(ns)
	})

	It("keeps a standby not ready, and its Session API answers 503 NotLeader", func() {
		replicas := []*replica{startReplica("manager-a", ns), startReplica("manager-b", ns)}
		createQueue(ns, agentlanev1alpha1.LaneQueueSpec{
			Lanes: []agentlanev1alpha1.Lane{externalLane("execute", 0, 4, 0)},
		})
		leader, standbys := leaderOf(replicas...)
		Expect(standbys).To(HaveLen(1))
		standby := standbys[0]
		Consistently(standby.ready, 2*time.Second).Should(BeFalse(), "a standby is ready")

		url := "http://%s/v1/namespaces/" + ns + "/sessions/s1/commands"
		resp, err := http.Post(fmt.Sprintf(url, standby.api), "application/json", strings.NewReader(`{"type":"bash"}`))
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		var body sessionapi.Error
		Expect(json.NewDecoder(resp.Body).Decode(&body)).To(Succeed())
		Expect(resp.StatusCode).To(Equal(http.StatusServiceUnavailable))
		Expect(body.Code).To(Equal(sessionapi.CodeNotLeader))
		Expect(resp.Header.Get("Retry-After")).NotTo(BeEmpty())

		By("sending the leader the same call: it answers as the API does (no token: 401), not NotLeader")
		resp2, err := http.Post(fmt.Sprintf(url, leader.api), "application/json", strings.NewReader(`{"type":"bash"}`))
		Expect(err).NotTo(HaveOccurred())
		defer resp2.Body.Close()
		Expect(resp2.StatusCode).To(Equal(http.StatusUnauthorized))
	})

	It("resumes dispatch within a bounded gap after the leader's SIGKILL, sooner after its SIGTERM, running every task once", func() {
		runs := filepath.Join(GinkgoT().TempDir(), "runs")
		replicas := []*replica{startReplica("manager-a", ns), startReplica("manager-b", ns)}
		s := createQueue(ns, agentlanev1alpha1.LaneQueueSpec{
			Lanes: []agentlanev1alpha1.Lane{externalLane("execute", 0, 4, 0)},
		})
		startPool(ns, 2)
		dw := watchDispatches(ns)
		leader, _ := leaderOf(replicas...)

		var names []string
		batch := func(prefix string, n int) {
			for i := range n {
				name := taskName(prefix, i)
				names = append(names, name)
				create(bashTask(s, name, "execute", fmt.Sprintf("sleep 0.5; echo %s >> %s", name, runs)))
			}
		}
		succeeded := func(g Gomega) int { return countPhases(g, ns)[agentlanev1alpha1.ExternalTaskSucceeded] }

		By("killing the leader with SIGKILL while tasks flow")
		batch("k", 60)
		Eventually(succeeded, time.Minute).Should(BeNumerically(">=", 8))
		killGap := handover(ns, dw, leader.kill)
		load := loadAverage()
		leader, _ = leaderOf(replicas...)

		By("starting a new standby, then stopping the leader with SIGTERM while tasks flow")
		replicas = append(replicas, startReplica("manager-c", ns))
		Eventually(func() bool { return replicas[2].exited() || probeAnswers(replicas[2]) }).Should(BeTrue())
		time.Sleep(2 * time.Second) // its caches warm up
		batch("t", 60)
		Eventually(succeeded, time.Minute).Should(BeNumerically(">=", 68), "the first batch and 8 of the second ran")
		termGap := handover(ns, dw, func() {
			leader.signal(syscall.SIGTERM)
			Eventually(leader.exited, 30*time.Second).Should(BeTrue(), "the leader did not exit on SIGTERM")
		})
		Expect(leader.Err).NotTo(HaveOccurred(), "the leader exited with an error on SIGTERM")
		leaderOf(replicas...)

		AddReportEntry("failover gap after SIGKILL", killGap.String())
		AddReportEntry("failover gap after SIGTERM", termGap.String())
		GinkgoWriter.Printf("failover gap: SIGKILL %s, SIGTERM %s (load average %s, then %s)\n",
			killGap.Round(time.Millisecond), termGap.Round(time.Millisecond), load, loadAverage())
		fmt.Fprintf(os.Stderr, "failover gap: SIGKILL %s, SIGTERM %s (load average %s, then %s)\n",
			killGap.Round(time.Millisecond), termGap.Round(time.Millisecond), load, loadAverage())

		Eventually(succeeded, 3*time.Minute).Should(Equal(len(names)))
		Expect(lines(runs)).To(ConsistOf(names), "every task ran exactly once: %s", duplicates(ns, runs))
		for _, t := range tasksIn(Default, ns) {
			Expect(t.Status.Attempt).To(Equal(int32(1)), "%s: no worker was lost, so no attempt may be retried", t.Name)
		}
		Expect(killGap).To(BeNumerically("<", 3*leaseDuration), "dispatch resumes within the lease duration plus a new leader's start")
		Expect(termGap).To(BeNumerically("<", leaseDuration), "a released Lease is taken without waiting for it to expire")
	})
})

// probeAnswers tells whether the replica's probe endpoint answers at all.
func probeAnswers(r *replica) bool {
	resp, err := http.Get("http://" + r.probe + "/healthz")
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
