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

	"github.com/agentlane/agentlane/pkg/sessionapi"
)

var _ = Describe("A command's timeout", func() {
	It("is held to the API's bounds, 100ms to 24h, so no request's timeout can overflow the scheduler or be refused as its task", func() {
		a := newTenant()
		a.newQueue(internalLanes())
		a.newSession("s1", nil)
		s := a.session("s1")
		for _, d := range []time.Duration{time.Nanosecond, 99 * time.Millisecond, 24*time.Hour + time.Second, 876000 * time.Hour} {
			_, err := s.Submit(ctx, sessionapi.SubmitRequest{ID: "bad", Type: "read", Timeout: &metav1.Duration{Duration: d}})
			Expect(expectCode(err, http.StatusBadRequest, sessionapi.CodeInvalidRequest)).To(
				ContainSubstring("timeout must be a duration between 100ms and 24h0m0s"), "timeout %s", d)
		}
		for i, d := range []time.Duration{100 * time.Millisecond, 24 * time.Hour} {
			_, err := s.Submit(ctx, sessionapi.SubmitRequest{ID: []string{"low", "high"}[i], Type: "read", Timeout: &metav1.Duration{Duration: d}})
			Expect(err).NotTo(HaveOccurred(), "timeout %s", d)
		}
	})
})
