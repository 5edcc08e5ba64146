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

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// setSessionBounds sets spec.sessionBounds of the tenant's queue "q" and
// waits until the manager's cache shows it.
func (t tenant) setSessionBounds(b *agentlanev1alpha1.SessionBounds) {
	GinkgoHelper()
	key := types.NamespacedName{Namespace: t.ns, Name: "q"}
	// The manager writes the queue's status meanwhile: an update may
	// conflict with it, and is made again on the newer version.
	Eventually(func() error {
		lq := &agentlanev1alpha1.LaneQueue{}
		if err := k8sClient.Get(ctx, key, lq); err != nil {
			return err
		}
		lq.Spec.SessionBounds = b
		return k8sClient.Update(ctx, lq)
	}).Should(Succeed())
	Eventually(func(g Gomega) {
		cached := &agentlanev1alpha1.LaneQueue{}
		g.Expect(server.Client.Get(ctx, key, cached)).To(Succeed())
		g.Expect(cached.Spec.SessionBounds).To(Equal(b))
	}).Should(Succeed())
}

var _ = Describe("A LaneQueue's session bounds", func() {
	var a, b tenant

	BeforeEach(func() {
		a, b = newTenant(), newTenant()
		a.newQueue(delegateLanes())
		b.newQueue(delegateLanes())
		a.newSession("s1", nil)
		b.newSession("s1", nil)
	})

	It("lower the manager's bounds for the queue's sessions only, naming the LaneQueue's field", func() {
		a.setSessionBounds(&agentlanev1alpha1.SessionBounds{
			MaxPendingCommands:    ptr.To[int32](2),
			MaxMessageBytes:       ptr.To[int32](100),
			MaxCheckpointBytes:    ptr.To[int32](1000),
			MaxEventStreams:       ptr.To[int32](1),
			MaxPendingDelegations: ptr.To[int32](1),
		})
		s, other := a.session("s1"), b.session("s1")
		payload := json.RawMessage(`{"command":"true"}`)
		DeferCleanup(func() {
			_, _ = s.Cancel(ctx, sessionapi.CancelRequest{Session: true})
			_, _ = other.Cancel(ctx, sessionapi.CancelRequest{Session: true})
		})

		By("pending commands")
		for i := range 2 {
			_, err := s.Submit(ctx, queued(fmt.Sprintf("c%d", i), payload))
			Expect(err).NotTo(HaveOccurred())
		}
		_, err := s.Submit(ctx, queued("c2", payload))
		Expect(expectCode(err, http.StatusTooManyRequests, sessionapi.CodeQueueFull)).To(
			ContainSubstring(`spec.sessionBounds.maxPendingCommands of LaneQueue "q"`))
		_, err = s.Get(ctx, "c2", 0)
		Expect(sessionapi.IsCode(err, sessionapi.CodeCommandNotFound)).To(BeTrue(), "the refused command was queued: %v", err)
		for i := range 3 {
			_, err := other.Submit(ctx, queued(fmt.Sprintf("c%d", i), payload))
			Expect(err).NotTo(HaveOccurred(), "another queue's session keeps the manager's bound")
		}

		By("message text")
		_, err = s.Post(ctx, sessionapi.Message{Text: strings.Repeat("m", 101)})
		Expect(expectCode(err, http.StatusRequestEntityTooLarge, sessionapi.CodeTooLarge)).To(
			ContainSubstring("spec.sessionBounds.maxMessageBytes"))
		_, err = other.Post(ctx, sessionapi.Message{Text: strings.Repeat("m", 101)})
		Expect(err).NotTo(HaveOccurred())

		By("checkpoint size")
		big := json.RawMessage(`"` + strings.Repeat("x", 1000) + `"`)
		_, err = s.SaveCheckpoint(ctx, sessionapi.Checkpoint{RunID: "run-1", State: big})
		Expect(expectCode(err, http.StatusRequestEntityTooLarge, sessionapi.CodeTooLarge)).To(
			ContainSubstring("spec.sessionBounds.maxCheckpointBytes"))
		_, err = s.LoadCheckpoint(ctx, "")
		expectCode(err, http.StatusNotFound, sessionapi.CodeCheckpointNotFound)
		_, err = other.SaveCheckpoint(ctx, sessionapi.Checkpoint{RunID: "run-1", State: big})
		Expect(err).NotTo(HaveOccurred())

		By("event streams")
		es, err := s.Events(ctx, sessionapi.EventsOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(es.Close)
		_, err = s.Events(ctx, sessionapi.EventsOptions{})
		Expect(expectCode(err, http.StatusTooManyRequests, sessionapi.CodeRateLimited)).To(
			ContainSubstring("spec.sessionBounds.maxEventStreams"))
		es2, err := other.Events(ctx, sessionapi.EventsOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(es2.Close)

		By("pending delegations")
		_, err = s.Delegate(ctx, sessionapi.DelegationRequest{ID: "d1", Lane: "review", Text: "review PR 1"})
		Expect(err).NotTo(HaveOccurred())
		_, err = s.Delegate(ctx, sessionapi.DelegationRequest{ID: "d2", Lane: "review", Text: "review PR 2"})
		Expect(expectCode(err, http.StatusTooManyRequests, sessionapi.CodeQueueFull)).To(
			ContainSubstring("spec.sessionBounds.maxPendingDelegations"))
		for i := range 2 {
			_, err = other.Delegate(ctx, sessionapi.DelegationRequest{ID: fmt.Sprintf("d%d", i), Lane: "review", Text: "review"})
			Expect(err).NotTo(HaveOccurred())
		}

		By("removing the bounds gives the manager's back")
		a.setSessionBounds(nil)
		_, err = s.Submit(ctx, queued("c2", payload))
		Expect(err).NotTo(HaveOccurred())
		_, err = s.Post(ctx, sessionapi.Message{Text: strings.Repeat("m", 101)})
		Expect(err).NotTo(HaveOccurred())
	})

	It("cannot raise a bound above the manager's", func() {
		a.setSessionBounds(&agentlanev1alpha1.SessionBounds{
			MaxMessageBytes:    ptr.To[int32](16 << 20),
			MaxPendingCommands: ptr.To[int32](100000),
		})
		s := a.session("s1")
		_, err := s.Post(ctx, sessionapi.Message{Text: strings.Repeat("m", server.StoreBounds.MaxMessageBytes+1)})
		msg := expectCode(err, http.StatusRequestEntityTooLarge, sessionapi.CodeTooLarge)
		Expect(msg).To(ContainSubstring("--session-api-max-message-bytes"))
		Expect(msg).NotTo(ContainSubstring("sessionBounds"))

		limitPending(pendingLimits{perSession: 2, perSessionBytes: 1 << 30, totalBytes: 1 << 30})
		DeferCleanup(func() { _, _ = s.Cancel(ctx, sessionapi.CancelRequest{Session: true}) })
		payload := json.RawMessage(`{"command":"true"}`)
		for i := range 2 {
			_, err := s.Submit(ctx, queued(fmt.Sprintf("c%d", i), payload))
			Expect(err).NotTo(HaveOccurred())
		}
		_, err = s.Submit(ctx, queued("c2", payload))
		Expect(expectCode(err, http.StatusTooManyRequests, sessionapi.CodeQueueFull)).To(
			ContainSubstring("--session-api-max-pending-per-session"))
	})
})
