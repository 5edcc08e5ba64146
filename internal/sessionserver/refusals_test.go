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
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/agentlane/agentlane/pkg/sessionapi"
)

var _ = Describe("Held refusals", func() {
	It("hold a 429 answer for the refusal hold, with at most half the address's connections holding one", func() {
		a := newTenant()
		a.newQueue(internalLanes())
		a.newSession("s1", nil)
		const hold = 700 * time.Millisecond
		// One call per caller, then 429 RateLimited with a Retry-After far
		// longer than the hold. Half of 8 connections per address: 4 held.
		alt := mustNew(Config{Client: server.Client, Reader: server.Reader, Schedulers: server.Schedulers, Budgets: server.Budgets,
			Auth: server.Auth, RetainedEvents: retainedEvents, Store: server.Store,
			Rate: 0.001, Burst: 1, RefusalHold: hold, MaxConnectionsPerAddress: 8})
		srv := httptest.NewServer(alt.Handler())
		DeferCleanup(srv.Close)
		s := clientOf(srv.URL, a.token).Session(a.ns, "s1")
		_, err := s.Stats(ctx)
		Expect(err).NotTo(HaveOccurred())

		var peak atomic.Int64
		stop := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			for {
				total, _ := alt.refusals.held("127.0.0.1")
				if int64(total) > peak.Load() {
					peak.Store(int64(total))
				}
				select {
				case <-stop:
					return
				case <-time.After(5 * time.Millisecond):
				}
			}
		}()
		const calls = 12
		var wg sync.WaitGroup
		var slow atomic.Int64
		for range calls {
			wg.Go(func() {
				defer GinkgoRecover()
				start := time.Now()
				_, err := s.Stats(ctx)
				expectCode(err, http.StatusTooManyRequests, sessionapi.CodeRateLimited)
				Expect(err.(*sessionapi.Error).RetryAfter).To(BeNumerically(">", hold))
				if time.Since(start) >= hold {
					slow.Add(1)
				}
			})
		}
		wg.Wait()
		close(stop)
		<-sampled
		Expect(slow.Load()).To(BeNumerically(">=", 4), "refusals were held")
		Expect(peak.Load()).To(BeNumerically("<=", 4), "at most half the address's connections hold a refusal")
		Expect(peak.Load()).To(BeNumerically(">=", 1))
		total, ofAddr := alt.refusals.held("127.0.0.1")
		Expect([]int{total, ofAddr}).To(Equal([]int{0, 0}), "every hold ended")
	})

	It("refuses a message whose body is too large for the text bound before reading it", func() {
		a := newTenant()
		a.newQueue(internalLanes())
		a.newSession("s1", nil)
		alt := mustNew(Config{Client: server.Client, Reader: server.Reader, Schedulers: server.Schedulers, Budgets: server.Budgets,
			Auth: server.Auth, RetainedEvents: retainedEvents, Store: server.Store})
		srv := httptest.NewServer(alt.Handler())
		DeferCleanup(srv.Close)
		// The body says it is 1 MiB and never comes: a server that read it
		// would wait for it, past the connection's deadline.
		conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(conn.Close)
		Expect(conn.SetDeadline(time.Now().Add(30 * time.Second))).To(Succeed())
		_, err = fmt.Fprintf(conn, "POST /v1/namespaces/%s/sessions/s1/messages HTTP/1.1\r\nHost: agentlane\r\n"+
			"Authorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"text\":\"",
			a.ns, a.token, 1<<20)
		Expect(err).NotTo(HaveOccurred())
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		Expect(err).NotTo(HaveOccurred(), "the server answered before the body came")
		defer resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusRequestEntityTooLarge))
		var e sessionapi.Error
		Expect(json.NewDecoder(resp.Body).Decode(&e)).To(Succeed())
		Expect(e.Code).To(Equal(sessionapi.CodeTooLarge))
		Expect(e.Message).To(ContainSubstring("--session-api-max-message-bytes"))
	})
})
