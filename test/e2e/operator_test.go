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
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// taskWatch records, from a watch on a namespace's ExternalTasks, every
// write to each task and the phase transitions in the order the API server
// made them.
type taskWatch struct {
	mu     sync.Mutex
	writes map[string]int
	phase  map[string]agentlanev1alpha1.ExternalTaskPhase
	// dispatched lists the tasks in the order they became Dispatched.
	dispatched []string
	// maxHeld is the largest number of tasks Dispatched or Running at once.
	maxHeld int
}

func watchTasks(ns string) *taskWatch {
	GinkgoHelper()
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	w, err := wc.Watch(suiteCtx, &agentlanev1alpha1.ExternalTaskList{}, client.InNamespace(ns))
	Expect(err).NotTo(HaveOccurred())
	tw := &taskWatch{writes: map[string]int{}, phase: map[string]agentlanev1alpha1.ExternalTaskPhase{}}
	go func() {
		for ev := range w.ResultChan() {
			t, ok := ev.Object.(*agentlanev1alpha1.ExternalTask)
			if !ok || (ev.Type != watch.Added && ev.Type != watch.Modified) {
				continue
			}
			tw.observe(t)
		}
	}()
	DeferCleanup(w.Stop)
	return tw
}

func (tw *taskWatch) observe(t *agentlanev1alpha1.ExternalTask) {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	tw.writes[t.Name]++
	prev := tw.phase[t.Name]
	tw.phase[t.Name] = t.Status.Phase
	if prev != t.Status.Phase && t.Status.Phase == agentlanev1alpha1.ExternalTaskDispatched {
		tw.dispatched = append(tw.dispatched, t.Name)
	}
	held := 0
	for _, p := range tw.phase {
		if p == agentlanev1alpha1.ExternalTaskDispatched || p == agentlanev1alpha1.ExternalTaskRunning {
			held++
		}
	}
	tw.maxHeld = max(tw.maxHeld, held)
}

func (tw *taskWatch) writesOf(name string) int {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	return tw.writes[name]
}

func (tw *taskWatch) snapshot() (dispatched []string, maxHeld int, writes map[string]int) {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	w := make(map[string]int, len(tw.writes))
	for k, v := range tw.writes {
		w[k] = v
	}
	return slices.Clone(tw.dispatched), tw.maxHeld, w
}

// waitForWorkers waits until the workers' Leases exist.
func waitForWorkers(ns string, workers ...*workerProc) {
	GinkgoHelper()
	for _, w := range workers {
		Eventually(func() error {
			return k8sClient.Get(suiteCtx, types.NamespacedName{Namespace: ns, Name: "agentlane-worker-" + w.name}, &coordinationv1.Lease{})
		}).Should(Succeed())
	}
}

// startPool starts three workers of capacity on nodes a, b and c and waits
// for their Leases.
func startPool(ns string, capacity int) {
	GinkgoHelper()
	var workers []*workerProc
	for _, n := range []string{"a", "b", "c"} {
		workers = append(workers, startWorker(ns, "worker-"+n, "node-"+n, fmt.Sprintf("--capacity=%d", capacity)))
	}
	waitForWorkers(ns, workers...)
}

// lines reads a file of one task name per line.
func lines(path string) []string {
	GinkgoHelper()
	b, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	out := strings.Fields(string(b))
	slices.Sort(out)
	return out
}

// duplicates describes the tasks that ran more than once, with what their
// status knows of their attempts, to tell an attempt the manager knowingly
// ran again from a run nobody recorded.
func duplicates(ns, runs string) string {
	seen := map[string]int{}
	for _, name := range lines(runs) {
		seen[name]++
	}
	var out []string
	for _, t := range tasksIn(Default, ns) {
		if seen[t.Name] > 1 {
			out = append(out, fmt.Sprintf("%s ran %d times; status: phase %s, attempt %d, worker %s, attempts %+v",
				t.Name, seen[t.Name], t.Status.Phase, t.Status.Attempt, t.Status.Worker, t.Status.Attempts))
		}
	}
	return strings.Join(out, "; ")
}

var _ = Describe("ExternalTasks on worker processes", func() {
	var ns string

	BeforeEach(func() {
		ns = newNamespace()
		showManagerLogOnFailure()
	})

	It("runs 200 tasks over 3 workers, each exactly once, with three API writes for a short task dispatched at once", func() {
		runs := filepath.Join(GinkgoT().TempDir(), "runs")
		s := createQueue(ns, agentlanev1alpha1.LaneQueueSpec{
			Lanes: []agentlanev1alpha1.Lane{externalLane("execute", 0, 0, 0)},
		})
		startPool(ns, 4)
		tw := watchTasks(ns)

		By("running one task first, so the manager has seen the workers")
		warm := bashTask(s, "warm-up", "execute", "true")
		create(warm)
		Eventually(phaseOf(warm)).Should(Equal(agentlanev1alpha1.ExternalTaskSucceeded))

		By("counting the writes of one task created as the Session API creates it")
		single := asSubmitted(bashTask(s, "single", "execute", "echo one"), s)
		create(single)
		Eventually(phaseOf(single)).Should(Equal(agentlanev1alpha1.ExternalTaskSucceeded))
		Expect(meta.FindStatusCondition(single.Status.Conditions, agentlanev1alpha1.ExternalTaskFinishedCondition)).To(HaveField("Status", metav1.ConditionTrue))
		Consistently(func() int { return tw.writesOf("single") }, time.Second).Should(Equal(3),
			"create, Dispatched (manager), Succeeded with its start (worker): no Running write for a short run")

		By("creating 200 tasks directly, as kubectl would")
		names := make([]string, 200)
		for i := range names {
			names[i] = taskName("t", i)
			create(bashTask(s, names[i], "execute", fmt.Sprintf("echo %s >> %s", names[i], runs)))
		}
		Eventually(func(g Gomega) int {
			return countPhases(g, ns)[agentlanev1alpha1.ExternalTaskSucceeded]
		}, 3*time.Minute).Should(Equal(202))

		By("checking that every task ran once, on its first attempt, and that all workers took part")
		Expect(lines(runs)).To(Equal(names), "every task ran exactly once: %s", duplicates(ns, runs))
		perWorker := map[string]int{}
		for _, t := range tasksIn(Default, ns) {
			Expect(t.Status.Attempt).To(Equal(int32(1)), t.Name)
			Expect(t.Status.Attempts).To(BeEmpty(), t.Name)
			Expect(t.Labels).To(HaveKeyWithValue(agentlanev1alpha1.QueueLabel, "q1"), t.Name)
			Expect(t.OwnerReferences).To(ContainElement(HaveField("Name", s.Name)), t.Name)
			perWorker[t.Status.Worker]++
		}
		Expect(perWorker).To(HaveLen(3))
		for w, n := range perWorker {
			Expect(n).To(BeNumerically(">=", 20), "worker %s ran only %d of 202 tasks", w, n)
		}
		_, _, writes := tw.snapshot()
		total := 0
		for _, n := range names {
			total += writes[n]
		}
		AddReportEntry("API writes per task created directly (200 tasks)", fmt.Sprintf("%.2f", float64(total)/200))
		AddReportEntry("tasks per worker", perWorker)
		GinkgoWriter.Printf("writes: single task %d; 200 direct tasks %.2f on average; per worker %v\n",
			writes["single"], float64(total)/200, perWorker)
	})

	It("keeps lane priority and the queue's cap across workers", func() {
		s := createQueue(ns, agentlanev1alpha1.LaneQueueSpec{
			MaxConcurrent: 2,
			DefaultLane:   "bulk",
			Lanes:         []agentlanev1alpha1.Lane{externalLane("urgent", 0, 0, 0), externalLane("bulk", 1, 0, 0)},
		})
		startPool(ns, 2)
		tw := watchTasks(ns)

		By("filling the queue's two slots with bulk work")
		for i := range 6 {
			create(bashTask(s, taskName("bulk", i), "bulk", "sleep 1"))
		}
		Eventually(func(g Gomega) map[agentlanev1alpha1.ExternalTaskPhase]int {
			c := countPhases(g, ns)
			c[agentlanev1alpha1.ExternalTaskDispatched] += c[agentlanev1alpha1.ExternalTaskRunning]
			delete(c, agentlanev1alpha1.ExternalTaskRunning)
			// A new task is written Queued only once it has waited 2s.
			c[agentlanev1alpha1.ExternalTaskQueued] += c[""]
			delete(c, "")
			return c
		}).Should(Equal(map[agentlanev1alpha1.ExternalTaskPhase]int{
			agentlanev1alpha1.ExternalTaskDispatched: 2, agentlanev1alpha1.ExternalTaskQueued: 4,
		}))

		By("submitting urgent work behind it")
		for i := range 3 {
			create(bashTask(s, taskName("urgent", i), "urgent", "sleep 1"))
		}
		Eventually(func(g Gomega) int {
			return countPhases(g, ns)[agentlanev1alpha1.ExternalTaskSucceeded]
		}, time.Minute).Should(Equal(9))

		dispatched, maxHeld, _ := tw.snapshot()
		Expect(maxHeld).To(Equal(2), "never more than maxConcurrent tasks held by workers at once")
		Expect(dispatched).To(HaveLen(9))
		Expect(dispatched[0]).To(HavePrefix("bulk-"))
		Expect(dispatched[1]).To(HavePrefix("bulk-"))
		// Slots free up two at a time, and the two attempts granted together
		// are written in either order. The urgent tasks, submitted behind
		// four queued bulk tasks, take the next three slots: at most one bulk
		// task (granted with the third urgent one) is dispatched before the
		// last of them.
		last := 0
		for i, name := range dispatched {
			if strings.HasPrefix(name, "urgent-") {
				last = i
			}
		}
		Expect(last).To(BeNumerically("<=", 5),
			"the urgent lane goes first as soon as a slot frees up; dispatch order %v", dispatched)
		used := map[string]bool{}
		for _, t := range tasksIn(Default, ns) {
			used[t.Status.Worker] = true
		}
		Expect(len(used)).To(BeNumerically(">=", 2), "the two slots are spread over workers")
	})

	It("retries the tasks of a worker killed with SIGKILL on the other workers", func() {
		s := createQueue(ns, agentlanev1alpha1.LaneQueueSpec{
			Lanes: []agentlanev1alpha1.Lane{externalLane("execute", 0, 0, 0)},
			RetryPolicy: &agentlanev1alpha1.RetryPolicy{Strategy: agentlanev1alpha1.RetryFixed,
				FixedDelay: &metav1.Duration{Duration: 200 * time.Millisecond}, MaxRetries: ptr.To[int32](3)},
		})
		doomed := startWorker(ns, "worker-a", "node-a", "--capacity=2")
		waitForWorkers(ns, doomed)
		tasks := make([]*agentlanev1alpha1.ExternalTask, 4)
		for i := range tasks {
			// Long enough to be marked Running (after 2s) well before it ends.
			tasks[i] = bashTask(s, taskName("t", i), "execute", "sleep 6")
		}
		create(tasks...)
		Eventually(func(g Gomega) int {
			n := 0
			for _, t := range tasksIn(g, ns) {
				if t.Status.Worker == doomed.name && t.Status.Phase == agentlanev1alpha1.ExternalTaskRunning {
					n++
				}
			}
			return n
		}).Should(Equal(2), "worker-a runs two tasks")
		others := []*workerProc{
			startWorker(ns, "worker-b", "node-b", "--capacity=2"),
			startWorker(ns, "worker-c", "node-c", "--capacity=2"),
		}
		waitForWorkers(ns, others...)

		By("killing worker-a mid-task")
		doomed.kill()
		Eventually(func(g Gomega) int {
			return countPhases(g, ns)[agentlanev1alpha1.ExternalTaskSucceeded]
		}, time.Minute).Should(Equal(4), "nothing is lost")

		lost := 0
		for _, t := range tasksIn(Default, ns) {
			Expect(t.Status.Worker).NotTo(Equal(doomed.name), t.Name)
			if len(t.Status.Attempts) == 0 {
				Expect(t.Status.Attempt).To(Equal(int32(1)), t.Name)
				continue
			}
			lost++
			Expect(t.Status.Attempts).To(HaveExactElements(And(
				HaveField("Attempt", int32(1)),
				HaveField("Worker", doomed.name),
				HaveField("NodeName", "node-a"),
				HaveField("Outcome", agentlanev1alpha1.AttemptWorkerLost),
			)), t.Name)
			Expect(t.Status.Attempt).To(Equal(int32(2)), t.Name)
		}
		Expect(lost).To(Equal(2), "the two tasks worker-a held were retried")
	})

	It("dead-letters a task that always fails after maxRetries, recording every attempt", func() {
		s := createQueue(ns, agentlanev1alpha1.LaneQueueSpec{
			Lanes: []agentlanev1alpha1.Lane{externalLane("execute", 0, 0, 0)},
			RetryPolicy: &agentlanev1alpha1.RetryPolicy{Strategy: agentlanev1alpha1.RetryFixed,
				FixedDelay: &metav1.Duration{Duration: 100 * time.Millisecond}, MaxRetries: ptr.To[int32](2)},
		})
		w := startWorker(ns, "worker-a", "node-a")
		waitForWorkers(ns, w)
		task := bashTask(s, "always-fails", "execute", "echo boom >&2; exit 3")
		create(task)
		Eventually(phaseOf(task)).Should(Equal(agentlanev1alpha1.ExternalTaskDeadLettered))

		Expect(task.Status.Attempt).To(Equal(int32(3)))
		Expect(task.Status.Attempts).To(HaveLen(3))
		for i, a := range task.Status.Attempts {
			Expect(a.Attempt).To(Equal(int32(i + 1)))
			Expect(a.Outcome).To(Equal(agentlanev1alpha1.AttemptFailed))
			Expect(a.Worker).To(Equal(w.name))
			Expect(a.StartedAt).NotTo(BeNil())
			Expect(a.FinishedAt).NotTo(BeNil())
		}
		Expect(task.Status.Result).NotTo(BeNil(), "the last result is kept")
		Expect(task.Status.Result.ExitCode).To(HaveValue(Equal(int32(3))))
		Expect(meta.FindStatusCondition(task.Status.Conditions, agentlanev1alpha1.ExternalTaskFinishedCondition)).To(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", "DeadLettered")))

		lq := &agentlanev1alpha1.LaneQueue{}
		Eventually(func(g Gomega) int64 {
			g.Expect(k8sClient.Get(suiteCtx, types.NamespacedName{Namespace: ns, Name: "q1"}, lq)).To(Succeed())
			g.Expect(lq.Status.Lanes).To(HaveLen(1))
			return lq.Status.Lanes[0].DeadLettered
		}).Should(Equal(int64(1)))
	})

	It("deletes a session with its tasks, queued and finished, under the manager's generated role", func() {
		s := createQueue(ns, agentlanev1alpha1.LaneQueueSpec{
			Lanes: []agentlanev1alpha1.Lane{externalLane("execute", 0, 0, 1)},
		})
		w := startWorker(ns, "worker-a", "node-a")
		waitForWorkers(ns, w)
		done := bashTask(s, "done", "execute", "echo done")
		create(done)
		Eventually(phaseOf(done)).Should(Equal(agentlanev1alpha1.ExternalTaskSucceeded))
		// One runs and one waits behind it (per-session cap 1) when the
		// session goes.
		create(bashTask(s, "running", "execute", "sleep 30"), bashTask(s, "queued", "execute", "echo never"))
		Eventually(phaseOf(&agentlanev1alpha1.ExternalTask{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "running"}})).
			Should(Equal(agentlanev1alpha1.ExternalTaskRunning))

		Expect(k8sClient.Delete(suiteCtx, s)).To(Succeed())
		Eventually(func(g Gomega) {
			err := k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(s), &agentlanev1alpha1.AgentSession{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the session is still there: %v", err)
			g.Expect(tasksIn(g, ns)).To(BeEmpty())
		}).WithTimeout(30 * time.Second).Should(Succeed())
	})

	It("rejects the late completion of a worker that lost its attempt", func() {
		s := createQueue(ns, agentlanev1alpha1.LaneQueueSpec{
			Lanes: []agentlanev1alpha1.Lane{externalLane("execute", 0, 0, 0)},
			RetryPolicy: &agentlanev1alpha1.RetryPolicy{Strategy: agentlanev1alpha1.RetryFixed,
				FixedDelay: &metav1.Duration{Duration: 100 * time.Millisecond}, MaxRetries: ptr.To[int32](3)},
		})
		stale := startWorker(ns, "worker-a", "node-a", "--capacity=1")
		waitForWorkers(ns, stale)
		// Long enough for the worker to mark it Running (after 2s).
		task := bashTask(s, "contested", "execute", "sleep 5; echo done")
		create(task)
		Eventually(phaseOf(task)).Should(Equal(agentlanev1alpha1.ExternalTaskRunning))
		Expect(task.Status.Worker).To(Equal(stale.name))

		By("freezing worker-a so that its heartbeat lapses while its command runs on")
		stale.signal(syscall.SIGSTOP)
		fresh := startWorker(ns, "worker-b", "node-b")
		Eventually(phaseOf(task), time.Minute).Should(Equal(agentlanev1alpha1.ExternalTaskSucceeded))
		Expect(task.Status.Worker).To(Equal(fresh.name))
		Expect(task.Status.Attempt).To(Equal(int32(2)))
		Expect(task.Status.Attempts).To(HaveExactElements(And(
			HaveField("Worker", stale.name), HaveField("Outcome", agentlanev1alpha1.AttemptWorkerLost))))
		won := task.Status.DeepCopy()

		By("waking worker-a: its completion of attempt 1 must not count")
		stale.signal(syscall.SIGCONT)
		Eventually(stale.metrics).Should(Or(
			ContainSubstring(`agentlane_worker_fenced_writes_rejected_total{write="complete"} 1`),
			ContainSubstring(`agentlane_worker_tasks_finished_total{outcome="lost"} 1`)))
		Consistently(func(g Gomega) agentlanev1alpha1.ExternalTaskStatus {
			g.Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(task), task)).To(Succeed())
			return task.Status
		}, time.Second).Should(Equal(*won))

		By("sending worker-a's fenced completion of attempt 1 directly")
		patch := []byte(`[
			{"op":"test","path":"/status/worker","value":"worker-a"},
			{"op":"test","path":"/status/attempt","value":1},
			{"op":"test","path":"/status/phase","value":"Running"},
			{"op":"add","path":"/status/result","value":{"success":true}}]`)
		err := k8sClient.Status().Patch(suiteCtx, task, client.RawPatch(types.JSONPatchType, patch))
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "rejected with 422, got %v", err)
	})

	It("loses nothing and runs nothing twice when the manager is killed mid-run", func() {
		runs := filepath.Join(GinkgoT().TempDir(), "runs")
		s := createQueue(ns, agentlanev1alpha1.LaneQueueSpec{
			Lanes: []agentlanev1alpha1.Lane{externalLane("execute", 0, 4, 0)},
		})
		startPool(ns, 2)
		names := make([]string, 40)
		for i := range names {
			names[i] = taskName("t", i)
			create(bashTask(s, names[i], "execute", fmt.Sprintf("sleep 0.3; echo %s >> %s", names[i], runs)))
		}
		Eventually(func(g Gomega) int {
			return countPhases(g, ns)[agentlanev1alpha1.ExternalTaskSucceeded]
		}, time.Minute).Should(BeNumerically(">=", 8))

		By("killing the manager with SIGKILL and starting a new one")
		manager.kill()
		time.Sleep(500 * time.Millisecond) // running tasks finish while no manager runs
		during := countPhases(Default, ns)
		GinkgoWriter.Printf("phases while the manager was down: %v\n", during)
		manager = startManager()

		Eventually(func(g Gomega) int {
			return countPhases(g, ns)[agentlanev1alpha1.ExternalTaskSucceeded]
		}, 2*time.Minute).Should(Equal(40))
		Expect(lines(runs)).To(Equal(names), "every task ran exactly once: %s", duplicates(ns, runs))
		for _, t := range tasksIn(Default, ns) {
			Expect(t.Status.Attempt).To(Equal(int32(1)), t.Name)
			Expect(t.Status.Attempts).To(BeEmpty(), t.Name)
		}
	})

	It("runs a Job-target lane's task in a Job's one-shot worker, and fails it when the Job fails", func() {
		s := createQueue(ns, agentlanev1alpha1.LaneQueueSpec{
			DefaultLane: "batch",
			Lanes: []agentlanev1alpha1.Lane{{
				Name: "batch", Priority: 0, HandlerMode: agentlanev1alpha1.HandlerModeExternal,
				RetryPolicy: &agentlanev1alpha1.RetryPolicy{Strategy: agentlanev1alpha1.RetryNone},
				ExternalTarget: &agentlanev1alpha1.ExternalTarget{
					Type: agentlanev1alpha1.ExternalTargetJob,
					JobTemplate: &batchv1.JobTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"team": "infra"}},
						Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
							Containers: []corev1.Container{
								{Name: "sidecar", Image: "sidecar:latest"},
								{Name: "worker", Image: "agentlane-worker:latest", Args: []string{"--max-output-bytes=4096"}},
							},
						}}},
					},
				},
			}},
		})
		task := bashTask(s, "in-a-job", "batch", "echo from a job")
		create(task)

		By("expecting the Job for attempt 1")
		job := &batchv1.Job{}
		Eventually(func() error {
			return k8sClient.Get(suiteCtx, types.NamespacedName{Namespace: ns, Name: "in-a-job-1"}, job)
		}).Should(Succeed())
		Expect(job.Labels).To(And(
			HaveKeyWithValue("team", "infra"),
			HaveKeyWithValue("agentlane.io/task", "in-a-job"),
			HaveKeyWithValue(agentlanev1alpha1.QueueLabel, "q1"),
			HaveKeyWithValue(agentlanev1alpha1.LaneLabel, "batch"),
			HaveKeyWithValue(agentlanev1alpha1.SessionLabel, "s1"),
		))
		Expect(job.OwnerReferences).To(HaveExactElements(And(
			HaveField("Kind", "ExternalTask"), HaveField("Name", "in-a-job"), HaveField("Controller", HaveValue(BeTrue())))))
		Expect(job.Spec.BackoffLimit).To(HaveValue(Equal(int32(0))))
		Expect(job.Spec.Template.Spec.RestartPolicy).To(Equal(corev1.RestartPolicyNever))
		Expect(job.Spec.Template.Spec.Containers[0].Args).To(BeEmpty(), "only the worker container is changed")
		wc := job.Spec.Template.Spec.Containers[1]
		Expect(wc.Args).To(Equal([]string{"--max-output-bytes=4096", "--task=in-a-job"}))
		Expect(wc.Env).To(ContainElement(corev1.EnvVar{Name: "JOB_NAME", Value: "in-a-job-1"}))
		Eventually(phaseOf(task)).Should(Equal(agentlanev1alpha1.ExternalTaskDispatched))
		Expect(task.Status.JobName).To(Equal("in-a-job-1"))
		Expect(meta.FindStatusCondition(task.Status.Conditions, agentlanev1alpha1.ExternalTaskClaimedCondition)).To(HaveField("Reason", agentlanev1alpha1.ExternalTaskJobPendingReason))

		By("running the Job's pod: the worker binary in one-shot mode")
		pod := startProcess("in-a-job-1-pod", workerBin, workerKubeconfig,
			"--task=in-a-job", "--namespace="+ns, "--name=in-a-job-1-x7k2p", "--node-name=node-j", "--job-name=in-a-job-1")
		Eventually(pod.Done).Should(BeClosed())
		Expect(pod.Err).NotTo(HaveOccurred(), pod.logTail())
		Eventually(phaseOf(task)).Should(Equal(agentlanev1alpha1.ExternalTaskSucceeded))
		Expect(task.Status.Worker).To(Equal("in-a-job-1-x7k2p"))
		Expect(task.Status.NodeName).To(Equal("node-j"))
		Expect(string(task.Status.Result.Result.Raw)).To(ContainSubstring("from a job"))

		By("failing the Job of another task, as the Job controller would")
		doomed := bashTask(s, "job-fails", "batch", "true")
		create(doomed)
		Eventually(func() error {
			return k8sClient.Get(suiteCtx, types.NamespacedName{Namespace: ns, Name: "job-fails-1"}, job)
		}).Should(Succeed())
		now := metav1.Now()
		job.Status.StartTime = &now
		job.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded",
				Message: "Job has reached the specified backoff limit", LastTransitionTime: now, LastProbeTime: now},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded",
				Message: "Job has reached the specified backoff limit", LastTransitionTime: now, LastProbeTime: now},
		}
		job.Status.Failed = 1
		Expect(k8sClient.Status().Update(suiteCtx, job)).To(Succeed())
		Eventually(phaseOf(doomed)).Should(Equal(agentlanev1alpha1.ExternalTaskDeadLettered))
		Expect(doomed.Status.Attempts).To(HaveExactElements(And(
			HaveField("Outcome", agentlanev1alpha1.AttemptFailed),
			HaveField("Error", ContainSubstring("BackoffLimitExceeded")))))
	})
})
