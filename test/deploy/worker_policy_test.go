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
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/testenv"
	"github.com/agentlane/agentlane/internal/worker"
	"github.com/agentlane/agentlane/internal/workerproto"
)

const (
	// served is the namespace the shipped workers serve; unserved one they
	// do not.
	served   = "default"
	unserved = "tenant-unserved"

	managerUser = "system:serviceaccount:" + namespace + ":agentlane-controller-manager"
	workerUser  = "system:serviceaccount:" + namespace + ":agentlane-worker"

	podNameExtra  = "authentication.kubernetes.io/pod-name"
	nodeNameExtra = "authentication.kubernetes.io/node-name"
)

// impersonating returns a client that authenticates as user with the extra
// attributes a pod-bound service-account token carries.
func impersonating(user string, extra map[string][]string) client.Client {
	GinkgoHelper()
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: user, Extra: extra}
	cl, err := client.New(c, client.Options{Scheme: testenv.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	return cl
}

// workerPodConfig is the config of the pool worker running in pod name.
func workerPodConfig(name string) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: workerUser,
		Extra: map[string][]string{podNameExtra: {name}, nodeNameExtra: {"node-" + name}}}
	return c
}

// workerPod is a client of the pool worker running in pod name.
func workerPod(name string) client.Client {
	GinkgoHelper()
	cl, err := client.New(workerPodConfig(name), client.Options{Scheme: testenv.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	return cl
}

// expectRefused checks that err is the API server's refusal, naming why.
func expectRefused(err error, fragment string) {
	GinkgoHelper()
	Expect(err).To(HaveOccurred(), "admitted")
	Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
	Expect(err.Error()).To(ContainSubstring(fragment))
}

var _ = Describe("config/policy worker rules, installed", Ordered, func() {
	var manager, admin client.Client
	seq := 0

	// newTask creates a bash task in the served namespace, not yet
	// dispatched, that runs command.
	newTask := func(command string) *agentlanev1alpha1.ExternalTask {
		GinkgoHelper()
		seq++
		t := &agentlanev1alpha1.ExternalTask{
			ObjectMeta: metav1.ObjectMeta{Namespace: served, Name: fmt.Sprintf("xt-%d", seq)},
			Spec: agentlanev1alpha1.ExternalTaskSpec{
				QueueRef:    &agentlanev1alpha1.LaneQueueReference{Name: "q"},
				CommandType: "bash",
				Payload:     &runtime.RawExtension{Raw: []byte(fmt.Sprintf(`{"command":%q}`, command))},
			},
		}
		Expect(admin.Create(ctx, t)).To(Succeed())
		return t
	}
	// setStatus writes the task's status as the manager, with its identity
	// (retrying while the API server catches up with the RBAC and the
	// ConfigMap the suite just installed).
	setStatus := func(t *agentlanev1alpha1.ExternalTask, change func(*agentlanev1alpha1.ExternalTaskStatus)) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			g.Expect(manager.Get(ctx, client.ObjectKeyFromObject(t), t)).To(Succeed())
			change(&t.Status)
			g.Expect(manager.Status().Update(ctx, t)).To(Succeed())
		}).WithTimeout(30 * time.Second).Should(Succeed())
	}
	// dispatched creates a task whose attempt the manager dispatched to a
	// pool worker.
	dispatched := func(workerName string, attempt int32) *agentlanev1alpha1.ExternalTask {
		GinkgoHelper()
		t := newTask("echo policy")
		setStatus(t, func(st *agentlanev1alpha1.ExternalTaskStatus) {
			now := metav1.Now()
			st.Phase = agentlanev1alpha1.ExternalTaskDispatched
			st.Lane, st.Attempt = "tools", attempt
			st.Worker, st.NodeName = workerName, "node-"+workerName
			st.QueuedAt, st.DispatchedAt = &now, &now
		})
		return t
	}
	// patchStatus sends a raw patch of the task's status as c.
	patchStatus := func(c client.Client, t *agentlanev1alpha1.ExternalTask, pt types.PatchType, data string, opts ...client.SubResourcePatchOption) error {
		return c.Status().Patch(ctx, t.DeepCopy(), client.RawPatch(pt, []byte(data)), opts...)
	}
	succeed := `{"status":{"phase":"Succeeded","result":{"success":true,"result":{"stdout":"forged"}}}}`

	BeforeAll(func() {
		By("installing the Namespace, the CRDs, RBAC and config/policy's objects for real")
		installPolicies("agentlane-worker-policy")
		for _, name := range []string{unserved} {
			Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}))).To(Succeed())
		}
		admin = k8sClient
		manager = impersonating(managerUser, nil)
		Eventually(func(g Gomega) {
			crd := &metav1.PartialObjectMetadataList{}
			crd.SetGroupVersionKind(agentlanev1alpha1.GroupVersion.WithKind("ExternalTaskList"))
			g.Expect(admin.List(ctx, crd, client.InNamespace(served))).To(Succeed())
		}).WithTimeout(30 * time.Second).Should(Succeed())

		By("waiting until the API server enforces the policies")
		probe := dispatched("worker-b", 1)
		Eventually(func(g Gomega) {
			err := patchStatus(workerPod("worker-a"), probe, types.MergePatchType, succeed, client.DryRunAll)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring("agentlane-task-status"))
			lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: served, Name: "agentlane-worker-probe"}}
			err = workerPod("worker-a").Create(ctx, lease, client.DryRunAll)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring("agentlane-worker-lease"))
		}).WithTimeout(30 * time.Second).Should(Succeed())
	})

	Context("a worker's credentials", func() {
		It("cannot complete another worker's task with a plain merge patch", func() {
			t := dispatched("worker-b", 1)
			expectRefused(patchStatus(workerPod("worker-a"), t, types.MergePatchType, succeed),
				`only the manager and the worker it is assigned to (status.worker "worker-b"`)
			By("nor take it over by naming itself in status.worker")
			expectRefused(patchStatus(workerPod("worker-a"), t, types.MergePatchType, `{"status":{"worker":"worker-a"}}`),
				"may not write the status of this task")
			By("and the task is untouched")
			Expect(admin.Get(ctx, client.ObjectKeyFromObject(t), t)).To(Succeed())
			Expect(t.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskDispatched))
			Expect(t.Status.Result).To(BeNil())
		})

		It("cannot complete a task that was never dispatched", func() {
			t := newTask("echo policy")
			expectRefused(patchStatus(workerPod("worker-a"), t, types.MergePatchType,
				`{"status":{"phase":"Succeeded","worker":"worker-a","attempt":1,"result":{"success":true}}}`),
				"may not write the status of this task")
			setStatus(t, func(st *agentlanev1alpha1.ExternalTaskStatus) { st.Phase = agentlanev1alpha1.ExternalTaskQueued })
			expectRefused(patchStatus(workerPod("worker-a"), t, types.MergePatchType, succeed), "may not write the status of this task")
		})

		It("cannot rewind the attempt of its own task, and neither can the manager", func() {
			t := dispatched("worker-a", 3)
			expectRefused(patchStatus(workerPod("worker-a"), t, types.MergePatchType, `{"status":{"attempt":1}}`),
				"status.attempt cannot go back, from 3 to 1")
			expectRefused(patchStatus(manager, t, types.MergePatchType, `{"status":{"attempt":1}}`),
				"status.attempt cannot go back, from 3 to 1")
			By("nor move it to another attempt or node, or rewrite its history")
			for _, patch := range []string{
				`{"status":{"attempt":4}}`,
				`{"status":{"nodeName":"elsewhere"}}`,
				`{"status":{"jobName":"some-job"}}`,
				`{"status":{"dispatchedAt":"2020-01-01T00:00:00Z"}}`,
				`{"status":{"attempts":[{"attempt":1,"outcome":"Succeeded"}]}}`,
			} {
				expectRefused(patchStatus(workerPod("worker-a"), t, types.MergePatchType, patch), "a worker may not change status.worker")
			}
		})

		It("cannot lengthen or loosen its attempt's time budget, while its heartbeats are admitted", func() {
			t := dispatched("worker-a", 1)
			setStatus(t, func(st *agentlanev1alpha1.ExternalTaskStatus) {
				st.HeartbeatTimeout = &metav1.Duration{Duration: 5 * time.Second}
			})
			a := workerPod("worker-a")
			for _, patch := range []string{
				`{"status":{"deadline":"2099-01-01T00:00:00Z"}}`,
				`{"status":{"extensions":8}}`,
				`{"status":{"heartbeatTimeout":"1h"}}`,
				`{"status":{"heartbeatTimeout":null}}`,
			} {
				expectRefused(patchStatus(a, t, types.MergePatchType, patch), "status.heartbeatTimeout, status.deadline or status.extensions")
			}
			By("while its claim and heartbeat of that attempt are admitted")
			claim := must(workerproto.ClaimPatch(workerproto.WorkerFence("worker-a", 1), metav1.Now()))
			Expect(patchStatus(a, t, types.JSONPatchType, string(claim))).To(Succeed())
			beat := must(workerproto.HeartbeatPatch(workerproto.WorkerFence("worker-a", 1), metav1.Now(), "half way"))
			Expect(patchStatus(a, t, types.JSONPatchType, string(beat))).To(Succeed())
			Expect(admin.Get(ctx, client.ObjectKeyFromObject(t), t)).To(Succeed())
			Expect(t.Status.LastHeartbeatAt).NotTo(BeNil())
			Expect(t.Status.HeartbeatTimeout.Duration).To(Equal(5 * time.Second))
		})

		It("cannot rewrite the worker process its attempt was dispatched to", func() {
			t := dispatched("worker-a", 1)
			setStatus(t, func(st *agentlanev1alpha1.ExternalTaskStatus) { st.WorkerIncarnation = "PROCESSA" })
			a := workerPod("worker-a")
			for _, patch := range []string{
				`{"status":{"workerIncarnation":"PROCESSB"}}`,
				`{"status":{"workerIncarnation":null}}`,
			} {
				expectRefused(patchStatus(a, t, types.MergePatchType, patch), "a worker may not change status.worker, status.workerIncarnation, status.holder")
			}
			By("while its fenced report of that attempt is admitted")
			f := workerproto.WorkerFence("worker-a", 1).WithIncarnation("PROCESSA")
			report := must(workerproto.StartAndCompletePatch(f, agentlanev1alpha1.TaskResult{Success: true}, metav1.Now(), metav1.Now()))
			Expect(patchStatus(a, t, types.JSONPatchType, string(report))).To(Succeed())
			Expect(admin.Get(ctx, client.ObjectKeyFromObject(t), t)).To(Succeed())
			Expect(t.Status.WorkerIncarnation).To(Equal("PROCESSA"))
			Expect(t.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskSucceeded))
		})

		It("cannot change the kind of holder its attempt was dispatched to", func() {
			t := dispatched("worker-a", 1)
			setStatus(t, func(st *agentlanev1alpha1.ExternalTaskStatus) { st.Holder = agentlanev1alpha1.HolderWorkers })
			a := workerPod("worker-a")
			for _, patch := range []string{
				`{"status":{"holder":"Handler"}}`,
				`{"status":{"holder":null}}`,
			} {
				expectRefused(patchStatus(a, t, types.MergePatchType, patch), "a worker may not change status.worker, status.workerIncarnation, status.holder")
			}
			By("while its fenced claim of that attempt is admitted")
			claim := must(workerproto.ClaimPatch(workerproto.WorkerFence("worker-a", 1), metav1.Now()))
			Expect(patchStatus(a, t, types.JSONPatchType, string(claim))).To(Succeed())
			Expect(admin.Get(ctx, client.ObjectKeyFromObject(t), t)).To(Succeed())
			Expect(t.Status.Holder).To(Equal(agentlanev1alpha1.HolderWorkers))
			Expect(t.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskRunning))
		})

		It("cannot move a phase back, nor change a finished one", func() {
			t := dispatched("worker-a", 1)
			a := workerPod("worker-a")
			Expect(patchStatus(a, t, types.MergePatchType, `{"status":{"phase":"Running"}}`)).To(Succeed())
			expectRefused(patchStatus(a, t, types.MergePatchType, `{"status":{"phase":"Dispatched"}}`),
				`may not move a task from phase "Running" to "Dispatched"`)
			Expect(patchStatus(a, t, types.MergePatchType, succeed)).To(Succeed())
			// The CRD refuses this one too, before the policy sees it.
			expectRefused(patchStatus(a, t, types.MergePatchType, `{"status":{"phase":"Running"}}`), "phase")
			expectRefused(patchStatus(a, t, types.MergePatchType, `{"status":{"result":{"success":true,"error":"rewritten"}}}`),
				`a worker may not write a finished task (phase Succeeded)`)
			By("nor claim success without a successful result")
			u := dispatched("worker-a", 1)
			expectRefused(patchStatus(a, u, types.MergePatchType, `{"status":{"phase":"Succeeded"}}`),
				"only with a successful status.result")
		})

		It("cannot write another worker's Lease, nor a Lease outside the namespaces it serves", func() {
			a, b := workerPod("worker-a"), workerPod("worker-b")
			leaseOf := func(ns, name string) *coordinationv1.Lease {
				return &coordinationv1.Lease{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
					Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(strings.TrimPrefix(name, "agentlane-worker-"))},
				}
			}
			expectRefused(a.Create(ctx, leaseOf(served, "agentlane-worker-worker-b")),
				"worker worker-a may write only its own Lease, agentlane-worker-worker-a, not default/agentlane-worker-worker-b")

			By("taking over or deleting the Lease worker-b created")
			theirs := leaseOf(served, "agentlane-worker-worker-b")
			Expect(b.Create(ctx, theirs)).To(Succeed())
			theirs.Spec.HolderIdentity = ptr.To("worker-a")
			expectRefused(a.Update(ctx, theirs), "may write only its own Lease")
			expectRefused(a.Delete(ctx, theirs), "may write only its own Lease")
			Expect(b.Delete(ctx, theirs)).To(Succeed())

			By("writing Leases of the control plane or of a namespace it does not serve")
			for _, ns := range []string{"kube-system", unserved, namespace} {
				err := a.Create(ctx, leaseOf(ns, "agentlane-worker-worker-a"))
				Expect(apierrors.IsForbidden(err)).To(BeTrue(), "create a Lease in %s: %v", ns, err)
			}
			other := leaseOf(served, "some-controller-leader")
			expectRefused(a.Create(ctx, other), "may write only its own Lease")

			By("a service account that is not a worker forging a worker's Lease")
			Expect(admin.Create(ctx, &rbacv1.Role{
				ObjectMeta: metav1.ObjectMeta{Namespace: served, Name: "lease-writer"},
				Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"*"}}},
			})).To(Succeed())
			Expect(admin.Create(ctx, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Namespace: served, Name: "lease-writer"},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "lease-writer"},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: served, Name: "app"}},
			})).To(Succeed())
			app := impersonating("system:serviceaccount:"+served+":app", map[string][]string{podNameExtra: {"worker-b"}})
			expectRefused(app.Create(ctx, leaseOf(served, "agentlane-worker-worker-b")), "only the worker it names writes a worker Lease")
			Expect(app.Create(ctx, other)).To(Succeed(), "the policy leaves other service accounts' Leases alone")

			By("a worker token not bound to a pod writing any Lease")
			expectRefused(impersonating(workerUser, nil).Create(ctx, leaseOf(served, "agentlane-worker-worker-a")),
				"a worker without a name")
		})

		It("cannot hold its own Lease as another worker", func() {
			a := workerPod("worker-a")
			own := &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Namespace: served, Name: "agentlane-worker-worker-a",
					Labels: map[string]string{workerproto.WorkerLabel: "true"}},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("worker-b")},
			}
			expectRefused(a.Create(ctx, own), `worker worker-a may hold its Lease only as itself: spec.holderIdentity must be "worker-a", not "worker-b"`)
			own.Spec.HolderIdentity = ptr.To("worker-a")
			Expect(a.Create(ctx, own)).To(Succeed())
			own.Spec.HolderIdentity = ptr.To("worker-b")
			expectRefused(a.Update(ctx, own), "may hold its Lease only as itself")
			Expect(a.Delete(ctx, own)).To(Succeed())
		})

		It("cannot review tokens or access: the worker service account holds no cluster-wide review right", func() {
			for _, c := range []client.Client{workerPod("worker-a"), impersonating(workerUser, nil)} {
				err := c.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: "a-token"}})
				Expect(apierrors.IsForbidden(err)).To(BeTrue(), "create a TokenReview: %v", err)
				err = c.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
					User: managerUser, ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "secrets"}}})
				Expect(apierrors.IsForbidden(err)).To(BeTrue(), "create a SubjectAccessReview: %v", err)
			}
			By("while the manager, which serves the Session API, still may")
			Expect(manager.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: "a-token"}})).To(Succeed())
		})

		It("cannot read the tasks of a namespace it does not serve", func() {
			list := &agentlanev1alpha1.ExternalTaskList{}
			err := workerPod("worker-a").List(ctx, list, client.InNamespace(unserved))
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "list in %s: %v", unserved, err)
			err = workerPod("worker-a").List(ctx, list)
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "list in every namespace: %v", err)
			Expect(workerPod("worker-a").List(ctx, list, client.InNamespace(served))).To(Succeed())
		})

		It("cannot write a task's status without a pod-bound token", func() {
			t := dispatched("worker-a", 1)
			expectRefused(patchStatus(impersonating(workerUser, nil), t, types.MergePatchType, `{"status":{"phase":"Running"}}`),
				"may not write the status of this task")
		})
	})

	Context("a worker Lease forged by another identity", func() {
		It("refuses a Lease labelled as a worker's unless a pool worker writes it under its own name", func() {
			Expect(client.IgnoreAlreadyExists(admin.Create(ctx, &rbacv1.Role{
				ObjectMeta: metav1.ObjectMeta{Namespace: served, Name: "lease-forger"},
				Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"*"}}},
			}))).To(Succeed())
			Expect(client.IgnoreAlreadyExists(admin.Create(ctx, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Namespace: served, Name: "lease-forger"},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "lease-forger"},
				Subjects: []rbacv1.Subject{
					{Kind: rbacv1.ServiceAccountKind, Namespace: served, Name: "my-app"},
					{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "alice"},
				},
			}))).To(Succeed())
			forged := func(name, holder string) *coordinationv1.Lease {
				return &coordinationv1.Lease{
					ObjectMeta: metav1.ObjectMeta{Namespace: served, Name: name,
						Labels:      map[string]string{workerproto.WorkerLabel: "true"},
						Annotations: map[string]string{workerproto.CapacityAnnotation: "10000"}},
					Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder)},
				}
			}
			app := impersonating("system:serviceaccount:"+served+":my-app", map[string][]string{podNameExtra: {"my-app-0"}})
			alice := impersonating("alice", nil)
			for who, c := range map[string]client.Client{"a service account": app, "a user": alice} {
				By(who + " labelling a Lease of its own as a worker's")
				Eventually(func() error { return c.Create(ctx, forged("my-app-leader", "worker-a"), client.DryRunAll) }).
					WithTimeout(30*time.Second).Should(MatchError(ContainSubstring("with the label agentlane.io/worker: only a pool worker writes a Lease so labelled")), who)
				By(who + " writing a worker's Lease by name")
				expectRefused(c.Create(ctx, forged("agentlane-worker-worker-a", "worker-a")), "only the worker it names writes a worker Lease")
			}

			By("a service account labelling an existing Lease of its own")
			mine := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: served, Name: "my-app-leader"},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("my-app-0")}}
			Expect(app.Create(ctx, mine)).To(Succeed(), "an unlabelled Lease of its own stays the service account's business")
			mine.Labels = map[string]string{workerproto.WorkerLabel: "true"}
			expectRefused(app.Update(ctx, mine), "with the label agentlane.io/worker")

			By("a pool worker labelling a Lease that is not its own")
			expectRefused(workerPod("worker-a").Create(ctx, forged("my-app-leader-2", "worker-a")), "may write only its own Lease")
		})
	})

	Context("the legal paths", func() {
		It("admits the assigned worker's fenced claim, completion and hand-back", func() {
			a := workerPod("worker-a")
			t := dispatched("worker-a", 1)
			f := workerproto.WorkerFence("worker-a", 1)
			claim, err := workerproto.ClaimPatch(f, metav1.Now())
			Expect(err).NotTo(HaveOccurred())
			Expect(patchStatus(a, t, types.JSONPatchType, string(claim))).To(Succeed())
			done, err := workerproto.CompletePatch(f, agentlanev1alpha1.TaskResult{Success: true}, metav1.Now())
			Expect(err).NotTo(HaveOccurred())
			Expect(patchStatus(a, t, types.JSONPatchType, string(done))).To(Succeed())
			Expect(admin.Get(ctx, client.ObjectKeyFromObject(t), t)).To(Succeed())
			Expect(t.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskSucceeded))

			By("a failed run, which stays Running for the manager's retry policy")
			u := dispatched("worker-a", 2)
			f = workerproto.WorkerFence("worker-a", 2)
			Expect(patchStatus(a, u, types.JSONPatchType, string(must(workerproto.ClaimPatch(f, metav1.Now()))))).To(Succeed())
			Expect(patchStatus(a, u, types.JSONPatchType, string(must(workerproto.CompletePatch(f,
				agentlanev1alpha1.TaskResult{Error: "exit 1"}, metav1.Now()))))).To(Succeed())

			By("a short run, its start reported with its result in one write from Dispatched")
			for _, ok := range []bool{true, false} {
				v := dispatched("worker-a", 1)
				f := workerproto.WorkerFence("worker-a", 1)
				Expect(patchStatus(a, v, types.JSONPatchType, string(must(workerproto.StartAndCompletePatch(f,
					agentlanev1alpha1.TaskResult{Success: ok}, metav1.Now(), metav1.Now()))))).To(Succeed(), "success %v", ok)
				Expect(admin.Get(ctx, client.ObjectKeyFromObject(v), v)).To(Succeed())
				Expect(v.Status.StartedAt).NotTo(BeNil())
			}

			By("handing back a dispatched and a running attempt")
			for _, from := range []agentlanev1alpha1.ExternalTaskPhase{agentlanev1alpha1.ExternalTaskDispatched, agentlanev1alpha1.ExternalTaskRunning} {
				v := dispatched("worker-a", 1)
				f := workerproto.WorkerFence("worker-a", 1)
				if from == agentlanev1alpha1.ExternalTaskRunning {
					Expect(patchStatus(a, v, types.JSONPatchType, string(must(workerproto.ClaimPatch(f, metav1.Now()))))).To(Succeed())
				}
				Expect(patchStatus(a, v, types.JSONPatchType, string(must(workerproto.HandBackPatch(f, from))))).To(Succeed(), "hand back from %s", from)
				Expect(admin.Get(ctx, client.ObjectKeyFromObject(v), v)).To(Succeed())
				Expect(v.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskQueued))
				Expect(v.Status.Worker).To(BeEmpty())
			}
		})

		It("admits the manager's own transitions: dispatch, retry back to Queued, the next attempt, the final phase", func() {
			t := dispatched("worker-a", 1)
			setStatus(t, func(st *agentlanev1alpha1.ExternalTaskStatus) {
				st.Attempts = append(st.Attempts, agentlanev1alpha1.TaskAttempt{Attempt: 1, Worker: st.Worker, Outcome: agentlanev1alpha1.AttemptWorkerLost})
				st.Phase, st.Worker, st.NodeName, st.DispatchedAt = agentlanev1alpha1.ExternalTaskQueued, "", "", nil
			})
			setStatus(t, func(st *agentlanev1alpha1.ExternalTaskStatus) {
				now := metav1.Now()
				st.Phase, st.Attempt, st.Worker, st.NodeName, st.DispatchedAt = agentlanev1alpha1.ExternalTaskDispatched, 2, "worker-b", "node-b", &now
			})
			setStatus(t, func(st *agentlanev1alpha1.ExternalTaskStatus) {
				st.Phase = agentlanev1alpha1.ExternalTaskDeadLettered
			})
		})

		It("runs a real worker under the policies: heartbeat Lease, a task to Succeeded, an interrupted run reported and Lease delete on shutdown", func() {
			w, err := worker.New(workerPodConfig("worker-r"), worker.Options{
				Name: "worker-r", NodeName: "node-worker-r", Namespace: served, Capacity: 2,
				HeartbeatInterval: 200 * time.Millisecond, GracePeriod: 0,
			})
			Expect(err).NotTo(HaveOccurred())
			wctx, stop := context.WithCancel(ctx)
			done, stopped := make(chan error, 1), make(chan struct{})
			go func() {
				defer GinkgoRecover()
				defer close(stopped)
				done <- w.Run(wctx)
			}()
			DeferCleanup(func() {
				stop()
				Eventually(stopped).WithTimeout(10 * time.Second).Should(BeClosed())
			})
			leaseKey := client.ObjectKey{Namespace: served, Name: workerproto.LeaseName("worker-r")}
			Eventually(func() error { return admin.Get(ctx, leaseKey, &coordinationv1.Lease{}) }).WithTimeout(10 * time.Second).Should(Succeed())

			ok := dispatched("worker-r", 1)
			Eventually(func(g Gomega) {
				g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(ok), ok)).To(Succeed())
				g.Expect(ok.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskSucceeded))
			}).WithTimeout(15 * time.Second).Should(Succeed())

			Expect(ok.Status.Result).NotTo(BeNil())
			Expect(string(ok.Status.Result.Result.Raw)).To(ContainSubstring("policy"))

			long := newTask("sleep 30")
			setStatus(long, func(st *agentlanev1alpha1.ExternalTaskStatus) {
				now := metav1.Now()
				st.Phase, st.Lane, st.Attempt, st.Worker, st.NodeName, st.DispatchedAt =
					agentlanev1alpha1.ExternalTaskDispatched, "tools", 1, "worker-r", "node-worker-r", &now
			})
			Eventually(func(g Gomega) {
				g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(long), long)).To(Succeed())
				g.Expect(long.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskRunning))
			}).WithTimeout(15 * time.Second).Should(Succeed())
			stop()
			Eventually(done).WithTimeout(10 * time.Second).Should(Receive(BeNil()))
			Expect(admin.Get(ctx, client.ObjectKeyFromObject(long), long)).To(Succeed())
			Expect(long.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskRunning), "the worker reports what it stopped at shutdown")
			Expect(long.Status.Result).NotTo(BeNil())
			Expect(long.Status.Result.Error).To(HavePrefix("interrupted: worker-r stopped the command at shutdown"))
			err = admin.Get(ctx, leaseKey, &coordinationv1.Lease{})
			Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the worker deletes its Lease on shutdown: %v", err)
		})

		It("knows a worker outside a pod by its user agentlane-worker:<name>", func() {
			Expect(admin.Create(ctx, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Namespace: served, Name: "process-worker"},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "agentlane-worker-role"},
				Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "agentlane-worker:proc-w"}},
			})).To(Succeed())
			p := impersonating("agentlane-worker:proc-w", nil)
			mine, theirs := dispatched("proc-w", 1), dispatched("worker-b", 1)
			f := workerproto.WorkerFence("proc-w", 1)
			Eventually(func() error {
				return patchStatus(p, mine, types.JSONPatchType, string(must(workerproto.ClaimPatch(f, metav1.Now()))))
			}).WithTimeout(10*time.Second).Should(Succeed(), "RBAC may take a moment to see the binding")
			expectRefused(patchStatus(p, theirs, types.MergePatchType, succeed), "(worker proc-w) may not write the status of this task")
			lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: served, Name: "agentlane-worker-proc-w"},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("proc-w")}}
			Expect(p.Create(ctx, lease)).To(Succeed())
			Expect(p.Delete(ctx, lease)).To(Succeed())
			expectRefused(p.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: served, Name: "agentlane-worker-worker-b"}}),
				"worker proc-w may write only its own Lease")
		})

		It("admits a Job's pod claiming and completing its attempt, and refuses the pod of another Job", func() {
			Expect(admin.Create(ctx, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Namespace: served, Name: "job-runner"},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "agentlane-worker-role"},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: served, Name: "job-runner"}},
			})).To(Succeed())
			jobPod := func(pod string) *rest.Config {
				c := rest.CopyConfig(cfg)
				c.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + served + ":job-runner",
					Extra: map[string][]string{podNameExtra: {pod}, nodeNameExtra: {"node-j"}}}
				return c
			}
			t := newTask("echo policy")
			job := t.Name + "-1"
			setStatus(t, func(st *agentlanev1alpha1.ExternalTaskStatus) {
				now := metav1.Now()
				st.Phase, st.Lane, st.Attempt, st.JobName, st.DispatchedAt = agentlanev1alpha1.ExternalTaskDispatched, "build", 1, job, &now
			})
			other, err := client.New(jobPod("xt-999-1-abcde"), client.Options{Scheme: testenv.Scheme()})
			Expect(err).NotTo(HaveOccurred())
			expectRefused(patchStatus(other, t, types.JSONPatchType, string(must(workerproto.ClaimPatch(workerproto.JobFence(job, 1), metav1.Now(),
				workerproto.AddOp(workerproto.PathWorker, "xt-999-1-abcde"))))), "may not write the status of this task")

			pod := job + "-x7k2q"
			Expect(worker.RunTask(ctx, jobPod(pod), worker.TaskOptions{
				Task: t.Name, Namespace: served, Name: pod, NodeName: "node-j", JobName: job,
				WaitTimeout: 10 * time.Second,
			})).To(Succeed())
			Expect(admin.Get(ctx, client.ObjectKeyFromObject(t), t)).To(Succeed())
			Expect(t.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskSucceeded))
			Expect(t.Status.Worker).To(Equal(pod))
			Expect(t.Status.NodeName).To(Equal("node-j"))
		})
	})
})

// must returns v, failing the spec on err.
func must[T any](v T, err error) T {
	GinkgoHelper()
	Expect(err).NotTo(HaveOccurred())
	return v
}
