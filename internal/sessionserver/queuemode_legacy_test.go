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

var _ = Describe("The queue mode steer+backlog in an AgentSession", func() {
	It("is accepted as the /queue directive accepts it, and behaves as steer-backlog", func() {
		t := newTenant()
		t.newQueue(internalLanes())
		t.newSession("s", modeOptions(agentlanev1alpha1.QueueModeSteerPlusBacklog, 0, 20, agentlanev1alpha1.DropSummarize))
		s := t.session("s")
		rt := follow(s, sessionapi.EventsOptions{Runtime: true})
		_, err := s.Post(ctx, sessionapi.Message{Text: "start"})
		Expect(err).NotTo(HaveOccurred())
		run := rt.next(sessionapi.EventTurn).RunID

		res, err := s.Post(ctx, sessionapi.Message{Text: "use the other file"})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Steered).To(BeTrue(), "steered")
		Expect(res.Queued).To(BeTrue(), "and kept as a followup")
		Expect(rt.next(sessionapi.EventSteer).RunID).To(Equal(run))
		Expect(s.FinishRun(ctx, run)).To(Succeed())
		Expect(rt.next(sessionapi.EventTurn).Text).To(Equal("use the other file"))
	})
})
