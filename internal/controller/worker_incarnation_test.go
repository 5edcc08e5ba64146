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
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/workerproto"
)

// fakeWorkerProcess creates the Lease of a worker of capacity 1 whose
// process is incarnation, live for an hour.
func fakeWorkerProcess(ns, name, incarnation string) {
	GinkgoHelper()
	lease := workerLease(ns, name, 1)
	lease.Annotations[workerproto.IncarnationAnnotation] = incarnation
	Expect(k8sClient.Create(ctx, lease)).To(Succeed())
}

// setIncarnation makes the worker's Lease advertise a process of the worker,
// renewed now, as a worker process that starts (or restarts under the same
// name) does.
func setIncarnation(ns, worker, incarnation string) {
	GinkgoHelper()
	lease := &coordinationv1.Lease{}
	Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: workerproto.LeaseName(worker)}, lease)).To(Succeed())
	lease.Annotations[workerproto.IncarnationAnnotation] = incarnation
	now := metav1.NewMicroTime(time.Now())
	lease.Spec.RenewTime = &now
	Expect(k8sClient.Update(ctx, lease)).To(Succeed())
}

var _ = Describe("ExternalTask controller, worker incarnations", func() {
	var ns string
	BeforeEach(func() { ns = taskNamespace() })

	It("records an attempt dispatched to a worker process that was replaced under the same name as lost before it started, and dispatches the next to the new process", func() {
		taskQueue(ns, func(s *agentlanev1alpha1.LaneQueueSpec) {
			s.RetryPolicy = &agentlanev1alpha1.RetryPolicy{MaxRetries: ptr.To[int32](0)}
		})
		fakeWorkerProcess(ns, "phoenix", "PROCESSA")
		task := queueTask(ns, "dispatched-to-a")
		Expect(k8sClient.Create(ctx, task)).To(Succeed())
		Eventually(taskPhase(task)).Should(Equal(agentlanev1alpha1.ExternalTaskDispatched))
		Expect(task.Status).To(And(HaveField("Worker", "phoenix"), HaveField("WorkerIncarnation", "PROCESSA")))

		By("the worker restarting under the same name before its Lease lapses")
		setIncarnation(ns, "phoenix", "PROCESSB")

		Eventually(func(g Gomega) int32 {
			getTask(task)(g)
			g.Expect(task.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskDispatched))
			return task.Status.Attempt
		}).Should(Equal(int32(2)))
		Expect(task.Status).To(And(HaveField("Worker", "phoenix"), HaveField("WorkerIncarnation", "PROCESSB")))
		Expect(task.Status.Attempts).To(ConsistOf(And(
			HaveField("Attempt", int32(1)), HaveField("Worker", "phoenix"),
			HaveField("Outcome", agentlanev1alpha1.AttemptWorkerLost), HaveField("NotStarted", true),
			HaveField("Error", ContainSubstring("restarted")))))
		claim(task, "phoenix", 2)
		succeed(task, "phoenix", 2)
		Eventually(taskPhase(task)).Should(Equal(agentlanev1alpha1.ExternalTaskSucceeded))
	})

	It("leaves an attempt dispatched without an incarnation to the worker when its Lease starts naming one", func() {
		taskQueue(ns, nil)
		fakeWorker(ns, "upgraded", 1)
		task := queueTask(ns, "dispatched-before")
		Expect(k8sClient.Create(ctx, task)).To(Succeed())
		Eventually(taskPhase(task)).Should(Equal(agentlanev1alpha1.ExternalTaskDispatched))
		Expect(task.Status.WorkerIncarnation).To(BeEmpty())

		setIncarnation(ns, "upgraded", "PROCESSNEW")
		Consistently(func(g Gomega) {
			getTask(task)(g)
			g.Expect(task.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskDispatched))
			g.Expect(task.Status.Attempt).To(Equal(int32(1)))
		}, time.Second).Should(Succeed())
		claim(task, "upgraded", 1)
		succeed(task, "upgraded", 1)
		Eventually(taskPhase(task)).Should(Equal(agentlanev1alpha1.ExternalTaskSucceeded))
		Expect(task.Status.Attempts).To(BeEmpty())
	})
})
