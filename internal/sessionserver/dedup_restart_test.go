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
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"k8s.io/apimachinery/pkg/types"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/sessionstore"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

var _ = Describe("A message re-delivered after a manager restart", func() {
	It("is still a duplicate: the session's remembered ids are kept with its inbox record", func() {
		t := newTenant()
		t.newQueue(internalLanes())
		t.newSession("s", modeOptions(agentlanev1alpha1.QueueModeFollowup, 0, 20, agentlanev1alpha1.DropSummarize))
		old := t.session("s")
		rt := follow(old, sessionapi.EventsOptions{Runtime: true})
		res, err := old.Post(ctx, sessionapi.Message{ID: "chat-1", Text: "start"})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Queued).To(BeTrue())
		run := rt.next(sessionapi.EventTurn).RunID
		Expect(old.FinishRun(ctx, run)).To(Succeed())

		key := types.NamespacedName{Namespace: t.ns, Name: "s"}
		By("writing the id taken at once with the record, within a few seconds and without a message to carry it")
		Eventually(func(g Gomega) []string {
			data, err := server.Store.(sessionstore.InboxStore).LoadInbox(ctx, key)
			g.Expect(err).NotTo(HaveOccurred())
			var rec inboxRecord
			if len(data) > 0 {
				g.Expect(json.Unmarshal(data, &rec)).To(Succeed())
			}
			return rec.Recent
		}, 30*time.Second).Should(Equal([]string{"chat-1"}))

		s := restartAPI(t, time.Now()).Session(t.ns, "s")
		// The restarted manager's schedulers start empty.
		_, inbox, ok := server.Schedulers.Session(types.NamespacedName{Namespace: t.ns, Name: "q"})
		Expect(ok).To(BeTrue())
		inbox.ForgetSession("s")
		after := follow(s, sessionapi.EventsOptions{Runtime: true, FromNow: true})

		res, err = s.Post(ctx, sessionapi.Message{ID: "chat-1", Text: "start (re-delivered)"})
		Expect(err).NotTo(HaveOccurred())
		Expect(*res).To(Equal(sessionapi.PostResult{Duplicate: true}))
		res, err = s.Post(ctx, sessionapi.Message{ID: "chat-2", Text: "next"})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Queued).To(BeTrue())
		turn := after.next(sessionapi.EventTurn)
		Expect(turn.Text).To(Equal("next"), "the re-delivered message started no turn")
	})
})
