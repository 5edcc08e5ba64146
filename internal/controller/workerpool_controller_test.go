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

package controller

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// newWorkerPool is a pool named name in ns serving q1, of workers of capacity
// slots, between 0 and max replicas, that scales down downWindow seconds
// after its backlog did.
func newWorkerPool(ns, name string, capacity, max, downWindow int32) *agentlanev1alpha1.WorkerPool {
	return &agentlanev1alpha1.WorkerPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: agentlanev1alpha1.WorkerPoolSpec{
			Queues:      []string{"q1"},
			Capacity:    capacity,
			MaxReplicas: max,
			Behavior: &agentlanev1alpha1.WorkerPoolBehavior{
				ScaleDown: &agentlanev1alpha1.WorkerPoolScalingRules{StabilizationWindowSeconds: ptr.To(downWindow)},
			},
		},
	}
}

// poolDeployment reads the Deployment of pool.
func poolDeployment(pool *agentlanev1alpha1.WorkerPool) func(Gomega) *appsv1.Deployment {
	return func(g Gomega) *appsv1.Deployment {
		d := &appsv1.Deployment{}
		g.Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: pool.Namespace, Name: "workerpool-" + pool.Name}, d)).To(Succeed())
		return d
	}
}

// poolReplicas is the replicas of pool's Deployment.
func poolReplicas(pool *agentlanev1alpha1.WorkerPool) func(Gomega) int32 {
	return func(g Gomega) int32 { return ptr.Deref(poolDeployment(pool)(g).Spec.Replicas, -1) }
}

func getPool(pool *agentlanev1alpha1.WorkerPool) func(Gomega) *agentlanev1alpha1.WorkerPool {
	return func(g Gomega) *agentlanev1alpha1.WorkerPool {
		p := &agentlanev1alpha1.WorkerPool{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pool), p)).To(Succeed())
		return p
	}
}

var _ = Describe("WorkerPool controller", func() {
	It("scales a pool from zero with its namespace's backlog, bounded by maxReplicas, and back to zero after the scale-down window; another namespace's pool never moves", func() {
		ns := taskNamespace()
		taskQueue(ns, nil)
		other := taskNamespace()
		taskQueue(other, nil)

		pool := newWorkerPool(ns, "tools", 2, 3, 2)
		Expect(k8sClient.Create(ctx, pool)).To(Succeed())
		otherPool := newWorkerPool(other, "tools", 1, 10, 2)
		Expect(k8sClient.Create(ctx, otherPool)).To(Succeed())

		By("an idle pool runs no worker, in its namespace, as the namespace's pool service account")
		Eventually(poolReplicas(pool)).Should(BeZero())
		d := poolDeployment(pool)(Default)
		Expect(d.Namespace).To(Equal(ns))
		spec := d.Spec.Template.Spec
		Expect(spec.ServiceAccountName).To(Equal(WorkerPoolServiceAccount))
		Expect(spec.Containers[0].Args).To(ContainElements("--namespace="+ns, "--capacity=2", "--queues=q1"))
		Expect(metav1.IsControlledBy(d, getPool(pool)(Default))).To(BeTrue())
		rb := &rbacv1.RoleBinding{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: WorkerPoolServiceAccount}, rb)).To(Succeed())
		Expect(rb.RoleRef.Name).To(Equal(DefaultWorkerRole))
		Expect(rb.Subjects).To(Equal([]rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: WorkerPoolServiceAccount, Namespace: ns}}))

		By("seven tasks need four workers of capacity 2: the pool goes to its maximum, 3")
		var tasks []*agentlanev1alpha1.ExternalTask
		for i := range 7 {
			t := queueTask(ns, fmt.Sprintf("t%d", i))
			Expect(k8sClient.Create(ctx, t)).To(Succeed())
			tasks = append(tasks, t)
		}
		Eventually(poolReplicas(pool)).Should(Equal(int32(3)))
		Eventually(func(g Gomega) {
			p := getPool(pool)(g)
			g.Expect(p.Status.Backlog).To(Equal(int32(7)))
			g.Expect(p.Status.DesiredReplicas).To(Equal(int32(3)))
			g.Expect(ptr.Deref(p.Spec.Replicas, -1)).To(Equal(int32(3)))
			g.Expect(p.Status.LastScaleReason).To(MatchRegexp(`^[0-2] to 3: `))
			limited := meta.FindStatusCondition(p.Status.Conditions, agentlanev1alpha1.WorkerPoolScalingLimitedCondition)
			g.Expect(limited).NotTo(BeNil())
			g.Expect(limited.Reason).To(Equal(agentlanev1alpha1.WorkerPoolAtMaxReason))
		}).Should(Succeed())

		By("the other namespace's pool counts none of it")
		Consistently(func(g Gomega) {
			g.Expect(poolReplicas(otherPool)(g)).To(BeZero())
			g.Expect(getPool(otherPool)(g).Status.Backlog).To(BeZero())
		}, "1s").Should(Succeed())

		By("the tasks finish: the pool keeps its workers for the window, then goes back to zero")
		fakeWorker(ns, "w1", 10)
		for _, t := range tasks {
			runToSuccess(t, "w1")
		}
		Eventually(func(g Gomega) { g.Expect(getPool(pool)(g).Status.Backlog).To(BeZero()) }).Should(Succeed())
		Eventually(poolReplicas(pool), "30s").Should(BeZero())
		// The reconcile that scales the Deployment writes the pool's status
		// after it.
		Eventually(func(g Gomega) string { return getPool(pool)(g).Status.LastScaleReason }).Should(MatchRegexp(`^[1-3] to 0: backlog 0 `))
		Expect(poolReplicas(otherPool)(Default)).To(BeZero())
	})

	It("a pool's backlog never counts a lane of another target, and a pool driven by an external autoscaler is only bounded", func() {
		ns := taskNamespace()
		taskQueue(ns, func(s *agentlanev1alpha1.LaneQueueSpec) {
			s.Lanes = append(s.Lanes, agentlanev1alpha1.Lane{Name: "handled", HandlerMode: agentlanev1alpha1.HandlerModeExternal,
				ExternalTarget: &agentlanev1alpha1.ExternalTarget{Type: agentlanev1alpha1.ExternalTargetHandler}})
		})
		pool := newWorkerPool(ns, "ext", 1, 4, 0)
		pool.Spec.Autoscaling = agentlanev1alpha1.WorkerPoolAutoscalingExternal
		pool.Spec.Replicas = ptr.To[int32](2)
		Expect(k8sClient.Create(ctx, pool)).To(Succeed())
		Eventually(poolReplicas(pool)).Should(Equal(int32(2)))

		for i := range 3 {
			t := queueTask(ns, fmt.Sprintf("h%d", i))
			t.Spec.Lane = "handled"
			Expect(k8sClient.Create(ctx, t)).To(Succeed())
		}
		Consistently(func(g Gomega) {
			g.Expect(poolReplicas(pool)(g)).To(Equal(int32(2)))
			g.Expect(getPool(pool)(g).Status.Backlog).To(BeZero())
		}, "1s").Should(Succeed())

		By("the scale subresource drives it, cut to maxReplicas")
		scale := &autoscalingv1.Scale{}
		Expect(k8sClient.SubResource("scale").Get(ctx, getPool(pool)(Default), scale)).To(Succeed())
		Expect(scale.Spec.Replicas).To(Equal(int32(2)))
		scale.Spec.Replicas = 9
		Expect(k8sClient.SubResource("scale").Update(ctx, getPool(pool)(Default), client.WithSubResourceBody(scale))).To(Succeed())
		Eventually(poolReplicas(pool)).Should(Equal(int32(4)))
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.SubResource("scale").Get(ctx, getPool(pool)(g), scale)).To(Succeed())
			g.Expect(scale.Status.Selector).To(ContainSubstring(agentlanev1alpha1.WorkerPoolLabel + "=ext"))
		}).Should(Succeed())
	})

	It("refuses a pod template that adds a container, and runs no worker for it", func() {
		ns := taskNamespace()
		taskQueue(ns, nil)
		pool := newWorkerPool(ns, "bad", 1, 4, 0)
		pool.Spec.MinReplicas = ptr.To[int32](1)
		pool.Spec.PodTemplate = &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "sidecar", Image: "steal:latest"},
		}}}
		Expect(k8sClient.Create(ctx, pool)).To(Succeed())
		Eventually(func(g Gomega) {
			ready := meta.FindStatusCondition(getPool(pool)(g).Status.Conditions, agentlanev1alpha1.WorkerPoolReadyCondition)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Reason).To(Equal(agentlanev1alpha1.WorkerPoolInvalidTemplateReason))
			g.Expect(ready.Message).To(ContainSubstring(`"sidecar"`))
		}).Should(Succeed())
		Expect(poolReplicas(pool)(Default)).To(BeZero())
	})
	It("bounds what a tenant may ask: maxReplicas at admission, the manager's bound, and the pools of a namespace", func() {
		ns := taskNamespace()
		taskQueue(ns, nil)

		By("maxReplicas above 1000, or below minReplicas, is refused at admission")
		huge := newWorkerPool(ns, "huge", 1, 1001, 0)
		Expect(k8sClient.Create(ctx, huge)).NotTo(Succeed())
		crossed := newWorkerPool(ns, "crossed", 1, 2, 0)
		crossed.Spec.MinReplicas = ptr.To[int32](3)
		err := k8sClient.Create(ctx, crossed)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("minReplicas must not exceed maxReplicas"))

		By("a pool that keeps more workers than the manager allows any pool gets the manager's bound")
		big := newWorkerPool(ns, "big", 1, 1000, 0)
		big.Spec.MinReplicas = ptr.To[int32](500)
		Expect(k8sClient.Create(ctx, big)).To(Succeed())
		Eventually(poolReplicas(big)).Should(Equal(int32(DefaultWorkerPoolMaxReplicas)))
		Eventually(func(g Gomega) {
			limited := meta.FindStatusCondition(getPool(big)(g).Status.Conditions, agentlanev1alpha1.WorkerPoolScalingLimitedCondition)
			g.Expect(limited).NotTo(BeNil())
			g.Expect(limited.Reason).To(Equal(agentlanev1alpha1.WorkerPoolManagerBoundReason))
		}).Should(Succeed())

		By("past the pools a namespace may run, the newest run no worker")
		for i := 1; i < DefaultWorkerPoolsPerNamespace; i++ {
			p := newWorkerPool(ns, fmt.Sprintf("p%02d", i), 1, 1, 0)
			Expect(k8sClient.Create(ctx, p)).To(Succeed())
		}
		// Pools created in the same second rank by name: this one last.
		extra := newWorkerPool(ns, "zz-extra", 1, 1, 0)
		extra.Spec.MinReplicas = ptr.To[int32](1)
		Expect(k8sClient.Create(ctx, extra)).To(Succeed())
		Eventually(func(g Gomega) {
			ready := meta.FindStatusCondition(getPool(extra)(g).Status.Conditions, agentlanev1alpha1.WorkerPoolReadyCondition)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Reason).To(Equal(agentlanev1alpha1.WorkerPoolTooManyReason))
		}).Should(Succeed())
		Expect(poolReplicas(extra)(Default)).To(BeZero())
		Expect(poolReplicas(big)(Default)).To(Equal(int32(DefaultWorkerPoolMaxReplicas)))
	})
	It("accepts the sample WorkerPool", func() {
		ns := taskNamespace()
		data, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "workerpool", "agentlane_v1alpha1_workerpool.yaml"))
		Expect(err).NotTo(HaveOccurred())
		pool := &agentlanev1alpha1.WorkerPool{}
		Expect(yaml.UnmarshalStrict(data, pool)).To(Succeed())
		pool.Namespace = ns
		Expect(k8sClient.Create(ctx, pool)).To(Succeed())
		Eventually(func(g Gomega) {
			ready := meta.FindStatusCondition(getPool(pool)(g).Status.Conditions, agentlanev1alpha1.WorkerPoolReadyCondition)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Reason).To(Equal(agentlanev1alpha1.WorkerPoolAvailableReason))
		}).Should(Succeed())
		runner := poolDeployment(pool)(Default).Spec.Template.Spec.Containers[1]
		Expect(runner.Resources.Limits.Memory().String()).To(Equal("1Gi"))
	})
	It("makes the pool workers' RoleBinding again when it was deleted, within the recheck interval, and calls the API server no more often", func() {
		ns := taskNamespace()
		clk := clocktesting.NewFakeClock(time.Now())
		r := &WorkerPoolReconciler{Client: k8sClient, Clock: clk, rbacDone: map[string]time.Time{}}
		r.Options.defaults()
		key := types.NamespacedName{Namespace: ns, Name: WorkerPoolServiceAccount}
		Expect(r.ensureRBAC(ctx, ns)).To(Succeed())
		rb := &rbacv1.RoleBinding{}
		Expect(k8sClient.Get(ctx, key, rb)).To(Succeed())
		Expect(rb.RoleRef.Name).To(Equal(DefaultWorkerRole))

		By("deleted: not looked at again before the interval")
		Expect(k8sClient.Delete(ctx, rb)).To(Succeed())
		clk.Step(rbacRecheckInterval - time.Second)
		Expect(r.ensureRBAC(ctx, ns)).To(Succeed())
		Expect(apierrors.IsNotFound(k8sClient.Get(ctx, key, &rbacv1.RoleBinding{}))).To(BeTrue())

		By("made again once the interval passed, with the same subject")
		clk.Step(time.Second)
		Expect(r.ensureRBAC(ctx, ns)).To(Succeed())
		again := &rbacv1.RoleBinding{}
		Expect(k8sClient.Get(ctx, key, again)).To(Succeed())
		Expect(again.UID).NotTo(Equal(rb.UID))
		Expect(again.Subjects).To(Equal([]rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: WorkerPoolServiceAccount, Namespace: ns}}))
	})
})
