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
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// In these specs no delegation controller runs: every delegation stays
// pending, as a flood of them would while the lane's workers are busy.

// delegateLanes is internalLanes with a Delegate lane, review.
func delegateLanes() agentlanev1alpha1.LaneQueueSpec {
	spec := internalLanes()
	spec.Lanes = append(spec.Lanes, agentlanev1alpha1.Lane{Name: "review", Priority: 2, MaxConcurrency: 2,
		ExternalTarget: &agentlanev1alpha1.ExternalTarget{Type: agentlanev1alpha1.ExternalTargetDelegate,
			Delegate: &agentlanev1alpha1.DelegateTarget{SessionTemplate: agentlanev1alpha1.AgentSessionTemplate{
				Spec: agentlanev1alpha1.AgentSessionTemplateSpec{AgentTemplateID: "reviewer"}}}}})
	return spec
}

// countingReader counts the ExternalTask reads that reach the API server.
type countingReader struct {
	client.Reader
	taskReads atomic.Int64
}

func (c *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*agentlanev1alpha1.ExternalTask); ok {
		c.taskReads.Add(1)
	}
	return c.Reader.Get(ctx, key, obj, opts...)
}

func (c *countingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*agentlanev1alpha1.ExternalTaskList); ok {
		c.taskReads.Add(1)
	}
	return c.Reader.List(ctx, list, opts...)
}

// limitDelegations sets the server's delegation bounds for one spec.
func limitDelegations(b DelegationBounds) {
	old := server.Delegations
	server.Delegations = b
	DeferCleanup(func() { server.Delegations = old })
}

// delegateAll posts n delegations at once from the session and returns the
// accepted ones and the errors of the others.
func delegateAll(s *sessionapi.SessionClient, prefix string, n int) (accepted []string, refused []error) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer GinkgoRecover()
			defer wg.Done()
			d, err := s.Delegate(ctx, sessionapi.DelegationRequest{ID: fmt.Sprintf("%s-%02d", prefix, i), Lane: "review",
				Text: strings.Repeat("review this ", 100)})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				refused = append(refused, err)
				return
			}
			accepted = append(accepted, d.ID)
		}()
	}
	wg.Wait()
	return accepted, refused
}

// finishTask marks a delegated task Succeeded, as its worker would.
func finishTask(ns, name string) {
	GinkgoHelper()
	t := &agentlanev1alpha1.ExternalTask{}
	Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, t)).To(Succeed())
	now := metav1.Now()
	t.Status.Phase, t.Status.FinishedAt = agentlanev1alpha1.ExternalTaskSucceeded, &now
	Expect(k8sClient.Status().Update(ctx, t)).To(Succeed())
}

var _ = Describe("Delegation bounds", func() {
	var a, b tenant
	BeforeEach(func() {
		a, b = newTenant(), newTenant()
		a.newQueue(delegateLanes())
		b.newQueue(delegateLanes())
		a.newSession("lead", nil)
		a.newSession("lead2", nil)
		b.newSession("lead", nil)
	})

	It("refuses one session's flood at its bound with 429 QueueFull, and still admits another namespace's delegation", func() {
		limitDelegations(DelegationBounds{PendingPerSession: 5, PerSession: 6, PendingPerNamespace: 8, PerNamespace: 20})
		accepted, refused := delegateAll(a.session("lead"), "flood", 40)
		Expect(accepted).To(HaveLen(5), "the session's pending bound")
		Expect(refused).To(HaveLen(35))
		for _, err := range refused {
			msg := expectCode(err, http.StatusTooManyRequests, sessionapi.CodeQueueFull)
			Expect(msg).To(ContainSubstring("max-delegations-pending-per-session"))
			var e *sessionapi.Error
			Expect(errors.As(err, &e)).To(BeTrue())
			Expect(e.RetryAfter).To(BeNumerically(">", 0))
		}

		accepted, refused = delegateAll(a.session("lead2"), "second", 5)
		Expect(accepted).To(HaveLen(3), "the namespace's pending bound: 8, 5 of them lead's")
		for _, err := range refused {
			Expect(expectCode(err, http.StatusTooManyRequests, sessionapi.CodeQueueFull)).To(ContainSubstring("namespace"))
		}

		d, err := b.session("lead").Delegate(ctx, sessionapi.DelegationRequest{Lane: "review", Text: "Review PR 42"})
		Expect(err).NotTo(HaveOccurred(), "another namespace's delegation is admitted")
		Expect(d.Phase).To(Equal("Queued"))

		By("a finished delegation frees a pending place, up to the session's total")
		list, err := a.session("lead").Delegations(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(list.Items).To(HaveLen(5))
		finishTask(a.ns, list.Items[0].ID)
		Eventually(func() error {
			_, err := a.session("lead").Delegate(ctx, sessionapi.DelegationRequest{ID: "after-finish", Lane: "review", Text: "one more"})
			return err
		}).Should(Succeed())
		finishTask(a.ns, list.Items[1].ID)
		Eventually(func(g Gomega) {
			pending := 0
			l, err := a.session("lead").Delegations(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			for _, d := range l.Items {
				if d.Phase == "Queued" {
					pending++
				}
			}
			g.Expect(pending).To(Equal(4))
		}).Should(Succeed())
		_, err = a.session("lead").Delegate(ctx, sessionapi.DelegationRequest{ID: "past-total", Lane: "review", Text: "and another"})
		Expect(expectCode(err, http.StatusTooManyRequests, sessionapi.CodeQueueFull)).To(ContainSubstring("max-delegations-per-session"))
	})

	It("refuses a first turn over the size bound with 413 TooLarge, and one no worker can take with 400 InvalidDirective", func() {
		_, err := a.session("lead").Delegate(ctx, sessionapi.DelegationRequest{Lane: "review", Text: strings.Repeat("x", maxDelegationText+100)})
		expectCode(err, http.StatusRequestEntityTooLarge, sessionapi.CodeTooLarge)
		_, err = a.session("lead").Delegate(ctx, sessionapi.DelegationRequest{Lane: "review", Text: "/queue followup"})
		Expect(expectCode(err, http.StatusBadRequest, sessionapi.CodeInvalidDirective)).To(ContainSubstring("/queue directive"))
		_, err = a.session("lead").Delegate(ctx, sessionapi.DelegationRequest{Lane: "review", Text: "/queue sideways"})
		expectCode(err, http.StatusBadRequest, sessionapi.CodeInvalidDirective)
		_, err = a.session("lead").Submit(ctx, sessionapi.SubmitRequest{Lane: "review", Type: "review", Payload: []byte(`{"text":"/queue collect"}`)})
		expectCode(err, http.StatusBadRequest, sessionapi.CodeInvalidDirective)
		list, err := a.session("lead").Delegations(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(list.Items).To(BeEmpty(), "nothing refused was created")
	})

	It("refuses a session whose budget is exhausted with 409 BudgetExhausted", func() {
		s := &agentlanev1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: a.ns, Name: "spent"},
			Spec: agentlanev1alpha1.AgentSessionSpec{QueueRef: agentlanev1alpha1.LaneQueueReference{Name: "q"},
				Identity: &agentlanev1alpha1.Identity{TenantID: a.ns, Principal: "agent"},
				Budget:   &agentlanev1alpha1.Budget{Tokens: &agentlanev1alpha1.TokenBudget{Hard: ptr.To[int64](100)}}}}
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
			g.Expect(s.Status.Phase).To(Equal(agentlanev1alpha1.SessionActive))
		}).Should(Succeed())
		_, err := a.session("spent").Delegate(ctx, sessionapi.DelegationRequest{Lane: "review", Text: "while within budget"})
		Expect(err).NotTo(HaveOccurred())
		_, err = a.session("spent").RecordUsage(ctx, sessionapi.Usage{InputTokens: 100})
		Expect(err).NotTo(HaveOccurred())
		_, err = a.session("spent").Delegate(ctx, sessionapi.DelegationRequest{Lane: "review", Text: "after the hard limit"})
		Expect(expectCode(err, http.StatusConflict, sessionapi.CodeBudgetExhausted)).To(ContainSubstring("hard limit"))
	})

	DescribeTable("refuses a session whose delegation depth is not valid",
		func(depth string) {
			s := &agentlanev1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: a.ns, Name: "forged",
				Labels:      map[string]string{agentlanev1alpha1.DelegationTaskLabel: "earlier"},
				Annotations: map[string]string{agentlanev1alpha1.DelegationDepthAnnotation: depth}},
				Spec: agentlanev1alpha1.AgentSessionSpec{QueueRef: agentlanev1alpha1.LaneQueueReference{Name: "q"},
					Identity: &agentlanev1alpha1.Identity{TenantID: a.ns, Principal: "agent"}}}
			Expect(k8sClient.Create(ctx, s)).To(Succeed())
			Eventually(func(g Gomega) {
				g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
				g.Expect(s.Status.Phase).To(Equal(agentlanev1alpha1.SessionActive))
			}).Should(Succeed())
			_, err := a.session("forged").Delegate(ctx, sessionapi.DelegationRequest{Lane: "review", Text: "go deeper"})
			Expect(expectCode(err, http.StatusBadRequest, sessionapi.CodeInvalidRequest)).To(ContainSubstring("invalid delegation depth"))
		},
		Entry("negative", "-1000"),
		Entry("zero", "0"),
		Entry("not a number", "deep"),
	)

	It("lists a session's delegations in bounded pages from the manager's cache, not the API server", func() {
		accepted, refused := delegateAll(a.session("lead"), "page", 5)
		Expect(refused).To(BeEmpty())
		Expect(accepted).To(HaveLen(5))
		reader := &countingReader{Reader: server.Reader}
		old := server.Reader
		server.Reader = reader
		DeferCleanup(func() { server.Reader = old })

		var ids []string
		Eventually(func(g Gomega) {
			ids = nil
			cont := ""
			for pages := 0; ; pages++ {
				g.Expect(pages).To(BeNumerically("<", 3))
				page, err := a.session("lead").DelegationsPage(ctx, 2, cont)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(len(page.Items)).To(BeNumerically("<=", 2))
				for _, d := range page.Items {
					ids = append(ids, d.ID)
				}
				if cont = page.Continue; cont == "" {
					break
				}
			}
			g.Expect(ids).To(ConsistOf(accepted))
		}).Should(Succeed())
		Expect(ids).To(HaveLen(5), "no delegation twice")
		Expect(reader.taskReads.Load()).To(BeZero(), "GET /delegations read tasks from the API server")

		_, err := a.session("lead").DelegationsPage(ctx, maxDelegationPage+1, "")
		expectCode(err, http.StatusBadRequest, sessionapi.CodeInvalidRequest)
		_, err = a.session("lead").DelegationsPage(ctx, 0, "not-a-cursor")
		expectCode(err, http.StatusBadRequest, sessionapi.CodeInvalidRequest)
	})
})
