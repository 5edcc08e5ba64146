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
	"fmt"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/executor"
	"github.com/agentlane/agentlane/internal/workerproto"
)

var _ = Describe("Worker", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	Context("registration", func() {
		It("advertises itself on a Lease and renews it every heartbeat", func() {
			w := startWorker(Options{
				Name: "w-lease", NodeName: "node-b", Namespace: ns, Capacity: 3,
				Queues: []string{"q1", "q2"}, Labels: map[string]string{"gpu": "a100"},
			})
			lease := &coordinationv1.Lease{}
			Expect(k8sClient.Get(suiteCtx, leaseKey(w.opts), lease)).To(Succeed())
			Expect(lease.Labels).To(Equal(map[string]string{
				"agentlane.io/worker": "true", "agentlane.io/node": "node-b", "gpu": "a100",
			}))
			Expect(lease.Annotations).To(HaveKeyWithValue("agentlane.io/incarnation", MatchRegexp(`^[0-9A-Z]{26}$`)),
				"the process advertises its incarnation, a ULID")
			delete(lease.Annotations, "agentlane.io/incarnation")
			Expect(lease.Annotations).To(Equal(map[string]string{
				"agentlane.io/capacity": "3", "agentlane.io/queues": "q1,q2", "agentlane.io/lanes": "",
				"agentlane.io/command-types": "bash,exec,read",
			}))
			Expect(lease.Spec.HolderIdentity).To(Equal(ptr.To("w-lease")))
			Expect(lease.Spec.LeaseDurationSeconds).To(Equal(ptr.To[int32](1)), "three 200ms heartbeats, rounded up")
			first := lease.Spec.RenewTime.Time

			Eventually(func(g Gomega) {
				g.Expect(k8sClient.Get(suiteCtx, leaseKey(w.opts), lease)).To(Succeed())
				g.Expect(lease.Spec.RenewTime.Time).To(BeTemporally(">", first))
			}).Should(Succeed())
		})

		It("renews on its clock's ticks, re-reading the Lease after a conflicting write", func() {
			fc := clocktesting.NewFakeClock(time.Date(2026, 5, 21, 14, 30, 0, 0, time.UTC))
			id := leaseIdentity{namespace: ns, name: "w-fake", nodeName: "node-a", capacity: 1,
				commandTypes: []string{"bash"}, heartbeat: 10 * time.Second}
			h := newHeartbeat(k8sClient, fc, id, ctrl.Log)
			Expect(h.renew(suiteCtx)).To(Succeed())
			key := leaseKey(Options{Namespace: ns, Name: "w-fake"})
			lease := &coordinationv1.Lease{}
			Expect(k8sClient.Get(suiteCtx, key, lease)).To(Succeed())
			Expect(lease.Spec.RenewTime.Time).To(BeTemporally("==", fc.Now()))
			Expect(lease.Spec.LeaseDurationSeconds).To(Equal(ptr.To[int32](30)))

			// Someone else writes the Lease: the heartbeat's copy is stale.
			lease.Labels["intruder"] = "x"
			Expect(k8sClient.Update(suiteCtx, lease)).To(Succeed())

			ctx, cancel := context.WithCancel(suiteCtx)
			DeferCleanup(cancel)
			go h.run(ctx)
			Eventually(fc.HasWaiters).Should(BeTrue())
			fc.Step(10 * time.Second)
			Eventually(func(g Gomega) {
				g.Expect(k8sClient.Get(suiteCtx, key, lease)).To(Succeed())
				g.Expect(lease.Spec.RenewTime.Time).To(BeTemporally("==", fc.Now()))
				g.Expect(lease.Labels).NotTo(HaveKey("intruder"))
			}).Should(Succeed())

			Expect(h.drain(suiteCtx)).To(Succeed())
			Expect(k8sClient.Get(suiteCtx, key, lease)).To(Succeed())
			Expect(lease.Annotations).To(HaveKeyWithValue("agentlane.io/draining", "true"))
			fc.Step(10 * time.Second)
			Eventually(func(g Gomega) {
				g.Expect(k8sClient.Get(suiteCtx, key, lease)).To(Succeed())
				g.Expect(lease.Spec.RenewTime.Time).To(BeTemporally("==", fc.Now()))
				g.Expect(lease.Annotations).To(HaveKeyWithValue("agentlane.io/draining", "true"), "renewals keep the mark")
			}).Should(Succeed())

			cancel()
			Expect(h.release(suiteCtx)).To(Succeed())
			Expect(apierrors.IsNotFound(k8sClient.Get(suiteCtx, key, lease))).To(BeTrue())
		})
	})

	Context("running tasks", func() {
		It("claims a dispatched task, runs it and reports success", func() {
			startWorker(Options{Name: "w-run", Namespace: ns})
			succeeded := counter(tasksFinished.WithLabelValues(outcomeSucceeded))
			t := bashTask(ns, "hello", "echo hello; echo careful >&2").dispatch("w-run")

			Eventually(phaseOf(t)).Should(Equal(agentlanev1alpha1.ExternalTaskSucceeded))
			cur := resultOf(t)
			Expect(cur.Status.Result.Success).To(BeTrue())
			Expect(cur.Status.Result.ExitCode).To(Equal(ptr.To[int32](0)))
			Expect(cur.Status.Result.Error).To(BeEmpty())
			Expect(output(cur)).To(Equal(executor.Output{Stdout: "hello\n", Stderr: "careful\n"}))
			Expect(cur.Status.StartedAt).NotTo(BeNil())
			Expect(cur.Status.FinishedAt).NotTo(BeNil())
			Expect(cur.Status.StartedAt.Time).To(BeTemporally(">=", cur.Status.DispatchedAt.Time))
			Expect(cur.Status.FinishedAt.Time).To(BeTemporally(">=", cur.Status.StartedAt.Time))
			Expect(cur.Status.Worker).To(Equal("w-run"))
			Expect(cur.Status.Attempt).To(Equal(int32(1)))
			Expect(counter(tasksFinished.WithLabelValues(outcomeSucceeded))).To(Equal(succeeded + 1))
		})

		It("reports a failed run and leaves the phase Running for the manager's retry policy", func() {
			startWorker(Options{Name: "w-fail", Namespace: ns})
			t := bashTask(ns, "fails", "echo bad input >&2; exit 3").dispatch("w-fail")

			cur := resultOf(t)
			Expect(cur.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskRunning))
			Expect(cur.Status.Result.Success).To(BeFalse())
			Expect(cur.Status.Result.ExitCode).To(Equal(ptr.To[int32](3)))
			Expect(cur.Status.Result.Error).To(Equal("exit code 3: bad input"))
			Expect(output(cur).Stderr).To(Equal("bad input\n"))
			Expect(cur.Status.FinishedAt).NotTo(BeNil())
			Consistently(phaseOf(t)).Should(Equal(agentlanev1alpha1.ExternalTaskRunning))
		})

		It("fails a task of an unknown command type and goes on working", func() {
			startWorker(Options{Name: "w-unknown", Namespace: ns})
			t := bashTask(ns, "teleport", "beam me up").commandType("teleport").dispatch("w-unknown")

			cur := resultOf(t)
			Expect(cur.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskRunning))
			Expect(cur.Status.Result.Success).To(BeFalse())
			Expect(cur.Status.Result.Error).To(Equal(`no executor for command type "teleport"`))
			Expect(cur.Status.Result.ExitCode).To(BeNil(), "no process ran")

			next := bashTask(ns, "after", "true").dispatch("w-unknown")
			Eventually(phaseOf(next)).Should(Equal(agentlanev1alpha1.ExternalTaskSucceeded))
		})

		It("stops a run at the task's timeout and reports it as failed", func() {
			startWorker(Options{Name: "w-timeout", Namespace: ns})
			t := bashTask(ns, "slow", "sleep 30").timeout(time.Second).dispatch("w-timeout")

			cur := resultOf(t)
			Expect(cur.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskRunning))
			Expect(cur.Status.Result.Success).To(BeFalse())
			Expect(cur.Status.Result.Error).To(ContainSubstring("attempt timed out after 1s"))
			Expect(cur.Status.Result.ExitCode).To(Equal(ptr.To[int32](-1)))
		})

		It("takes only its own tasks of the queues and lanes it serves", func() {
			startWorker(Options{Name: "w-picky", Namespace: ns, Queues: []string{"q1"}, Lanes: []string{"tools"}})
			otherWorker := bashTask(ns, "other-worker", "true").dispatch("w-someone-else")
			otherQueue := bashTask(ns, "other-queue", "true").queue("q2").dispatch("w-picky")
			otherLane := dispatch(bashTask(ns, "other-lane", "true").create(), "w-picky", "gpu", 1)
			mine := bashTask(ns, "mine", "true").dispatch("w-picky")

			Eventually(phaseOf(mine)).Should(Equal(agentlanev1alpha1.ExternalTaskSucceeded))
			Consistently(func(g Gomega) {
				for _, t := range []*agentlanev1alpha1.ExternalTask{otherWorker, otherQueue, otherLane} {
					cur := get(g, t)
					g.Expect(cur.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskDispatched), t.Name)
					g.Expect(cur.Status.StartedAt).To(BeNil(), t.Name)
				}
			}).Should(Succeed())
		})

		It("never runs more tasks at once than its capacity", func() {
			startWorker(Options{Name: "w-cap", Namespace: ns, Capacity: 2, RunningAfter: 10 * time.Millisecond})
			var tasks []*agentlanev1alpha1.ExternalTask
			for i := range 4 {
				tasks = append(tasks, bashTask(ns, fmt.Sprintf("slow-%d", i), "sleep 1").dispatch("w-cap"))
			}
			// One List is one consistent snapshot; reading the tasks one by
			// one could see a task finish and the next start as overlapping.
			running := func(g Gomega) int {
				var list agentlanev1alpha1.ExternalTaskList
				g.Expect(k8sClient.List(suiteCtx, &list, client.InNamespace(ns))).To(Succeed())
				n := 0
				for _, t := range list.Items {
					if st := t.Status; st.Phase == agentlanev1alpha1.ExternalTaskRunning && st.Result == nil {
						n++
					}
				}
				return n
			}
			Eventually(running).Should(Equal(2))
			Consistently(running, 1500*time.Millisecond).Should(BeNumerically("<=", 2))
			for _, t := range tasks {
				Eventually(phaseOf(t)).Should(Equal(agentlanev1alpha1.ExternalTaskSucceeded))
			}
		})

		It("reports as failed a running attempt that an earlier process of the same worker left behind", func() {
			t := bashTask(ns, "orphan", "true").dispatch("w-restarted")
			updateStatus(t, func(st *agentlanev1alpha1.ExternalTaskStatus) {
				st.Phase = agentlanev1alpha1.ExternalTaskRunning
				st.StartedAt = ptr.To(metav1.Now())
			})
			startWorker(Options{Name: "w-restarted", Namespace: ns})

			cur := resultOf(t)
			Expect(cur.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskRunning))
			Expect(cur.Status.Result.Success).To(BeFalse())
			Expect(cur.Status.Result.Error).To(ContainSubstring("restarted while it ran the attempt"))
		})

		It("runs only attempts dispatched to its own process, never one dispatched to an earlier process of the worker", func() {
			dir := GinkgoT().TempDir()
			first := startWorker(Options{Name: "w-again", Namespace: ns})
			firstInc := incarnationOf(first)
			first.stop()
			Eventually(func() bool {
				return apierrors.IsNotFound(k8sClient.Get(suiteCtx, leaseKey(first.opts), &coordinationv1.Lease{}))
			}, 10*time.Second).Should(BeTrue(), "the first process stopped")
			second := startWorker(Options{Name: "w-again", Namespace: ns})
			inc := incarnationOf(second)
			Expect(inc).NotTo(Equal(firstInc), "each process of a worker advertises an incarnation of its own")

			byPredecessor := dispatchTo(bashTask(ns, "for-the-predecessor", "touch "+dir+"/predecessor").create(), "w-again", firstInc, 1)
			mine := dispatchTo(bashTask(ns, "for-me", "true").create(), "w-again", inc, 1)
			unnamed := bashTask(ns, "unnamed", "true").dispatch("w-again")

			Eventually(phaseOf(mine)).Should(Equal(agentlanev1alpha1.ExternalTaskSucceeded))
			Eventually(phaseOf(unnamed)).Should(Equal(agentlanev1alpha1.ExternalTaskSucceeded),
				"an attempt dispatched before workers advertised incarnations runs as before")
			Consistently(func(g Gomega) {
				cur := get(g, byPredecessor)
				g.Expect(cur.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskDispatched))
				g.Expect(cur.Status.StartedAt).To(BeNil())
				g.Expect(filepath.Join(dir, "predecessor")).NotTo(BeAnExistingFile())
			}).Should(Succeed())

			By("the manager's next attempt, dispatched to this process, runs")
			dispatchTo(byPredecessor, "w-again", inc, 2)
			Eventually(phaseOf(byPredecessor)).Should(Equal(agentlanev1alpha1.ExternalTaskSucceeded))
			Expect(filepath.Join(dir, "predecessor")).To(BeAnExistingFile())
		})
	})

	Context("fencing", func() {
		It("stops a run and drops its result when the manager takes the attempt away", func() {
			marker := filepath.Join(GinkgoT().TempDir(), "finished")
			startWorker(Options{Name: "w-fenced", Namespace: ns, RunningAfter: 10 * time.Millisecond})
			lost := counter(tasksFinished.WithLabelValues(outcomeLost))
			t := bashTask(ns, "taken", "sleep 1; touch "+marker).dispatch("w-fenced")
			Eventually(phaseOf(t)).Should(Equal(agentlanev1alpha1.ExternalTaskRunning))

			// The manager times the attempt out and dispatches attempt 2
			// elsewhere.
			updateStatus(t, func(st *agentlanev1alpha1.ExternalTaskStatus) {
				st.Attempts = append(st.Attempts, agentlanev1alpha1.TaskAttempt{
					Attempt: 1, Worker: st.Worker, StartedAt: st.StartedAt, Outcome: agentlanev1alpha1.AttemptTimedOut,
				})
				st.Attempt = 2
				st.Phase = agentlanev1alpha1.ExternalTaskDispatched
				st.Worker = "w-other"
				st.StartedAt = nil
			})

			Eventually(func() float64 { return counter(tasksFinished.WithLabelValues(outcomeLost)) }).Should(Equal(lost + 1))
			Consistently(func(g Gomega) {
				st := get(g, t).Status
				g.Expect(st.Attempt).To(Equal(int32(2)))
				g.Expect(st.Worker).To(Equal("w-other"))
				g.Expect(st.Phase).To(Equal(agentlanev1alpha1.ExternalTaskDispatched))
				g.Expect(st.Result).To(BeNil())
				g.Expect(st.StartedAt).To(BeNil())
				g.Expect(marker).NotTo(BeAnExistingFile(), "the run was stopped")
			}, 1500*time.Millisecond).Should(Succeed())
		})

		DescribeTable("the API server rejects a write whose workerproto.Fence no longer holds",
			func(write string, status agentlanev1alpha1.ExternalTaskStatus, send func(*attempts, *agentlanev1alpha1.ExternalTask) error) {
				t := bashTask(ns, "fenced", "true").create()
				updateStatus(t, func(st *agentlanev1alpha1.ExternalTaskStatus) { *st = status })
				before := get(Default, t).Status
				rejected := counter(fencedWritesRejected.WithLabelValues(write))

				a := &attempts{client: k8sClient, registry: executor.NewRegistry(1024), clock: clock.RealClock{}, log: ctrl.Log}
				err := send(a, t)
				Expect(err).To(MatchError(errAttemptLost))
				Expect(apierrors.IsInvalid(err)).To(BeTrue(), "422: %v", err)
				Expect(get(Default, t).Status).To(Equal(before), "the status the manager wrote stays")
				Expect(counter(fencedWritesRejected.WithLabelValues(write))).To(Equal(rejected + 1))
			},
			Entry("completion after the attempt moved on", writeComplete,
				runningStatus("w-new", 2),
				func(a *attempts, t *agentlanev1alpha1.ExternalTask) error {
					return a.complete(suiteCtx, t, workerproto.WorkerFence("w-old", 1), agentlanev1alpha1.TaskResult{Success: true})
				}),
			Entry("completion of an attempt the manager already closed", writeComplete,
				agentlanev1alpha1.ExternalTaskStatus{Phase: agentlanev1alpha1.ExternalTaskTimedOut, Attempt: 1, Worker: "w1"},
				func(a *attempts, t *agentlanev1alpha1.ExternalTask) error {
					return a.complete(suiteCtx, t, workerproto.WorkerFence("w1", 1), agentlanev1alpha1.TaskResult{Success: true})
				}),
			Entry("claim of an attempt that is already running", writeClaim,
				runningStatus("w1", 1),
				func(a *attempts, t *agentlanev1alpha1.ExternalTask) error {
					return a.claim(suiteCtx, t, workerproto.WorkerFence("w1", 1))
				}),
			Entry("claim of an attempt dispatched to another worker", writeClaim,
				agentlanev1alpha1.ExternalTaskStatus{Phase: agentlanev1alpha1.ExternalTaskDispatched, Attempt: 1, Worker: "w2"},
				func(a *attempts, t *agentlanev1alpha1.ExternalTask) error {
					return a.claim(suiteCtx, t, workerproto.WorkerFence("w1", 1))
				}),
			Entry("hand back of an attempt that was cancelled", writeHandBack,
				agentlanev1alpha1.ExternalTaskStatus{Phase: agentlanev1alpha1.ExternalTaskCancelled, Attempt: 1, Worker: "w1"},
				func(a *attempts, t *agentlanev1alpha1.ExternalTask) error {
					return a.handBack(suiteCtx, t, workerproto.WorkerFence("w1", 1), agentlanev1alpha1.ExternalTaskRunning)
				}),
		)
	})

	Context("shutdown", func() {
		It("hands back what it has not started, stops and reports what still runs after the grace period, then deletes its Lease", func() {
			w := startWorker(Options{Name: "w-drain", Namespace: ns, Capacity: 1, GracePeriod: time.Second, RunningAfter: 10 * time.Millisecond})
			failed := counter(tasksFinished.WithLabelValues(outcomeFailed))
			running := bashTask(ns, "long", "sleep 30").dispatch("w-drain")
			Eventually(phaseOf(running)).Should(Equal(agentlanev1alpha1.ExternalTaskRunning))
			waiting := bashTask(ns, "waiting", "true").dispatch("w-drain")
			Consistently(phaseOf(waiting), 300*time.Millisecond).Should(Equal(agentlanev1alpha1.ExternalTaskDispatched))

			stoppedAt := time.Now()
			w.stop()
			lease := &coordinationv1.Lease{}
			Eventually(func(g Gomega) {
				g.Expect(k8sClient.Get(suiteCtx, leaseKey(w.opts), lease)).To(Succeed())
				g.Expect(lease.Annotations).To(HaveKeyWithValue("agentlane.io/draining", "true"))
			}).Should(Succeed())

			Eventually(func(g Gomega) {
				st := get(g, waiting).Status
				g.Expect(st.Phase).To(Equal(agentlanev1alpha1.ExternalTaskQueued))
				g.Expect(st.Worker).To(BeEmpty())
				g.Expect(st.Attempt).To(Equal(int32(1)), "a hand back is not an attempt")
			}).Should(Succeed())
			Expect(get(Default, running).Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskRunning), "still within its grace period")

			// The command ran: its attempt stays recorded as one that ran,
			// failed as interrupted, for the manager's retry policy.
			Eventually(func(g Gomega) {
				st := get(g, running).Status
				g.Expect(st.Result).NotTo(BeNil())
				g.Expect(st.Phase).To(Equal(agentlanev1alpha1.ExternalTaskRunning))
				g.Expect(st.Worker).To(Equal("w-drain"))
				g.Expect(st.StartedAt).NotTo(BeNil())
				g.Expect(st.FinishedAt).NotTo(BeNil())
				g.Expect(st.Attempt).To(Equal(int32(1)))
				g.Expect(st.Result.Success).To(BeFalse())
				g.Expect(st.Result.Error).To(HavePrefix("interrupted: w-drain stopped the command at shutdown"))
			}).Should(Succeed())
			Expect(time.Since(stoppedAt)).To(BeNumerically(">=", time.Second), "stopped only after the grace period")

			var err error
			Eventually(w.done, 5*time.Second).Should(Receive(&err))
			Expect(err).NotTo(HaveOccurred())
			w.done <- err // for the cleanup
			Expect(apierrors.IsNotFound(k8sClient.Get(suiteCtx, leaseKey(w.opts), lease))).To(BeTrue())
			Expect(counter(tasksFinished.WithLabelValues(outcomeFailed))).To(Equal(failed + 1))
		})

		It("hands back a claimed attempt whose command was not started when the grace period ran out", func() {
			marker := filepath.Join(GinkgoT().TempDir(), "ran")
			t := bashTask(ns, "claimed", "touch "+marker).create()
			updateStatus(t, func(st *agentlanev1alpha1.ExternalTaskStatus) { *st = runningStatus("w1", 1) })
			t = get(Default, t)
			a := &attempts{client: k8sClient, registry: executor.NewRegistry(1024), clock: clock.RealClock{}, log: ctrl.Log}
			ctx, cancel := context.WithCancelCause(suiteCtx)
			cancel(errShuttingDown)

			outcome, err := a.finish(ctx, t, workerproto.WorkerFence("w1", 1), true)
			Expect(err).NotTo(HaveOccurred())
			Expect(outcome).To(Equal(outcomeHandedBack))
			st := get(Default, t).Status
			Expect(st.Phase).To(Equal(agentlanev1alpha1.ExternalTaskQueued))
			Expect(st.Worker).To(BeEmpty())
			Expect(st.StartedAt).To(BeNil(), "no command ran: no attempt to record")
			Expect(st.Result).To(BeNil())
			Expect(marker).NotTo(BeAnExistingFile())
		})

		It("lets a running task finish within the grace period", func() {
			w := startWorker(Options{Name: "w-finish", Namespace: ns, GracePeriod: 20 * time.Second, RunningAfter: 10 * time.Millisecond})
			t := bashTask(ns, "short", "sleep 1; echo done").dispatch("w-finish")
			Eventually(phaseOf(t)).Should(Equal(agentlanev1alpha1.ExternalTaskRunning))

			w.stop()
			var err error
			Eventually(w.done, 10*time.Second).Should(Receive(&err), "returns as soon as its tasks are done")
			Expect(err).NotTo(HaveOccurred())
			w.done <- err
			cur := get(Default, t)
			Expect(cur.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskSucceeded))
			Expect(output(cur).Stdout).To(Equal("done\n"))
			Expect(apierrors.IsNotFound(k8sClient.Get(suiteCtx, leaseKey(w.opts), &coordinationv1.Lease{}))).To(BeTrue())
		})
	})
})

func runningStatus(worker string, attempt int32) agentlanev1alpha1.ExternalTaskStatus {
	return agentlanev1alpha1.ExternalTaskStatus{
		Phase: agentlanev1alpha1.ExternalTaskRunning, Attempt: attempt, Worker: worker,
		StartedAt: ptr.To(metav1.NewTime(time.Now().Truncate(time.Second))),
	}
}
