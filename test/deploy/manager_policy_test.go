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

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/controller"
)

var _ = Describe("config/policy manager rules, installed", Ordered, func() {
	var manager client.Client

	controlledBy := func(kind string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: agentlanev1alpha1.GroupVersion.String(), Kind: kind,
			Name: "owner", UID: "00000000-0000-0000-0000-000000000001", Controller: ptr.To(true)}}
	}
	runtimePod := func(mutate func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: served, GenerateName: "runtime-", OwnerReferences: controlledBy("AgentSession")},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "agent:1"}}},
		}
		if mutate != nil {
			mutate(p)
		}
		// What the manager fills in where a template leaves it unset.
		controller.RestrictPodSpec(&p.Spec)
		return p
	}
	taskJob := func(mutate func(*batchv1.Job)) *batchv1.Job {
		j := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: served, GenerateName: "task-", OwnerReferences: controlledBy("ExternalTask")},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "worker", Image: "agentlane:dev"}},
			}}},
		}
		if mutate != nil {
			mutate(j)
		}
		controller.RestrictPodSpec(&j.Spec.Template.Spec)
		return j
	}

	BeforeAll(func() {
		By("installing the Namespace, the CRDs, RBAC and config/policy's objects for real")
		installPolicies("agentlane-template-policy")
		manager = impersonating(managerUser, nil)
		By("waiting until the API server enforces the policy")
		Eventually(func(g Gomega) {
			err := manager.Create(ctx, runtimePod(func(p *corev1.Pod) { p.OwnerReferences = nil }), client.DryRunAll)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring("agentlane-manager-workloads"))
		}).WithTimeout(30 * time.Second).Should(Succeed())
	})

	It("admits the manager's warm pods of a RuntimePool, and holds them to the same rules", func() {
		Expect(manager.Create(ctx, runtimePod(func(p *corev1.Pod) { p.OwnerReferences = controlledBy("RuntimePool") }), client.DryRunAll)).To(Succeed())
		expectRefused(manager.Create(ctx, runtimePod(func(p *corev1.Pod) {
			p.OwnerReferences = controlledBy("RuntimePool")
			p.Spec.HostPID = true
		}), client.DryRunAll), "hostNetwork, hostPID and hostIPC are not allowed")
	})

	It("refuses the manager a pod that is not a session's runtime pod", func() {
		expectRefused(manager.Create(ctx, runtimePod(func(p *corev1.Pod) { p.OwnerReferences = nil }), client.DryRunAll),
			"the manager creates only runtime pods of AgentSessions")
		expectRefused(manager.Create(ctx, runtimePod(func(p *corev1.Pod) { p.OwnerReferences = controlledBy("LaneQueue") }), client.DryRunAll),
			"the manager creates only runtime pods of AgentSessions")
	})

	It("refuses the manager a privileged, host-namespace or hostPath pod even for a session", func() {
		expectRefused(manager.Create(ctx, runtimePod(func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		}), client.DryRunAll), "privileged containers are not allowed")
		expectRefused(manager.Create(ctx, runtimePod(func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "i", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}}
		}), client.DryRunAll), "privileged containers are not allowed")
		expectRefused(manager.Create(ctx, runtimePod(func(p *corev1.Pod) { p.Spec.HostPID = true }), client.DryRunAll),
			"hostNetwork, hostPID and hostIPC are not allowed")
		expectRefused(manager.Create(ctx, runtimePod(func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
		}), client.DryRunAll), "hostPath volumes are not allowed")
	})

	It("refuses the manager a Job that is not a task's, or that reaches into the node", func() {
		expectRefused(manager.Create(ctx, taskJob(func(j *batchv1.Job) { j.OwnerReferences = nil }), client.DryRunAll),
			"the manager creates only Jobs of ExternalTasks")
		expectRefused(manager.Create(ctx, taskJob(func(j *batchv1.Job) { j.Spec.Template.Spec.HostNetwork = true }), client.DryRunAll),
			"hostNetwork, hostPID and hostIPC are not allowed")
	})

	It("refuses the manager a ConfigMap that is not its own", func() {
		expectRefused(manager.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "coredns-override"}}, client.DryRunAll),
			"the manager writes only its own ConfigMaps, named agentlane-*")
	})

	It("admits what the manager builds, and leaves other users to their own rights", func() {
		Expect(manager.Create(ctx, runtimePod(nil), client.DryRunAll)).To(Succeed())
		Expect(manager.Create(ctx, taskJob(nil), client.DryRunAll)).To(Succeed())
		Expect(manager.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: served, Name: "agentlane-checkpoint-s1"}}, client.DryRunAll)).To(Succeed())
		Expect(k8sClient.Create(ctx, runtimePod(func(p *corev1.Pod) {
			p.OwnerReferences = nil
			p.Spec.HostNetwork = true
		}), client.DryRunAll)).To(Succeed(), "an administrator's own pod is not the manager's")
	})

	It("never stops the cluster's pods and ConfigMaps when the template policy's ConfigMap is missing", func() {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "agentlane-template-policy"}}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
		saved := cm.DeepCopy()
		Expect(k8sClient.Delete(ctx, cm)).To(Succeed())
		DeferCleanup(func() {
			saved.ResourceVersion, saved.UID = "", ""
			Expect(k8sClient.Create(ctx, saved)).To(Succeed())
		})
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})).NotTo(Succeed())
			g.Expect(k8sClient.Create(ctx, runtimePod(func(p *corev1.Pod) { p.OwnerReferences = nil }), client.DryRunAll)).To(Succeed())
			g.Expect(k8sClient.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: served, Name: "anything"}}, client.DryRunAll)).To(Succeed())
			g.Expect(manager.Create(ctx, runtimePod(nil), client.DryRunAll)).To(Succeed())
		}).WithTimeout(30 * time.Second).Should(Succeed())
	})
})
