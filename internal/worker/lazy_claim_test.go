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
	"path/filepath"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// statusWrites records the phases of every write to the tasks of ns.
type statusWrites struct {
	mu     sync.Mutex
	phases map[string][]agentlanev1alpha1.ExternalTaskPhase
}

func watchWrites(ns string) *statusWrites {
	GinkgoHelper()
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: k8sClient.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	w, err := wc.Watch(suiteCtx, &agentlanev1alpha1.ExternalTaskList{}, client.InNamespace(ns))
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(w.Stop)
	sw := &statusWrites{phases: map[string][]agentlanev1alpha1.ExternalTaskPhase{}}
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type != watch.Added && ev.Type != watch.Modified {
				continue
			}
			t := ev.Object.(*agentlanev1alpha1.ExternalTask)
			sw.mu.Lock()
			sw.phases[t.Name] = append(sw.phases[t.Name], t.Status.Phase)
			sw.mu.Unlock()
		}
	}()
	return sw
}

func (s *statusWrites) of(name string) []agentlanev1alpha1.ExternalTaskPhase {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]agentlanev1alpha1.ExternalTaskPhase(nil), s.phases[name]...)
}

var _ = Describe("A worker's writes", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("reports a short run's start and result in one write, without a Running write", func() {
		startWorker(Options{Name: "w-short", Namespace: ns})
		writes := watchWrites(ns)
		t := bashTask(ns, "quick", "echo quick").dispatch("w-short")

		cur := resultOf(t)
		Expect(cur.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskSucceeded))
		Expect(cur.Status.StartedAt).NotTo(BeNil(), "the start is recorded with the result")
		Expect(cur.Status.FinishedAt).NotTo(BeNil())
		Expect(output(cur).Stdout).To(Equal("quick\n"))
		// Created, dispatched (by the test, as the manager), reported.
		Consistently(func() []agentlanev1alpha1.ExternalTaskPhase { return writes.of(t.Name) }, time.Second).Should(Equal(
			[]agentlanev1alpha1.ExternalTaskPhase{"", agentlanev1alpha1.ExternalTaskDispatched, agentlanev1alpha1.ExternalTaskSucceeded}))
	})

	It("reports a short failed run Running with its result, for the manager's retry policy", func() {
		startWorker(Options{Name: "w-short-fail", Namespace: ns})
		t := bashTask(ns, "quick-fail", "exit 4").dispatch("w-short-fail")

		cur := resultOf(t)
		Expect(cur.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskRunning))
		Expect(cur.Status.StartedAt).NotTo(BeNil())
		Expect(cur.Status.Result.Success).To(BeFalse())
	})

	It("marks a run Running once it has lasted RunningAfter", func() {
		startWorker(Options{Name: "w-long", Namespace: ns, RunningAfter: 300 * time.Millisecond})
		writes := watchWrites(ns)
		t := bashTask(ns, "slow", "sleep 1.5; echo slow").dispatch("w-long")

		Eventually(phaseOf(t)).Should(Equal(agentlanev1alpha1.ExternalTaskRunning))
		Expect(get(Default, t).Status.Result).To(BeNil(), "Running while it runs")
		Eventually(phaseOf(t)).Should(Equal(agentlanev1alpha1.ExternalTaskSucceeded))
		// The watch may deliver the last write after the read above saw it.
		Eventually(func() []agentlanev1alpha1.ExternalTaskPhase { return writes.of(t.Name) }).Should(Equal([]agentlanev1alpha1.ExternalTaskPhase{"",
			agentlanev1alpha1.ExternalTaskDispatched, agentlanev1alpha1.ExternalTaskRunning, agentlanev1alpha1.ExternalTaskSucceeded}))
	})

	It("records when a run really started, not when its late Running write was sent", func() {
		startWorker(Options{Name: "w-started", Namespace: ns, RunningAfter: 2 * time.Second})
		t := bashTask(ns, "three-seconds", "sleep 3; echo done").dispatch("w-started")

		Eventually(phaseOf(t)).Should(Equal(agentlanev1alpha1.ExternalTaskRunning))
		cur := resultOf(t)
		Expect(cur.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskSucceeded))
		// Times have one-second resolution: a run of 3 s started at s ends
		// at or after s+3 whatever the rounding, while a start taken from
		// the Running write (s+2) would leave 2 s at most.
		Expect(cur.Status.FinishedAt.Sub(cur.Status.StartedAt.Time)).To(BeNumerically(">=", 3*time.Second),
			"started %s, finished %s", cur.Status.StartedAt, cur.Status.FinishedAt)
	})

	It("stops a run it has not claimed yet and drops its result when the manager takes the attempt away", func() {
		marker := filepath.Join(GinkgoT().TempDir(), "finished")
		startWorker(Options{Name: "w-unclaimed", Namespace: ns})
		lost := counter(tasksFinished.WithLabelValues(outcomeLost))
		started := counter(tasksStarted)
		t := bashTask(ns, "taken-early", "sleep 1; touch "+marker).dispatch("w-unclaimed")
		Eventually(func() float64 { return counter(tasksStarted) }).Should(BeNumerically(">", started))

		updateStatus(t, func(st *agentlanev1alpha1.ExternalTaskStatus) {
			st.Attempt = 2
			st.Worker = "w-other"
		})
		Eventually(func() float64 { return counter(tasksFinished.WithLabelValues(outcomeLost)) }).Should(Equal(lost + 1))
		Consistently(func(g Gomega) {
			st := get(g, t).Status
			g.Expect(st.Attempt).To(Equal(int32(2)))
			g.Expect(st.Phase).To(Equal(agentlanev1alpha1.ExternalTaskDispatched))
			g.Expect(st.Result).To(BeNil())
			g.Expect(st.StartedAt).To(BeNil())
			g.Expect(marker).NotTo(BeAnExistingFile(), "the run was stopped")
		}, 1500*time.Millisecond).Should(Succeed())
	})
})
