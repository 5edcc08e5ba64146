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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/delegation"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

var _ = Describe("The delegate command type outside Delegate lanes", func() {
	var a tenant
	BeforeEach(func() {
		a = newTenant()
		a.newQueue(delegateLanes())
		a.newSession("lead", nil)
	})

	task := func(name string) (*agentlanev1alpha1.ExternalTask, error) {
		t := &agentlanev1alpha1.ExternalTask{}
		return t, k8sClient.Get(ctx, types.NamespacedName{Namespace: a.ns, Name: name}, t)
	}
	short := &metav1.Duration{Duration: 50 * time.Millisecond}

	It("is refused with 400 CommandTypeRefused on an External lane and creates no task", func() {
		_, err := a.session("lead").Submit(ctx, sessionapi.SubmitRequest{ID: "sneak", Lane: "remote", Type: DelegateCommandType,
			Payload: []byte(`{"text":"review this"}`), Wait: short})
		Expect(expectCode(err, http.StatusBadRequest, sessionapi.CodeCommandTypeRefused)).To(ContainSubstring("reserved for delegations"))
		_, err = task("sneak")
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no ExternalTask of type delegate outside a Delegate lane: %v", err)
	})

	It("is refused with 400 CommandTypeRefused on an Internal lane", func() {
		_, err := a.session("lead").Submit(ctx, sessionapi.SubmitRequest{ID: "sneak-internal", Lane: "query", Type: DelegateCommandType, Wait: short})
		expectCode(err, http.StatusBadRequest, sessionapi.CodeCommandTypeRefused)
	})

	It("leaves another type's task on an External lane an ordinary one, and makes a Delegate lane's submission a delegation", func() {
		// No worker runs them: what stays pending is cancelled, so that it
		// does not count against later specs' server-wide bounds.
		DeferCleanup(func() {
			_, err := a.session("lead").Cancel(ctx, sessionapi.CancelRequest{Session: true})
			Expect(err).NotTo(HaveOccurred())
		})
		_, err := a.session("lead").Submit(ctx, sessionapi.SubmitRequest{ID: "plain", Lane: "remote", Type: "bash",
			Payload: []byte(`{"cmd":"true"}`), Wait: short})
		Expect(err).NotTo(HaveOccurred())
		plain, err := task("plain")
		Expect(err).NotTo(HaveOccurred())
		Expect(plain.Labels).NotTo(HaveKey(agentlanev1alpha1.DelegatedLabel))
		Expect(delegation.IsDelegated(plain)).To(BeFalse())

		_, err = a.session("lead").Submit(ctx, sessionapi.SubmitRequest{ID: "real", Lane: "review", Type: DelegateCommandType,
			Payload: []byte(`{"text":"review this"}`), Wait: short})
		Expect(err).NotTo(HaveOccurred())
		real, err := task("real")
		Expect(err).NotTo(HaveOccurred())
		Expect(delegation.IsDelegated(real)).To(BeTrue())
	})
})
