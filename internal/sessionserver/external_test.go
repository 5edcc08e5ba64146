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
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/testenv"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// handlerLanes have one External lane served by handlers through the API.
func handlerLanes() agentlanev1alpha1.LaneQueueSpec {
	return agentlanev1alpha1.LaneQueueSpec{DefaultLane: "handled", Lanes: []agentlanev1alpha1.Lane{{
		Name: "handled", Priority: 2, HandlerMode: agentlanev1alpha1.HandlerModeExternal,
		Timeout:        &metav1.Duration{Duration: 2 * time.Minute},
		ExternalTarget: &agentlanev1alpha1.ExternalTarget{Type: agentlanev1alpha1.ExternalTargetHandler},
		RetryPolicy: &agentlanev1alpha1.RetryPolicy{Strategy: agentlanev1alpha1.RetryFixed, MaxRetries: ptr.To[int32](1),
			FixedDelay: &metav1.Duration{Duration: 50 * time.Millisecond}},
	}}}
}

// tokenWith returns the token of a new service account of the tenant's
// namespace allowed the verbs on the sessions' agentsessions/api.
func (t tenant) tokenWith(name string, verbs ...string) string {
	GinkgoHelper()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: name},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{agentlanev1alpha1.GroupVersion.Group},
			Resources: []string{APIResource + "/" + APISubresource}, Verbs: verbs}},
	}
	Expect(k8sClient.Create(ctx, role)).To(Succeed())
	token, err := testenv.ServiceAccountToken(ctx, k8sClient, t.ns, name, rbacv1.RoleRef{Kind: "Role", Name: role.Name})
	Expect(err).NotTo(HaveOccurred())
	return token
}

// rawCall sends one plain HTTP request to the session route path and
// returns the status and the decoded JSON body.
func (t tenant) rawCall(token, method, session, path string, body any) (int, map[string]any) {
	GinkgoHelper()
	var in io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		Expect(err).NotTo(HaveOccurred())
		in = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, baseURL+"/v1/namespaces/"+t.ns+"/sessions/"+session+path, in)
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := apiHTTPClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	out := map[string]any{}
	Expect(json.NewDecoder(resp.Body).Decode(&out)).To(Succeed())
	return resp.StatusCode, out
}

var _ = Describe("The external-task contract for handlers", func() {
	It("lists a task created with kubectl with its payload, which the manager's cache does not keep", func() {
		t := newTenant()
		t.newQueue(handlerLanes())
		t.newSession("s", nil)
		handler := t.tokenWith("handler", VerbRead, VerbComplete)
		task := &agentlanev1alpha1.ExternalTask{
			ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: "bare1"},
			Spec: agentlanev1alpha1.ExternalTaskSpec{SessionRef: &agentlanev1alpha1.AgentSessionReference{Name: "s"},
				Lane: "handled", CommandType: "wordcount",
				Payload: &runtime.RawExtension{Raw: []byte(`{"text":"four words right here"}`)}},
		}
		Expect(k8sClient.Create(ctx, task)).To(Succeed())
		Eventually(func(g Gomega) {
			code, list := t.rawCall(handler, http.MethodGet, "s", "/external", nil)
			g.Expect(code).To(Equal(http.StatusOK))
			items, _ := list["items"].([]any)
			g.Expect(items).To(HaveLen(1))
			g.Expect(items[0]).To(HaveKeyWithValue("id", "bare1"))
			g.Expect(items[0]).To(HaveKeyWithValue("payload", map[string]any{"text": "four words right here"}))
		}).Should(Succeed())
	})

	It("lists tasks with their payload and takes exactly one fenced completion from an authorized handler", func() {
		t := newTenant()
		t.newQueue(handlerLanes())
		t.newSession("s", nil)
		handler := t.tokenWith("handler", VerbRead, VerbComplete)
		reader := t.tokenWith("reader", VerbRead)

		By("a runtime submitting a command to the Handler lane")
		code, cmd := t.rawCall(t.token, http.MethodPost, "s", "/commands", map[string]any{
			"id": "wc1", "type": "wordcount", "lane": "handled", "payload": map[string]any{"text": "one two three"}, "wait": "10ms"})
		Expect(code).To(Equal(http.StatusAccepted), "%v", cmd)

		By("the handler listing it with its payload and remaining time")
		var item map[string]any
		Eventually(func(g Gomega) {
			code, list := t.rawCall(handler, http.MethodGet, "s", "/external", nil)
			g.Expect(code).To(Equal(http.StatusOK))
			items, _ := list["items"].([]any)
			g.Expect(items).To(HaveLen(1))
			item = items[0].(map[string]any)
			g.Expect(item["deadline"]).NotTo(HavePrefix("0001-"), "dispatched to handlers, its timeout runs")
		}).Should(Succeed())
		Expect(item).To(HaveKeyWithValue("id", "wc1"))
		Expect(item).To(HaveKeyWithValue("attempt", BeNumerically("==", 1)))
		Expect(item).To(HaveKeyWithValue("commandType", "wordcount"))
		Expect(item).To(HaveKeyWithValue("payload", map[string]any{"text": "one two three"}))
		Expect(item).To(HaveKeyWithValue("remainingSeconds", And(BeNumerically(">", 60), BeNumerically("<=", 120))))
		Expect(item).To(HaveKeyWithValue("timedOut", false))
		task := &agentlanev1alpha1.ExternalTask{}
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: t.ns, Name: "wc1"}, task)).To(Succeed())
			g.Expect(task.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskDispatched))
		}).Should(Succeed())
		Expect(task.Status.Worker).To(BeEmpty())
		Expect(task.Status.Holder).To(Equal(agentlanev1alpha1.HolderHandler))

		done := map[string]any{"attempt": 1, "success": true, "result": map[string]any{"words": 3}}
		By("callers without the update verb being refused")
		code, body := t.rawCall(reader, http.MethodPost, "s", "/external/wc1/complete", done)
		Expect(code).To(Equal(http.StatusForbidden))
		Expect(body).To(HaveKeyWithValue("code", sessionapi.CodeForbidden))
		code, body = t.rawCall(t.token, http.MethodPost, "s", "/external/wc1/complete", done)
		Expect(code).To(Equal(http.StatusForbidden), "submitting commands does not grant completing them")
		Expect(body).To(HaveKeyWithValue("code", sessionapi.CodeForbidden))

		By("a completion for another attempt being refused")
		code, body = t.rawCall(handler, http.MethodPost, "s", "/external/wc1/complete", map[string]any{"attempt": 2, "success": true})
		Expect(code).To(Equal(http.StatusConflict))
		Expect(body).To(HaveKeyWithValue("code", sessionapi.CodeStaleAttempt))
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: t.ns, Name: "wc1"}, task)).To(Succeed())
		Expect(task.Status.Result).To(BeNil(), "a refused completion changes nothing")

		By("the handler completing the current attempt")
		code, body = t.rawCall(handler, http.MethodPost, "s", "/external/wc1/complete", done)
		Expect(code).To(Equal(http.StatusOK), "%v", body)
		Expect(body).To(HaveKeyWithValue("phase", "Succeeded"))

		By("a second completion of that attempt being refused")
		code, body = t.rawCall(handler, http.MethodPost, "s", "/external/wc1/complete",
			map[string]any{"attempt": 1, "success": false, "error": "late"})
		Expect(code).To(Equal(http.StatusConflict))
		Expect(body).To(HaveKeyWithValue("code", sessionapi.CodeAlreadyCompleted))

		By("the runtime reading the handler's result")
		Eventually(func(g Gomega) {
			code, cmd := t.rawCall(t.token, http.MethodGet, "s", "/commands/wc1", nil)
			g.Expect(code).To(Equal(http.StatusOK))
			g.Expect(cmd).To(HaveKeyWithValue("state", "Succeeded"))
			g.Expect(cmd).To(HaveKeyWithValue("result", HaveKeyWithValue("output", map[string]any{"words": float64(3)})))
		}).Should(Succeed())
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: t.ns, Name: "wc1"}, task)).To(Succeed())
		Expect(task.Status.Result.Success).To(BeTrue())

		By("a task of another session staying out of reach")
		t.newSession("other", nil)
		code, body = t.rawCall(handler, http.MethodPost, "other", "/external/wc1/complete", done)
		Expect(code).To(Equal(http.StatusNotFound))
		Expect(body).To(HaveKeyWithValue("code", sessionapi.CodeCommandNotFound))
	})

	It("retries a failed completion as a new attempt, which the Go client completes", func() {
		t := newTenant()
		t.newQueue(handlerLanes())
		t.newSession("s", nil)
		handler := clientWithToken(t.tokenWith("handler", VerbRead, VerbComplete)).Session(t.ns, "s")
		_, err := t.session("s").Submit(ctx, sessionapi.SubmitRequest{ID: "wc2", Type: "wordcount", Lane: "handled",
			Payload: json.RawMessage(`{"text":"a b"}`), Wait: &metav1.Duration{Duration: 10 * time.Millisecond}})
		Expect(err).NotTo(HaveOccurred())
		pendingAttempt := func(n int) {
			GinkgoHelper()
			Eventually(func(g Gomega) {
				items, err := handler.PendingExternal(ctx)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(items).To(HaveLen(1))
				g.Expect(items[0].Attempt).To(Equal(n))
				g.Expect(items[0].Deadline.IsZero()).To(BeFalse())
			}).Should(Succeed())
		}
		pendingAttempt(1)
		res, err := handler.Complete(ctx, "wc2", sessionapi.Completion{Attempt: 1, Error: "disk full", ExitCode: ptr.To[int32](2)})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Phase).To(Equal("Running"))
		pendingAttempt(2)
		_, err = handler.Complete(ctx, "wc2", sessionapi.Completion{Attempt: 1, Success: true})
		Expect(sessionapi.IsCode(err, sessionapi.CodeStaleAttempt)).To(BeTrue(), "%v", err)
		_, err = handler.Complete(ctx, "wc2", sessionapi.Completion{Attempt: 2, Success: true, Result: json.RawMessage(`{"words":2}`)})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			cmd, err := t.session("s").Get(ctx, "wc2", 0)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cmd.State).To(Equal(sessionapi.StateSucceeded))
			g.Expect(cmd.Attempt).To(Equal(2))
		}).Should(Succeed())
	})
})
