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
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/workerproto"
)

// heartbeat writes the worker's heartbeat of attempt of t, as cmd/worker
// does (workerproto.HeartbeatPatch).
func heartbeat(t *agentlanev1alpha1.ExternalTask, w string, attempt int32, progress string) {
	GinkgoHelper()
	body, err := workerproto.HeartbeatPatch(workerproto.WorkerFence(w, attempt), metav1.Now(), progress)
	Expect(err).NotTo(HaveOccurred())
	Expect(jsonPatch(t, string(body))).To(Succeed())
}

var _ = Describe("ExternalTask heartbeats", func() {
	It("keeps a heartbeating attempt past the lane's heartbeatTimeout and times out a silent one on it, retried", func() {
		ns := taskNamespace()
		const hbTimeout = 4 * time.Second
		taskQueue(ns, func(s *agentlanev1alpha1.LaneQueueSpec) {
			s.Lanes[0].Timeout = &metav1.Duration{Duration: 10 * time.Minute}
			s.Lanes[0].HeartbeatTimeout = &metav1.Duration{Duration: hbTimeout}
			s.RetryPolicy = &agentlanev1alpha1.RetryPolicy{Strategy: agentlanev1alpha1.RetryFixed, MaxRetries: ptr.To[int32](1),
				FixedDelay: &metav1.Duration{Duration: 50 * time.Millisecond}}
		})
		fakeWorker(ns, "w1", 2)
		t := queueTask(ns, "hb1")
		Expect(k8sClient.Create(ctx, t)).To(Succeed())
		Eventually(taskPhase(t)).Should(Equal(agentlanev1alpha1.ExternalTaskDispatched))
		Expect(t.Status.HeartbeatTimeout).To(Equal(&metav1.Duration{Duration: hbTimeout}), "the dispatch tells the worker the heartbeatTimeout")
		claim(t, "w1", 1)

		By("the worker heartbeating every second for three heartbeatTimeouts")
		start := time.Now()
		for i := 0; time.Since(start) < 3*hbTimeout; i++ {
			heartbeat(t, "w1", 1, fmt.Sprintf("%d done", i))
			// The next heartbeat waits for this one to reach the manager's
			// cache (and so its scheduler), whatever the load.
			Eventually(func(g Gomega) {
				cur := &agentlanev1alpha1.ExternalTask{}
				g.Expect(managerCache.Get(ctx, client.ObjectKeyFromObject(t), cur)).To(Succeed())
				g.Expect(cur.Status.Progress).To(Equal(fmt.Sprintf("%d done", i)))
			}).Should(Succeed())
			time.Sleep(time.Second)
		}
		getTask(t)(Default)
		Expect(t.Status.Attempt).To(Equal(int32(1)))
		Expect(t.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskRunning), "alive past its heartbeatTimeout")
		Expect(t.Status.Attempts).To(BeEmpty())

		By("the worker going silent: attempt 1 times out on its heartbeat and attempt 2 is dispatched")
		Eventually(func(g Gomega) {
			getTask(t)(g)
			g.Expect(t.Status.Attempt).To(Equal(int32(2)))
		}, time.Minute).Should(Succeed())
		Expect(t.Status.Attempts).To(HaveLen(1))
		Expect(t.Status.Attempts[0].Outcome).To(Equal(agentlanev1alpha1.AttemptTimedOut))
		Expect(t.Status.Attempts[0].Error).To(MatchRegexp(`^attempt 1 timed out: no heartbeat for [0-9.]+s \(lane execute heartbeatTimeout 4s\)$`))
		Expect(t.Status.LastHeartbeatAt).To(BeNil())
		Expect(t.Status.Progress).To(BeEmpty())

		By("a heartbeat of the old attempt being refused by its fence")
		body, err := workerproto.HeartbeatPatch(workerproto.WorkerFence("w1", 1), metav1.Now(), "late")
		Expect(err).NotTo(HaveOccurred())
		Expect(jsonPatch(t, string(body))).NotTo(Succeed())

		By("attempt 2, never heartbeating either, timing out for good")
		Eventually(taskPhase(t), time.Minute).Should(Equal(agentlanev1alpha1.ExternalTaskDeadLettered))
		Expect(t.Status.Attempts).To(HaveLen(2))
		Expect(t.Status.Attempts[1].Error).To(ContainSubstring("(lane execute heartbeatTimeout 4s)"))
	})
})
