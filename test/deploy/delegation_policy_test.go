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

package deploy

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/delegation"
)

var _ = Describe("config/policy delegation marks, installed", Ordered, func() {
	const policy = "agentlane-delegation-marks"
	var manager, admin client.Client
	seq := 0

	// newTask creates, as the manager would, a task of command type
	// delegate with the labels and annotations given.
	newTask := func(labels, annotations map[string]string) *agentlanev1alpha1.ExternalTask {
		GinkgoHelper()
		seq++
		t := &agentlanev1alpha1.ExternalTask{
			ObjectMeta: metav1.ObjectMeta{Namespace: served, Name: fmt.Sprintf("dm-%d", seq),
				Labels: labels, Annotations: annotations},
			Spec: agentlanev1alpha1.ExternalTaskSpec{
				QueueRef:    &agentlanev1alpha1.LaneQueueReference{Name: "q"},
				CommandType: delegation.CommandType,
				Payload:     &runtime.RawExtension{Raw: []byte(`{"text":"review this"}`)},
			},
		}
		Expect(admin.Create(ctx, t)).To(Succeed())
		return t
	}
	newSession := func(labels, annotations map[string]string) *agentlanev1alpha1.AgentSession {
		GinkgoHelper()
		seq++
		s := &agentlanev1alpha1.AgentSession{
			ObjectMeta: metav1.ObjectMeta{Namespace: served, Name: fmt.Sprintf("dm-%d", seq),
				Labels: labels, Annotations: annotations},
			Spec: agentlanev1alpha1.AgentSessionSpec{QueueRef: agentlanev1alpha1.LaneQueueReference{Name: "q"}},
		}
		Expect(admin.Create(ctx, s)).To(Succeed())
		return s
	}
	patch := func(c client.Client, o client.Object, data string) error {
		return c.Patch(ctx, o.DeepCopyObject().(client.Object), client.RawPatch(types.MergePatchType, []byte(data)))
	}
	delegated := func() *agentlanev1alpha1.ExternalTask {
		return newTask(map[string]string{agentlanev1alpha1.DelegatedLabel: "true"},
			map[string]string{agentlanev1alpha1.DelegationCallbackAnnotation: "true"})
	}
	worker := func() *agentlanev1alpha1.AgentSession {
		return newSession(map[string]string{agentlanev1alpha1.DelegationTaskLabel: "dm-task", delegation.ProducerLabel: "uid-1"},
			map[string]string{agentlanev1alpha1.DelegationDepthAnnotation: "1"})
	}

	BeforeAll(func() {
		By("installing the Namespace, the CRDs, RBAC and config/policy's objects for real")
		// The template policy covers every AgentSession and refuses them
		// all while its ConfigMap is missing.
		installPolicies("agentlane-template-policy")
		admin = k8sClient
		manager = impersonating(managerUser, nil)
		Eventually(func(g Gomega) {
			l := &metav1.PartialObjectMetadataList{}
			l.SetGroupVersionKind(agentlanev1alpha1.GroupVersion.WithKind("ExternalTaskList"))
			g.Expect(admin.List(ctx, l, client.InNamespace(served))).To(Succeed())
		}).WithTimeout(30 * time.Second).Should(Succeed())

		By("waiting until the API server sees the template policy's ConfigMap")
		Eventually(func(g Gomega) {
			s := &agentlanev1alpha1.AgentSession{
				ObjectMeta: metav1.ObjectMeta{Namespace: served, Name: "dm-probe"},
				Spec:       agentlanev1alpha1.AgentSessionSpec{QueueRef: agentlanev1alpha1.LaneQueueReference{Name: "q"}},
			}
			g.Expect(admin.Create(ctx, s, client.DryRunAll)).To(Succeed())
		}).WithTimeout(30 * time.Second).Should(Succeed())

		By("waiting until the API server enforces the policy")
		probe := newTask(nil, nil)
		Eventually(func(g Gomega) {
			err := admin.Patch(ctx, probe.DeepCopy(), client.RawPatch(types.MergePatchType,
				[]byte(`{"metadata":{"labels":{"agentlane.io/delegated":"true"}}}`)), client.DryRunAll)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(policy))
		}).WithTimeout(30 * time.Second).Should(Succeed())
	})

	It("keeps an ordinary task of type delegate from being labelled delegated, by anyone", func() {
		t := newTask(map[string]string{"team": "a"}, nil)
		Expect(delegation.IsDelegated(t)).To(BeFalse())
		for _, c := range []client.Client{admin, manager} {
			expectRefused(patch(c, t, `{"metadata":{"labels":{"agentlane.io/delegated":"true"}}}`), "agentlane.io/delegated")
			expectRefused(patch(c, t, `{"metadata":{"annotations":{"agentlane.io/delegation-callback":"false"}}}`),
				"agentlane.io/delegation-callback")
		}
		Expect(patch(admin, t, `{"metadata":{"labels":{"team":"b"},"annotations":{"note":"x"}}}`)).To(Succeed(), "other marks change freely")
	})

	It("keeps a delegated task's label and callback annotation as created", func() {
		t := delegated()
		Expect(delegation.IsDelegated(t)).To(BeTrue())
		for _, c := range []client.Client{admin, manager} {
			expectRefused(patch(c, t, `{"metadata":{"labels":{"agentlane.io/delegated":null}}}`), "cannot be added, removed or changed")
			expectRefused(patch(c, t, `{"metadata":{"labels":{"agentlane.io/delegated":"false"}}}`), "agentlane.io/delegated")
			expectRefused(patch(c, t, `{"metadata":{"annotations":{"agentlane.io/delegation-callback":null}}}`),
				"agentlane.io/delegation-callback")
			expectRefused(patch(c, t, `{"metadata":{"annotations":{"agentlane.io/delegation-callback":"false"}}}`),
				"agentlane.io/delegation-callback")
		}
		Expect(patch(admin, t, `{"metadata":{"labels":{"agentlane.io/delegated":"true","team":"a"}}}`)).To(Succeed(),
			"an update that keeps the marks is admitted")
	})

	It("keeps a worker session's task and producer labels and its depth annotation as created", func() {
		s := worker()
		for _, c := range []client.Client{admin, manager} {
			expectRefused(patch(c, s, `{"metadata":{"labels":{"agentlane.io/delegation-task":"other"}}}`), "agentlane.io/delegation-task")
			expectRefused(patch(c, s, `{"metadata":{"labels":{"agentlane.io/delegation-task":null}}}`), "agentlane.io/delegation-task")
			expectRefused(patch(c, s, `{"metadata":{"labels":{"agentlane.io/delegation-producer-uid":"uid-2"}}}`),
				"agentlane.io/delegation-producer-uid")
			expectRefused(patch(c, s, `{"metadata":{"annotations":{"agentlane.io/delegation-depth":null}}}`), "agentlane.io/delegation-depth")
			expectRefused(patch(c, s, `{"metadata":{"annotations":{"agentlane.io/delegation-depth":"0"}}}`), "agentlane.io/delegation-depth")
		}
		Expect(patch(admin, s, `{"metadata":{"labels":{"team":"a"}}}`)).To(Succeed())

		plain := newSession(nil, nil)
		expectRefused(patch(admin, plain, `{"metadata":{"labels":{"agentlane.io/delegation-task":"dm-task"}}}`), "agentlane.io/delegation-task")
		expectRefused(patch(admin, plain, `{"metadata":{"annotations":{"agentlane.io/delegation-depth":"1"}}}`), "agentlane.io/delegation-depth")
	})
})
