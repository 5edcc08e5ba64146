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
	"errors"
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

var _ = Describe("Lane control in the Session API", func() {
	var a tenant
	BeforeEach(func() {
		a = newTenant()
		a.newQueue(internalLanes())
	})

	It("clears the session's queued commands of one lane, leaving running ones and other sessions alone", func() {
		a.newSession("s1", nil)
		a.newSession("s2", nil)
		s1, s2 := a.session("s1"), a.session("s2")
		// execute runs one command per session: c0 runs, c1 and c2 wait.
		for _, id := range []string{"c0", "c1", "c2"} {
			_, err := s1.Submit(ctx, queued(id, nil))
			Expect(err).NotTo(HaveOccurred())
		}
		for _, id := range []string{"d0", "d1"} {
			_, err := s2.Submit(ctx, queued(id, nil))
			Expect(err).NotTo(HaveOccurred())
		}

		n, err := s1.ClearLane(ctx, "execute")
		Expect(err).NotTo(HaveOccurred())
		Expect(n).To(Equal(2))
		for _, id := range []string{"c1", "c2"} {
			c, err := s1.Get(ctx, id, 5*time.Second)
			Expect(err).NotTo(HaveOccurred())
			Expect(c.State).To(Equal(sessionapi.StateCancelled))
			Expect(c.Error).To(ContainSubstring("lane was cleared"))
		}
		c, err := s1.Get(ctx, "c0", 0)
		Expect(err).NotTo(HaveOccurred())
		Expect(c.State).To(Equal(sessionapi.StateRunning))
		d, err := s2.Get(ctx, "d1", 0)
		Expect(err).NotTo(HaveOccurred())
		Expect(d.State).To(Equal(sessionapi.StateQueued))

		// Nothing left to clear; an unknown lane is a bad request.
		n, err = s1.ClearLane(ctx, "execute")
		Expect(err).NotTo(HaveOccurred())
		Expect(n).To(BeZero())
		_, err = s1.ClearLane(ctx, "nope")
		Expect(sessionapi.IsCode(err, sessionapi.CodeUnknownLane)).To(BeTrue(), "%v", err)

		// A caller without write access may not clear.
		_, err = clientWithToken("").Session(a.ns, "s1").ClearLane(ctx, "execute")
		Expect(sessionapi.IsCode(err, sessionapi.CodeUnauthenticated)).To(BeTrue(), "%v", err)
	})

	It("refuses submissions to a draining queue with 503 Draining and Retry-After, and takes them again after", func() {
		a.newSession("s1", nil)
		s := a.session("s1")
		_, err := s.Submit(ctx, queued("before", nil))
		Expect(err).NotTo(HaveOccurred())

		key := types.NamespacedName{Namespace: a.ns, Name: "q"}
		setDrain := func(d *agentlanev1alpha1.QueueDrain) {
			Eventually(func(g Gomega) {
				lq := &agentlanev1alpha1.LaneQueue{}
				g.Expect(k8sClient.Get(ctx, key, lq)).To(Succeed())
				lq.Spec.Drain = d
				g.Expect(k8sClient.Update(ctx, lq)).To(Succeed())
			}).Should(Succeed())
		}
		setDrain(&agentlanev1alpha1.QueueDrain{Timeout: &metav1.Duration{Duration: time.Hour}})
		Eventually(func(g Gomega) {
			_, err := s.Submit(ctx, queued("during", nil))
			var e *sessionapi.Error
			g.Expect(errors.As(err, &e)).To(BeTrue(), "%v", err)
			g.Expect(e.Status).To(Equal(http.StatusServiceUnavailable))
			g.Expect(e.Code).To(Equal(sessionapi.CodeDraining))
			g.Expect(e.RetryAfter).To(BeNumerically(">=", time.Second))
		}).Should(Succeed())
		st, err := s.Stats(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(st.Draining).To(BeTrue())
		// What was submitted before goes on: its result is still taken.
		_, err = s.Report(ctx, "before", sessionapi.ReportRequest{Attempt: 1, Result: sessionapi.Result{Success: true}})
		Expect(err).NotTo(HaveOccurred())

		setDrain(nil)
		Eventually(func() error {
			_, err := s.Submit(ctx, queued("after", nil))
			return err
		}).Should(Succeed())
		st, err = s.Stats(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(st.Draining).To(BeFalse())
	})

	It("shows a paused lane in the session's stats", func() {
		a.newSession("s1", nil)
		s := a.session("s1")
		key := types.NamespacedName{Namespace: a.ns, Name: "q"}
		Eventually(func(g Gomega) {
			lq := &agentlanev1alpha1.LaneQueue{}
			g.Expect(k8sClient.Get(ctx, key, lq)).To(Succeed())
			lq.Spec.Lanes[2].Paused = true // execute
			g.Expect(k8sClient.Update(ctx, lq)).To(Succeed())
		}).Should(Succeed())
		Eventually(func(g Gomega) map[string]bool {
			st, err := s.Stats(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			paused := map[string]bool{}
			for _, l := range st.Lanes {
				paused[l.Name] = l.Paused
			}
			return paused
		}).Should(And(HaveKeyWithValue("execute", true), HaveKeyWithValue("query", false)))
		c, err := s.Submit(ctx, queued("waits", nil))
		Expect(err).NotTo(HaveOccurred())
		Expect(c.State).To(Equal(sessionapi.StateQueued))
	})
})
