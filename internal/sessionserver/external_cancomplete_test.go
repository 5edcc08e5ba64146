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
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

var _ = Describe("GET .../external canComplete", func() {
	It("says which listed tasks the caller may complete, with the access and the fence of the complete call", func() {
		t := newTenant()
		lanes := handlerLanes()
		lanes.Lanes = append(lanes.Lanes, agentlanev1alpha1.Lane{
			Name: "workers", Priority: 3, HandlerMode: agentlanev1alpha1.HandlerModeExternal,
			Timeout:        &metav1.Duration{Duration: 2 * time.Minute},
			ExternalTarget: &agentlanev1alpha1.ExternalTarget{Type: agentlanev1alpha1.ExternalTargetWorkers},
		})
		t.newQueue(lanes)
		t.newSession("s", nil)
		handler := t.tokenWith("handler", VerbRead, VerbComplete)
		reader := t.tokenWith("reader", VerbRead)

		for id, lane := range map[string]string{"h1": "handled", "w1": "workers"} {
			code, cmd := t.rawCall(t.token, http.MethodPost, "s", "/commands", map[string]any{
				"id": id, "type": "wordcount", "lane": lane, "payload": map[string]any{"text": "a b"}, "wait": "10ms"})
			Expect(code).To(Equal(http.StatusAccepted), "%v", cmd)
		}
		canComplete := func(g Gomega, token string) map[string]any {
			code, list := t.rawCall(token, http.MethodGet, "s", "/external", nil)
			g.Expect(code).To(Equal(http.StatusOK), "%v", list)
			items, _ := list["items"].([]any)
			out := map[string]any{}
			for _, it := range items {
				m := it.(map[string]any)
				out[m["id"].(string)] = m["canComplete"]
			}
			return out
		}
		Eventually(func(g Gomega) {
			g.Expect(canComplete(g, handler)).To(Equal(map[string]any{"h1": true, "w1": false}),
				"a Handler lane's dispatched task is the handler's; a Workers lane's is not completed through the API")
		}).Should(Succeed())
		Expect(canComplete(Default, reader)).To(Equal(map[string]any{"h1": false, "w1": false}), "get does not grant update")
		Expect(canComplete(Default, t.token)).To(Equal(map[string]any{"h1": false, "w1": false}), "create does not grant update")
	})
})
