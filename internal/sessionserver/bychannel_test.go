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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

var _ = Describe("Per-channel queue modes", func() {
	It("applies the mode of spec.queueMode.byChannel to the messages of that channel", func() {
		t := newTenant()
		t.newQueue(internalLanes())
		bad := &agentlanev1alpha1.AgentSession{
			ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: "bad"},
			Spec: agentlanev1alpha1.AgentSessionSpec{QueueRef: agentlanev1alpha1.LaneQueueReference{Name: "q"},
				QueueMode: &agentlanev1alpha1.QueueModeOptions{ByChannel: map[string]agentlanev1alpha1.QueueMode{"": "collect"}}},
		}
		Expect(k8sClient.Create(ctx, bad)).To(MatchError(ContainSubstring("byChannel channel names must be 1 to 63 characters")))

		mode := modeOptions(agentlanev1alpha1.QueueModeFollowup, 0, 20, agentlanev1alpha1.DropSummarize)
		mode.ByChannel = map[string]agentlanev1alpha1.QueueMode{"discord": agentlanev1alpha1.QueueModeSteer}
		t.newSession("s", mode)
		s := t.session("s")
		rt := follow(s, sessionapi.EventsOptions{Runtime: true})
		_, err := s.Post(ctx, sessionapi.Message{Text: "start", Channel: "slack"})
		Expect(err).NotTo(HaveOccurred())
		run := rt.next(sessionapi.EventTurn).RunID

		res, err := s.Post(ctx, sessionapi.Message{Text: "use the other file", Channel: "discord"})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Steered).To(BeTrue(), "discord steers")
		Expect(res.Queued).To(BeFalse())
		steer := rt.next(sessionapi.EventSteer)
		Expect(steer.RunID).To(Equal(run))
		Expect(steer.Channel).To(Equal("discord"))

		res, err = s.Post(ctx, sessionapi.Message{Text: "and then deploy", Channel: "slack"})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Steered).To(BeFalse(), "slack follows up")
		Expect(res.Queued).To(BeTrue())
		rt.quiet(300*time.Millisecond, sessionapi.EventTurn, sessionapi.EventSteer)
		Expect(s.FinishRun(ctx, run)).To(Succeed())
		Expect(rt.next(sessionapi.EventTurn).Text).To(Equal("and then deploy"))
	})
})
