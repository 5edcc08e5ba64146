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
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

var _ = Describe("An isolated lane", func() {
	It("keeps the work running on it from submitting into other lanes", func() {
		t := newTenant()
		spec := internalLanes()
		spec.Lanes = append(spec.Lanes, agentlanev1alpha1.Lane{Name: "cron", Priority: 4, Isolated: true})
		t.newQueue(spec)
		t.newSession("s", nil)
		s := t.session("s")

		var escaped, own, explicit error
		cmd, err := s.Run(ctx, sessionapi.SubmitRequest{Type: "cron-job", Lane: "cron"}, func(ctx context.Context, c *sessionapi.Command) sessionapi.Result {
			_, escaped = s.Submit(ctx, sessionapi.SubmitRequest{Type: "bash"})
			_, explicit = s.Submit(context.Background(), sessionapi.SubmitRequest{Type: "read", ParentID: c.ID})
			_, own = s.Run(ctx, sessionapi.SubmitRequest{Type: "bash", Lane: "cron"}, func(context.Context, *sessionapi.Command) sessionapi.Result {
				return sessionapi.Result{Success: true}
			})
			return sessionapi.Result{Success: true}
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(cmd.State).To(Equal(sessionapi.StateSucceeded))
		Expect(expectCode(escaped, http.StatusForbidden, sessionapi.CodeIsolatedLane)).To(ContainSubstring(`isolated lane "cron"`))
		expectCode(explicit, http.StatusForbidden, sessionapi.CodeIsolatedLane)
		Expect(own).NotTo(HaveOccurred(), "its own lane takes its work")

		By("letting the work of a lane that is not isolated submit anywhere")
		var fromQuery error
		_, err = s.Run(ctx, sessionapi.SubmitRequest{Type: "read"}, func(ctx context.Context, c *sessionapi.Command) sessionapi.Result {
			_, fromQuery = s.Run(ctx, sessionapi.SubmitRequest{Type: "grep", Lane: "cron"}, func(context.Context, *sessionapi.Command) sessionapi.Result {
				return sessionapi.Result{Success: true}
			})
			return sessionapi.Result{Success: true}
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(fromQuery).NotTo(HaveOccurred())

		By("refusing a parent that is not a running command of the session")
		_, err = s.Submit(ctx, sessionapi.SubmitRequest{Type: "read", ParentID: "nope"})
		expectCode(err, http.StatusBadRequest, sessionapi.CodeInvalidRequest)
		_, err = s.Submit(ctx, sessionapi.SubmitRequest{Type: "read", ParentID: cmd.ID})
		expectCode(err, http.StatusConflict, sessionapi.CodeNotRunning)
		t.newSession("other", nil)
		var crossed error
		_, err = s.Run(ctx, sessionapi.SubmitRequest{Type: "cron-job", Lane: "cron"}, func(ctx context.Context, c *sessionapi.Command) sessionapi.Result {
			_, crossed = t.session("other").Submit(ctx, sessionapi.SubmitRequest{Type: "read", Lane: "cron"})
			return sessionapi.Result{Success: true}
		})
		Expect(err).NotTo(HaveOccurred())
		expectCode(crossed, http.StatusBadRequest, sessionapi.CodeInvalidRequest)
	})
})
