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
	"k8s.io/apimachinery/pkg/types"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

var _ = Describe("A delegation's timeout", func() {
	var a tenant
	BeforeEach(func() {
		a = newTenant()
		spec := delegateLanes()
		for i := range spec.Lanes {
			if spec.Lanes[i].Name == "review" {
				spec.Lanes[i].Timeout = &metav1.Duration{Duration: 5 * time.Minute}
			}
		}
		a.newQueue(spec)
		a.newSession("lead", nil)
	})
	timeoutOf := func(id string) *metav1.Duration {
		GinkgoHelper()
		task := &agentlanev1alpha1.ExternalTask{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: a.ns, Name: id}, task)).To(Succeed())
		return task.Spec.Timeout
	}

	It("is the task's spec.timeout, bounded by its lane's, and shown by GET /delegations/{id}", func() {
		lead := a.session("lead")
		short, err := lead.Delegate(ctx, sessionapi.DelegationRequest{Lane: "review", Text: "a quick look",
			Timeout: &metav1.Duration{Duration: 2 * time.Minute}})
		Expect(err).NotTo(HaveOccurred())
		Expect(short.Timeout).To(Equal(&metav1.Duration{Duration: 2 * time.Minute}))
		Expect(timeoutOf(short.ID)).To(Equal(&metav1.Duration{Duration: 2 * time.Minute}))

		long, err := lead.Delegate(ctx, sessionapi.DelegationRequest{Lane: "review", Text: "a long look",
			Timeout: &metav1.Duration{Duration: 3 * time.Hour}})
		Expect(err).NotTo(HaveOccurred())
		Expect(timeoutOf(long.ID)).To(Equal(&metav1.Duration{Duration: 5 * time.Minute}), "bounded by the lane's 5m")
		got, err := lead.GetDelegation(ctx, long.ID)
		Expect(err).NotTo(HaveOccurred())
		Expect(got.Timeout).To(Equal(&metav1.Duration{Duration: 5 * time.Minute}))

		none, err := lead.Delegate(ctx, sessionapi.DelegationRequest{Lane: "review", Text: "the lane decides"})
		Expect(err).NotTo(HaveOccurred())
		Expect(timeoutOf(none.ID)).To(BeNil(), "without one, the lane's applies")
	})

	DescribeTable("is refused with 400 InvalidRequest out of range, and nothing is created",
		func(d time.Duration) {
			_, err := a.session("lead").Delegate(ctx, sessionapi.DelegationRequest{ID: "out-of-range", Lane: "review", Text: "look",
				Timeout: &metav1.Duration{Duration: d}})
			Expect(expectCode(err, http.StatusBadRequest, sessionapi.CodeInvalidRequest)).To(ContainSubstring("timeout must be a duration between"))
			err = k8sClient.Get(ctx, types.NamespacedName{Namespace: a.ns, Name: "out-of-range"}, &agentlanev1alpha1.ExternalTask{})
			Expect(err).To(HaveOccurred())
		},
		Entry("negative", -time.Second),
		Entry("below the minimum", time.Millisecond),
		Entry("beyond a day", 25*time.Hour),
	)
})
