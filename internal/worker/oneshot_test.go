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

package worker

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// dispatchToJob writes the manager's dispatch of attempt 1 to a Job: jobName
// instead of worker.
func dispatchToJob(t *agentlanev1alpha1.ExternalTask, job string) *agentlanev1alpha1.ExternalTask {
	GinkgoHelper()
	return updateStatus(t, func(st *agentlanev1alpha1.ExternalTaskStatus) {
		now := metav1.Now()
		st.Phase = agentlanev1alpha1.ExternalTaskDispatched
		st.Lane = testLane
		st.Attempt = 1
		st.JobName = job
		st.QueuedAt, st.DispatchedAt = &now, &now
	})
}

// runTask runs RunTask in the background and returns where its error goes.
func runTask(o TaskOptions) chan error {
	if o.WaitTimeout == 0 {
		o.WaitTimeout = 10 * time.Second
	}
	if o.GracePeriod == 0 {
		o.GracePeriod = testGrace
	}
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(suiteCtx)
	DeferCleanup(cancel)
	go func() {
		defer GinkgoRecover()
		done <- RunTask(ctx, cfg, o)
	}()
	return done
}

var _ = Describe("One-shot mode", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("waits until its task is dispatched to its Job, then runs exactly that task", func() {
		t := bashTask(ns, "job-task", "echo from the job").create()
		other := dispatchToJob(bashTask(ns, "other-task", "true").create(), "job-other")

		done := runTask(TaskOptions{Task: t.Name, Namespace: ns, Name: "pod-1", NodeName: "node-j", JobName: "job-1"})
		Consistently(done, 300*time.Millisecond).ShouldNot(Receive(), "waits while the task is not dispatched")
		dispatchToJob(t, "job-1")

		var err error
		Eventually(done).Should(Receive(&err))
		Expect(err).NotTo(HaveOccurred())
		cur := get(Default, t)
		Expect(cur.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskSucceeded))
		Expect(cur.Status.Worker).To(Equal("pod-1"))
		Expect(cur.Status.NodeName).To(Equal("node-j"))
		Expect(cur.Status.JobName).To(Equal("job-1"))
		Expect(cur.Status.StartedAt).NotTo(BeNil())
		Expect(cur.Status.FinishedAt).NotTo(BeNil())
		Expect(output(cur).Stdout).To(Equal("from the job\n"))

		Expect(get(Default, other).Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskDispatched), "the other task is untouched")
		var leases coordinationv1.LeaseList
		Expect(k8sClient.List(suiteCtx, &leases, client.InNamespace(ns))).To(Succeed())
		Expect(leases.Items).To(BeEmpty(), "one-shot mode keeps no Lease")
	})

	It("reports a failed run and still succeeds itself, since the result is reported", func() {
		t := dispatchToJob(bashTask(ns, "job-fails", "exit 4").create(), "job-1")
		var err error
		Eventually(runTask(TaskOptions{Task: t.Name, Namespace: ns, Name: "pod-1"})).Should(Receive(&err))
		Expect(err).NotTo(HaveOccurred())
		cur := get(Default, t)
		Expect(cur.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskRunning))
		Expect(cur.Status.Result.Success).To(BeFalse())
		Expect(cur.Status.Result.ExitCode).To(Equal(ptr.To[int32](4)))
	})

	It("gives up when the task is not dispatched to its Job in time", func() {
		t := dispatchToJob(bashTask(ns, "job-late", "true").create(), "job-0")
		var err error
		Eventually(runTask(TaskOptions{Task: t.Name, Namespace: ns, Name: "pod-1", JobName: "job-1", WaitTimeout: 500 * time.Millisecond})).
			Should(Receive(&err))
		Expect(err).To(MatchError(ContainSubstring("was not dispatched to a Job within 500ms")))
		Expect(get(Default, t).Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskDispatched), "a Job of another attempt does not take it")
	})

	It("fails for a task that already finished", func() {
		t := bashTask(ns, "job-done", "true").create()
		updateStatus(t, func(st *agentlanev1alpha1.ExternalTaskStatus) {
			st.Phase, st.Attempt, st.JobName = agentlanev1alpha1.ExternalTaskCancelled, 1, "job-1"
		})
		var err error
		Eventually(runTask(TaskOptions{Task: t.Name, Namespace: ns, Name: "pod-1"})).Should(Receive(&err))
		Expect(err).To(MatchError(ContainSubstring("already finished: phase Cancelled")))
	})

	It("fails for a task that does not exist", func() {
		var err error
		Eventually(runTask(TaskOptions{Task: "missing", Namespace: ns, Name: "pod-1"})).Should(Receive(&err))
		Expect(err).To(MatchError(ContainSubstring("not found")))
	})
})
