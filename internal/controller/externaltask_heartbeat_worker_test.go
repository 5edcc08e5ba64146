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

package controller

import (
	"context"
	"encoding/json"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/executor"
	"github.com/agentlane/agentlane/internal/worker"
)

// bashTaskOf is a task of queue q1 that runs command with bash.
func bashTaskOf(ns, name, command string) *agentlanev1alpha1.ExternalTask {
	GinkgoHelper()
	t := queueTask(ns, name)
	raw, err := json.Marshal(executor.ProcessPayload{Command: command})
	Expect(err).NotTo(HaveOccurred())
	t.Spec.Payload = &runtime.RawExtension{Raw: raw}
	return t
}

var _ = Describe("ExternalTask heartbeats from a real worker", func() {
	It("keeps running a command that writes its heartbeat file past heartbeatTimeout, and times out and retries one that stops", func() {
		ns := taskNamespace()
		const hbTimeout = 6 * time.Second
		taskQueue(ns, func(s *agentlanev1alpha1.LaneQueueSpec) {
			s.Lanes[0].Timeout = &metav1.Duration{Duration: 10 * time.Minute}
			s.Lanes[0].HeartbeatTimeout = &metav1.Duration{Duration: hbTimeout}
			s.RetryPolicy = &agentlanev1alpha1.RetryPolicy{Strategy: agentlanev1alpha1.RetryFixed, MaxRetries: ptr.To[int32](1),
				FixedDelay: &metav1.Duration{Duration: 50 * time.Millisecond}}
		})
		w, err := worker.New(testEnv.Config, worker.Options{Name: "hb-worker", NodeName: "node-hb", Namespace: ns, Capacity: 2,
			HeartbeatInterval: 200 * time.Millisecond, GracePeriod: 2 * time.Second,
			Registry: executor.NewSandboxedRegistry(0, executor.Sandbox{Root: GinkgoT().TempDir()})})
		Expect(err).NotTo(HaveOccurred())
		wctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			defer GinkgoRecover()
			done <- w.Run(wctx)
		}()
		DeferCleanup(func() {
			stop()
			Eventually(done, time.Minute).Should(Receive())
		})

		By("a command that writes its heartbeat file every 0.5s for more than twice the heartbeatTimeout")
		alive := bashTaskOf(ns, "alive",
			`for i in $(seq 1 30); do echo "$i/30" >> "$AGENTLANE_HEARTBEAT_FILE"; sleep 0.5; done; echo finished`)
		Expect(k8sClient.Create(ctx, alive)).To(Succeed())
		By("a command that writes it once and then hangs")
		stuck := bashTaskOf(ns, "stuck", `echo started >> "$AGENTLANE_HEARTBEAT_FILE"; sleep 600`)
		Expect(k8sClient.Create(ctx, stuck)).To(Succeed())

		Eventually(func(g Gomega) {
			getTask(stuck)(g)
			g.Expect(stuck.Status.Attempts).NotTo(BeEmpty())
		}, 2*time.Minute).Should(Succeed())
		Expect(stuck.Status.Attempts[0].Outcome).To(Equal(agentlanev1alpha1.AttemptTimedOut))
		Expect(stuck.Status.Attempts[0].Error).To(ContainSubstring("no heartbeat for"))
		Expect(stuck.Status.Attempts[0].Error).To(ContainSubstring("(lane execute heartbeatTimeout 6s)"))
		Eventually(func(g Gomega) {
			g.Expect(getTask(stuck)(g).Status.Attempt).To(Equal(int32(2)), "retried")
		}, time.Minute).Should(Succeed())

		Eventually(taskPhase(alive), 2*time.Minute).Should(Equal(agentlanev1alpha1.ExternalTaskSucceeded))
		Expect(alive.Status.Attempt).To(Equal(int32(1)), "its heartbeats kept attempt 1 alive for 15s")
		Expect(alive.Status.Attempts).To(BeEmpty())
		Expect(alive.Status.Progress).NotTo(BeEmpty())
		Expect(alive.Status.FinishedAt.Sub(alive.Status.StartedAt.Time)).To(BeNumerically(">", 2*hbTimeout))
	})
})
