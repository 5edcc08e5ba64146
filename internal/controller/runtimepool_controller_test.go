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
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
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

// In these specs the test plays the scheduler and the kubelets: a warm pod
// is ready only once the spec binds it to a node and marks it Ready.

// agentTemplate is a runtime pod template of image.
func agentTemplate(image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: image}}},
	}
}

// newRuntimePool is a pool of replicas warm pods of tmpl.
func newRuntimePool(ns, name string, replicas int32, tmpl corev1.PodTemplateSpec) *agentlanev1alpha1.RuntimePool {
	return &agentlanev1alpha1.RuntimePool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       agentlanev1alpha1.RuntimePoolSpec{Replicas: ptr.To(replicas), Template: tmpl},
	}
}

// poolSession creates session name in ns (whose queue q1 exists) with a
// runtime pod of tmpl.
func poolSession(ns, name string, tmpl corev1.PodTemplateSpec) *agentlanev1alpha1.AgentSession {
	GinkgoHelper()
	s := testSession(name, "q1")
	s.Namespace = ns
	s.Spec.Runtime = &agentlanev1alpha1.SessionRuntime{PodTemplate: tmpl, PassivationDeadline: &metav1.Duration{Duration: time.Minute}}
	Expect(k8sClient.Create(ctx, s)).To(Succeed())
	return s
}

// warmPodsOf lists the pool's warm pods that are not being deleted, oldest
// first.
func warmPodsOf(pool *agentlanev1alpha1.RuntimePool) func(Gomega) []corev1.Pod {
	return func(g Gomega) []corev1.Pod {
		pods := &corev1.PodList{}
		g.Expect(k8sClient.List(ctx, pods, client.InNamespace(pool.Namespace), client.MatchingLabels{RuntimePoolLabel: pool.Name})).To(Succeed())
		var out []corev1.Pod
		for _, p := range pods.Items {
			if p.DeletionTimestamp.IsZero() {
				out = append(out, p)
			}
		}
		return out
	}
}

// warmPodNames names them.
func warmPodNames(pool *agentlanev1alpha1.RuntimePool) func(Gomega) []string {
	return func(g Gomega) []string {
		var names []string
		for _, p := range warmPodsOf(pool)(g) {
			names = append(names, p.Name)
		}
		return names
	}
}

// readyWarmPod waits for count warm pods of the pool, runs the first one
// not yet running on node, and waits until the pool counts it ready.
func readyWarmPod(pool *agentlanev1alpha1.RuntimePool, count int, node *corev1.Node) *corev1.Pod {
	GinkgoHelper()
	var pod *corev1.Pod
	Eventually(func(g Gomega) {
		pods := warmPodsOf(pool)(g)
		g.Expect(pods).To(HaveLen(count))
		for i := range pods {
			if pods[i].Spec.NodeName == "" {
				pod = &pods[i]
				return
			}
		}
		g.Expect(pod).NotTo(BeNil(), "no warm pod left to run")
	}).Should(Succeed())
	run(pod, node)
	Eventually(func(g Gomega) {
		g.Expect(getRuntimePool(pool)(g).Status.ReadyReplicas).To(BeNumerically(">=", 1))
	}).Should(Succeed())
	return pod
}

func getRuntimePool(pool *agentlanev1alpha1.RuntimePool) func(Gomega) *agentlanev1alpha1.RuntimePool {
	return func(g Gomega) *agentlanev1alpha1.RuntimePool {
		p := &agentlanev1alpha1.RuntimePool{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pool), p)).To(Succeed())
		return p
	}
}

func poolReady(pool *agentlanev1alpha1.RuntimePool) func(Gomega) *metav1.Condition {
	return func(g Gomega) *metav1.Condition {
		c := meta.FindStatusCondition(getRuntimePool(pool)(g).Status.Conditions, agentlanev1alpha1.RuntimePoolReadyCondition)
		g.Expect(c).NotTo(BeNil())
		return c
	}
}

// sessionPodName is the pod the session's status names.
func sessionPodName(s *agentlanev1alpha1.AgentSession) func(Gomega) string {
	return func(g Gomega) string { return getSession(client.ObjectKeyFromObject(s))(g).Status.PodName }
}

// expectWarm checks that pod is still an unassigned warm pod of pool.
func expectWarm(pool *agentlanev1alpha1.RuntimePool, pod *corev1.Pod) {
	GinkgoHelper()
	cur := &corev1.Pod{}
	Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), cur)).To(Succeed())
	Expect(cur.Labels).To(HaveKeyWithValue(RuntimePoolLabel, pool.Name))
	Expect(cur.Labels).To(HaveKeyWithValue(RuntimeLabel, ""))
	Expect(cur.Annotations).NotTo(HaveKey(AdoptedAtAnnotation))
	Expect(metav1.IsControlledBy(cur, getRuntimePool(pool)(Default))).To(BeTrue())
}

var _ = Describe("RuntimePool controller", func() {
	It("keeps its replicas of warm pods, built as runtime pods that name their pool and no session, and refills a deleted one", func() {
		ns := taskNamespace()
		tmpl := agentTemplate("agent:warm")
		pool := newRuntimePool(ns, "agents", 2, tmpl)
		Expect(k8sClient.Create(ctx, pool)).To(Succeed())

		Eventually(warmPodsOf(pool)).Should(HaveLen(2))
		hash := TemplateHash(&tmpl)
		Eventually(func(g Gomega) {
			p := getRuntimePool(pool)(g)
			g.Expect(p.Status.TemplateHash).To(Equal(hash))
			g.Expect(p.Status.Replicas).To(Equal(int32(2)))
			g.Expect(p.Status.DesiredReplicas).To(Equal(int32(2)))
		}).Should(Succeed())
		for _, p := range warmPodsOf(pool)(Default) {
			Expect(p.Name).To(HavePrefix("agents-warm-"))
			Expect(p.Labels).To(Equal(map[string]string{"app": "agent", RuntimeLabel: "", RuntimePoolLabel: "agents", TemplateHashLabel: hash}))
			Expect(metav1.IsControlledBy(&p, getRuntimePool(pool)(Default))).To(BeTrue())
			env := p.Spec.Containers[0].Env
			Expect(env).To(ContainElements(
				corev1.EnvVar{Name: EnvWarmPool, Value: "agents"},
				corev1.EnvVar{Name: EnvNamespace, Value: ns},
				HaveField("Name", EnvPodName), HaveField("Name", EnvNodeName)))
			for _, e := range env {
				Expect([]string{EnvSession, EnvTenantID, EnvResumeRunID, EnvCheckpointLocation}).NotTo(ContainElement(e.Name))
			}
			Expect(p.Spec.SecurityContext.RunAsNonRoot).To(Equal(ptr.To(true)), "restricted like a session's pod")
			Expect(p.Spec.Containers[0].SecurityContext.Capabilities.Drop).To(ContainElement(corev1.Capability("ALL")))
		}

		By("ready once its pods run")
		node := newNode("warm-fill")
		for _, p := range warmPodsOf(pool)(Default) {
			run(&p, node)
		}
		Eventually(func(g Gomega) {
			c := poolReady(pool)(g)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(getRuntimePool(pool)(g).Status.ReadyReplicas).To(Equal(int32(2)))
		}).Should(Succeed())

		By("a deleted pod is replaced")
		gone := warmPodsOf(pool)(Default)[0]
		Expect(k8sClient.Delete(ctx, &gone, client.GracePeriodSeconds(0))).To(Succeed())
		Eventually(func(g Gomega) {
			names := warmPodNames(pool)(g)
			g.Expect(names).To(HaveLen(2))
			g.Expect(names).NotTo(ContainElement(gone.Name))
		}).Should(Succeed())

		By("fewer replicas: the extra pod goes, the unready one first")
		Eventually(func(g Gomega) {
			p := getRuntimePool(pool)(g)
			p.Spec.Replicas = ptr.To[int32](1)
			g.Expect(k8sClient.Update(ctx, p)).To(Succeed())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			pods := warmPodsOf(pool)(g)
			g.Expect(pods).To(HaveLen(1))
			g.Expect(pods[0].Spec.NodeName).To(Equal(node.Name), "the ready pod is kept")
		}).Should(Succeed())
		Consistently(warmPodsOf(pool), "500ms").Should(HaveLen(1))
	})

	It("hands a ready warm pod to a session of its template, which the pool replaces", func() {
		ns := taskNamespace()
		taskQueue(ns, nil)
		tmpl := agentTemplate("agent:adopt")
		pool := newRuntimePool(ns, "agents", 1, tmpl)
		Expect(k8sClient.Create(ctx, pool)).To(Succeed())
		node := newNode("warm-adopt")
		warm := readyWarmPod(pool, 1, node)

		s := poolSession(ns, "adopter", tmpl)
		Eventually(sessionPodName(s)).Should(Equal(warm.Name))
		Eventually(phaseOf(s)).Should(Equal(agentlanev1alpha1.SessionActive))

		pod := &corev1.Pod{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(warm), pod)).To(Succeed())
		Expect(pod.Labels).To(HaveKeyWithValue(RuntimeLabel, s.Name))
		Expect(pod.Labels).To(HaveKeyWithValue(agentlanev1alpha1.SessionLabel, s.Name))
		Expect(pod.Labels).To(HaveKeyWithValue(TemplateHashLabel, TemplateHash(&tmpl)))
		Expect(pod.Labels).NotTo(HaveKey(RuntimePoolLabel))
		cur := getSession(client.ObjectKeyFromObject(s))(Default)
		Expect(metav1.IsControlledBy(pod, cur)).To(BeTrue())
		Expect(pod.OwnerReferences).To(HaveLen(1), "the pool no longer owns it")
		at, err := time.Parse(time.RFC3339Nano, pod.Annotations[AdoptedAtAnnotation])
		Expect(err).NotTo(HaveOccurred())
		Expect(at).NotTo(BeZero())
		Expect(cur.Status.NodeName).To(Equal(node.Name))
		Eventually(sessionEvent(s, agentlanev1alpha1.AgentSessionRuntimePodAdoptedReason)).Should(
			HaveField("Note", And(ContainSubstring(warm.Name), ContainSubstring("RuntimePool agents"))))

		By("the session's disruption budget covers the adopted pod")
		pdb := &policyv1.PodDisruptionBudget{}
		Eventually(func() error {
			return k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: runtimeBudgetName(s)}, pdb)
		}).Should(Succeed())
		Expect(pdb.Spec.Selector.MatchLabels).To(Equal(map[string]string{RuntimeLabel: s.Name}))

		By("the pool makes another warm pod and counts the adoption")
		Eventually(func(g Gomega) {
			names := warmPodNames(pool)(g)
			g.Expect(names).To(HaveLen(1))
			g.Expect(names).NotTo(ContainElement(warm.Name))
			p := getRuntimePool(pool)(g)
			g.Expect(p.Status.Adopted).To(Equal(int64(1)))
			g.Expect(p.Status.LastAdoptionTime).NotTo(BeNil())
		}).Should(Succeed())
		Consistently(sessionPodName(s), "500ms").Should(Equal(warm.Name), "the session keeps the pod it adopted")
	})

	It("never hands a warm pod to another namespace or template, nor one that changed or that the pool did not make", func() {
		ns, other := taskNamespace(), taskNamespace()
		taskQueue(ns, nil)
		taskQueue(other, nil)
		tmpl := agentTemplate("agent:tenant")
		pool := newRuntimePool(ns, "agents", 1, tmpl)
		Expect(k8sClient.Create(ctx, pool)).To(Succeed())
		node := newNode("warm-isolation")
		warm := readyWarmPod(pool, 1, node)

		By("a session of another namespace with the very same template gets a new pod")
		foreign := poolSession(other, "foreign", tmpl)
		Eventually(sessionPodName(foreign)).ShouldNot(BeEmpty())
		Expect(sessionPodName(foreign)(Default)).NotTo(Equal(warm.Name))
		Expect(sessionEvents(foreign)(Default)).NotTo(ContainElement(agentlanev1alpha1.AgentSessionWarmPoolEmptyReason),
			"its namespace has no pool")

		By("a session of the pool's namespace with another template gets a new pod")
		differs := poolSession(ns, "differs", agentTemplate("agent:other"))
		Eventually(sessionPodName(differs)).ShouldNot(BeEmpty())
		Expect(sessionPodName(differs)(Default)).NotTo(Equal(warm.Name))
		expectWarm(pool, warm)

		By("a pod that claims to be the pool's, but was not made by it, is not taken")
		forged := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "forged", Labels: map[string]string{
				RuntimeLabel: "", RuntimePoolLabel: pool.Name, TemplateHashLabel: TemplateHash(&tmpl)}},
			Spec: tmpl.Spec,
		}
		Expect(k8sClient.Create(ctx, forged)).To(Succeed())
		run(forged, node)

		By("the pool's pod whose image was changed is not taken, and the pool replaces it")
		Eventually(func(g Gomega) {
			cur := &corev1.Pod{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(warm), cur)).To(Succeed())
			cur.Spec.Containers[0].Image = "attacker:latest"
			g.Expect(k8sClient.Update(ctx, cur)).To(Succeed())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			cur := &corev1.Pod{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(warm), cur)).To(Succeed())
			g.Expect(cur.DeletionTimestamp).NotTo(BeNil(), "the pool deletes the changed pod")
		}).Should(Succeed())
		s := poolSession(ns, "same", tmpl)
		Eventually(sessionPodName(s)).ShouldNot(BeEmpty())
		Expect(sessionPodName(s)(Default)).NotTo(BeElementOf(warm.Name, forged.Name))
		Eventually(sessionEvent(s, agentlanev1alpha1.AgentSessionWarmPoolEmptyReason)).ShouldNot(BeNil())
		f := &corev1.Pod{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(forged), f)).To(Succeed())
		Expect(f.Labels).To(HaveKeyWithValue(RuntimeLabel, ""), "the forged pod is left alone")
		Expect(f.OwnerReferences).To(BeEmpty())
	})

	It("replaces a warm pod whose node stopped answering", func() {
		ns := taskNamespace()
		tmpl := agentTemplate("agent:lost")
		pool := newRuntimePool(ns, "agents", 1, tmpl)
		Expect(k8sClient.Create(ctx, pool)).To(Succeed())
		node := newNode("warm-lost")
		first := readyWarmPod(pool, 1, node)
		Consistently(warmPodNames(pool), "500ms").Should(Equal([]string{first.Name}), "a pod on a live node is kept")

		By("the node stops answering: the node controller taints it unreachable and marks its pods not ready")
		Eventually(func(g Gomega) {
			cur := &corev1.Node{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(node), cur)).To(Succeed())
			cur.Spec.Taints = append(cur.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule})
			g.Expect(k8sClient.Update(ctx, cur)).To(Succeed())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			cur := &corev1.Pod{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(first), cur)).To(Succeed())
			cur.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
			g.Expect(k8sClient.Status().Update(ctx, cur)).To(Succeed())
		}).Should(Succeed())

		Eventually(func(g Gomega) {
			names := warmPodNames(pool)(g)
			g.Expect(names).To(HaveLen(1))
			g.Expect(names).NotTo(ContainElement(first.Name), "the pod on the lost node is still kept")
		}).Should(Succeed())
		gone := &corev1.Pod{}
		err := k8sClient.Get(ctx, client.ObjectKeyFromObject(first), gone)
		if err == nil {
			Expect(gone.DeletionTimestamp).NotTo(BeNil(), "the pod on the lost node is deleted")
		} else {
			Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
		}
	})

	It("falls back to a new pod with a WarmPoolEmpty event when the pool has no ready pod", func() {
		ns := taskNamespace()
		taskQueue(ns, nil)
		tmpl := agentTemplate("agent:empty")
		pool := newRuntimePool(ns, "agents", 1, tmpl)
		Expect(k8sClient.Create(ctx, pool)).To(Succeed())
		Eventually(warmPodsOf(pool)).Should(HaveLen(1))
		unready := warmPodsOf(pool)(Default)[0]

		s := poolSession(ns, "cold", tmpl)
		Eventually(sessionEvent(s, agentlanev1alpha1.AgentSessionWarmPoolEmptyReason)).Should(
			HaveField("Note", ContainSubstring("RuntimePool agents has no ready warm pod")))
		pod := runtimePodOf(s, "")
		Expect(pod.Name).NotTo(Equal(unready.Name))
		Expect(pod.Name).To(HavePrefix("cold-"))
		Expect(pod.Labels).NotTo(HaveKey(RuntimePoolLabel))
		Expect(pod.Spec.Containers[0].Env).To(ContainElement(corev1.EnvVar{Name: EnvSession, Value: "cold"}))
		Expect(sessionEvents(s)(Default)).To(ContainElement(agentlanev1alpha1.AgentSessionRuntimePodCreatedReason))
		expectWarm(pool, &unready)
	})

	It("lets exactly one of two sessions racing for one warm pod adopt it", func() {
		ns := taskNamespace()
		taskQueue(ns, nil)
		tmpl := agentTemplate("agent:race")
		pool := newRuntimePool(ns, "agents", 1, tmpl)
		Expect(k8sClient.Create(ctx, pool)).To(Succeed())
		warm := readyWarmPod(pool, 1, newNode("warm-race"))

		a := poolSession(ns, "race-a", tmpl)
		b := poolSession(ns, "race-b", tmpl)
		Eventually(sessionPodName(a)).ShouldNot(BeEmpty())
		Eventually(sessionPodName(b)).ShouldNot(BeEmpty())
		names := []string{sessionPodName(a)(Default), sessionPodName(b)(Default)}
		Expect(names).To(ContainElement(warm.Name))
		Expect(names[0]).NotTo(Equal(names[1]))
		pod := &corev1.Pod{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(warm), pod)).To(Succeed())
		Expect(pod.OwnerReferences).To(HaveLen(1))

		By("two adoptions from the same read of the pod: the second finds it changed")
		c := &AgentSessionReconciler{Client: k8sClient, Clock: clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)), warm: newWarmPools()}
		warm2 := readyWarmPod(pool, 1, newNode("warm-race-2"))
		x, y := testSession("race-x", "q1"), testSession("race-y", "q1")
		x.Namespace, y.Namespace = ns, ns // no runtime: the manager adopts nothing for them
		Expect(k8sClient.Create(ctx, x)).To(Succeed())
		Expect(k8sClient.Create(ctx, y)).To(Succeed())
		read := warm2.DeepCopy()
		ok, err := c.adopt(ctx, x, getRuntimePool(pool)(Default), warm2)
		Expect(err).NotTo(HaveOccurred())
		Expect(ok).To(BeTrue())
		ok, err = c.adopt(ctx, y, getRuntimePool(pool)(Default), read)
		Expect(err).NotTo(HaveOccurred())
		Expect(ok).To(BeFalse())
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(warm2), pod)).To(Succeed())
		Expect(pod.Labels).To(HaveKeyWithValue(RuntimeLabel, "race-x"))
		Expect(pod.Annotations).To(HaveKeyWithValue(AdoptedAtAnnotation, "2026-01-02T03:04:05.000000006Z"))
		Expect(metav1.IsControlledBy(pod, x)).To(BeTrue())
	})

	It("lets two sessions whose caches show the same warm pod adopt it once: the other gets a new pod", func() {
		ns := taskNamespace()
		tmpl := agentTemplate("agent:race-cache")
		pool := newRuntimePool(ns, "agents", 1, tmpl)
		Expect(k8sClient.Create(ctx, pool)).To(Succeed())
		warm := readyWarmPod(pool, 1, newNode("warm-race-cache"))
		snapshot := &corev1.PodList{}
		Expect(k8sClient.List(ctx, snapshot, client.InNamespace(ns))).To(Succeed())
		Expect(snapshot.Items).To(HaveLen(1))

		shared := newWarmPools()
		var sessions []*agentlanev1alpha1.AgentSession
		for _, name := range []string{"racer-a", "racer-b"} {
			// Its queue does not exist: the manager leaves its pods to the spec.
			s := testSession(name, "no-such-queue")
			s.Namespace = ns
			s.Spec.Runtime = &agentlanev1alpha1.SessionRuntime{PodTemplate: tmpl}
			Expect(k8sClient.Create(ctx, s)).To(Succeed())
			sessions = append(sessions, getSession(client.ObjectKeyFromObject(s))(Default))
		}
		got := make([]*corev1.Pod, len(sessions))
		var wg sync.WaitGroup
		for i, s := range sessions {
			wg.Add(1)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				r := &AgentSessionReconciler{Client: frozenPods{Client: k8sClient, pods: snapshot}, APIReader: k8sClient,
					Clock: clocktesting.NewFakeClock(time.Now()), warm: shared}
				pod, err := r.ensureRuntime(ctx, s, &lifecycle{}, nil)
				Expect(err).NotTo(HaveOccurred())
				got[i] = pod
			}()
		}
		wg.Wait()
		Expect(got[0]).NotTo(BeNil())
		Expect(got[1]).NotTo(BeNil())
		Expect([]string{got[0].Name, got[1].Name}).To(ContainElement(warm.Name))
		Expect(got[0].Name).NotTo(Equal(got[1].Name))
		for result, n := range map[string]float64{adoptionAdopted: 1, adoptionConflict: 1, adoptionCold: 1} {
			Expect(testutil.ToFloat64(shared.metrics.adoptions.WithLabelValues(result))).To(Equal(n), result)
		}
		pod := &corev1.Pod{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(warm), pod)).To(Succeed())
		Expect(pod.OwnerReferences).To(HaveLen(1))
		Expect([]string{sessions[0].Name, sessions[1].Name}).To(ContainElement(pod.OwnerReferences[0].Name))
	})

	It("never adopts a warm pod on the node a migration moves the session off", func() {
		ns := taskNamespace()
		taskQueue(ns, nil)
		tmpl := agentTemplate("agent:migrate")
		pool := newRuntimePool(ns, "agents", 2, tmpl)
		Expect(k8sClient.Create(ctx, pool)).To(Succeed())
		nodeA := newNode("warm-mig-a")
		first := readyWarmPod(pool, 2, nodeA)
		s := poolSession(ns, "moved", tmpl)
		Eventually(sessionPodName(s)).Should(Equal(first.Name))
		Eventually(phaseOf(s)).Should(Equal(agentlanev1alpha1.SessionActive))

		By("another warm pod is ready on the same node")
		var onA *corev1.Pod
		Eventually(func(g Gomega) {
			pods := warmPodsOf(pool)(g)
			g.Expect(pods).To(HaveLen(2), "the pool refilled")
			onA = &pods[0]
		}).Should(Succeed())
		run(onA, nodeA)
		Eventually(func(g Gomega) { g.Expect(getRuntimePool(pool)(g).Status.ReadyReplicas).To(Equal(int32(1))) }).Should(Succeed())

		By("migrating the session")
		Eventually(func(g Gomega) {
			cur := getSession(client.ObjectKeyFromObject(s))(g)
			cur.Annotations = map[string]string{agentlanev1alpha1.MigrateAnnotation: "rebalance"}
			g.Expect(k8sClient.Update(ctx, cur)).To(Succeed())
		}).Should(Succeed())
		Eventually(phaseOf(s)).Should(Equal(agentlanev1alpha1.SessionPassivating))
		checkpoint(s, "run-warm-mig")
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(first), first)).To(Succeed())
			g.Expect(first.DeletionTimestamp).NotTo(BeNil(), "evicted")
		}).Should(Succeed())
		finishDeletion(first)

		second := runtimePodOf(s, first.Name)
		Expect(second.Name).NotTo(Equal(onA.Name))
		Expect(second.Labels).NotTo(HaveKey(TemplateHashLabel), "a new pod, not a warm one")
		Expect(second.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms).To(ConsistOf(
			HaveField("MatchFields", ContainElement(corev1.NodeSelectorRequirement{Key: "metadata.name",
				Operator: corev1.NodeSelectorOpNotIn, Values: []string{nodeA.Name}}))))
		Eventually(sessionEvent(s, agentlanev1alpha1.AgentSessionWarmPoolEmptyReason)).ShouldNot(BeNil())
		expectWarm(pool, onA)
	})

	It("on a drain, hands the resuming session a warm pod on another node, never one on the cordoned node", func() {
		ns := taskNamespace()
		taskQueue(ns, nil)
		tmpl := agentTemplate("agent:drain")
		pool := newRuntimePool(ns, "agents", 2, tmpl)
		Expect(k8sClient.Create(ctx, pool)).To(Succeed())
		nodeA, nodeB := newNode("warm-drain-a"), newNode("warm-drain-b")
		first := readyWarmPod(pool, 2, nodeA)
		s := poolSession(ns, "drained", tmpl)
		Eventually(sessionPodName(s)).Should(Equal(first.Name))
		Eventually(phaseOf(s)).Should(Equal(agentlanev1alpha1.SessionActive))

		By("one warm pod ready on the session's node, one on another")
		var pods []corev1.Pod
		Eventually(func(g Gomega) {
			pods = warmPodsOf(pool)(g)
			g.Expect(pods).To(HaveLen(2), "the pool refilled")
		}).Should(Succeed())
		onA, onB := &pods[0], &pods[1]
		run(onA, nodeA)
		run(onB, nodeB)
		Eventually(func(g Gomega) { g.Expect(getRuntimePool(pool)(g).Status.ReadyReplicas).To(Equal(int32(2))) }).Should(Succeed())

		By("draining the session's node")
		cordon(nodeA)
		Eventually(phaseOf(s)).Should(Equal(agentlanev1alpha1.SessionPassivating))
		checkpoint(s, "run-warm-drain")
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(first), first)).To(Succeed())
			g.Expect(first.DeletionTimestamp).NotTo(BeNil(), "evicted")
		}).Should(Succeed())
		finishDeletion(first)

		Eventually(sessionPodName(s)).Should(Equal(onB.Name))
		Eventually(phaseOf(s)).Should(Equal(agentlanev1alpha1.SessionActive))
		expectWarm(pool, onA)
	})

	It("gives a session whose cache lags behind the pod it just got that pod again, not a second one", func() {
		ns := taskNamespace()
		tmpl := agentTemplate("agent:lag")
		pool := newRuntimePool(ns, "agents", 1, tmpl)
		Expect(k8sClient.Create(ctx, pool)).To(Succeed())
		warm := readyWarmPod(pool, 1, newNode("warm-lag"))
		// Its queue does not exist: the manager leaves its pods to the spec.
		s := testSession("lagging", "no-such-queue")
		s.Namespace = ns
		s.Spec.Runtime = &agentlanev1alpha1.SessionRuntime{PodTemplate: tmpl}
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		s = getSession(client.ObjectKeyFromObject(s))(Default)
		r := &AgentSessionReconciler{Client: k8sClient, APIReader: k8sClient, Clock: clocktesting.NewFakeClock(time.Now()), warm: newWarmPools()}

		first, err := r.ensureRuntime(ctx, s, &lifecycle{}, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(first.Name).To(Equal(warm.Name), "adopted")
		By("a cache that does not show the adopted pod yet")
		r.Client = podsUnseen{k8sClient}
		again, err := r.ensureRuntime(ctx, s, &lifecycle{}, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(again.Name).To(Equal(first.Name))

		By("once the pod is gone, a new one, given again while the cache lags")
		Expect(k8sClient.Delete(ctx, first, client.GracePeriodSeconds(0))).To(Succeed())
		cold, err := r.ensureRuntime(ctx, s, &lifecycle{}, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(cold.Name).To(HavePrefix("lagging-"))
		again, err = r.ensureRuntime(ctx, s, &lifecycle{}, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(again.Name).To(Equal(cold.Name))
		list := &corev1.PodList{}
		Expect(k8sClient.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{RuntimeLabel: s.Name})).To(Succeed())
		Expect(list.Items).To(HaveLen(1))
	})

	It("keeps no pod of a template the API server refuses, or that sets what a warm pod must not have", func() {
		ns := taskNamespace()
		bad := agentTemplate("agent:bad")
		bad.Spec.Containers[0].Name = "Not_A_DNS_Label"
		refused := newRuntimePool(ns, "refused", 3, bad)
		Expect(k8sClient.Create(ctx, refused)).To(Succeed())
		Eventually(func(g Gomega) {
			c := poolReady(refused)(g)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(agentlanev1alpha1.RuntimePoolInvalidTemplateReason))
			g.Expect(c.Message).To(ContainSubstring("spec.template is refused"))
		}).Should(Succeed())

		pinned := agentTemplate("agent:pinned")
		pinned.Spec.Containers[0].Env = []corev1.EnvVar{{Name: EnvSession, Value: "someone-else"}}
		named := newRuntimePool(ns, "named", 3, pinned)
		Expect(k8sClient.Create(ctx, named)).To(Succeed())
		Eventually(func(g Gomega) {
			c := poolReady(named)(g)
			g.Expect(c.Reason).To(Equal(agentlanev1alpha1.RuntimePoolInvalidTemplateReason))
			g.Expect(c.Message).To(ContainSubstring(EnvSession))
		}).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(warmPodsOf(refused)(g)).To(BeEmpty())
			g.Expect(warmPodsOf(named)(g)).To(BeEmpty())
			g.Expect(getRuntimePool(refused)(g).Status.DesiredReplicas).To(BeZero())
		}, "1s").Should(Succeed())
	})

	It("bounds what a tenant may ask: replicas at admission, the pools of a namespace, and their pods together", func() {
		ns := taskNamespace()
		tmpl := agentTemplate("agent:bounds")

		By("more than 50 replicas, or fewer than 0, are refused at admission")
		Expect(k8sClient.Create(ctx, newRuntimePool(ns, "huge", 51, tmpl))).NotTo(Succeed())
		Expect(k8sClient.Create(ctx, newRuntimePool(ns, "negative", -1, tmpl))).NotTo(Succeed())
		long := newRuntimePool(ns, strings.Repeat("p", 53), 0, tmpl)
		Expect(k8sClient.Create(ctx, long)).NotTo(Succeed())

		By("past the pools a namespace may run, the newest keep no pod")
		for i := range DefaultRuntimePoolsPerNamespace {
			Expect(k8sClient.Create(ctx, newRuntimePool(ns, fmt.Sprintf("p%02d", i), 0, tmpl))).To(Succeed())
		}
		// Pools created in the same second rank by name: this one last.
		extra := newRuntimePool(ns, "zz-extra", 2, tmpl)
		Expect(k8sClient.Create(ctx, extra)).To(Succeed())
		Eventually(func(g Gomega) {
			c := poolReady(extra)(g)
			g.Expect(c.Reason).To(Equal(agentlanev1alpha1.RuntimePoolTooManyReason))
		}).Should(Succeed())
		Consistently(warmPodsOf(extra), "1s").Should(BeEmpty())

		By("the namespace's pools share the manager's bound of warm pods, the oldest first")
		bounded := taskNamespace()
		for _, name := range []string{"a", "b", "c"} {
			Expect(k8sClient.Create(ctx, newRuntimePool(bounded, name, 3, tmpl))).To(Succeed())
		}
		r := &RuntimePoolReconciler{Client: k8sClient, Options: RuntimePoolOptions{MaxPodsPerNamespace: 5, PerNamespace: 16}}
		want := map[string]int32{"a": 3, "b": 2, "c": 0}
		for name, n := range want {
			got, reason, msg, err := r.allowance(ctx, newRuntimePool(bounded, name, 3, tmpl))
			Expect(err).NotTo(HaveOccurred())
			Expect(got).To(Equal(n), "pool %s", name)
			if n < 3 {
				Expect(reason).To(Equal(agentlanev1alpha1.RuntimePoolNamespaceBoundReason))
				Expect(msg).To(ContainSubstring("at most 5 together"))
			} else {
				Expect(reason).To(BeEmpty())
			}
		}
	})

	It("accepts the sample RuntimePool", func() {
		ns := taskNamespace()
		data, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "runtimepool", "agentlane_v1alpha1_runtimepool.yaml"))
		Expect(err).NotTo(HaveOccurred())
		pool := &agentlanev1alpha1.RuntimePool{}
		Expect(yaml.UnmarshalStrict(data, pool)).To(Succeed())
		pool.Namespace = ns
		Expect(k8sClient.Create(ctx, pool)).To(Succeed())
		Eventually(warmPodsOf(pool)).Should(HaveLen(int(ptr.Deref(pool.Spec.Replicas, 1))))
	})
})

// podsUnseen is a client whose cache has not seen any pod yet.
type podsUnseen struct{ client.Client }

func (c podsUnseen) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*corev1.PodList); ok {
		return nil
	}
	return c.Client.List(ctx, list, opts...)
}

// frozenPods is a client whose cache shows pods as they were in pods.
type frozenPods struct {
	client.Client
	pods *corev1.PodList
}

func (c frozenPods) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if l, ok := list.(*corev1.PodList); ok {
		c.pods.DeepCopyInto(l)
		return nil
	}
	return c.Client.List(ctx, list, opts...)
}
