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
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

var _ = Describe("A re-delivered inbound message", func() {
	It("is reported as a duplicate by its id, queued or taken, and not queued twice", func() {
		t := newTenant()
		t.newQueue(internalLanes())
		t.newSession("s", modeOptions(agentlanev1alpha1.QueueModeFollowup, 0, 20, agentlanev1alpha1.DropSummarize))
		s := t.session("s")
		rt := follow(s, sessionapi.EventsOptions{Runtime: true})

		res, err := s.Post(ctx, sessionapi.Message{ID: "chat-1", Text: "start"})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Queued).To(BeTrue())
		Expect(res.Duplicate).To(BeFalse())
		run := rt.next(sessionapi.EventTurn).RunID

		res, err = s.Post(ctx, sessionapi.Message{ID: "chat-2", Text: "and then deploy"})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Queued).To(BeTrue())

		for _, id := range []string{"chat-1", "chat-2"} {
			res, err = s.Post(ctx, sessionapi.Message{ID: id, Text: "re-delivered"})
			Expect(err).NotTo(HaveOccurred())
			Expect(*res).To(Equal(sessionapi.PostResult{Duplicate: true}), "re-delivery of %s", id)
		}

		Expect(s.FinishRun(ctx, run)).To(Succeed())
		next := rt.next(sessionapi.EventTurn)
		Expect(next.Text).To(Equal("and then deploy"))
		Expect(s.FinishRun(ctx, next.RunID)).To(Succeed())
		rt.quiet(300*time.Millisecond, sessionapi.EventTurn)
	})
})
