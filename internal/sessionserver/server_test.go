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
	"io"
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

var _ = Describe("Session API", func() {
	var a tenant

	BeforeEach(func() {
		a = newTenant()
		a.newQueue(internalLanes())
	})

	Describe("authentication and authorization", func() {
		It("refuses anonymous calls, bad tokens and other tenants' sessions, and changes nothing", func() {
			a.newSession("s1", nil)
			b := newTenant()
			b.newQueue(internalLanes())
			b.newSession("s1", nil)

			submit := sessionapi.SubmitRequest{Type: "bash", Payload: json.RawMessage(`{"command":"true"}`)}
			for name, tc := range map[string]struct {
				token string
				code  string
			}{
				"no token":             {"", sessionapi.CodeUnauthenticated},
				"a token that is junk": {"not-a-token", sessionapi.CodeUnauthenticated},
				"another tenant":       {b.token, sessionapi.CodeForbidden},
			} {
				s := clientWithToken(tc.token).Session(a.ns, "s1")
				_, err := s.Submit(ctx, submit)
				Expect(sessionapi.IsCode(err, tc.code)).To(BeTrue(), "%s: submit error %v", name, err)
				_, err = s.Post(ctx, sessionapi.Message{Text: "hello"})
				Expect(sessionapi.IsCode(err, tc.code)).To(BeTrue(), "%s: post error %v", name, err)
				_, err = s.Events(ctx, sessionapi.EventsOptions{})
				Expect(sessionapi.IsCode(err, tc.code)).To(BeTrue(), "%s: events error %v", name, err)
				_, err = s.Cancel(ctx, sessionapi.CancelRequest{Session: true})
				Expect(sessionapi.IsCode(err, tc.code)).To(BeTrue(), "%s: cancel error %v", name, err)
			}
			var apiErr *sessionapi.Error
			_, err := clientWithToken(b.token).Session(a.ns, "s1").Stats(ctx)
			Expect(err).To(BeAssignableToTypeOf(apiErr))
			Expect(err.(*sessionapi.Error).Status).To(Equal(http.StatusForbidden))
			Expect(err.(*sessionapi.Error).Message).To(ContainSubstring(`may not get agentsessions/api of AgentSession "s1" in namespace "` + a.ns + `"`))

			// Nothing reached tenant a's session.
			st, err := a.session("s1").Stats(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(st.Session.Pending + st.Session.Active).To(BeZero())
			Expect(st.Session.QueuedMessages).To(BeZero())
			for _, l := range st.Lanes {
				Expect(l.Completed+l.Cancelled).To(BeZero(), "lane %s", l.Name)
			}
			// Tenant b still reaches its own session.
			_, err = b.session("s1").Stats(ctx)
			Expect(err).NotTo(HaveOccurred())
		})
	})

	Describe("commands", func() {
		It("grants an Internal command, fences stale reports and carries it through a retry", func() {
			a.newSession("s1", nil)
			s := a.session("s1")
			cmd, err := s.Submit(ctx, sessionapi.SubmitRequest{ID: "llm-1", Type: "llm", RunID: "run-1"})
			Expect(err).NotTo(HaveOccurred())
			Expect(cmd.State).To(Equal(sessionapi.StateRunning))
			Expect(cmd.Lane).To(Equal("generate"))
			Expect(cmd.Mode).To(Equal(sessionapi.ModeInternal))
			Expect(cmd.Labels.TenantID).To(Equal(a.ns))
			Expect(cmd.Grant).NotTo(BeNil())
			Expect(cmd.Grant.Attempt).To(Equal(1))

			_, err = s.Report(ctx, "llm-1", sessionapi.ReportRequest{Attempt: 2, Result: sessionapi.Result{Success: true}})
			Expect(sessionapi.IsCode(err, sessionapi.CodeNotRunning)).To(BeTrue(), "report of a future attempt: %v", err)

			cmd, err = s.Report(ctx, "llm-1", sessionapi.ReportRequest{Attempt: 1, Result: sessionapi.Result{Error: "provider overloaded"}})
			Expect(err).NotTo(HaveOccurred())
			Expect(cmd.Final()).To(BeFalse())
			cmd, err = s.Await(ctx, "llm-1")
			Expect(err).NotTo(HaveOccurred())
			Expect(cmd.Grant).NotTo(BeNil())
			Expect(cmd.Grant.Attempt).To(Equal(2))

			_, err = s.Report(ctx, "llm-1", sessionapi.ReportRequest{Attempt: 1, Result: sessionapi.Result{Success: true}})
			Expect(sessionapi.IsCode(err, sessionapi.CodeStaleAttempt)).To(BeTrue(), "late report of attempt 1: %v", err)

			cmd, err = s.Report(ctx, "llm-1", sessionapi.ReportRequest{Attempt: 2, Result: sessionapi.Result{
				Success: true, Output: json.RawMessage(`{"usage":{"inputTokens":10}}`)}})
			Expect(err).NotTo(HaveOccurred())
			Expect(cmd.State).To(Equal(sessionapi.StateSucceeded))
			Expect(cmd.Attempt).To(Equal(2))
			Expect(cmd.Result.Output).To(MatchJSON(`{"usage":{"inputTokens":10}}`))
		})

		It("answers bad requests with stable error codes", func() {
			a.newSession("s1", nil)
			s := a.session("s1")
			for name, tc := range map[string]struct {
				req  sessionapi.SubmitRequest
				code string
			}{
				"no type":      {sessionapi.SubmitRequest{}, sessionapi.CodeInvalidRequest},
				"unknown lane": {sessionapi.SubmitRequest{Type: "read", Lane: "nope"}, sessionapi.CodeUnknownLane},
				"type the lane refuses": {sessionapi.SubmitRequest{Type: "bash", Lane: "readonly",
					Payload: json.RawMessage(`{"command":"cat /etc/passwd"}`)}, sessionapi.CodeCommandTypeRefused},
				"id not a name":    {sessionapi.SubmitRequest{ID: "Not_A_Name", Type: "read"}, sessionapi.CodeInvalidRequest},
				"negative timeout": {sessionapi.SubmitRequest{Type: "read", Timeout: &metav1.Duration{Duration: -time.Second}}, sessionapi.CodeInvalidRequest},
			} {
				_, err := s.Submit(ctx, tc.req)
				Expect(sessionapi.IsCode(err, tc.code)).To(BeTrue(), "%s: %v", name, err)
			}
			// A refused command leaves nothing behind: no ExternalTask for
			// a worker to run.
			tasks := &agentlanev1alpha1.ExternalTaskList{}
			Expect(k8sClient.List(ctx, tasks, client.InNamespace(a.ns))).To(Succeed())
			Expect(tasks.Items).To(BeEmpty())
			_, err := s.Submit(ctx, sessionapi.SubmitRequest{ID: "dup", Type: "read"})
			Expect(err).NotTo(HaveOccurred())
			_, err = s.Submit(ctx, sessionapi.SubmitRequest{ID: "dup", Type: "read"})
			Expect(sessionapi.IsCode(err, sessionapi.CodeDuplicateCommand)).To(BeTrue(), "%v", err)
			_, err = a.session("nobody").Stats(ctx)
			Expect(sessionapi.IsCode(err, sessionapi.CodeSessionNotFound)).To(BeTrue(), "%v", err)
			_, err = s.Get(ctx, "never-submitted", 0)
			Expect(sessionapi.IsCode(err, sessionapi.CodeCommandNotFound)).To(BeTrue(), "%v", err)
			_, err = s.Post(ctx, sessionapi.Message{Text: "/queue sideways"})
			Expect(sessionapi.IsCode(err, sessionapi.CodeInvalidDirective)).To(BeTrue(), "%v", err)

			// A malformed body, read with plain HTTP.
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost,
				fmt.Sprintf("%s/v1/namespaces/%s/sessions/s1/commands", baseURL, a.ns), strings.NewReader(`{"type": "read", "colour": 1}`))
			req.Header.Set("Authorization", "Bearer "+a.token)
			resp, err := apiHTTPClient.Do(req)
			Expect(err).NotTo(HaveOccurred())
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			Expect(resp.StatusCode).To(Equal(http.StatusBadRequest))
			var e sessionapi.Error
			Expect(json.Unmarshal(body, &e)).To(Succeed())
			Expect(e.Code).To(Equal(sessionapi.CodeInvalidRequest))
			Expect(e.Message).To(ContainSubstring("colour"))
		})

		It("makes an External command an ExternalTask owned by its session from the start", func() {
			sess := a.newSession("s1", nil)
			s := a.session("s1")
			events := follow(s, sessionapi.EventsOptions{})
			cmd, err := s.Submit(ctx, sessionapi.SubmitRequest{ID: "remote-1", Type: "bash", Lane: "remote", RunID: "r1",
				Payload: json.RawMessage(`{"command":"true"}`), Wait: &metav1.Duration{Duration: 300 * time.Millisecond}})
			Expect(err).NotTo(HaveOccurred())
			Expect(cmd.Mode).To(Equal(sessionapi.ModeExternal))
			Expect(cmd.Final()).To(BeFalse(), "no worker runs it")
			Expect(cmd.Task).To(Equal("remote-1"))

			task := &agentlanev1alpha1.ExternalTask{}
			Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: a.ns, Name: "remote-1"}, task)).To(Succeed())
			Expect(task.Labels).To(HaveKeyWithValue(agentlanev1alpha1.SessionLabel, "s1"))
			Expect(task.Labels).To(HaveKeyWithValue(agentlanev1alpha1.LaneLabel, "remote"))
			Expect(task.Labels).To(HaveKeyWithValue(agentlanev1alpha1.QueueLabel, "q"))
			Expect(metav1.IsControlledBy(task, sess)).To(BeTrue())
			Expect(task.Spec.RunID).To(Equal("r1"))
			Expect(task.Spec.Identity.TenantID).To(Equal(a.ns))

			ev := events.next("external_task_pending")
			Expect(ev.CommandID).To(Equal("remote-1"))
			pending, err := s.PendingExternal(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(pending).To(HaveLen(1))
			Expect(pending[0].ID).To(Equal("remote-1"))

			n, err := s.Cancel(ctx, sessionapi.CancelRequest{CommandID: "remote-1"})
			Expect(err).NotTo(HaveOccurred())
			Expect(n).To(Equal(1))
			cmd, err = s.AwaitFinal(ctx, "remote-1")
			Expect(err).NotTo(HaveOccurred())
			Expect(cmd.State).To(Equal(sessionapi.StateCancelled))
			Eventually(func(g Gomega) agentlanev1alpha1.ExternalTaskPhase {
				g.Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: a.ns, Name: "remote-1"}, task)).To(Succeed())
				return task.Status.Phase
			}).Should(Equal(agentlanev1alpha1.ExternalTaskCancelled))
		})
	})

	Describe("queue modes", func() {
		It("collect: starts an idle session at once, merges a burst posted during the run into one turn, and keeps other threads apart", func() {
			a.newSession("s1", modeOptions(agentlanev1alpha1.QueueModeCollect, 300*time.Millisecond, 20, agentlanev1alpha1.DropSummarize))
			s := a.session("s1")
			rt := follow(s, sessionapi.EventsOptions{Runtime: true})
			_, err := s.Post(ctx, sessionapi.Message{Text: "start", Channel: "chat"})
			Expect(err).NotTo(HaveOccurred())
			first := rt.next(sessionapi.EventTurn)
			Expect(first.Text).To(Equal("start"))
			Expect(first.Waited.Duration).To(BeZero(), "the debounce does not delay a message to an idle session")

			for i := 1; i <= 5; i++ {
				res, err := s.Post(ctx, sessionapi.Message{Text: fmt.Sprintf("part %d", i), Channel: "chat"})
				Expect(err).NotTo(HaveOccurred())
				Expect(res.Queued).To(BeTrue())
			}
			_, err = s.Post(ctx, sessionapi.Message{Text: "other thread", Channel: "chat", Thread: "t2"})
			Expect(err).NotTo(HaveOccurred())
			// One run at a time: the burst waits for the first run to end.
			rt.quiet(600*time.Millisecond, sessionapi.EventTurn)
			Expect(s.FinishRun(ctx, first.RunID)).To(Succeed())

			turn := rt.next(sessionapi.EventTurn)
			Expect(turn.Messages).To(HaveLen(5))
			Expect(turn.Text).To(Equal("part 1\npart 2\npart 3\npart 4\npart 5"))
			Expect(turn.Channel).To(Equal("chat"))
			Expect(turn.Waited.Duration).To(BeNumerically(">=", 300*time.Millisecond))
			rt.quiet(600*time.Millisecond, sessionapi.EventTurn)
			Expect(s.FinishRun(ctx, turn.RunID)).To(Succeed())
			second := rt.next(sessionapi.EventTurn)
			Expect(second.Text).To(Equal("other thread"))
			Expect(second.Thread).To(Equal("t2"))
			Expect(second.RunID).NotTo(Equal(turn.RunID))
		})

		It("steer: cancels exactly the run's queued commands and lets the started one finish", func() {
			a.newSession("s1", modeOptions(agentlanev1alpha1.QueueModeSteer, 0, 20, agentlanev1alpha1.DropSummarize))
			s := a.session("s1")
			rt := follow(s, sessionapi.EventsOptions{Runtime: true})
			_, err := s.Post(ctx, sessionapi.Message{Text: "refactor the parser"})
			Expect(err).NotTo(HaveOccurred())
			run := rt.next(sessionapi.EventTurn).RunID

			// execute runs one command per session: the first starts, the
			// others queue behind it. A command of another run must survive.
			started, err := s.Submit(ctx, sessionapi.SubmitRequest{ID: "w1", Type: "write", RunID: run})
			Expect(err).NotTo(HaveOccurred())
			Expect(started.Grant).NotTo(BeNil())
			short := &metav1.Duration{Duration: 100 * time.Millisecond}
			for _, id := range []string{"w2", "w3"} {
				c, err := s.Submit(ctx, sessionapi.SubmitRequest{ID: id, Type: "write", RunID: run, Wait: short})
				Expect(err).NotTo(HaveOccurred())
				Expect(c.State).To(Equal(sessionapi.StateQueued))
			}
			other, err := s.Submit(ctx, sessionapi.SubmitRequest{ID: "other-run", Type: "write", RunID: "elsewhere", Wait: short})
			Expect(err).NotTo(HaveOccurred())
			Expect(other.State).To(Equal(sessionapi.StateQueued))

			res, err := s.Post(ctx, sessionapi.Message{Text: "actually, keep the old API"})
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Steered).To(BeTrue())
			Expect(res.Queued).To(BeFalse())
			steer := rt.next(sessionapi.EventSteer)
			Expect(steer.RunID).To(Equal(run))
			Expect(steer.Text).To(Equal("actually, keep the old API"))

			for _, id := range []string{"w2", "w3"} {
				c, err := s.AwaitFinal(ctx, id)
				Expect(err).NotTo(HaveOccurred())
				Expect(c.State).To(Equal(sessionapi.StateCancelled), id)
			}
			c, err := s.Get(ctx, "w1", 0)
			Expect(err).NotTo(HaveOccurred())
			Expect(c.State).To(Equal(sessionapi.StateRunning))
			c, err = s.Report(ctx, "w1", sessionapi.ReportRequest{Attempt: 1, Result: sessionapi.Result{Success: true}})
			Expect(err).NotTo(HaveOccurred())
			Expect(c.State).To(Equal(sessionapi.StateSucceeded))
			c, err = s.Await(ctx, "other-run")
			Expect(err).NotTo(HaveOccurred())
			Expect(c.Grant).NotTo(BeNil(), "the other run's command starts once w1 is done")
		})

		It("steer: falls back to a followup when no runtime takes steers", func() {
			a.newSession("s1", modeOptions(agentlanev1alpha1.QueueModeSteer, 0, 20, agentlanev1alpha1.DropSummarize))
			s := a.session("s1")
			_, err := s.Post(ctx, sessionapi.Message{Text: "first"})
			Expect(err).NotTo(HaveOccurred())
			res, err := s.Post(ctx, sessionapi.Message{Text: "second"})
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Steered).To(BeFalse())
			Expect(res.Queued).To(BeTrue())
		})

		It("interrupt: aborts the active run, cancels its queued commands and runs the newest message", func() {
			a.newSession("s1", modeOptions(agentlanev1alpha1.QueueModeInterrupt, 0, 20, agentlanev1alpha1.DropSummarize))
			s := a.session("s1")
			rt := follow(s, sessionapi.EventsOptions{Runtime: true})
			_, err := s.Post(ctx, sessionapi.Message{Text: "write the report"})
			Expect(err).NotTo(HaveOccurred())
			first := rt.next(sessionapi.EventTurn)
			_, err = s.Submit(ctx, sessionapi.SubmitRequest{ID: "x1", Type: "bash", RunID: first.RunID})
			Expect(err).NotTo(HaveOccurred())
			_, err = s.Submit(ctx, sessionapi.SubmitRequest{ID: "x2", Type: "bash", RunID: first.RunID, Wait: &metav1.Duration{Duration: 50 * time.Millisecond}})
			Expect(err).NotTo(HaveOccurred())

			res, err := s.Post(ctx, sessionapi.Message{Text: "stop, summarize instead"})
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Aborted).To(Equal(first.RunID))
			abort := rt.next(sessionapi.EventAbort, sessionapi.EventTurn)
			Expect(abort.Type).To(Equal(sessionapi.EventAbort))
			Expect(abort.RunID).To(Equal(first.RunID))
			newest := rt.next(sessionapi.EventTurn)
			Expect(newest.Text).To(Equal("stop, summarize instead"))
			Expect(newest.RunID).NotTo(Equal(first.RunID))
			c, err := s.AwaitFinal(ctx, "x2")
			Expect(err).NotTo(HaveOccurred())
			Expect(c.State).To(Equal(sessionapi.StateCancelled))
		})

		It("cap + summarize: delivers the dropped messages as one overflow turn, each shortened to 160 characters", func() {
			a.newSession("s1", modeOptions(agentlanev1alpha1.QueueModeFollowup, 0, 2, agentlanev1alpha1.DropSummarize))
			s := a.session("s1")
			rt := follow(s, sessionapi.EventsOptions{Runtime: true})
			_, err := s.Post(ctx, sessionapi.Message{Text: "busy work"})
			Expect(err).NotTo(HaveOccurred())
			run := rt.next(sessionapi.EventTurn).RunID

			long := strings.Repeat("very long message ", 20)
			texts := []string{"m1 " + long, "m2", "m3", "m4", "m5"}
			for _, t := range texts {
				_, err := s.Post(ctx, sessionapi.Message{Text: t})
				Expect(err).NotTo(HaveOccurred())
			}
			st, err := s.Stats(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(st.Session.QueuedMessages).To(Equal(3), "two queued messages and the summary")
			Expect(s.FinishRun(ctx, run)).To(Succeed())

			summary := rt.next(sessionapi.EventTurn)
			Expect(summary.Summary).To(BeTrue())
			Expect(summary.Messages).To(HaveLen(3))
			lines := strings.Split(summary.Text, "\n")
			Expect(lines).To(HaveLen(4))
			Expect(lines[0]).To(ContainSubstring("3 queued messages were dropped"))
			Expect([]rune(strings.TrimPrefix(lines[1], "- "))).To(HaveLen(160))
			Expect(lines[1]).To(HavePrefix("- m1 very long message"))
			Expect(lines[1]).To(HaveSuffix("…"))
			Expect(lines[2:]).To(Equal([]string{"- m2", "- m3"}))
			Expect(s.FinishRun(ctx, summary.RunID)).To(Succeed())
			Expect(rt.next(sessionapi.EventTurn).Text).To(Equal("m4"))
		})

		It("reports a message as queued at once and as waiting once it waited 2s while a run is active", func() {
			a.newSession("s1", modeOptions(agentlanev1alpha1.QueueModeFollowup, 0, 20, agentlanev1alpha1.DropSummarize))
			s := a.session("s1")
			rt := follow(s, sessionapi.EventsOptions{Runtime: true})
			_, err := s.Post(ctx, sessionapi.Message{Text: "start", Channel: "chat"})
			Expect(err).NotTo(HaveOccurred())
			queued := rt.next(sessionapi.EventMessageQueued, sessionapi.EventTurn)
			Expect(queued.Type).To(Equal(sessionapi.EventMessageQueued), "the queued event comes before the turn")
			Expect(queued.Channel).To(Equal("chat"))
			run := rt.next(sessionapi.EventTurn).RunID

			_, err = s.Post(ctx, sessionapi.Message{Text: "and then?", Channel: "chat"})
			Expect(err).NotTo(HaveOccurred())
			queued = rt.next(sessionapi.EventMessageQueued)
			Expect(queued.RunID).To(Equal(run))
			Expect(queued.Messages).To(HaveLen(1))
			Expect(queued.Messages[0].Text).To(Equal("and then?"))
			waiting := rt.next(sessionapi.EventMessageWaiting)
			Expect(waiting.RunID).To(Equal(run))
			Expect(waiting.Messages).To(HaveLen(1))
			Expect(waiting.Waited.Duration).To(BeNumerically(">=", 2*time.Second))
			Expect(s.FinishRun(ctx, run)).To(Succeed())
			Expect(rt.next(sessionapi.EventTurn).Text).To(Equal("and then?"))
		})

		It("queue, the legacy name of steer, steers and is reported as steer, in the spec and in /queue", func() {
			a.newSession("s1", modeOptions(agentlanev1alpha1.QueueModeQueue, 0, 20, agentlanev1alpha1.DropSummarize))
			s := a.session("s1")
			rt := follow(s, sessionapi.EventsOptions{Runtime: true})
			st, err := s.Stats(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(st.Options.Mode).To(Equal("steer"))
			_, err = s.Post(ctx, sessionapi.Message{Text: "refactor the parser"})
			Expect(err).NotTo(HaveOccurred())
			run := rt.next(sessionapi.EventTurn).RunID
			res, err := s.Post(ctx, sessionapi.Message{Text: "only the lexer"})
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Steered).To(BeTrue())
			Expect(res.Queued).To(BeFalse())
			steer := rt.next(sessionapi.EventSteer)
			Expect(steer.RunID).To(Equal(run))
			Expect(steer.Text).To(Equal("only the lexer"))

			res, err = s.Post(ctx, sessionapi.Message{Text: "/queue collect"})
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Options.Mode).To(Equal("collect"))
			res, err = s.Post(ctx, sessionapi.Message{Text: "/queue queue"})
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Directive).To(BeTrue())
			Expect(res.Options.Mode).To(Equal("steer"))
		})

		It("applies /queue overrides and returns to the session's defaults on /queue reset", func() {
			a.newSession("s1", modeOptions(agentlanev1alpha1.QueueModeCollect, time.Second, 20, agentlanev1alpha1.DropSummarize))
			s := a.session("s1")
			res, err := s.Post(ctx, sessionapi.Message{Text: "/queue interrupt debounce:2s cap:5 drop:old"})
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Directive).To(BeTrue())
			Expect(*res.Options).To(Equal(sessionapi.QueueOptions{Mode: "interrupt", Debounce: metav1.Duration{Duration: 2 * time.Second}, Cap: 5, Drop: "old"}))
			st, err := s.Stats(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(st.Options.Mode).To(Equal("interrupt"))
			res, err = s.Post(ctx, sessionapi.Message{Text: "/queue reset"})
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Options.Mode).To(Equal("collect"))
			Expect(res.Options.Cap).To(Equal(20))
		})
	})

	Describe("event stream", func() {
		It("shows its session's command events only, in order, and resumes after Last-Event-ID", func() {
			a.newSession("s1", nil)
			a.newSession("s2", nil)
			s1, s2 := a.session("s1"), a.session("s2")
			first := follow(s1, sessionapi.EventsOptions{})

			runCommand := func(s *sessionapi.SessionClient, id string) {
				GinkgoHelper()
				c, err := s.Run(ctx, sessionapi.SubmitRequest{ID: id, Type: "read"}, func(context.Context, *sessionapi.Command) sessionapi.Result {
					return sessionapi.Result{Success: true}
				})
				Expect(err).NotTo(HaveOccurred())
				Expect(c.State).To(Equal(sessionapi.StateSucceeded))
			}
			runCommand(s1, "a1")
			runCommand(s2, "b1")
			runCommand(s1, "a2")

			var seen []sessionapi.Event
			for len(seen) < 6 {
				seen = append(seen, first.next("submitted", "started", "completed"))
			}
			var got []string
			for i, ev := range seen {
				got = append(got, ev.CommandID+" "+ev.Type)
				Expect(ev.ID).To(Equal(seen[0].ID+uint64(i)), "ids are consecutive")
			}
			Expect(got).To(Equal([]string{"a1 submitted", "a1 started", "a1 completed", "a2 submitted", "a2 started", "a2 completed"}))
			first.quiet(200*time.Millisecond, "submitted")

			// Reconnect from the middle: nothing after the cursor is missed.
			runCommand(s1, "a3")
			resumed := follow(s1, sessionapi.EventsOptions{LastEventID: seen[2].ID})
			var again []string
			for len(again) < 6 {
				ev := resumed.next("submitted", "started", "completed")
				again = append(again, ev.CommandID+" "+ev.Type)
				if len(again) == 1 {
					Expect(ev.ID).To(Equal(seen[2].ID + 1))
				}
			}
			Expect(again).To(Equal([]string{"a2 submitted", "a2 started", "a2 completed", "a3 submitted", "a3 started", "a3 completed"}))
		})

		It("says how many events a reconnecting stream missed once they are no longer retained", func() {
			a.newSession("s1", nil)
			s := a.session("s1")
			for i := range retainedEvents/3 + 2 {
				_, err := s.Run(ctx, sessionapi.SubmitRequest{Type: "read"}, func(context.Context, *sessionapi.Command) sessionapi.Result {
					return sessionapi.Result{Success: true}
				})
				Expect(err).NotTo(HaveOccurred(), "command %d", i)
			}
			first := server.hub.base + 1
			st := follow(s, sessionapi.EventsOptions{LastEventID: first})
			lost := st.next(sessionapi.EventEventsLost)
			Expect(lost.Lost).To(BeNumerically(">", 0))
			next := st.next("submitted", "started", "completed")
			Expect(next.ID).To(Equal(first + lost.Lost + 1))
		})
	})
})
