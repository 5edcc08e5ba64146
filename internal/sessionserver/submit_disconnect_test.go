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
	"context"
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agentlane/agentlane/pkg/sessionapi"
)

var _ = Describe("A submission whose client disconnects", func() {
	It("cancels a command not granted yet and frees its pending place; a dispatched External one goes on", func() {
		a := newTenant()
		lanes := internalLanes()
		lanes.Lanes = append(lanes.Lanes, handlerLanes().Lanes...)
		a.newQueue(lanes)
		a.newSession("s1", nil)
		s := a.session("s1")
		key := types.NamespacedName{Namespace: a.ns, Name: "s1"}
		DeferCleanup(func() { _, _ = s.Cancel(ctx, sessionapi.CancelRequest{Session: true}) })

		By("a command holding the execute lane's only slot")
		busy, err := s.Submit(ctx, sessionapi.SubmitRequest{ID: "busy", Type: "bash", Lane: "execute"})
		Expect(err).NotTo(HaveOccurred())
		Expect(busy.Grant).NotTo(BeNil())

		By("a submission waiting behind it, abandoned by its client")
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := s.Submit(cctx, sessionapi.SubmitRequest{ID: "waiter", Type: "bash", Lane: "execute",
				Wait: &metav1.Duration{Duration: 30 * time.Second}})
			done <- err
		}()
		Eventually(func(g Gomega) {
			c, err := s.Get(ctx, "waiter", 0)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(c.State).To(Equal(sessionapi.StateQueued))
		}).Should(Succeed())
		Expect(pendingOf(key)[0]).To(BeEquivalentTo(2))
		cancel()
		Eventually(done).Should(Receive(MatchError(context.Canceled)))

		Eventually(func(g Gomega) {
			c, err := s.Get(ctx, "waiter", 0)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(c.State).To(Equal(sessionapi.StateCancelled))
			g.Expect(c.Error).To(ContainSubstring("disconnected before an attempt was granted"))
		}).Should(Succeed())
		Eventually(func() int64 { return pendingOf(key)[0] }).Should(BeEquivalentTo(1), "its pending place is freed")
		c, err := s.Get(ctx, "busy", 0)
		Expect(err).NotTo(HaveOccurred())
		Expect(c.State).To(Equal(sessionapi.StateRunning), "other commands go on")

		By("an External command dispatched to handlers before its client went away")
		xctx, xcancel := context.WithCancel(ctx)
		defer xcancel()
		go func() {
			_, err := s.Submit(xctx, sessionapi.SubmitRequest{ID: "wc1", Type: "wordcount", Lane: "handled",
				Wait: &metav1.Duration{Duration: 30 * time.Second}})
			done <- err
		}()
		Eventually(func(g Gomega) {
			c, err := s.Get(ctx, "wc1", 0)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(c.State).To(Equal(sessionapi.StateRunning))
		}).Should(Succeed())
		xcancel()
		Eventually(done).Should(Receive(MatchError(context.Canceled)))
		handler := a.tokenWith("handler", VerbRead, VerbComplete)
		code, body := a.rawCall(handler, http.MethodPost, "s1", "/external/wc1/complete",
			map[string]any{"attempt": 1, "success": true, "result": map[string]any{"words": 2}})
		Expect(code).To(Equal(http.StatusOK), "%v", body)
		Eventually(func(g Gomega) {
			c, err := s.Get(ctx, "wc1", 0)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(c.State).To(Equal(sessionapi.StateSucceeded), "a dispatched command follows its lane, not its submitter")
		}).Should(Succeed())
	})
})
