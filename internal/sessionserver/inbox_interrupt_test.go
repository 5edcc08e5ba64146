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
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

var _ = Describe("An interrupt that drops waiting messages", func() {
	It("says so on the event stream: message_dropped, superseded, with the dropped ids and their count", func() {
		a := newTenant()
		a.newQueue(internalLanes())
		a.newSession("s1", modeOptions(agentlanev1alpha1.QueueModeFollowup, 0, 20, agentlanev1alpha1.DropSummarize))
		s := a.session("s1")
		rt := follow(s, sessionapi.EventsOptions{Runtime: true})
		_, err := s.Post(ctx, sessionapi.Message{ID: "m0", Text: "write the report"})
		Expect(err).NotTo(HaveOccurred())
		first := rt.next(sessionapi.EventTurn)
		for _, id := range []string{"m1", "m2"} {
			res, err := s.Post(ctx, sessionapi.Message{ID: id, Text: "and " + id})
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Queued).To(BeTrue(), "the run is active: it waits")
		}
		_, err = s.Post(ctx, sessionapi.Message{Text: "/queue interrupt"})
		Expect(err).NotTo(HaveOccurred())
		_, err = s.Post(ctx, sessionapi.Message{ID: "m3", Text: "stop, summarize instead"})
		Expect(err).NotTo(HaveOccurred())

		dropped := rt.next(sessionapi.EventMessageDropped)
		Expect(dropped.Superseded).To(BeTrue())
		Expect(dropped.DroppedCount).To(Equal(2))
		Expect(dropped.RunID).To(Equal(first.RunID), "the run the interrupt aborted")
		var ids []string
		for _, m := range dropped.Messages {
			ids = append(ids, m.ID)
		}
		Expect(ids).To(Equal([]string{"m1", "m2"}))
		turn := rt.next(sessionapi.EventTurn)
		Expect(turn.Text).To(Equal("stop, summarize instead"))
	})
})
