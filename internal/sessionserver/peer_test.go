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

	"github.com/agentlane/agentlane/pkg/sessionapi"
)

var _ = Describe("Peer invocation", func() {
	It("tells the receiving session who invokes it, and refuses to speak for a session the caller may not use", func() {
		a := newTenant()
		a.newQueue(internalLanes())
		a.newSession("planner", nil)
		a.newSession("coder", modeOptions("followup", 0, 20, "summarize"))
		b := newTenant()
		b.newQueue(internalLanes())
		b.newSession("intruder", nil)

		coder := a.session("coder")
		rt := follow(coder, sessionapi.EventsOptions{Runtime: true})
		_, err := coder.Post(ctx, sessionapi.Message{Text: "implement the parser",
			From: &sessionapi.SessionRef{Namespace: a.ns, Name: "planner"}})
		Expect(err).NotTo(HaveOccurred())
		peer := rt.next(sessionapi.EventPeerInvocation)
		Expect(peer.Peer).To(Equal(&sessionapi.PeerInvocation{FromNamespace: a.ns, FromSession: "planner", FromTenant: a.ns}))
		Expect(rt.next(sessionapi.EventTurn).Text).To(Equal("implement the parser"))

		// Tenant a may not speak for tenant b's session, nor b reach a's.
		_, err = coder.Post(ctx, sessionapi.Message{Text: "spoofed",
			From: &sessionapi.SessionRef{Namespace: b.ns, Name: "intruder"}})
		Expect(sessionapi.IsCode(err, sessionapi.CodeForbidden)).To(BeTrue(), "%v", err)
		_, err = clientWithToken(b.token).Session(a.ns, "coder").Post(ctx, sessionapi.Message{Text: "hello",
			From: &sessionapi.SessionRef{Namespace: b.ns, Name: "intruder"}})
		Expect(sessionapi.IsCode(err, sessionapi.CodeForbidden)).To(BeTrue(), "%v", err)
		rt.quiet(300*time.Millisecond, sessionapi.EventPeerInvocation, sessionapi.EventTurn)
	})
})
