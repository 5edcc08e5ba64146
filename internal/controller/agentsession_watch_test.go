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

package controller

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// objectReconciles is how many reconciles the named controller has started
// for the given objects, and for nothing else.
func objectReconciles(controller string, objects ...client.Object) int {
	total := 0
	for _, o := range objects {
		total += reconciles.count(controller, client.ObjectKeyFromObject(o))
	}
	return total
}

// sessionReconciles is objectReconciles of the AgentSession controller.
func sessionReconciles(sessions ...*agentlanev1alpha1.AgentSession) int {
	objects := make([]client.Object, 0, len(sessions))
	for _, s := range sessions {
		objects = append(objects, s)
	}
	return objectReconciles("agentsession", objects...)
}

// activeSessions creates n sessions on queue and waits until each is Active.
func activeSessions(prefix, queue string, n int) []*agentlanev1alpha1.AgentSession {
	GinkgoHelper()
	var out []*agentlanev1alpha1.AgentSession
	for i := range n {
		s := testSession(fmt.Sprintf("%s-%d", prefix, i), queue)
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		// Gone before the next spec counts reconciles.
		DeferCleanup(func() {
			_ = k8sClient.Delete(ctx, s)
			Eventually(func() bool {
				return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(s), &agentlanev1alpha1.AgentSession{}))
			}).Should(BeTrue())
		})
		out = append(out, s)
	}
	for _, s := range out {
		Eventually(func(g Gomega) {
			g.Expect(getSession(client.ObjectKeyFromObject(s))(g).Status.Phase).To(Equal(agentlanev1alpha1.SessionActive))
		}).Should(Succeed())
	}
	return out
}

// settled waits until the controller has had no reconcile of the objects
// for a second and a half: what their creation and their work set off is
// over.
func settled(controller string, objects ...client.Object) {
	GinkgoHelper()
	last := -1 // Eventually polls once at once: that poll only takes the count
	Eventually(func() bool {
		now := objectReconciles(controller, objects...)
		same := now == last
		last = now
		return same
	}).WithPolling(1500 * time.Millisecond).WithTimeout(30 * time.Second).Should(BeTrue())
}

var _ = Describe("What wakes an AgentSession", func() {
	It("does not reconcile a queue's sessions for each status write of the queue", func() {
		lq := testQueue("storm")
		Expect(k8sClient.Create(ctx, lq)).To(Succeed())
		DeferCleanup(func() { _ = k8sClient.Delete(ctx, lq) })
		const sessions, writes = 8, 15
		ss := activeSessions("storm", lq.Name, sessions)
		var objects []client.Object
		for _, s := range ss {
			objects = append(objects, s)
		}
		settled("agentsession", objects...)

		before := sessionReconciles(ss...)
		for i := range writes {
			Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
				got := &agentlanev1alpha1.LaneQueue{}
				if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(lq), got); err != nil {
					return err
				}
				got.Status.Pending = int32(100 + i) // what a status refresh changes
				return k8sClient.Status().Update(ctx, got)
			})).To(Succeed())
		}
		// Before these predicates each write reconciled every session of
		// the queue: sessions*writes reconciles.
		Consistently(func() int { return sessionReconciles(ss...) - before }, "2s").
			Should(BeZero(), "the queue's status writes reconciled its sessions")
	})

	It("leaves a session with queued work alone while nothing about it changes", func() {
		lq := testQueue("idle-work")
		Expect(k8sClient.Create(ctx, lq)).To(Succeed())
		DeferCleanup(func() { _ = k8sClient.Delete(ctx, lq) })
		s := activeSessions("idle-work", lq.Name, 1)[0]
		q := runningScheduler(client.ObjectKeyFromObject(lq))
		b := newBlocker()
		DeferCleanup(func() { close(b.release) })
		// One command runs (execute allows one at a time), two wait.
		submit(q, 3, s.Name, "execute", b)
		Eventually(func(g Gomega) {
			st := getSession(client.ObjectKeyFromObject(s))(g).Status.Queue
			g.Expect(st.Pending).To(Equal(int32(2)))
			g.Expect(st.Active).To(Equal(int32(1)))
		}).Should(Succeed())
		settled("agentsession", s)

		// A session with work in flight used to be reconciled every second
		// (4 times here).
		before := sessionReconciles(s)
		Consistently(func() int { return sessionReconciles(s) - before }, "4s", "200ms").
			Should(BeZero(), "an idle session was reconciled periodically")

		// Its counts still follow its commands.
		b.release <- struct{}{}
		Eventually(func(g Gomega) {
			st := getSession(client.ObjectKeyFromObject(s))(g).Status.Queue
			g.Expect(st.Pending).To(Equal(int32(1)))
			g.Expect(st.Completed).To(Equal(int64(1)))
		}).Should(Succeed())
		Expect(sessionReconciles(s)).To(BeNumerically(">", before), "the count missed the reconcile that wrote the new counts")
	})
})
