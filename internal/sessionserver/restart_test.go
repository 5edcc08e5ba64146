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
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/scheduling"
	"github.com/agentlane/agentlane/internal/sessionstore"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// switchObserver passes the schedulers' session events to one server's
// observer, which a spec may replace: the suite's schedulers outlive a
// restarted server as a cluster's AgentSessions outlive a manager.
type switchObserver struct {
	to atomic.Pointer[scheduling.SessionObserver]
}

var _ scheduling.SessionObserver = &switchObserver{}

// use makes s's observer the one events go to.
func (o *switchObserver) use(s *Server) {
	to := s.Observer()
	o.to.Store(&to)
}

func (o *switchObserver) target() scheduling.SessionObserver { return *o.to.Load() }

func (o *switchObserver) CommandEvent(q types.NamespacedName, ev lanequeue.Event) {
	o.target().CommandEvent(q, ev)
}

func (o *switchObserver) InboxEvent(q types.NamespacedName, ev lanequeue.InboxEvent) {
	o.target().InboxEvent(q, ev)
}

func (o *switchObserver) SessionReleased(namespace, name string) {
	o.target().SessionReleased(namespace, name)
}

func (o *switchObserver) ClusterEvent(s types.NamespacedName, ev sessionapi.Event) {
	o.target().ClusterEvent(s, ev)
}

func (o *switchObserver) SessionRetention(s types.NamespacedName, l scheduling.RetentionLimits) {
	o.target().SessionRetention(s, l)
}

// restartAPI serves the Session API from a new Server on the suite's
// schedulers, started at startedAt, as the manager does after a restart:
// the new server learns of the sessions' events from now on and knows
// nothing of before. The suite's server serves again once the spec ends.
// It returns the new server's client with the tenant's token.
func restartAPI(t tenant, startedAt time.Time) *sessionapi.Client {
	GinkgoHelper()
	restarted := mustNew(Config{Client: server.Client, Reader: server.Reader, Schedulers: server.Schedulers, Budgets: server.Budgets,
		Auth: server.Auth, RetainedEvents: retainedEvents, StartedAt: startedAt, Store: server.Store})
	srv := httptest.NewServer(restarted.Handler())
	observer.use(restarted)
	DeferCleanup(func() {
		observer.use(server)
		srv.Close()
	})
	c, err := sessionapi.NewClient(srv.URL, sessionapi.WithToken(t.token))
	Expect(err).NotTo(HaveOccurred())
	return c
}

// texts are the texts of an event's messages.
func texts(ev sessionapi.Event) []string {
	out := []string{}
	for _, m := range ev.Messages {
		out = append(out, m.Text)
	}
	return out
}

// succeed runs an Internal command to success.
func succeed(s *sessionapi.SessionClient, id string) {
	GinkgoHelper()
	c, err := s.Run(ctx, sessionapi.SubmitRequest{ID: id, Type: "read"}, func(context.Context, *sessionapi.Command) sessionapi.Result {
		return sessionapi.Result{Success: true}
	})
	Expect(err).NotTo(HaveOccurred())
	Expect(c.State).To(Equal(sessionapi.StateSucceeded))
}

var _ = Describe("A manager restart", func() {
	var a tenant
	BeforeEach(func() {
		a = newTenant()
		a.newQueue(internalLanes())
		a.newSession("s1", nil)
	})

	It("keeps event ids growing, and tells a stream resuming from before it of the gap", func() {
		before := follow(a.session("s1"), sessionapi.EventsOptions{})
		succeed(a.session("s1"), "c1")
		last := before.next("completed")

		s := restartAPI(a, time.Now()).Session(a.ns, "s1")
		resumed := follow(s, sessionapi.EventsOptions{LastEventID: last.ID, Reconnect: true})
		gap := resumed.next(sessionapi.EventGap, "submitted", "started", "completed")
		Expect(gap.Type).To(Equal(sessionapi.EventGap), "the gap comes first")
		Expect(gap.After).To(Equal(last.ID))
		Expect(gap.ID).To(BeNumerically(">", last.ID))

		succeed(s, "c2")
		submitted := resumed.next("submitted", "started", "completed")
		Expect(submitted.CommandID).To(Equal("c2"))
		Expect(submitted.ID).To(Equal(gap.ID+1), "the restarted run's first event follows the gap's id")
		completed := resumed.next("completed")
		Expect(resumed.es.LastEventID()).To(Equal(completed.ID))

		By("refusing an id past every event the session had")
		_, err := s.Events(ctx, sessionapi.EventsOptions{LastEventID: completed.ID + 1})
		Expect(expectCode(err, http.StatusBadRequest, sessionapi.CodeFutureEventID)).To(ContainSubstring("from=now"))

		By("starting from now: the retained backlog is skipped")
		now := follow(s, sessionapi.EventsOptions{FromNow: true})
		Eventually(now.es.LastEventID).Should(Equal(completed.ID), "the server names the newest id at once")
		succeed(s, "c3")
		first := now.next("submitted", "started", "completed")
		Expect(first.CommandID).To(Equal("c3"))
		Expect(first.ID).To(Equal(completed.ID + 1))

		By("resuming after the gap's id: nothing more is lost")
		again := follow(s, sessionapi.EventsOptions{LastEventID: gap.ID})
		ev := again.next(sessionapi.EventGap, sessionapi.EventEventsLost, "submitted")
		Expect(ev.Type).To(Equal("submitted"))
		Expect(ev.CommandID).To(Equal("c2"))
	})

	It("puts back the queued messages and the /queue override the session's inbox held", func() {
		old := a.session("s1")
		before := follow(old, sessionapi.EventsOptions{})
		post := func(s *sessionapi.SessionClient, text string) {
			GinkgoHelper()
			_, err := s.Post(ctx, sessionapi.Message{Text: text})
			Expect(err).NotTo(HaveOccurred())
		}
		post(old, "first")
		Expect(texts(before.next(sessionapi.EventTurn))).To(Equal([]string{"first"}))
		post(old, "/queue followup cap:5")
		post(old, "second")
		post(old, "third")

		s := restartAPI(a, time.Now()).Session(a.ns, "s1")
		// The restarted manager's schedulers start empty.
		_, inbox, ok := server.Schedulers.Session(types.NamespacedName{Namespace: a.ns, Name: "q"})
		Expect(ok).To(BeTrue())
		inbox.ForgetSession("s1")
		after := follow(s, sessionapi.EventsOptions{FromNow: true})
		st, err := s.Stats(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(st.Options.Mode).To(Equal("followup"), "the override is back")
		Expect(st.Options.Cap).To(Equal(5))
		Expect(st.Session.QueuedMessages).To(Equal(2))

		restored := after.next(sessionapi.EventInboxRestored, sessionapi.EventTurn)
		Expect(restored.Type).To(Equal(sessionapi.EventInboxRestored), "the stream is told before the turns")
		Expect(texts(restored)).To(Equal([]string{"second", "third"}))
		turn := after.next(sessionapi.EventTurn)
		Expect(texts(turn)).To(Equal([]string{"second"}), "followup: one message a turn")
		Expect(s.FinishRun(ctx, turn.RunID)).To(Succeed())
		turn = after.next(sessionapi.EventTurn)
		Expect(texts(turn)).To(Equal([]string{"third"}))
		Expect(s.FinishRun(ctx, turn.RunID)).To(Succeed())

		By("keeping nothing once the turns took the messages")
		Eventually(func() []sessionapi.Message {
			data, err := server.Store.(sessionstore.InboxStore).LoadInbox(ctx, types.NamespacedName{Namespace: a.ns, Name: "s1"})
			Expect(err).NotTo(HaveOccurred())
			var rec inboxRecord
			if len(data) > 0 {
				Expect(json.Unmarshal(data, &rec)).To(Succeed())
			}
			return rec.Queued
		}).Should(BeEmpty())
	})

	It("answers Interrupted for the Internal commands of the run before it", func() {
		old := a.session("s1")
		cmd, err := old.Submit(ctx, sessionapi.SubmitRequest{Type: "read", Wait: &metav1.Duration{Duration: 10 * time.Second}})
		Expect(err).NotTo(HaveOccurred())
		Expect(cmd.Grant).NotTo(BeNil(), "the runtime holds a grant when the manager restarts")
		DeferCleanup(func() { _, _ = old.Cancel(ctx, sessionapi.CancelRequest{CommandID: cmd.ID}) })

		startedAt := time.Now().Add(time.Millisecond) // after the millisecond of the command's id
		s := restartAPI(a, startedAt).Session(a.ns, "s1")
		_, err = s.Get(ctx, cmd.ID, 0)
		Expect(expectCode(err, http.StatusGone, sessionapi.CodeInterrupted)).To(ContainSubstring("interrupted"))
		_, err = s.Report(ctx, cmd.ID, sessionapi.ReportRequest{Attempt: 1, Result: sessionapi.Result{Success: true}})
		expectCode(err, http.StatusGone, sessionapi.CodeInterrupted)
		_, err = s.Cancel(ctx, sessionapi.CancelRequest{CommandID: cmd.ID})
		expectCode(err, http.StatusGone, sessionapi.CodeInterrupted)

		By("still answering CommandNotFound for ids no run issued")
		fresh := lanequeue.NewULIDGenerator(clocktesting.NewFakePassiveClock(startedAt), nil).NewID()
		for _, id := range []string{fresh, "named-by-the-client"} {
			_, err = s.Get(ctx, id, 0)
			expectCode(err, http.StatusNotFound, sessionapi.CodeCommandNotFound)
			_, err = s.Report(ctx, id, sessionapi.ReportRequest{Attempt: 1})
			expectCode(err, http.StatusNotFound, sessionapi.CodeCommandNotFound)
		}
	})
})

// A stream starts after Last-Event-ID, or from now when asked and no
// Last-Event-ID says otherwise: a reconnect of a from=now stream resumes.
func TestParseStreamRequest(t *testing.T) {
	for name, tc := range map[string]struct {
		header, query string
		want          streamRequest
		wantErr       string
	}{
		"nothing":                  {want: streamRequest{}},
		"an id":                    {header: "42", want: streamRequest{last: 42}},
		"an id as a parameter":     {query: "lastEventId=42", want: streamRequest{last: 42}},
		"from now":                 {query: "from=now", want: streamRequest{now: true}},
		"Last-Event-ID now":        {header: "now", want: streamRequest{now: true}},
		"a reconnect of from=now":  {header: "42", query: "from=now", want: streamRequest{last: 42, now: true}},
		"from something else":      {query: "from=start", wantErr: sessionapi.CodeInvalidRequest},
		"an id that is not number": {header: "x", wantErr: sessionapi.CodeInvalidRequest},
	} {
		t.Run(name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/events?"+tc.query, nil)
			if tc.header != "" {
				r.Header.Set("Last-Event-ID", tc.header)
			}
			got, err := parseStreamRequest(r)
			if tc.wantErr != "" {
				if !sessionapi.IsCode(err, tc.wantErr) {
					t.Fatalf("error = %v, want %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(streamRequest{})); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

// A log's stream starts after the cursor asked, with a gap event before an
// id of an earlier manager run, and refuses an id past the newest.
func TestSessionLogStart(t *testing.T) {
	l := &sessionLog{events: newEventLog(scheduling.RetentionLimitsOf(nil), 1000)}
	l.events.append(sessionapi.Event{Type: "submitted"})
	l.events.append(sessionapi.Event{Type: "started"})
	now := time.Unix(1, 0)
	for name, tc := range map[string]struct {
		req        streamRequest
		wantCursor uint64
		wantFirst  string
		wantErr    string
	}{
		"no id: what is retained":   {req: streamRequest{}, wantCursor: 1000},
		"an id of this run":         {req: streamRequest{last: 1001}, wantCursor: 1001},
		"the base":                  {req: streamRequest{last: 1000}, wantCursor: 1000},
		"an id of an earlier run":   {req: streamRequest{last: 7}, wantCursor: 1000, wantFirst: "id: 1000\nevent: gap\ndata: {\"id\":1000,\"type\":\"gap\",\"time\":\"1970-01-01T00:00:01Z\",\"after\":7}\n\n"},
		"from now":                  {req: streamRequest{now: true}, wantCursor: 1002, wantFirst: "id: 1002\n\n"},
		"the newest":                {req: streamRequest{last: 1002}, wantCursor: 1002},
		"past the newest":           {req: streamRequest{last: 1003}, wantErr: sessionapi.CodeFutureEventID},
		"past the newest, even now": {req: streamRequest{last: 1003, now: true}, wantErr: sessionapi.CodeFutureEventID},
	} {
		t.Run(name, func(t *testing.T) {
			cursor, first, err := l.start(tc.req, now)
			if tc.wantErr != "" {
				if !sessionapi.IsCode(err, tc.wantErr) {
					t.Fatalf("error = %v, want %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cursor != tc.wantCursor || string(first) != tc.wantFirst {
				t.Errorf("start = %d, %q; want %d, %q", cursor, first, tc.wantCursor, tc.wantFirst)
			}
		})
	}
}
