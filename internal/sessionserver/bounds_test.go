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
	"net/http"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

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
})

// limitCallers gives the suite's server a per-caller limit of perSecond with
// bursts of burst until the spec ends.
func limitCallers(perSecond float64, burst int) {
	prev := server.callers.Swap(newKeyedLimiter(perSecond, burst, 0, server.Clock))
	DeferCleanup(func() { server.callers.Store(prev) })
}
