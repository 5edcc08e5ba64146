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
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

var _ = Describe("Tasks waiting for a worker", func() {
	It("are not looked at periodically, and a freed worker slot wakes the one that waited longest", func() {
		ns := taskNamespace()
		taskQueue(ns, nil)
		fakeWorker(ns, "one", 1)
		first := queueTask(ns, "t00")
		Expect(k8sClient.Create(ctx, first)).To(Succeed())
		Eventually(taskPhase(first)).Should(Equal(agentlanev1alpha1.ExternalTaskDispatched))
		// Each waits in turn, so their order is known.
		const waiting = 8
		var tasks []*agentlanev1alpha1.ExternalTask
		for i := 1; i <= waiting; i++ {
			t := queueTask(ns, fmt.Sprintf("t%02d", i))
			Expect(k8sClient.Create(ctx, t)).To(Succeed())
			Eventually(awaitingWorker(t)).Should(BeTrue())
			tasks = append(tasks, t)
		}
		var objects []client.Object
		for _, t := range tasks {
			objects = append(objects, t)
		}
		settled("externaltask", objects...)

		// Each waiting task used to look for a worker every 5s (8 reconciles
		// in 6s).
		before := objectReconciles("externaltask", objects...)
		Consistently(func() int { return objectReconciles("externaltask", objects...) - before }, "6s", "300ms").
			Should(BeZero(), "tasks waiting for a worker were reconciled periodically")

		// The worker's slot frees: the oldest waiting task gets it, the
		// others keep waiting.
		runToSuccess(first, "one")
		Eventually(taskPhase(tasks[0])).Should(Equal(agentlanev1alpha1.ExternalTaskDispatched))
		Expect(tasks[0].Status.Worker).To(Equal("one"))
		for _, t := range tasks[1:] {
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(t), t)).To(Succeed())
			Expect(t.Status.Phase).To(BeEmpty(), "task %s waits for the busy worker unwritten", t.Name)
			Expect(awaitingWorker(t)()).To(BeTrue(), "task %s", t.Name)
		}
		runToSuccess(tasks[0], "one")
		Eventually(taskPhase(tasks[1])).Should(Equal(agentlanev1alpha1.ExternalTaskDispatched))
	})

	It("writes nothing for a task waiting behind its lane's cap, and Queued for one no live worker serves", func() {
		ns := taskNamespace()
		taskQueue(ns, func(s *agentlanev1alpha1.LaneQueueSpec) { s.Lanes[0].MaxConcurrency = 1 })
		first, behind := queueTask(ns, "has-slot"), queueTask(ns, "behind-cap")
		Expect(k8sClient.Create(ctx, first)).To(Succeed())
		Eventually(func(g Gomega) {
			getTask(first)(g)
			g.Expect(first.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskQueued))
			g.Expect(cond(first, agentlanev1alpha1.ExternalTaskClaimedCondition)).To(HaveField("Message", ContainSubstring("no live worker")))
		}).Should(Succeed())
		Expect(k8sClient.Create(ctx, behind)).To(Succeed())
		// A task created bare gets its labels and owner in one metadata
		// write; nothing after it.
		Eventually(func(g Gomega) map[string]string { return getTask(behind)(g).Labels }).
			Should(HaveKeyWithValue(agentlanev1alpha1.LaneLabel, "execute"))
		created := behind.ResourceVersion

		// Longer than the delay after which a task used to be written Queued.
		Consistently(func(g Gomega) {
			getTask(behind)(g)
			g.Expect(behind.ResourceVersion).To(Equal(created), "the task waiting behind the cap was written: %+v", behind.Status)
		}, 3*time.Second, 200*time.Millisecond).Should(Succeed())
		Expect(behind.Status.Phase).To(BeEmpty())

		// Its grant wakes it: with a worker, both run in turn.
		fakeWorker(ns, "w", 1)
		runToSuccess(first, "w")
		Eventually(taskPhase(behind)).Should(Equal(agentlanev1alpha1.ExternalTaskDispatched))
	})

	It("writes nothing for a task waiting for busy workers, and Queued once no live worker is left", func() {
		ns := taskNamespace()
		taskQueue(ns, nil)
		fakeWorker(ns, "busy", 1)
		held := queueTask(ns, "held")
		Expect(k8sClient.Create(ctx, held)).To(Succeed())
		Eventually(taskPhase(held)).Should(Equal(agentlanev1alpha1.ExternalTaskDispatched))
		waiting := queueTask(ns, "waiting")
		Expect(k8sClient.Create(ctx, waiting)).To(Succeed())
		Eventually(awaitingWorker(waiting)).Should(BeTrue())
		Eventually(func(g Gomega) map[string]string { return getTask(waiting)(g).Labels }).
			Should(HaveKeyWithValue(agentlanev1alpha1.LaneLabel, "execute"))
		created := waiting.ResourceVersion

		// Longer than the delay after which a task used to be written Queued.
		Consistently(func(g Gomega) {
			getTask(waiting)(g)
			g.Expect(waiting.ResourceVersion).To(Equal(created), "the task waiting for a busy worker was written: %+v", waiting.Status)
		}, 3*time.Second, 200*time.Millisecond).Should(Succeed())

		// The worker goes: the held attempt is lost, and the waiting task
		// tells that nothing serves it now.
		loseWorker(ns, "busy")
		Eventually(func(g Gomega) {
			getTask(waiting)(g)
			g.Expect(waiting.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskQueued))
			g.Expect(cond(waiting, agentlanev1alpha1.ExternalTaskClaimedCondition)).To(HaveField("Message", ContainSubstring("no live worker serves it")))
		}).Should(Succeed())
	})
})

// awaitingWorker tells whether the manager holds the task among those that
// wait for a worker's free slot.
func awaitingWorker(t *agentlanev1alpha1.ExternalTask) func() bool {
	return func() bool {
		return controllers.Tasks.awaiting.has(client.ObjectKeyFromObject(t))
	}
}
