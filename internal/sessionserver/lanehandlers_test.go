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
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// asyncSubmit is a submit that waits on a goroutine of its own.
type asyncSubmit struct {
	cmd chan *sessionapi.Command
	err chan error
}

func submitAsync(s *sessionapi.SessionClient, req sessionapi.SubmitRequest) asyncSubmit {
	out := asyncSubmit{cmd: make(chan *sessionapi.Command, 1), err: make(chan error, 1)}
	go func() {
		defer GinkgoRecover()
		c, err := s.Submit(ctx, req)
		out.cmd <- c
		out.err <- err
	}()
	return out
}

// pendingTask waits until the session lists the external task id at attempt.
func pendingTask(s *sessionapi.SessionClient, id string, attempt int) sessionapi.ExternalTask {
	GinkgoHelper()
	var got sessionapi.ExternalTask
	Eventually(func(g Gomega) {
		list, err := s.PendingExternal(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		found := false
		for _, t := range list {
			if t.ID == id && t.Attempt == attempt {
				got, found = t, true
			}
		}
		g.Expect(found).To(BeTrue(), "task %s attempt %d among %+v", id, attempt, list)
	}, 30*time.Second).Should(Succeed())
	return got
}

var _ = Describe("A lane the session handles itself", func() {
	It("is switched by the session's own token and completed by it, without an ExternalTask or a second identity", func() {
		t := newTenant()
		t.newQueue(internalLanes())
		t.newSession("s", nil)
		s := t.session("s")

		h, err := s.SetLaneHandler(ctx, "execute", sessionapi.LaneHandlerExternal)
		Expect(err).NotTo(HaveOccurred())
		Expect(*h).To(Equal(sessionapi.LaneHandler{Lane: "execute", Mode: "External"}))

		sub := submitAsync(s, sessionapi.SubmitRequest{ID: "b1", Type: "bash", Payload: json.RawMessage(`{"cmd":"make"}`),
			Wait: &metav1.Duration{Duration: time.Minute}})
		task := pendingTask(s, "b1", 1)
		Expect(task.Lane).To(Equal("execute"))
		Expect(task.Payload).To(MatchJSON(`{"cmd":"make"}`))
		Expect(task.CanComplete).To(BeTrue(), "the token that submits may complete it")

		err = k8sClient.Get(ctx, types.NamespacedName{Namespace: t.ns, Name: "b1"}, &agentlanev1alpha1.ExternalTask{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no ExternalTask: %v", err)

		By("refusing the completion through another session of the same tenant")
		t.newSession("s2", nil)
		_, err = t.session("s2").CompleteExternalTask(ctx, "b1", json.RawMessage(`{"forged":true}`))
		expectCode(err, http.StatusForbidden, sessionapi.CodeForbidden) // a Handler task's access, which the runtime lacks

		res, err := s.CompleteExternalTask(ctx, "b1", json.RawMessage(`{"exit":0}`))
		Expect(err).NotTo(HaveOccurred())
		Expect(*res).To(Equal(sessionapi.CompletionResult{ID: "b1", Attempt: 1, Phase: "Succeeded"}), "the current attempt is assumed")
		var cmd *sessionapi.Command
		Eventually(sub.cmd, 30*time.Second).Should(Receive(&cmd))
		Expect(<-sub.err).NotTo(HaveOccurred())
		Expect(cmd.State).To(Equal(sessionapi.StateSucceeded))
		Expect(cmd.Mode).To(Equal(sessionapi.ModeExternal))
		Expect(cmd.Result.Output).To(MatchJSON(`{"exit":0}`))

		By("refusing a second completion of the finished task")
		_, err = s.CompleteExternalTask(ctx, "b1", json.RawMessage(`{}`))
		expectCode(err, http.StatusConflict, sessionapi.CodeAlreadyCompleted)

		By("refusing another tenant")
		other := newTenant()
		_, err = clientWithToken(other.token).Session(t.ns, "s").SetLaneHandler(ctx, "query", sessionapi.LaneHandlerExternal)
		expectCode(err, http.StatusForbidden, sessionapi.CodeForbidden)

		By("refusing unknown lanes and modes")
		_, err = s.SetLaneHandler(ctx, "nope", sessionapi.LaneHandlerExternal)
		expectCode(err, http.StatusBadRequest, sessionapi.CodeUnknownLane)
		_, err = s.SetLaneHandler(ctx, "query", "Hybrid")
		expectCode(err, http.StatusBadRequest, sessionapi.CodeInvalidRequest)

		By("running the lane on grants again once switched back")
		_, err = s.SetLaneHandler(ctx, "execute", sessionapi.LaneHandlerDefault)
		Expect(err).NotTo(HaveOccurred())
		c, err := s.Run(ctx, sessionapi.SubmitRequest{Type: "bash"}, func(context.Context, *sessionapi.Command) sessionapi.Result {
			return sessionapi.Result{Success: true}
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Mode).To(Equal(sessionapi.ModeInternal))
	})

	It("fences a completion to the current attempt: a retried attempt's is refused", func() {
		t := newTenant()
		spec := internalLanes()
		spec.Lanes = append(spec.Lanes, agentlanev1alpha1.Lane{Name: "slow", Priority: 2,
			RetryPolicy: &agentlanev1alpha1.RetryPolicy{Strategy: agentlanev1alpha1.RetryFixed, MaxRetries: ptrTo[int32](1), FixedDelay: &metav1.Duration{Duration: 100 * time.Millisecond}}})
		t.newQueue(spec)
		t.newSession("s", nil)
		s := t.session("s")
		_, err := s.SetLaneHandler(ctx, "slow", sessionapi.LaneHandlerExternal)
		Expect(err).NotTo(HaveOccurred())
		sub := submitAsync(s, sessionapi.SubmitRequest{ID: "w1", Type: "work", Lane: "slow", Wait: &metav1.Duration{Duration: time.Minute}})
		pendingTask(s, "w1", 1)
		res, err := s.Complete(ctx, "w1", sessionapi.Completion{Attempt: 1, Success: false, Error: "flaky disk"})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Phase).To(BeElementOf("Retrying", "Running"), "retried (Running once the retry started)")
		pendingTask(s, "w1", 2) // the retry

		_, err = s.Complete(ctx, "w1", sessionapi.Completion{Attempt: 1, Success: true})
		expectCode(err, http.StatusConflict, sessionapi.CodeStaleAttempt)
		res, err = s.Complete(ctx, "w1", sessionapi.Completion{Success: false, Error: "disk full"})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Attempt).To(Equal(2), "the current attempt is assumed")
		var cmd *sessionapi.Command
		Eventually(sub.cmd, 30*time.Second).Should(Receive(&cmd))
		Expect(<-sub.err).NotTo(HaveOccurred())
		Expect(cmd.State).NotTo(Equal(sessionapi.StateSucceeded))
		Expect(cmd.Error).To(ContainSubstring("disk full"))
		_, err = s.Complete(ctx, "w1", sessionapi.Completion{Success: true})
		expectCode(err, http.StatusConflict, sessionapi.CodeAlreadyCompleted)
	})

	It("is refused where the LaneQueue keeps the lane's commands on its runners, and never bypasses them", func() {
		t := newTenant()
		spec := internalLanes()
		spec.Lanes = append(spec.Lanes, agentlanev1alpha1.Lane{Name: "sandboxed", Priority: 2, HandlerMode: agentlanev1alpha1.HandlerModeExternal,
			SessionOverrides: &agentlanev1alpha1.LaneSessionOverrides{AllowedModes: []agentlanev1alpha1.HandlerMode{}}})
		t.newQueue(spec)
		t.newSession("s", nil)
		s := t.session("s")
		for _, mode := range []string{sessionapi.LaneHandlerExternal, sessionapi.LaneHandlerInternal} {
			_, err := s.SetLaneHandler(ctx, "sandboxed", mode)
			Expect(expectCode(err, http.StatusForbidden, sessionapi.CodeLaneSwitchRefused)).To(ContainSubstring("sandboxed"))
		}

		By("switching an External lane that allows it to Internal: the runtime runs it on a grant")
		_, err := s.SetLaneHandler(ctx, "remote", sessionapi.LaneHandlerInternal)
		Expect(err).NotTo(HaveOccurred())
		c, err := s.Run(ctx, sessionapi.SubmitRequest{ID: "r1", Type: "fetch", Lane: "remote"}, func(context.Context, *sessionapi.Command) sessionapi.Result {
			return sessionapi.Result{Success: true}
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(c.State).To(Equal(sessionapi.StateSucceeded))
		err = k8sClient.Get(ctx, types.NamespacedName{Namespace: t.ns, Name: "r1"}, &agentlanev1alpha1.ExternalTask{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no ExternalTask: %v", err)
	})

	It("stays switched after a manager restart: the switch is kept with the session's record", func() {
		t := newTenant()
		t.newQueue(internalLanes())
		t.newSession("s", nil)
		_, err := t.session("s").SetLaneHandler(ctx, "execute", sessionapi.LaneHandlerExternal)
		Expect(err).NotTo(HaveOccurred())

		s := restartAPI(t, time.Now()).Session(t.ns, "s")
		sub := submitAsync(s, sessionapi.SubmitRequest{ID: "after", Type: "bash", Wait: &metav1.Duration{Duration: time.Minute}})
		pendingTask(s, "after", 1)
		_, err = s.CompleteExternalTask(ctx, "after", json.RawMessage(`"ok"`))
		Expect(err).NotTo(HaveOccurred())
		var cmd *sessionapi.Command
		Eventually(sub.cmd, 30*time.Second).Should(Receive(&cmd))
		Expect(cmd.State).To(Equal(sessionapi.StateSucceeded))
	})
})

func ptrTo[T any](v T) *T { return &v }

var _ = Describe("Heartbeats of a lane the session handles itself", func() {
	It("keep a command alive past the lane's heartbeatTimeout, from the session's own token only, and a silent one times out", func() {
		t := newTenant()
		t.newQueue(agentlanev1alpha1.LaneQueueSpec{Lanes: []agentlanev1alpha1.Lane{
			{Name: "execute", Priority: 0, MaxConcurrencyPerSession: 2,
				Timeout:          &metav1.Duration{Duration: 2 * time.Minute},
				HeartbeatTimeout: &metav1.Duration{Duration: 3 * time.Second},
				RetryPolicy:      &agentlanev1alpha1.RetryPolicy{Strategy: agentlanev1alpha1.RetryNone}},
		}})
		t.newSession("s", nil)
		s := t.session("s")
		_, err := s.SetLaneHandler(ctx, "execute", sessionapi.LaneHandlerExternal)
		Expect(err).NotTo(HaveOccurred())

		alive := submitAsync(s, sessionapi.SubmitRequest{ID: "alive", Type: "bash", Wait: &metav1.Duration{Duration: 2 * time.Minute}})
		pendingTask(s, "alive", 1)
		By("heartbeating for more than twice the heartbeatTimeout")
		for start := time.Now(); time.Since(start) < 7*time.Second; time.Sleep(300 * time.Millisecond) {
			res, err := s.Heartbeat(ctx, "alive", sessionapi.Heartbeat{})
			Expect(err).NotTo(HaveOccurred())
			Expect(*res).To(Equal(sessionapi.HeartbeatResult{ID: "alive", Attempt: 1, HeartbeatTimeoutSeconds: 3}))
		}
		By("refusing another session's heartbeat: it needs a Handler task's access")
		t.newSession("s2", nil)
		_, err = t.session("s2").Heartbeat(ctx, "alive", sessionapi.Heartbeat{})
		expectCode(err, http.StatusForbidden, sessionapi.CodeForbidden)

		res, err := s.CompleteExternalTask(ctx, "alive", json.RawMessage(`{"done":true}`))
		Expect(err).NotTo(HaveOccurred())
		Expect(*res).To(Equal(sessionapi.CompletionResult{ID: "alive", Attempt: 1, Phase: "Succeeded"}))
		var cmd *sessionapi.Command
		Eventually(alive.cmd, 30*time.Second).Should(Receive(&cmd))
		Expect(<-alive.err).NotTo(HaveOccurred())
		Expect(cmd.State).To(Equal(sessionapi.StateSucceeded))

		By("timing out a command nobody heartbeats, naming the budget")
		silent := submitAsync(s, sessionapi.SubmitRequest{ID: "silent", Type: "bash", Wait: &metav1.Duration{Duration: 2 * time.Minute}})
		Eventually(silent.cmd, time.Minute).Should(Receive(&cmd))
		Expect(<-silent.err).NotTo(HaveOccurred())
		// Its one attempt timed out; the queue keeps dead letters.
		Expect(cmd.State).To(Equal(sessionapi.StateDeadLettered))
		Expect(cmd.Error).To(ContainSubstring("no heartbeat"))
		_, err = s.Heartbeat(ctx, "silent", sessionapi.Heartbeat{})
		Expect(err).To(HaveOccurred(), "a finished command takes no heartbeat")
	})
})
