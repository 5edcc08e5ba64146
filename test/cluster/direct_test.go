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
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// directQueueYAML is a LaneQueue whose lanes run on Direct workers: the
// suite's worker pods, which the chart (values.yaml: workers.direct) and the
// overlay (config/worker/direct) connect to the Session API. A command of
// quick is recorded as an ExternalTask only once it has waited for a worker,
// or run, 15s (a bound no short command nears, however loaded the machine);
// one of slow after 2s.
const directQueueYAML = `
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {name: direct, namespace: default}
spec:
  lanes:
  - name: quick
    priority: 1
    handlerMode: External
    maxConcurrency: 16
    maxConcurrencyPerSession: 16
    timeout: 1m
    externalTarget:
      type: Direct
      direct: {materializeAfter: 15s}
  - name: slow
    priority: 2
    handlerMode: External
    maxConcurrency: 4
    timeout: 1m
    externalTarget:
      type: Direct
      direct: {materializeAfter: 2s}
  defaultLane: quick
  retryPolicy: {strategy: Exponential, maxRetries: 3, initialDelay: 200ms, maxDelay: 2s}
---
apiVersion: agentlane.io/v1alpha1
kind: AgentSession
metadata: {name: direct, namespace: default}
spec:
  queueRef: {name: direct}
  identity: {tenantId: e2e, principal: agent}
`

// directStdout is what a Direct command's shell printed.
func directStdout(c *sessionapi.Command) string {
	if c == nil || c.Result == nil {
		return ""
	}
	var out struct {
		Stdout string `json:"stdout"`
	}
	_ = json.Unmarshal(c.Result.Output, &out)
	return out.Stdout
}

// describeCommand is a command in one line, for failure messages.
func describeCommand(c *sessionapi.Command) string {
	if c == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%s state=%s attempt=%d task=%q error=%q stdout=%q", c.ID, c.State, c.Attempt, c.Task, c.Error, directStdout(c))
}

// submitDirect submits a bash command to lane of the session "direct" and
// returns its final answer.
func submitDirect(id, lane, command string) *sessionapi.Command {
	GinkgoHelper()
	payload, err := json.Marshal(map[string]string{"command": command})
	Expect(err).NotTo(HaveOccurred())
	sc := sessionClient("direct")
	c, err := sc.Submit(ctx, sessionapi.SubmitRequest{ID: id, Type: "bash", Lane: lane, Payload: payload,
		Wait: &metav1.Duration{Duration: time.Minute}})
	Expect(err).NotTo(HaveOccurred(), id)
	if c.State != sessionapi.StateSucceeded && c.State != sessionapi.StateFailed {
		c, err = sc.AwaitFinal(ctx, id)
		Expect(err).NotTo(HaveOccurred(), id)
	}
	return c
}

// liveWorkers lists the worker pods that run, ready, on a ready node (a
// node an earlier spec killed keeps its pods listed for minutes).
func liveWorkers() []corev1.Pod {
	GinkgoHelper()
	var live []corev1.Pod
	for _, p := range podsOf("worker") {
		if ready(&p) && nodeReady(Default, p.Spec.NodeName) {
			live = append(live, p)
		}
	}
	return live
}

// directConnected tells whether the worker pod reports its Direct stream
// open (agentlane_worker_direct_stream_connected, on its plain-HTTP
// metrics port).
func directConnected(g Gomega, pod corev1.Pod) {
	hc := &http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get(fmt.Sprintf("http://%s:%d/metrics", pod.Status.PodIP, metricsPort))
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(body)).To(MatchRegexp(`(?m)^agentlane_worker_direct_stream_connected 1$`), "worker %s", pod.Name)
}

// directRecords lists the ExternalTasks the manager recorded for the
// session "direct".
func directRecords() []agentlanev1alpha1.ExternalTask {
	GinkgoHelper()
	list := &agentlanev1alpha1.ExternalTaskList{}
	Expect(k8sClient.List(ctx, list, client.InNamespace(ns),
		client.MatchingLabels{agentlanev1alpha1.SessionLabel: "direct"})).To(Succeed())
	return list.Items
}

var _ = Describe("Direct lanes on the shipped worker pods", Ordered, func() {
	// workers are the worker pods whose Direct streams are open when the
	// specs start; completed counts the session's commands.
	var (
		workers   []string
		completed uint64
	)

	BeforeAll(func() {
		apply(directQueueYAML)
		expectReady(&agentlanev1alpha1.LaneQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "direct"}},
			func() []metav1.Condition { return lq("direct").Status.Conditions })
		DeferCleanup(func() {
			_, _ = run(kubectlBin, "delete", "-n", ns, "agentsession/direct", "lanequeue/direct", "--ignore-not-found", "--wait=false")
		})
		By("waiting for every live worker pod's Direct stream to the leading manager")
		Eventually(func(g Gomega) {
			live := liveWorkers()
			g.Expect(len(live)).To(BeNumerically(">=", 2), "live worker pods")
			workers = nil
			for _, p := range live {
				directConnected(g, p)
				workers = append(workers, p.Name)
			}
		}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
		GinkgoWriter.Printf("Direct workers: %v\n", workers)
	})

	It("answers short commands from the workers' runners, with no ExternalTask written", func() {
		const n = 24
		began := time.Now()
		answers := make([]*sessionapi.Command, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				defer GinkgoRecover()
				answers[i] = submitDirect(fmt.Sprintf("direct-short-%02d", i), "quick",
					fmt.Sprintf("hostname; date -u +%%s; echo direct-short-%02d", i))
			})
		}
		wg.Wait()
		GinkgoWriter.Printf("%d Direct commands answered in %s\n", n, time.Since(began).Round(time.Millisecond))

		ranOn := map[string]int{}
		for i, c := range answers {
			Expect(c).NotTo(BeNil(), "command %d", i)
			Expect(c.State).To(Equal(sessionapi.StateSucceeded), describeCommand(c))
			Expect(c.Lane).To(Equal("quick"))
			Expect(c.Result.Success).To(BeTrue(), describeCommand(c))
			lines := strings.Split(strings.TrimSpace(directStdout(c)), "\n")
			Expect(lines).To(HaveLen(3), describeCommand(c))
			// hostname: the pod the runner ran in, a worker pod of the
			// chart's Deployment; date: a real program ran there.
			Expect(workers).To(ContainElement(lines[0]), describeCommand(c))
			Expect(lines[1]).To(MatchRegexp(`^[0-9]{10}$`), describeCommand(c))
			Expect(lines[2]).To(Equal(fmt.Sprintf("direct-short-%02d", i)))
			Expect(c.Task).To(BeEmpty(), "a short success is not recorded: %s", describeCommand(c))
			ranOn[lines[0]]++
		}
		completed += n
		GinkgoWriter.Printf("commands per worker pod: %v\n", ranOn)

		By("the API server holds no ExternalTask for them")
		Expect(directRecords()).To(BeEmpty())
		expectCounted("direct", int(completed))
	})

	It("records a command that runs past materializeAfter as an ExternalTask that ends Succeeded", func() {
		c := submitDirect("direct-long", "slow", "sleep 4; echo direct-long")
		Expect(c.State).To(Equal(sessionapi.StateSucceeded), describeCommand(c))
		Expect(directStdout(c)).To(ContainSubstring("direct-long"))
		Expect(c.Task).To(Equal(c.ID), describeCommand(c))
		completed++

		Eventually(func(g Gomega) {
			t := &agentlanev1alpha1.ExternalTask{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.Task}, t)).To(Succeed())
			g.Expect(t.Labels).To(HaveKeyWithValue(agentlanev1alpha1.TargetLabel, "Direct"))
			g.Expect(t.Status.Holder).To(Equal(agentlanev1alpha1.HolderDirect))
			g.Expect(t.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskSucceeded), describe(t))
			g.Expect(workers).To(ContainElement(t.Status.Worker), describe(t))
			g.Expect(t.Status.StartedAt).NotTo(BeNil(), describe(t))
			g.Expect(stdout(t)).To(ContainSubstring("direct-long"), describe(t))
		}).WithTimeout(time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
		Expect(keysOf(directRecords())).To(ConsistOf("direct-long"), "only the long command is recorded")
		expectCounted("direct", int(completed))
	})

	It("runs a command again on another worker when its worker pod is deleted while it runs", func() {
		// The submitter waits for the answer all along, as a runtime does.
		// The run lasts 12s: its record shows it Running from 2s, which
		// leaves the suite 10s to see that and delete the pod before the
		// run could end.
		answered := make(chan *sessionapi.Command, 1)
		go func() {
			defer GinkgoRecover()
			answered <- submitDirect("direct-moved", "slow", "hostname; sleep 12; echo direct-moved")
		}()

		By("waiting for its record to name the worker that runs it")
		var victim string
		Eventually(func(g Gomega) {
			t := &agentlanev1alpha1.ExternalTask{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "direct-moved"}, t)).To(Succeed())
			g.Expect(t.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskRunning), describe(t))
			g.Expect(t.Status.Worker).NotTo(BeEmpty())
			victim = t.Status.Worker
		}).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
		Expect(workers).To(ContainElement(victim))

		By("deleting worker pod " + victim + " with a one-second grace period while it runs the command")
		kubectl("delete", "pod", "-n", systemNamespace, victim, "--grace-period=1", "--wait=false")

		var final *sessionapi.Command
		Eventually(answered).WithTimeout(3 * time.Minute).Should(Receive(&final))
		Expect(final.State).To(Equal(sessionapi.StateSucceeded), describeCommand(final))
		Expect(final.Attempt).To(BeNumerically(">=", 2), describeCommand(final))
		lines := strings.Split(strings.TrimSpace(directStdout(final)), "\n")
		Expect(lines).To(HaveLen(2), describeCommand(final))
		Expect(lines[1]).To(Equal("direct-moved"))
		Expect(lines[0]).NotTo(Equal(victim), "ran again on another worker pod: %s", describeCommand(final))
		completed++

		By("its record shows the later attempt's success on " + lines[0])
		Eventually(func(g Gomega) {
			t := &agentlanev1alpha1.ExternalTask{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: final.ID}, t)).To(Succeed())
			g.Expect(t.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskSucceeded), describe(t))
			g.Expect(t.Status.Attempt).To(Equal(int32(final.Attempt)), describe(t))
			g.Expect(t.Status.Worker).To(Equal(lines[0]), describe(t))
		}).WithTimeout(time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
		expectCounted("direct", int(completed))

		By("the pool back to its live size, streams open, for the specs after")
		Eventually(func(g Gomega) {
			live := liveWorkers()
			g.Expect(live).To(HaveLen(len(workers)))
			for _, p := range live {
				directConnected(g, p)
			}
		}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
	})
})

// keysOf lists the names of tasks.
func keysOf(tasks []agentlanev1alpha1.ExternalTask) []string {
	var names []string
	for _, t := range tasks {
		names = append(names, t.Name)
	}
	return names
}
