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
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// replayed reads the first n events a stream from after cursor sends, as
// "<id> <type> <command>", or "lost <n>" for an events_lost event. Ids, and
// cursor unless 0, count from the suite server's event id base.
func replayed(s *sessionapi.SessionClient, cursor uint64, n int) []string {
	GinkgoHelper()
	base := server.hub.base
	if cursor > 0 {
		cursor += base
	}
	st := follow(s, sessionapi.EventsOptions{LastEventID: cursor})
	var out []string
	for range n {
		var ev sessionapi.Event
		Eventually(st.events).Should(Receive(&ev))
		if ev.Type == sessionapi.EventEventsLost {
			out = append(out, fmt.Sprintf("lost %d", ev.Lost))
			continue
		}
		out = append(out, fmt.Sprintf("%d %s %s", ev.ID-base, ev.Type, ev.CommandID))
	}
	return out
}

var _ = Describe("Retention caps", func() {
	It("bounds a run's events and the session's ended commands, and follows a lowered cap at once", func() {
		a := newTenant()
		a.newQueue(internalLanes())
		sess := &agentlanev1alpha1.AgentSession{
			ObjectMeta: metav1.ObjectMeta{Namespace: a.ns, Name: "s1"},
			Spec: agentlanev1alpha1.AgentSessionSpec{
				QueueRef: agentlanev1alpha1.LaneQueueReference{Name: "q"},
				Retention: &agentlanev1alpha1.SessionRetention{
					MaxEventsPerRun: ptr.To[int32](5), MaxFinishedTasks: ptr.To[int32](1)},
			},
		}
		Expect(k8sClient.Create(ctx, sess)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(sess), sess)).To(Succeed())
			g.Expect(sess.Status.Phase).To(Equal(agentlanev1alpha1.SessionActive))
		}).Should(Succeed())
		s := a.session("s1")
		live := follow(s, sessionapi.EventsOptions{})

		By("running 3 commands of run r1: 9 events")
		for _, id := range []string{"c1", "c2", "c3"} {
			c, err := s.Run(ctx, sessionapi.SubmitRequest{ID: id, Type: "read", RunID: "r1"}, func(context.Context, *sessionapi.Command) sessionapi.Result {
				return sessionapi.Result{Success: true}
			})
			Expect(err).NotTo(HaveOccurred())
			Expect(c.State).To(Equal(sessionapi.StateSucceeded))
		}
		for live.next("completed").CommandID != "c3" {
			// Every event of the run is in the log once c3's completion is.
		}

		By("replaying from the start: the run's 4 oldest events are lost, its 5 newest follow")
		Expect(replayed(s, 0, 6)).To(Equal([]string{
			"lost 4",
			"5 started c2", "6 completed c2",
			"7 submitted c3", "8 started c3", "9 completed c3",
		}))

		By("forgetting every ended command but the last")
		Eventually(func() error {
			_, err := s.Get(ctx, "c2", 0)
			return err
		}).Should(Satisfy(func(err error) bool { return sessionapi.IsCode(err, sessionapi.CodeCommandNotFound) }))
		for _, id := range []string{"c1", "c2"} {
			_, err := s.Get(ctx, id, 0)
			Expect(sessionapi.IsCode(err, sessionapi.CodeCommandNotFound)).To(BeTrue(), "%s: %v", id, err)
		}
		c3, err := s.Get(ctx, "c3", 0)
		Expect(err).NotTo(HaveOccurred())
		Expect(c3.State).To(Equal(sessionapi.StateSucceeded))

		By("lowering maxTraceEvents to 2: the log keeps the 2 newest at once")
		Eventually(func(g Gomega) {
			// The manager writes the session's status meanwhile: retry a
			// conflict from a fresh read.
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(sess), sess)).To(Succeed())
			sess.Spec.Retention.MaxTraceEvents = ptr.To[int32](2)
			g.Expect(k8sClient.Update(ctx, sess)).To(Succeed())
		}).Should(Succeed())
		Eventually(func() []string { return replayed(s, 0, 3) }).Should(Equal([]string{
			"lost 7", "8 started c3", "9 completed c3",
		}))
		Expect(replayed(s, 7, 2)).To(Equal([]string{"8 started c3", "9 completed c3"}),
			"a reader that saw up to 7 misses nothing")
	})
})
