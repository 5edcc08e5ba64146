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
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/testenv"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

var _ = Describe("Session API long-lived calls", func() {
	var a tenant

	BeforeEach(func() {
		a = newTenant()
		a.newQueue(internalLanes())
	})

	It("refuses an event stream past the session's bound with 429, and admits one again once a stream ends", func() {
		a.newSession("s1", nil)
		s := a.session("s1")
		streams := make([]*sessionapi.EventStream, 0, DefaultMaxStreamsPerSession)
		for range DefaultMaxStreamsPerSession {
			es, err := s.Events(ctx, sessionapi.EventsOptions{})
			Expect(err).NotTo(HaveOccurred())
			streams = append(streams, es)
		}
		DeferCleanup(func() {
			for _, es := range streams {
				_ = es.Close()
			}
		})
		_, err := s.Events(ctx, sessionapi.EventsOptions{})
		msg := expectCode(err, http.StatusTooManyRequests, sessionapi.CodeRateLimited)
		Expect(msg).To(ContainSubstring("--session-api-max-streams-per-session"))
		Expect(err.(*sessionapi.Error).RetryAfter).To(BeNumerically(">=", time.Second))

		Expect(streams[0].Close()).To(Succeed())
		Eventually(func() int {
			_, perSession := server.long.open(eventStream, "", types.NamespacedName{Namespace: a.ns, Name: "s1"})
			return perSession
		}).Should(Equal(DefaultMaxStreamsPerSession-1), "a closed stream gives its place back")
		es, err := s.Events(ctx, sessionapi.EventsOptions{})
		Expect(err).NotTo(HaveOccurred())
		streams[0] = es
	})

	It("refuses an event stream past the caller's bound, whichever sessions its streams follow", func() {
		sessions := []string{"s1", "s2", "s3"}
		for _, name := range sessions {
			a.newSession(name, nil)
		}
		var streams []*sessionapi.EventStream
		DeferCleanup(func() {
			for _, es := range streams {
				_ = es.Close()
			}
		})
		for i := range DefaultMaxStreamsPerCaller {
			es, err := a.session(sessions[i%len(sessions)]).Events(ctx, sessionapi.EventsOptions{})
			Expect(err).NotTo(HaveOccurred(), "stream %d", i)
			streams = append(streams, es)
		}
		_, err := a.session("s3").Events(ctx, sessionapi.EventsOptions{})
		msg := expectCode(err, http.StatusTooManyRequests, sessionapi.CodeRateLimited)
		Expect(msg).To(ContainSubstring("--session-api-max-streams-per-caller"))
	})

	It("ends an event stream and the waiting calls once the caller's RoleBinding is removed", func() {
		a.newSession("s1", nil)
		alt := serveWithTTL(time.Second)
		s := clientOf(alt, a.token).Session(a.ns, "s1")

		events, err := s.Events(ctx, sessionapi.EventsOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { _ = events.Close() })
		got := make(chan sessionapi.Event, 256)
		ended := make(chan error, 1)
		go func() {
			for {
				ev, err := events.Next()
				if err != nil {
					ended <- err
					return
				}
				got <- ev
			}
		}()

		// execute runs one command per session: w1 holds it, w2 waits.
		_, err = s.Submit(ctx, sessionapi.SubmitRequest{ID: "w1", Type: "bash", Lane: "execute"})
		Expect(err).NotTo(HaveOccurred())
		_, err = s.Submit(ctx, queued("w2", nil))
		Expect(err).NotTo(HaveOccurred())
		waited := make(chan error, 1)
		go func() {
			_, err := s.Get(ctx, "w2", 5*time.Minute)
			waited <- err
		}()
		submitted := make(chan error, 1)
		go func() {
			// Waits up to MaxWait for its grant, behind w1 and w2.
			_, err := s.Submit(ctx, sessionapi.SubmitRequest{ID: "w3", Type: "bash", Lane: "execute"})
			submitted <- err
		}()
		// Authorized again every half TTL, both stay while allowed.
		Consistently(ended, 2500*time.Millisecond).ShouldNot(Receive())
		Expect(waited).NotTo(Receive())
		Expect(submitted).NotTo(Receive())

		revokedAt := time.Now()
		Expect(k8sClient.Delete(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: a.ns, Name: "agent-session-user"}})).To(Succeed())

		// The stream's last event, error, ends it with the refusal's code.
		var werr error
		Eventually(ended, 5*time.Second).Should(Receive(&werr))
		expectCode(werr, http.StatusForbidden, sessionapi.CodeForbidden)
		Eventually(waited, 5*time.Second).Should(Receive(&werr))
		expectCode(werr, http.StatusForbidden, sessionapi.CodeForbidden)
		Eventually(submitted, 5*time.Second).Should(Receive(&werr))
		expectCode(werr, http.StatusForbidden, sessionapi.CodeForbidden)
		GinkgoWriter.Printf("stream and waits ended %v after the RoleBinding was removed (TTL 1s)\n", time.Since(revokedAt))
	})

	It("refuses runtime=true to a token that may only get the session, and keeps steer messages queued", func() {
		a.newSession("s1", modeOptions(agentlanev1alpha1.QueueModeSteer, 0, 20, agentlanev1alpha1.DropSummarize))
		reader := readerToken(a.ns)
		r := clientWithToken(reader).Session(a.ns, "s1")

		// The reader may follow the session ...
		es, err := r.Events(ctx, sessionapi.EventsOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(es.Close()).To(Succeed())
		// ... but not attach as its runtime.
		_, err = r.Events(ctx, sessionapi.EventsOptions{Runtime: true})
		msg := expectCode(err, http.StatusForbidden, sessionapi.CodeForbidden)
		Expect(msg).To(ContainSubstring(`may not create agentsessions/api`))

		s := a.session("s1")
		_, err = s.Post(ctx, sessionapi.Message{Text: "first"})
		Expect(err).NotTo(HaveOccurred())
		res, err := s.Post(ctx, sessionapi.Message{Text: "second"})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Steered).To(BeFalse(), "a steer went to the reader's stream")
		Expect(res.Queued).To(BeTrue())
	})

	It("keeps an event stream and a waiting call open past the read and write timeouts", func() {
		a.newSession("s1", nil)
		url := startWithTimeouts(300 * time.Millisecond)
		s := clientOf(url, a.token).Session(a.ns, "s1")
		events, err := s.Events(ctx, sessionapi.EventsOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { _ = events.Close() })
		got := make(chan sessionapi.Event, 64)
		go func() {
			defer close(got)
			for {
				ev, err := events.Next()
				if err != nil {
					return
				}
				got <- ev
			}
		}()
		_, err = s.Submit(ctx, sessionapi.SubmitRequest{ID: "w1", Type: "bash", Lane: "execute"})
		Expect(err).NotTo(HaveOccurred())
		_, err = s.Submit(ctx, queued("w2", nil))
		Expect(err).NotTo(HaveOccurred())
		// A connection of its own, which a client cannot retry on.
		waited := make(chan *sessionapi.Command, 1)
		go func() {
			defer GinkgoRecover()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet,
				fmt.Sprintf("%s/v1/namespaces/%s/sessions/s1/commands/w2?wait=5m", url, a.ns), nil)
			Expect(err).NotTo(HaveOccurred())
			req.Header.Set("Authorization", "Bearer "+a.token)
			resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
			Expect(err).NotTo(HaveOccurred(), "the waiting call's connection failed")
			defer func() { _ = resp.Body.Close() }()
			Expect(resp.StatusCode).To(Equal(http.StatusOK))
			var c sessionapi.Command
			Expect(json.NewDecoder(resp.Body).Decode(&c)).To(Succeed())
			waited <- &c
		}()
		// Both calls outlast the timeouts several times over.
		time.Sleep(time.Second)
		Expect(waited).NotTo(Receive())
		_, err = s.Report(ctx, "w1", sessionapi.ReportRequest{Attempt: 1, Result: sessionapi.Result{Success: true}})
		Expect(err).NotTo(HaveOccurred())
		var w2 *sessionapi.Command
		Eventually(waited).Should(Receive(&w2))
		Expect(w2.Grant).NotTo(BeNil(), "the wait ended before w2 was granted: %+v", w2)
		Eventually(func() bool {
			for {
				select {
				case ev, ok := <-got:
					if !ok {
						return false
					}
					if ev.Type == "completed" && ev.CommandID == "w1" {
						return true
					}
				default:
					return false
				}
			}
		}).Should(BeTrue(), "the stream did not deliver w1's completion")
	})

	It("reviews at most the failed-authentication burst for 300 concurrent bad tokens from one address", func() {
		a.newSession("s1", nil)
		const burst = 20
		limitFailedAuth(0.001, burst)
		before := reviews.tokenReviews.Load()
		var mu sync.Mutex
		answers := map[string]int{}
		var wg sync.WaitGroup
		for i := range 300 {
			wg.Go(func() {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet,
					fmt.Sprintf("%s/v1/namespaces/%s/sessions/s1/stats", baseURL, a.ns), nil)
				Expect(err).NotTo(HaveOccurred())
				req.Header.Set("Authorization", fmt.Sprintf("Bearer bad-token-%d", i))
				answer := "connection closed"
				if resp, err := apiHTTPClient.Do(req); err == nil {
					answer = resp.Status
					_ = resp.Body.Close()
				}
				mu.Lock()
				answers[answer]++
				mu.Unlock()
			})
		}
		wg.Wait()
		reviewed := reviews.tokenReviews.Load() - before
		GinkgoWriter.Printf("300 concurrent bad tokens: %d TokenReviews, answers %v\n", reviewed, answers)
		Expect(reviewed).To(BeNumerically("<=", burst))
		for answer := range answers {
			Expect(answer).To(BeElementOf("401 Unauthorized", "429 Too Many Requests", "connection closed"))
		}
	})
})

// serveWithTTL serves the Session API from a new Server on the suite's
// schedulers whose access reviews are reused for ttl, until the spec ends.
func serveWithTTL(ttl time.Duration) string {
	GinkgoHelper()
	alt := mustNew(Config{Client: server.Client, Reader: server.Reader, Schedulers: server.Schedulers, Budgets: server.Budgets,
		Auth: &KubeAuthorizer{Client: reviews, TTL: ttl}, RetainedEvents: retainedEvents, Store: server.Store})
	srv := httptest.NewServer(alt.Handler())
	DeferCleanup(srv.Close)
	return srv.URL
}

// startWithTimeouts serves the Session API from a new Server on the
// suite's schedulers, over plain HTTP on loopback, with read and write
// timeouts of d, until the spec ends; it returns its URL. The schedulers
// report to it meanwhile.
func startWithTimeouts(d time.Duration) string {
	GinkgoHelper()
	alt := mustNew(Config{Addr: "127.0.0.1:0", TLS: TLS{InsecureHTTP: true}, Client: server.Client, Reader: server.Reader,
		Schedulers: server.Schedulers, Budgets: server.Budgets, Auth: server.Auth, RetainedEvents: retainedEvents,
		Store: server.Store, ReadTimeout: d, WriteTimeout: d})
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- alt.Start(sctx) }()
	addr, err := alt.BoundAddr(sctx)
	Expect(err).NotTo(HaveOccurred())
	observer.use(alt)
	DeferCleanup(func() {
		observer.use(server)
		stop()
		Expect(<-done).To(Succeed())
	})
	return "http://" + addr
}

func clientOf(url, token string) *sessionapi.Client {
	GinkgoHelper()
	c, err := sessionapi.NewClient(url, sessionapi.WithToken(token))
	Expect(err).NotTo(HaveOccurred())
	return c
}

// readerToken returns the token of a service account of ns that may only
// get the Session API of the namespace's sessions.
func readerToken(ns string) string {
	GinkgoHelper()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "session-reader"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{agentlanev1alpha1.GroupVersion.Group},
			Resources: []string{APIResource + "/" + APISubresource},
			Verbs:     []string{VerbRead},
		}},
	}
	Expect(k8sClient.Create(ctx, role)).To(Succeed())
	token, err := testenv.ServiceAccountToken(ctx, k8sClient, ns, "reader", rbacv1.RoleRef{Kind: "Role", Name: role.Name})
	Expect(err).NotTo(HaveOccurred())
	return token
}
