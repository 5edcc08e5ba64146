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

package chaos

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// The pool every scenario starts with: poolSize workers of workerCapacity
// slots, and an External lane capped at their combined capacity.
const (
	poolSize       = 4
	workerCapacity = 6
	laneName       = "execute"
	maxRetries     = 5
	// drainTimeout bounds how long the tasks may take to finish after the
	// fault; a task still unfinished then is stuck.
	drainTimeout = 3 * time.Minute
)

// taskKind is how a task's command behaves.
type taskKind int

const (
	// succeeds: the command succeeds on every attempt.
	succeeds taskKind = iota
	// fails: the command fails on every attempt, so the task is
	// dead-lettered after its retries.
	fails
	// flaky: the first attempt that gets to its end fails, the next ones
	// succeed.
	flaky
)

// plannedTask is one task of a scenario and what its command does.
type plannedTask struct {
	name  string
	kind  taskKind
	sleep time.Duration
}

// scenario is one run of the chaos suite: a namespace with a LaneQueue,
// a session, a worker pool and the planned tasks; every random choice comes
// from rng, derived from the suite's seed and the scenario's title.
type scenario struct {
	title   string
	rng     *rand.Rand
	ns      string
	dir     string
	session *agentlanev1alpha1.AgentSession
	tasks   []plannedTask
	workers []workerSpec
	// procs are the running worker processes, by worker name.
	procs   map[string]*process
	watch   *dispatchWatch
	faultAt time.Time
}

// newScenario plans the tasks of a scenario. Call it after a manager runs:
// it creates the queue and waits for the session to bind.
func newScenario(title string) *scenario {
	GinkgoHelper()
	h := fnv.New64a()
	h.Write([]byte(title))
	s := &scenario{
		title: title,
		rng:   rand.New(rand.NewPCG(uint64(seed), h.Sum64())),
		dir:   scenarioDir(title),
		procs: map[string]*process{},
	}
	Expect(os.Mkdir(filepath.Join(s.dir, "flaky"), 0o700)).To(Succeed())
	for i := range poolSize {
		s.workers = append(s.workers, workerSpec{
			name: fmt.Sprintf("worker-%d", i), node: fmt.Sprintf("node-%d", i),
			runLog: filepath.Join(s.dir, fmt.Sprintf("worker-%d.runs", i)), capacity: workerCapacity,
		})
	}
	for i := range taskCount {
		t := plannedTask{name: fmt.Sprintf("t-%04d", i), sleep: time.Duration(200+s.rng.IntN(1000)) * time.Millisecond}
		switch r := s.rng.IntN(100); {
		case r < 5:
			t.kind = fails
		case r < 15:
			t.kind = flaky
		}
		s.tasks = append(s.tasks, t)
	}
	s.createQueue()
	s.watch = watchDispatches(s.ns)
	return s
}

// scenarioDir makes the directory of the scenario's run records.
func scenarioDir(title string) string {
	GinkgoHelper()
	dir, err := os.MkdirTemp(workDir, "scenario-")
	Expect(err).NotTo(HaveOccurred())
	Expect(os.WriteFile(filepath.Join(dir, "title"), []byte(title+"\n"), 0o600)).To(Succeed())
	return dir
}

// createQueue creates the scenario's namespace, LaneQueue and session.
func (s *scenario) createQueue() {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "chaos-"}}
	Expect(k8sClient.Create(suiteCtx, ns)).To(Succeed())
	s.ns = ns.Name
	lq := &agentlanev1alpha1.LaneQueue{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "q1"},
		Spec: agentlanev1alpha1.LaneQueueSpec{
			Lanes: []agentlanev1alpha1.Lane{{
				Name: laneName, HandlerMode: agentlanev1alpha1.HandlerModeExternal,
				MaxConcurrency: poolSize * workerCapacity,
			}},
			RetryPolicy: &agentlanev1alpha1.RetryPolicy{Strategy: agentlanev1alpha1.RetryFixed,
				FixedDelay: &metav1.Duration{Duration: 200 * time.Millisecond}, MaxRetries: ptr.To[int32](maxRetries)},
		},
	}
	Expect(k8sClient.Create(suiteCtx, lq)).To(Succeed())
	s.session = &agentlanev1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "s1"},
		Spec: agentlanev1alpha1.AgentSessionSpec{
			QueueRef:  agentlanev1alpha1.LaneQueueReference{Name: "q1"},
			Retention: &agentlanev1alpha1.SessionRetention{MaxFinishedTasks: ptr.To[int32](10000)},
		},
	}
	Expect(k8sClient.Create(suiteCtx, s.session)).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(s.session), s.session)).To(Succeed())
		g.Expect(s.session.Status.Phase).To(Equal(agentlanev1alpha1.SessionActive))
	}).Should(Succeed())
}

// startPool starts every worker of the pool with the grace period and
// waits for their Leases.
func (s *scenario) startPool(grace time.Duration) {
	GinkgoHelper()
	for _, w := range s.workers {
		s.startWorker(w, grace)
	}
}

// startWorker starts (or restarts) one worker and waits for its Lease.
func (s *scenario) startWorker(w workerSpec, grace time.Duration) {
	GinkgoHelper()
	s.procs[w.name] = startWorker(s.ns, w, grace)
	Eventually(func() error {
		return k8sClient.Get(suiteCtx, types.NamespacedName{Namespace: s.ns, Name: "agentlane-worker-" + w.name}, &coordinationv1.Lease{})
	}).Should(Succeed())
}

// half picks half of the pool at random.
func (s *scenario) half() []workerSpec {
	picked := make([]workerSpec, len(s.workers))
	for i, j := range s.rng.Perm(len(s.workers)) {
		picked[i] = s.workers[j]
	}
	return picked[:len(picked)/2]
}

// command is the shell command of t: it first records the run in the
// worker's run log, so the log holds every execution that started.
func (s *scenario) command(t plannedTask) string {
	record := fmt.Sprintf(`echo %s >> "$CHAOS_RUNLOG"; sleep %.3f; `, t.name, t.sleep.Seconds())
	switch t.kind {
	case fails:
		return record + "echo failing on purpose >&2; exit 3"
	case flaky:
		return record + fmt.Sprintf("mkdir %s 2>/dev/null && exit 3; exit 0", filepath.Join(s.dir, "flaky", t.name))
	case succeeds:
		return record + "echo done"
	default:
		panic(fmt.Sprintf("task %s: unknown kind %d", t.name, t.kind))
	}
}

// submit creates every planned task, several at a time as many sessions
// would.
func (s *scenario) submit() {
	GinkgoHelper()
	const parallel = 8
	next := make(chan plannedTask)
	errs := make(chan error, parallel)
	for range parallel {
		go func() {
			var err error
			for t := range next {
				if err == nil {
					err = k8sClient.Create(suiteCtx, s.task(t))
				}
			}
			errs <- err
		}()
	}
	for _, t := range s.tasks {
		next <- t
	}
	close(next)
	for range parallel {
		Expect(<-errs).To(Succeed())
	}
}

// task is the ExternalTask of t.
func (s *scenario) task(t plannedTask) *agentlanev1alpha1.ExternalTask {
	raw, _ := json.Marshal(map[string]string{"command": s.command(t)})
	return &agentlanev1alpha1.ExternalTask{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: t.name},
		Spec: agentlanev1alpha1.ExternalTaskSpec{
			SessionRef:  &agentlanev1alpha1.AgentSessionReference{Name: s.session.Name},
			Lane:        laneName,
			CommandType: "bash",
			Payload:     &runtime.RawExtension{Raw: raw},
		},
	}
}

// waitForProgress waits until a fraction of the tasks finished, with many
// more in flight, and marks the moment of the fault.
func (s *scenario) waitForProgress(fraction float64) {
	GinkgoHelper()
	want := int(float64(len(s.tasks)) * fraction)
	Eventually(func(g Gomega) int {
		return finished(tasksIn(g, s.ns))
	}, 2*time.Minute).Should(BeNumerically(">=", want))
	s.faultAt = time.Now()
}

// drain waits until every task finished and returns how long that took
// from the fault; past drainTimeout it returns what it has, and the audit
// counts the unfinished tasks as stuck.
func (s *scenario) drain() time.Duration {
	deadline := time.Now().Add(drainTimeout)
	for time.Now().Before(deadline) {
		list := &agentlanev1alpha1.ExternalTaskList{}
		if err := k8sClient.List(suiteCtx, list, client.InNamespace(s.ns)); err == nil && finished(list.Items) == len(s.tasks) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	return time.Since(s.faultAt)
}

// tasksIn lists the tasks of namespace ns.
func tasksIn(g Gomega, ns string) []agentlanev1alpha1.ExternalTask {
	list := &agentlanev1alpha1.ExternalTaskList{}
	g.Expect(k8sClient.List(suiteCtx, list, client.InNamespace(ns))).To(Succeed())
	return list.Items
}

// finished counts the tasks in a terminal phase.
func finished(tasks []agentlanev1alpha1.ExternalTask) int {
	n := 0
	for _, t := range tasks {
		if terminal(t.Status.Phase) {
			n++
		}
	}
	return n
}

func terminal(p agentlanev1alpha1.ExternalTaskPhase) bool {
	switch p {
	case agentlanev1alpha1.ExternalTaskSucceeded, agentlanev1alpha1.ExternalTaskFailed, agentlanev1alpha1.ExternalTaskTimedOut,
		agentlanev1alpha1.ExternalTaskDeadLettered, agentlanev1alpha1.ExternalTaskCancelled:
		return true
	}
	return false
}
