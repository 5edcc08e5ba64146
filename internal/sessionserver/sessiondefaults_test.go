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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

var _ = Describe("A LaneQueue's sessionDefaults", func() {
	It("are refused at admission when a mode or a channel name is invalid", func() {
		t := newTenant()
		for name, d := range map[string]*agentlanev1alpha1.SessionDefaults{
			"Unsupported value": {QueueMode: "whenever"},
			"byChannel channel names must be 1 to 63 characters": {ByChannel: map[string]agentlanev1alpha1.QueueMode{"": "steer"}},
		} {
			spec := internalLanes()
			spec.SessionDefaults = d
			lq := &agentlanev1alpha1.LaneQueue{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: "q"}, Spec: spec}
			Expect(k8sClient.Create(ctx, lq)).To(MatchError(ContainSubstring(name)))
		}
		spec := internalLanes()
		many := map[string]agentlanev1alpha1.QueueMode{}
		for i := range 65 {
			many[string(rune('a'+i%26))+string(rune('a'+i/26))] = agentlanev1alpha1.QueueModeSteer
		}
		spec.SessionDefaults = &agentlanev1alpha1.SessionDefaults{ByChannel: many}
		lq := &agentlanev1alpha1.LaneQueue{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: "q"}, Spec: spec}
		Expect(k8sClient.Create(ctx, lq)).To(MatchError(ContainSubstring("must have at most 64 items")))
	})

	It("give the queue mode and byChannel to the sessions that set none, and a session's own win", func() {
		t := newTenant()
		spec := internalLanes()
		spec.SessionDefaults = &agentlanev1alpha1.SessionDefaults{QueueMode: agentlanev1alpha1.QueueModeFollowup,
			ByChannel: map[string]agentlanev1alpha1.QueueMode{"telegram": agentlanev1alpha1.QueueModeSteer}}
		t.newQueue(spec)
		t.newSession("plain", nil)
		own := &agentlanev1alpha1.QueueModeOptions{Mode: agentlanev1alpha1.QueueModeCollect,
			ByChannel: map[string]agentlanev1alpha1.QueueMode{"discord": agentlanev1alpha1.QueueModeInterrupt}}
		t.newSession("own", own)
		t.newSession("modeonly", &agentlanev1alpha1.QueueModeOptions{Mode: agentlanev1alpha1.QueueModeInterrupt})

		options := func(name string) sessionapi.QueueOptions {
			GinkgoHelper()
			s := t.session(name)
			_, err := s.Post(ctx, sessionapi.Message{Text: "start"})
			Expect(err).NotTo(HaveOccurred())
			st, err := s.Stats(ctx)
			Expect(err).NotTo(HaveOccurred())
			return st.Options
		}
		plain := options("plain")
		Expect(plain.Mode).To(Equal("followup"), "the queue's default mode")
		Expect(plain.ByChannel).To(Equal(map[string]string{"telegram": "steer"}))
		Expect(plain.Debounce.Duration).To(Equal(lanequeue.DefaultDebounce), "what neither sets keeps its default")

		o := options("own")
		Expect(o.Mode).To(Equal("collect"), "the session's mode wins")
		Expect(o.ByChannel).To(Equal(map[string]string{"discord": "interrupt"}), "the session's byChannel replaces the queue's")

		m := options("modeonly")
		Expect(m.Mode).To(Equal("interrupt"))
		Expect(m.ByChannel).To(Equal(map[string]string{"telegram": "steer"}), "byChannel the session leaves out is the queue's")
	})
})
