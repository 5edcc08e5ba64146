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
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agentlane/agentlane/pkg/sessionapi"
)

var _ = Describe("Session API bounds", func() {
	var a tenant

	BeforeEach(func() {
		a = newTenant()
		a.newQueue(internalLanes())
	})

	It("refuses a payload over the payload limit with 413 TooLarge, naming the limit", func() {
		a.newSession("s1", nil)
		s := a.session("s1")
		big, err := json.Marshal(strings.Repeat("x", DefaultMaxPayloadBytes))
		Expect(err).NotTo(HaveOccurred())
		_, err = s.Submit(ctx, sessionapi.SubmitRequest{ID: "big", Type: "read", Payload: big})
		var e *sessionapi.Error
		Expect(errors.As(err, &e)).To(BeTrue(), "%v", err)
		Expect(e.Status).To(Equal(http.StatusRequestEntityTooLarge))
		Expect(e.Code).To(Equal(sessionapi.CodeTooLarge))
		Expect(e.Message).To(ContainSubstring(strconv.Itoa(DefaultMaxPayloadBytes)))
		_, err = s.Get(ctx, "big", 0)
		Expect(sessionapi.IsCode(err, sessionapi.CodeCommandNotFound)).To(BeTrue(), "the refused command was queued: %v", err)
	})

	It("answers a caller over its rate 429 RateLimited with Retry-After, and other callers not at all", func() {
		b := newTenant()
		b.newQueue(internalLanes())
		a.newSession("s1", nil)
		b.newSession("s1", nil)
		// A rate that does not refill during the spec: the burst is all.
		limitCallers(0.001, 3)
		for i := range 3 {
			_, err := a.session("s1").Stats(ctx)
			Expect(err).NotTo(HaveOccurred(), "call %d within the burst", i)
		}
		_, err := a.session("s1").Stats(ctx)
		var e *sessionapi.Error
		Expect(errors.As(err, &e)).To(BeTrue(), "%v", err)
		Expect(e.Status).To(Equal(http.StatusTooManyRequests))
		Expect(e.Code).To(Equal(sessionapi.CodeRateLimited))
		Expect(e.RetryAfter).To(BeNumerically(">=", time.Second))
		// Every route of the caller is limited, on any session.
		_, err = a.session("s1").Submit(ctx, sessionapi.SubmitRequest{ID: "late", Type: "read"})
		Expect(sessionapi.IsCode(err, sessionapi.CodeRateLimited)).To(BeTrue(), "%v", err)
		_, err = a.session("s1").Get(ctx, "late", 0)
		Expect(sessionapi.IsCode(err, sessionapi.CodeRateLimited)).To(BeTrue(), "%v", err)

		for i := range 3 {
			_, err := b.session("s1").Stats(ctx)
			Expect(err).NotTo(HaveOccurred(), "another caller's call %d", i)
		}
	})

	It("refuses submissions past a session's pending bound with 429 QueueFull, and takes them again once commands end", func() {
		a.newSession("s1", nil)
		s := a.session("s1")
		key := types.NamespacedName{Namespace: a.ns, Name: "s1"}
		limitPending(pendingLimits{perSession: 3, perSessionBytes: 1 << 30, totalBytes: 1 << 30})
		// What other sessions of the server hold, which this spec does not own.
		_, _, others := server.pending.usage(types.NamespacedName{})
		payload := json.RawMessage(`{"command":"true"}`)
		// execute runs one command per session: the first is granted, the
		// others wait in the lane.
		for i := range 3 {
			_, err := s.Submit(ctx, queued(fmt.Sprintf("c%d", i), payload))
			Expect(err).NotTo(HaveOccurred())
		}
		Expect(pendingOf(key)).To(Equal([3]int64{3, 3 * int64(len(payload)), others + 3*int64(len(payload))}))
		_, err := s.Submit(ctx, queued("c3", payload))
		var e *sessionapi.Error
		Expect(errors.As(err, &e)).To(BeTrue(), "%v", err)
		Expect(e.Status).To(Equal(http.StatusTooManyRequests))
		Expect(e.Code).To(Equal(sessionapi.CodeQueueFull))
		Expect(e.Message).To(ContainSubstring("pending commands"))
		Expect(e.RetryAfter).To(BeNumerically(">=", time.Second))
		_, err = s.Get(ctx, "c3", 0)
		Expect(sessionapi.IsCode(err, sessionapi.CodeCommandNotFound)).To(BeTrue(), "the refused command was queued: %v", err)

		// One succeeds: there is room for one more.
		_, err = s.Report(ctx, "c0", sessionapi.ReportRequest{Attempt: 1, Result: sessionapi.Result{Success: true}})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() [3]int64 { return pendingOf(key) }).Should(Equal([3]int64{2, 2 * int64(len(payload)), others + 2*int64(len(payload))}))
		_, err = s.Submit(ctx, queued("c3", payload))
		Expect(err).NotTo(HaveOccurred())

		// Cancelling the rest gives everything back.
		n, err := s.Cancel(ctx, sessionapi.CancelRequest{Session: true})
		Expect(err).NotTo(HaveOccurred())
		Expect(n).To(Equal(3))
		Eventually(func() [3]int64 { return pendingOf(key) }).Should(Equal([3]int64{0, 0, others}))
		for i := range 3 {
			_, err := s.Submit(ctx, queued(fmt.Sprintf("d%d", i), payload))
			Expect(err).NotTo(HaveOccurred())
		}
		_, err = s.Cancel(ctx, sessionapi.CancelRequest{Session: true})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() [3]int64 { return pendingOf(key) }).Should(Equal([3]int64{0, 0, others}))
	})

	It("never holds more pending payload bytes than the server's bound under a flood of large payloads", func() {
		a.newSession("s1", nil)
		a.newSession("s2", nil)
		const bound = 1 << 20
		limitPending(pendingLimits{perSession: 1000, perSessionBytes: 1 << 30, totalBytes: bound})
		limitShare(1) // one namespace: the server-wide bound is the one at work
		_, _, others := server.pending.usage(types.NamespacedName{})
		big, err := json.Marshal(map[string]string{"command": strings.Repeat("x", 100<<10)})
		Expect(err).NotTo(HaveOccurred())

		var (
			mu       sync.Mutex
			accepted = map[string][]string{}
			refused  = map[string][]string{}
			maxSeen  int64
			wg       sync.WaitGroup
		)
		for i := range 40 {
			session := []string{"s1", "s2"}[i%2]
			id := fmt.Sprintf("big-%d", i)
			wg.Add(1)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				_, err := a.session(session).Submit(ctx, queued(id, big))
				_, _, total := server.pending.usage(types.NamespacedName{})
				mu.Lock()
				defer mu.Unlock()
				maxSeen = max(maxSeen, total)
				switch {
				case err == nil:
					accepted[session] = append(accepted[session], id)
				case sessionapi.IsCode(err, sessionapi.CodeQueueFull):
					Expect(err.Error()).To(ContainSubstring("--session-api-max-pending-bytes)"))
					refused[session] = append(refused[session], id)
				default:
					Fail(fmt.Sprintf("submit %s: %v", id, err))
				}
			}()
		}
		wg.Wait()
		Expect(maxSeen).To(BeNumerically("<=", bound))
		n := len(accepted["s1"]) + len(accepted["s2"])
		Expect(n).To(Equal((bound - int(others)) / len(big)))
		_, _, total := server.pending.usage(types.NamespacedName{})
		Expect(total).To(Equal(others + int64(n*len(big))))
		// What was refused left nothing queued.
		for _, session := range []string{"s1", "s2"} {
			st, err := a.session(session).Stats(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(st.Session.Pending+st.Session.Active).To(Equal(len(accepted[session])), session)
			for _, id := range refused[session] {
				_, err := a.session(session).Get(ctx, id, 0)
				Expect(sessionapi.IsCode(err, sessionapi.CodeCommandNotFound)).To(BeTrue(), "refused %s: %v", id, err)
			}
			_, err = a.session(session).Cancel(ctx, sessionapi.CancelRequest{Session: true})
			Expect(err).NotTo(HaveOccurred())
		}
		Eventually(func() int64 {
			_, _, total := server.pending.usage(types.NamespacedName{})
			return total
		}).Should(Equal(others))
	})

	It("reviews a flood of bad tokens a handful of times, then refuses the address 429 before any review", func() {
		a.newSession("s1", nil)
		// The tenant's runtime, on the same address, was reviewed before.
		_, err := a.session("s1").Stats(ctx)
		Expect(err).NotTo(HaveOccurred())
		limitFailedAuth(0.001, 5)
		before := reviews.tokenReviews.Load()
		var unauthenticated, limited int
		for range 50 {
			_, err := clientWithToken("not-a-token").Session(a.ns, "s1").Stats(ctx)
			var e *sessionapi.Error
			Expect(errors.As(err, &e)).To(BeTrue(), "%v", err)
			switch e.Code {
			case sessionapi.CodeUnauthenticated:
				Expect(e.Status).To(Equal(http.StatusUnauthorized))
				unauthenticated++
			case sessionapi.CodeRateLimited:
				Expect(e.Status).To(Equal(http.StatusTooManyRequests))
				Expect(e.RetryAfter).To(BeNumerically(">=", time.Second))
				limited++
			default:
				Fail(fmt.Sprintf("a bad token answered %v", err))
			}
		}
		Expect(unauthenticated).To(Equal(5))
		Expect(limited).To(Equal(45))
		Expect(reviews.tokenReviews.Load()-before).To(BeNumerically("<=", 2), "one bad token is reviewed once per cache period")

		// Distinct bad tokens cannot get past the address's bucket either.
		limitFailedAuth(0.001, 5)
		before = reviews.tokenReviews.Load()
		for i := range 50 {
			_, err := clientWithToken(fmt.Sprintf("bad-token-%d", i)).Session(a.ns, "s1").Stats(ctx)
			Expect(err).To(HaveOccurred())
		}
		Expect(reviews.tokenReviews.Load() - before).To(BeNumerically("<=", 5))

		By("the runtime whose token proved valid keeps its answers while its address is refused")
		_, err = a.session("s1").Stats(ctx)
		Expect(err).NotTo(HaveOccurred())
	})
})

// limitFailedAuth gives the suite's server a per-address limit on requests
// failing authentication until the spec ends.
func limitFailedAuth(perSecond float64, burst int) {
	prev := server.failedAuth.Swap(newKeyedLimiter(perSecond, burst, 0, server.Clock))
	DeferCleanup(func() { server.failedAuth.Store(prev) })
}

// queued is a submission to the execute lane that returns at once.
func queued(id string, payload json.RawMessage) sessionapi.SubmitRequest {
	return sessionapi.SubmitRequest{ID: id, Type: "bash", Lane: "execute", Payload: payload,
		Wait: &metav1.Duration{Duration: time.Millisecond}}
}

// pendingOf returns the suite server's pending commands and bytes of the
// session, and its pending bytes in all.
func pendingOf(session types.NamespacedName) [3]int64 {
	count, bytes, total := server.pending.usage(session)
	return [3]int64{count, bytes, total}
}

// limitPending sets the suite server's pending bounds until the spec ends.
func limitPending(l pendingLimits) {
	prev := server.pending.setLimits(l)
	DeferCleanup(func() { server.pending.setLimits(prev) })
}

// limitCallers gives the suite's server a per-caller limit of perSecond with
// bursts of burst until the spec ends.
func limitCallers(perSecond float64, burst int) {
	prev := server.callers.Swap(newKeyedLimiter(perSecond, burst, 0, server.Clock))
	DeferCleanup(func() { server.callers.Store(prev) })
}
