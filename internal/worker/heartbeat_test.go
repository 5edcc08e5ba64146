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
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/workerproto"
)

// heartbeatWrites watches the task and records every write to it (its
// resourceVersion moved) and each heartbeat those writes carry, until the
// spec ends.
type heartbeatWrites struct {
	mu     sync.Mutex
	writes int
	beats  []metav1.MicroTime
	notes  []string
}

func watchHeartbeats(t *agentlanev1alpha1.ExternalTask) *heartbeatWrites {
	GinkgoHelper()
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: Scheme()})
	Expect(err).NotTo(HaveOccurred())
	w, err := wc.Watch(suiteCtx, &agentlanev1alpha1.ExternalTaskList{}, client.InNamespace(t.Namespace),
		client.MatchingFields{"metadata.name": t.Name})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(w.Stop)
	h := &heartbeatWrites{}
	go func() {
		defer GinkgoRecover()
		var last *metav1.MicroTime
		for ev := range w.ResultChan() {
			task, ok := ev.Object.(*agentlanev1alpha1.ExternalTask)
			if !ok || ev.Type != watch.Modified {
				continue
			}
			h.mu.Lock()
			h.writes++
			if hb := task.Status.LastHeartbeatAt; hb != nil && (last == nil || !hb.Equal(last)) {
				last = hb
				h.beats = append(h.beats, *hb)
				h.notes = append(h.notes, task.Status.Progress)
			}
			h.mu.Unlock()
		}
	}()
	return h
}

func (h *heartbeatWrites) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.beats)
}

var _ = Describe("Worker heartbeats", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("writes at most one heartbeat per interval for a command that writes its heartbeat file in a tight loop", func() {
		startWorker(Options{Name: "w-hb", Namespace: ns})
		dir := GinkgoT().TempDir()
		stop := filepath.Join(dir, "stop")
		cmd := fmt.Sprintf(`i=0; while [ ! -e %q ]; do i=$((i+1)); echo "step $i" >> "$AGENTLANE_HEARTBEAT_FILE"; done; echo "$i"`, stop)
		t := bashTask(ns, "flood", cmd).create()
		writes := watchHeartbeats(t)
		const hbTimeout = 2 * time.Second // interval: 500ms
		dispatched := time.Now()
		t = updateStatus(t, func(st *agentlanev1alpha1.ExternalTaskStatus) {
			dispatchStatus(st, "w-hb", testLane, 1)
			st.HeartbeatTimeout = &metav1.Duration{Duration: hbTimeout}
		})

		Eventually(writes.count, time.Minute).Should(BeNumerically(">=", 4))
		Expect(os.WriteFile(stop, nil, 0o600)).To(Succeed())
		cur := resultOf(t)
		Expect(cur.Status.Result.Success).To(BeTrue(), cur.Status.Result.Error)
		loops, err := strconv.Atoi(strings.TrimSpace(output(cur).Stdout))
		Expect(err).NotTo(HaveOccurred())

		elapsed := time.Since(dispatched)
		writes.mu.Lock()
		defer writes.mu.Unlock()
		n := len(writes.beats)
		interval := workerproto.HeartbeatInterval(&metav1.Duration{Duration: hbTimeout})
		// Besides the heartbeats: the dispatch, the claim and the result.
		Expect(writes.writes).To(BeNumerically("<=", int(elapsed/interval)+1+3),
			"%d writes (%d heartbeats) in %s for %d writes of the heartbeat file", writes.writes, n, elapsed, loops)
		Expect(loops).To(BeNumerically(">", writes.writes), "the command wrote its file more often than the worker wrote the task")
		for _, note := range writes.notes {
			Expect(note).To(HavePrefix("step "))
		}
		AddReportEntry("heartbeat writes", fmt.Sprintf("%d writes of the task (%d heartbeats) in %s for %d writes of the heartbeat file", writes.writes, n, elapsed, loops))
	})

	It("claims an attempt of a heartbeat lane at once, without waiting for RunningAfter", func() {
		startWorker(Options{Name: "w-hb-claim", Namespace: ns, RunningAfter: time.Hour})
		dir := GinkgoT().TempDir()
		stop := filepath.Join(dir, "stop")
		t := bashTask(ns, "claimed", fmt.Sprintf(`while [ ! -e %q ]; do sleep 0.05; done`, stop)).create()
		updateStatus(t, func(st *agentlanev1alpha1.ExternalTaskStatus) {
			dispatchStatus(st, "w-hb-claim", testLane, 1)
			st.HeartbeatTimeout = &metav1.Duration{Duration: 10 * time.Second}
		})
		Eventually(phaseOf(t), time.Minute).Should(Equal(agentlanev1alpha1.ExternalTaskRunning))
		Expect(os.WriteFile(stop, nil, 0o600)).To(Succeed())
		Eventually(phaseOf(t), time.Minute).Should(Equal(agentlanev1alpha1.ExternalTaskSucceeded))
	})

	It("moves a run's own bound to the extended deadline its task records", func() {
		startWorker(Options{Name: "w-ext", Namespace: ns})
		dir := GinkgoT().TempDir()
		started := filepath.Join(dir, "started")
		proceed := filepath.Join(dir, "proceed")
		// The command outlives its 5s spec.timeout only if the bound moved
		// (the worker hears of the extension well within those 5s).
		cmd := fmt.Sprintf(`touch %q; while [ ! -e %q ]; do sleep 0.05; done; sleep 7; echo done`, started, proceed)
		t := bashTask(ns, "extended", cmd).timeout(5 * time.Second).create()
		t = dispatch(t, "w-ext", testLane, 1)
		Eventually(func() error { _, err := os.Stat(started); return err }, time.Minute).Should(Succeed())
		updateStatus(t, func(st *agentlanev1alpha1.ExternalTaskStatus) {
			d := metav1.NewTime(time.Now().Add(time.Minute))
			st.Deadline, st.Extensions = &d, 1
		})
		Expect(os.WriteFile(proceed, nil, 0o600)).To(Succeed())
		cur := resultOf(t)
		Expect(cur.Status.Result.Success).To(BeTrue(), cur.Status.Result.Error)
		Expect(output(cur).Stdout).To(Equal("done\n"))
	})
})
