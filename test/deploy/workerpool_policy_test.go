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
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/controller"
)

// A WorkerPool's workers run as the service account agentlane-workerpool
// of the pool's namespace, which the manager binds to the worker role
// there (internal/controller/workerpool_deployment.go). The worker policies
// know them as pool workers in that namespace and nowhere else.
var _ = Describe("config/policy worker rules for WorkerPool workers, installed", Ordered, func() {
	const (
		tenantA = "tenant-pool-a"
		tenantB = "tenant-pool-b"
		podA    = "workerpool-tools-5d9c7b-x2k8q"
	)
	poolUser := func(ns string) string {
		return "system:serviceaccount:" + ns + ":" + controller.WorkerPoolServiceAccount
	}
	poolWorker := func(ns, pod string) client.Client {
		return impersonating(poolUser(ns), map[string][]string{podNameExtra: {pod}, nodeNameExtra: {"node-1"}})
	}
	leaseOf := func(ns, worker string) *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agentlane-worker-" + worker},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(worker)},
		}
	}
	bind := func(ns, saNamespace string) {
		GinkgoHelper()
		Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "workerpool-" + saNamespace},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: controller.DefaultWorkerRole},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: saNamespace, Name: controller.WorkerPoolServiceAccount}},
		}))).To(Succeed())
	}

	BeforeAll(func() {
		installPolicies("agentlane-worker-policy")
		for _, ns := range []string{tenantA, tenantB} {
			Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
			bind(ns, ns)
		}
		By("waiting until the API server enforces RBAC and the policies for the pool's worker")
		Eventually(func(g Gomega) {
			g.Expect(poolWorker(tenantA, podA).Create(ctx, leaseOf(tenantA, podA), client.DryRunAll)).To(Succeed())
			err := poolWorker(tenantA, podA).Create(ctx, leaseOf(tenantA, "other"), client.DryRunAll)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring("agentlane-worker-lease"))
		}).WithTimeout(30 * time.Second).Should(Succeed())
	})

	It("lets a pool's worker write its own Lease in its namespace, and no other worker's", func() {
		Expect(poolWorker(tenantA, podA).Create(ctx, leaseOf(tenantA, podA))).To(Succeed())
		expectRefused(poolWorker(tenantA, podA).Create(ctx, leaseOf(tenantA, "workerpool-tools-5d9c7b-zzzzz")),
			"may write only its own Lease")
	})

	It("never counts another namespace's pool service account as a worker, even where the worker role is bound to it", func() {
		By("tenant B's pool worker, bound nowhere but in B, cannot write A's Leases")
		err := poolWorker(tenantB, "workerpool-x-1-a").Create(ctx, leaseOf(tenantA, "workerpool-x-1-a"))
		Expect(err).To(HaveOccurred())
		By("bound in A by mistake, it is still no worker of A")
		bind(tenantA, tenantB)
		Eventually(func(g Gomega) {
			err := poolWorker(tenantB, "workerpool-x-1-a").Create(ctx, leaseOf(tenantA, "workerpool-x-1-a"), client.DryRunAll)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring("only the worker it names writes a worker Lease"))
		}).WithTimeout(30 * time.Second).Should(Succeed())
	})

	It("admits a pool worker's claim of the task dispatched to it in its namespace, and refuses it on another's", func() {
		manager := impersonating(managerUser, nil)
		dispatch := func(name, worker string) *agentlanev1alpha1.ExternalTask {
			GinkgoHelper()
			t := &agentlanev1alpha1.ExternalTask{
				ObjectMeta: metav1.ObjectMeta{Namespace: tenantA, Name: name},
				Spec: agentlanev1alpha1.ExternalTaskSpec{
					QueueRef: &agentlanev1alpha1.LaneQueueReference{Name: "q"}, CommandType: "bash"},
			}
			Expect(k8sClient.Create(ctx, t)).To(Succeed())
			Eventually(func(g Gomega) {
				g.Expect(manager.Get(ctx, client.ObjectKeyFromObject(t), t)).To(Succeed())
				now := metav1.Now()
				t.Status.Phase, t.Status.Lane, t.Status.Attempt = agentlanev1alpha1.ExternalTaskDispatched, "tools", 1
				t.Status.Worker, t.Status.NodeName = worker, "node-1"
				t.Status.QueuedAt, t.Status.DispatchedAt = &now, &now
				g.Expect(manager.Status().Update(ctx, t)).To(Succeed())
			}).WithTimeout(30 * time.Second).Should(Succeed())
			return t
		}
		running := `{"status":{"phase":"Running"}}`
		mine := dispatch("pool-mine", podA)
		Expect(poolWorker(tenantA, podA).Status().Patch(ctx, mine, client.RawPatch(types.MergePatchType, []byte(running)))).To(Succeed())
		theirs := dispatch("pool-theirs", "workerpool-tools-5d9c7b-zzzzz")
		expectRefused(poolWorker(tenantA, podA).Status().Patch(ctx, theirs, client.RawPatch(types.MergePatchType, []byte(running))),
			"may not write the status of this task")
	})
})
