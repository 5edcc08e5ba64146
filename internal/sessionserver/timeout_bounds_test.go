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
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

var _ = Describe("A command's timeout", func() {
	It("is held to the API's bounds, 100ms to 24h, so no request's timeout can overflow the scheduler or be refused as its task", func() {
		a := newTenant()
		a.newQueue(internalLanes())
		a.newSession("s1", nil)
		s := a.session("s1")
		for _, d := range []time.Duration{time.Nanosecond, 99 * time.Millisecond, 24*time.Hour + time.Second, 876000 * time.Hour} {
			_, err := s.Submit(ctx, sessionapi.SubmitRequest{ID: "bad", Type: "read", Timeout: &metav1.Duration{Duration: d}})
			Expect(expectCode(err, http.StatusBadRequest, sessionapi.CodeInvalidRequest)).To(
				ContainSubstring("timeout must be a duration between 100ms and 24h0m0s"), "timeout %s", d)
		}
		for i, d := range []time.Duration{100 * time.Millisecond, 24 * time.Hour} {
			_, err := s.Submit(ctx, sessionapi.SubmitRequest{ID: []string{"low", "high"}[i], Type: "read", Timeout: &metav1.Duration{Duration: d}})
			Expect(err).NotTo(HaveOccurred(), "timeout %s", d)
		}
	})
})

var _ = Describe("A timed-out command's error", func() {
	It("names the budget that ran out: the session's lane override", func() {
		a := newTenant()
		a.newQueue(agentlanev1alpha1.LaneQueueSpec{Lanes: []agentlanev1alpha1.Lane{
			{Name: "execute", Priority: 2, RetryPolicy: &agentlanev1alpha1.RetryPolicy{Strategy: agentlanev1alpha1.RetryNone}},
		}})
		sess := &agentlanev1alpha1.AgentSession{
			ObjectMeta: metav1.ObjectMeta{Namespace: a.ns, Name: "s1"},
			Spec: agentlanev1alpha1.AgentSessionSpec{
				QueueRef: agentlanev1alpha1.LaneQueueReference{Name: "q"},
				Identity: &agentlanev1alpha1.Identity{TenantID: a.ns, Principal: "agent"},
				LaneOverrides: []agentlanev1alpha1.LaneOverride{{Lane: "execute",
					HandlerMode: agentlanev1alpha1.HandlerModeInternal, Timeout: &metav1.Duration{Duration: 100 * time.Millisecond}}},
			},
		}
		Expect(k8sClient.Create(ctx, sess)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(sess), sess)).To(Succeed())
			g.Expect(sess.Status.Phase).To(Equal(agentlanev1alpha1.SessionActive))
		}).Should(Succeed())
		s := a.session("s1")
		cmd, err := s.Submit(ctx, sessionapi.SubmitRequest{ID: "slow", Type: "bash", Lane: "execute",
			Wait: &metav1.Duration{Duration: 5 * time.Second}})
		Expect(err).NotTo(HaveOccurred())
		Expect(cmd.Grant).NotTo(BeNil())
		Eventually(func(g Gomega) {
			cmd, err := s.Get(ctx, "slow", time.Second)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cmd.State).To(BeElementOf(sessionapi.StateTimedOut, sessionapi.StateDeadLettered))
			g.Expect(cmd.Error).To(MatchRegexp(`attempt timed out after \S+ \(AgentSession laneOverrides\[execute\] timeout 100ms\)`))
		}).Should(Succeed())
	})
})
