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

package sessionserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/testenv"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// heartbeatLanes: a Handler lane with a 5s heartbeatTimeout under a long
// timeout, one retry; and an Internal lane with a 2s timeout.
func heartbeatLanes() agentlanev1alpha1.LaneQueueSpec {
	spec := handlerLanes()
	spec.Lanes[0].HeartbeatTimeout = &metav1.Duration{Duration: 5 * time.Second}
	spec.Lanes = append(spec.Lanes, agentlanev1alpha1.Lane{Name: "execute", Priority: 2,
		Timeout:     &metav1.Duration{Duration: 2 * time.Second},
		RetryPolicy: &agentlanev1alpha1.RetryPolicy{Strategy: agentlanev1alpha1.RetryNone}})
	return spec
}

// taskWrites counts the writes to one ExternalTask, from a watch, until the
// spec ends.
type taskWrites struct {
	mu sync.Mutex
	n  int
}

func countTaskWrites(ns, name string) *taskWrites {
	GinkgoHelper()
	wc, err := client.NewWithWatch(restConfig, client.Options{Scheme: testenv.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	w, err := wc.Watch(ctx, &agentlanev1alpha1.ExternalTaskList{}, client.InNamespace(ns), client.MatchingFields{"metadata.name": name})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(w.Stop)
	tw := &taskWrites{}
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type == watch.Modified {
				tw.mu.Lock()
				tw.n++
				tw.mu.Unlock()
			}
		}
	}()
	return tw
}

func (tw *taskWrites) count() int {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	return tw.n
}

var _ = Describe("Heartbeats and deadline extensions", func() {
	It("keeps a handler's attempt alive past heartbeatTimeout while it heartbeats, at a bounded number of writes, and times it out once it stops", func() {
		t := newTenant()
		t.newQueue(heartbeatLanes())
		t.newSession("s", nil)
		handlerToken := t.tokenWith("handler", VerbRead, VerbComplete)
		handler := clientWithToken(handlerToken).Session(t.ns, "s")
		t.newSession("other", nil)
		other := newTenant()
		other.newQueue(heartbeatLanes())
		other.newSession("s", nil)
		otherHandler := other.tokenWith("handler", VerbRead, VerbComplete)
		_, err := t.session("s").Submit(ctx, sessionapi.SubmitRequest{ID: "long1", Type: "crawl", Lane: "handled",
			Wait: &metav1.Duration{Duration: 10 * time.Millisecond}})
		Expect(err).NotTo(HaveOccurred())
		task := &agentlanev1alpha1.ExternalTask{}
		key := types.NamespacedName{Namespace: t.ns, Name: "long1"}
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, key, task)).To(Succeed())
			g.Expect(task.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskDispatched))
			g.Expect(task.Status.HeartbeatTimeout).To(Equal(&metav1.Duration{Duration: 5 * time.Second}))
		}).Should(Succeed())
		writes := countTaskWrites(t.ns, "long1")

		By("heartbeats for another attempt, another session or namespace, or without the completion verb being refused")
		_, err = handler.Heartbeat(ctx, "long1", sessionapi.Heartbeat{Attempt: 2})
		Expect(sessionapi.IsCode(err, sessionapi.CodeStaleAttempt)).To(BeTrue(), "%v", err)
		_, err = clientWithToken(handlerToken).Session(t.ns, "other").Heartbeat(ctx, "long1", sessionapi.Heartbeat{Attempt: 1})
		Expect(sessionapi.IsCode(err, sessionapi.CodeCommandNotFound)).To(BeTrue(), "%v", err)
		_, err = t.session("s").Heartbeat(ctx, "long1", sessionapi.Heartbeat{Attempt: 1})
		Expect(sessionapi.IsCode(err, sessionapi.CodeForbidden)).To(BeTrue(), "submitting does not grant heartbeats: %v", err)
		code, body := other.rawCall(otherHandler, http.MethodPost, "s", "/external/long1/heartbeat", map[string]any{"attempt": 1})
		Expect(code).To(Equal(http.StatusNotFound), "another namespace's task: %v", body)
		_, err = handler.Heartbeat(ctx, "long1", sessionapi.Heartbeat{Attempt: 1, Progress: strings.Repeat("x", sessionapi.MaxProgressBytes+1)})
		Expect(sessionapi.IsCode(err, sessionapi.CodeTooLarge)).To(BeTrue(), "%v", err)

		By("a handler heartbeating in a tight loop for twice the heartbeatTimeout")
		start := time.Now()
		posted, recorded := 0, 0
		for time.Since(start) < 10*time.Second {
			res, err := handler.Heartbeat(ctx, "long1", sessionapi.Heartbeat{Attempt: 1, Progress: fmt.Sprintf("page %d", posted)})
			if sessionapi.IsCode(err, sessionapi.CodeRateLimited) {
				continue
			}
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Attempt).To(Equal(1))
			Expect(res.HeartbeatTimeoutSeconds).To(BeNumerically("==", 5))
			posted++
			if res.Recorded {
				recorded++
			}
		}
		elapsed := time.Since(start)
		Expect(k8sClient.Get(ctx, key, task)).To(Succeed())
		Expect(task.Status.Attempt).To(Equal(int32(1)), "heartbeats kept attempt 1 alive past its heartbeatTimeout")
		Expect(task.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskDispatched))
		Expect(task.Status.LastHeartbeatAt).NotTo(BeNil())
		Expect(task.Status.Progress).To(HavePrefix("page "))
		// One write per quarter of the heartbeatTimeout (1.25s) at most;
		// the count is read after the loop, so a late watch event only
		// lowers it.
		Expect(writes.count()).To(BeNumerically("<=", int(elapsed/(1250*time.Millisecond))+1),
			"%d writes for %d heartbeats in %s", writes.count(), posted, elapsed)
		Expect(recorded).To(BeNumerically("<=", int(elapsed/(1250*time.Millisecond))+1))
		Expect(posted).To(BeNumerically(">", recorded))
		AddReportEntry("handler heartbeats", fmt.Sprintf("%d heartbeats posted, %d recorded, %d task writes in %s", posted, recorded, writes.count(), elapsed))

		By("the handler going silent: the attempt times out on its heartbeat and is retried")
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, key, task)).To(Succeed())
			g.Expect(task.Status.Attempts).NotTo(BeEmpty())
		}, time.Minute).Should(Succeed())
		rec := task.Status.Attempts[0]
		Expect(rec.Attempt).To(Equal(int32(1)))
		Expect(rec.Outcome).To(Equal(agentlanev1alpha1.AttemptTimedOut))
		Expect(rec.Error).To(ContainSubstring("no heartbeat for"))
		Expect(rec.Error).To(ContainSubstring("(lane handled heartbeatTimeout 5s)"))
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, key, task)).To(Succeed())
			g.Expect(task.Status.Attempt).To(Equal(int32(2)))
			g.Expect(task.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskDispatched))
		}, time.Minute).Should(Succeed())
		Expect(task.Status.LastHeartbeatAt).To(BeNil(), "attempt 2 starts without attempt 1's heartbeat")
		Expect(task.Status.Progress).To(BeEmpty())

		By("the retry completed")
		_, err = handler.Complete(ctx, "long1", sessionapi.Completion{Attempt: 2, Success: true, Result: json.RawMessage(`{}`)})
		Expect(err).NotTo(HaveOccurred())
	})

	It("lets the session's owner extend a running command's deadline within its bounds", func() {
		t := newTenant()
		t.newQueue(heartbeatLanes())
		t.newSession("s", nil)
		s := t.session("s")
		reader := clientWithToken(t.tokenWith("reader", VerbRead)).Session(t.ns, "s")

		By("an Internal command with a 2s timeout, extended by 10s")
		granted, err := s.Submit(ctx, sessionapi.SubmitRequest{ID: "slow1", Type: "bash", Lane: "execute"})
		Expect(err).NotTo(HaveOccurred())
		Expect(granted.Grant).NotTo(BeNil())
		_, err = reader.Extend(ctx, "slow1", 0, 10*time.Second)
		Expect(sessionapi.IsCode(err, sessionapi.CodeForbidden)).To(BeTrue(), "a reader may not extend: %v", err)
		x, err := s.Extend(ctx, "slow1", granted.Grant.Attempt, 10*time.Second)
		Expect(err).NotTo(HaveOccurred())
		Expect(x.Attempt).To(Equal(1))
		Expect(x.Extensions).To(Equal(1))
		Expect(x.Deadline).To(BeTemporally("~", granted.Grant.Deadline.Add(10*time.Second), time.Millisecond))
		cmd, err := s.Get(ctx, "slow1", 0)
		Expect(err).NotTo(HaveOccurred())
		Expect(cmd.Grant).NotTo(BeNil())
		Expect(cmd.Grant.Deadline).To(BeTemporally("~", x.Deadline, time.Millisecond), "the grant shows the new deadline")

		By("the command still running past its timeout")
		Eventually(func() bool { return time.Now().After(granted.Grant.Deadline.Add(time.Second)) }, time.Minute).Should(BeTrue())
		cmd, err = s.Get(ctx, "slow1", 0)
		Expect(err).NotTo(HaveOccurred())
		Expect(cmd.State).To(Equal("Running"), "%+v", cmd)

		By("the bounds: no extension by less than 1s, none past 10 times the timeout, at most 8")
		_, err = s.Extend(ctx, "slow1", 0, 0)
		Expect(sessionapi.IsCode(err, sessionapi.CodeInvalidRequest)).To(BeTrue(), "%v", err)
		_, err = s.Extend(ctx, "slow1", 0, time.Minute)
		Expect(sessionapi.IsCode(err, sessionapi.CodeExtendRefused)).To(BeTrue(), "past 20s in all: %v", err)
		_, err = s.Extend(ctx, "slow1", 2, time.Second)
		Expect(sessionapi.IsCode(err, sessionapi.CodeStaleAttempt)).To(BeTrue(), "%v", err)
		for range 7 {
			_, err = s.Extend(ctx, "slow1", 0, time.Second)
			Expect(err).NotTo(HaveOccurred())
		}
		_, err = s.Extend(ctx, "slow1", 0, time.Second)
		Expect(sessionapi.IsCode(err, sessionapi.CodeExtendRefused)).To(BeTrue(), "a ninth extension: %v", err)
		t.newSession("other", nil)
		_, err = t.session("other").Extend(ctx, "slow1", 0, time.Second)
		Expect(sessionapi.IsCode(err, sessionapi.CodeCommandNotFound)).To(BeTrue(), "another session's command: %v", err)

		_, err = s.Report(ctx, "slow1", sessionapi.ReportRequest{Attempt: 1, Result: sessionapi.Result{Success: true}})
		Expect(err).NotTo(HaveOccurred())

		By("an External command's extension recorded in its task")
		_, err = s.Submit(ctx, sessionapi.SubmitRequest{ID: "long2", Type: "crawl", Lane: "handled",
			Wait: &metav1.Duration{Duration: 10 * time.Millisecond}})
		Expect(err).NotTo(HaveOccurred())
		task := &agentlanev1alpha1.ExternalTask{}
		key := types.NamespacedName{Namespace: t.ns, Name: "long2"}
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, key, task)).To(Succeed())
			g.Expect(task.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskDispatched))
		}).Should(Succeed())
		Eventually(func() error {
			x, err = s.Extend(ctx, "long2", 1, 5*time.Minute)
			return err
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, key, task)).To(Succeed())
			g.Expect(task.Status.Extensions).To(Equal(int32(1)))
			g.Expect(task.Status.Deadline).NotTo(BeNil())
			g.Expect(task.Status.Deadline.Time).To(BeTemporally("~", x.Deadline, time.Second))
		}).Should(Succeed())
	})
})
