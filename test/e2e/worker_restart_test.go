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
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

var _ = Describe("A worker process restarted under the same name", func() {
	var ns string

	BeforeEach(func() {
		ns = newNamespace()
		showManagerLogOnFailure()
	})

	It("never runs an attempt dispatched to the process it replaced: that attempt is recorded lost and retried, and every run is in status", func() {
		s := createQueue(ns, agentlanev1alpha1.LaneQueueSpec{
			Lanes: []agentlanev1alpha1.Lane{externalLane("execute", 0, 0, 0)},
			RetryPolicy: &agentlanev1alpha1.RetryPolicy{Strategy: agentlanev1alpha1.RetryFixed,
				FixedDelay: &metav1.Duration{Duration: 100 * time.Millisecond}, MaxRetries: ptr.To[int32](0)},
		})
		// Heartbeats every 2s: the Lease lasts 6s, far longer than the
		// restart, so the manager never sees the worker lapse.
		flags := []string{"--capacity=1", "--heartbeat-interval=2s"}
		first := startWorker(ns, "phoenix", "node-p", flags...)
		waitForWorkers(ns, first)
		runs := filepath.Join(GinkgoT().TempDir(), "runs")
		// Each execution appends a line; the run is shorter than the
		// worker's RunningAfter (2s), so until it ends the attempt shows
		// Dispatched and nothing else.
		task := bashTask(s, "short", "execute", "echo run >> "+runs+"; sleep 1.5")
		create(task)
		executions := func() int {
			data, err := os.ReadFile(runs)
			if err != nil {
				return 0
			}
			return strings.Count(string(data), "run\n")
		}
		Eventually(executions, 20*time.Second, 20*time.Millisecond).Should(Equal(1), "the first process runs the attempt")

		By("killing the worker within the first 2s of the run and starting it again at once")
		first.kill()
		Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(task), task)).To(Succeed())
		Expect(task.Status).To(And(HaveField("Phase", agentlanev1alpha1.ExternalTaskDispatched), HaveField("Attempt", int32(1)),
			HaveField("StartedAt", BeNil())), "the first process died before it wrote anything about its run")
		second := startWorker(ns, "phoenix", "node-p", flags...)

		Eventually(phaseOf(task), 30*time.Second).Should(Equal(agentlanev1alpha1.ExternalTaskSucceeded))
		Expect(task.Status.Attempt).To(Equal(int32(2)), "the attempt of the replaced process is not the one that succeeded")
		Expect(task.Status.Attempts).To(HaveExactElements(And(
			HaveField("Attempt", int32(1)), HaveField("Worker", "phoenix"),
			HaveField("Outcome", agentlanev1alpha1.AttemptWorkerLost), HaveField("NotStarted", true))))
		Expect(task.Status.Worker).To(Equal("phoenix"))
		Expect(executions()).To(Equal(2), "one run per attempt in status: attempt 1 on the first process, attempt 2 on the second")
		Eventually(second.metrics).Should(ContainSubstring("agentlane_worker_tasks_started_total 1\n"),
			"the second process ran one attempt, the one dispatched to it")
	})
})
