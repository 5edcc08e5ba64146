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

package e2e

import (
	"encoding/json"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// newNamespace creates a namespace for one spec, so that the workers of
// different specs never see each other's tasks.
func newNamespace() string {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-"}}
	Expect(k8sClient.Create(suiteCtx, ns)).To(Succeed())
	return ns.Name
}

// externalLane is an External lane with the given priority and caps.
func externalLane(name string, priority, maxConcurrency, perSession int32) agentlanev1alpha1.Lane {
	return agentlanev1alpha1.Lane{
		Name:                     agentlanev1alpha1.LaneName(name),
		Priority:                 priority,
		HandlerMode:              agentlanev1alpha1.HandlerModeExternal,
		MaxConcurrency:           maxConcurrency,
		MaxConcurrencyPerSession: perSession,
	}
}

// createQueue creates a LaneQueue with lanes and a session "s1" on it, and
// waits until the session is bound to the queue's scheduler.
func createQueue(ns string, spec agentlanev1alpha1.LaneQueueSpec) *agentlanev1alpha1.AgentSession {
	GinkgoHelper()
	lq := &agentlanev1alpha1.LaneQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "q1"}, Spec: spec}
	Expect(k8sClient.Create(suiteCtx, lq)).To(Succeed())
	s := &agentlanev1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s1"},
		Spec: agentlanev1alpha1.AgentSessionSpec{
			QueueRef: agentlanev1alpha1.LaneQueueReference{Name: "q1"},
			// The specs count every task the session ran, so none may be
			// swept by the session's retention.
			Retention: &agentlanev1alpha1.SessionRetention{MaxFinishedTasks: ptr.To[int32](10000)},
		},
	}
	Expect(k8sClient.Create(suiteCtx, s)).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(s), s)).To(Succeed())
		g.Expect(s.Status.Phase).To(Equal(agentlanev1alpha1.SessionActive))
	}).Should(Succeed())
	return s
}

// bashTask returns a task of session s that runs command in lane.
func bashTask(s *agentlanev1alpha1.AgentSession, name, lane, command string) *agentlanev1alpha1.ExternalTask {
	GinkgoHelper()
	raw, err := json.Marshal(map[string]string{"command": command})
	Expect(err).NotTo(HaveOccurred())
	return &agentlanev1alpha1.ExternalTask{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: name},
		Spec: agentlanev1alpha1.ExternalTaskSpec{
			SessionRef:  &agentlanev1alpha1.AgentSessionReference{Name: s.Name},
			Lane:        agentlanev1alpha1.LaneName(lane),
			CommandType: "bash",
			Payload:     &runtime.RawExtension{Raw: raw},
		},
	}
}

// asSubmitted gives the task what a submitter that knows its session sets
// at creation (the Session API does): labels and the owner reference, so
// that the manager need not add them.
func asSubmitted(t *agentlanev1alpha1.ExternalTask, s *agentlanev1alpha1.AgentSession) *agentlanev1alpha1.ExternalTask {
	t.Labels = map[string]string{
		agentlanev1alpha1.QueueLabel:   s.Spec.QueueRef.Name,
		agentlanev1alpha1.LaneLabel:    string(t.Spec.Lane),
		agentlanev1alpha1.SessionLabel: s.Name,
	}
	t.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: agentlanev1alpha1.GroupVersion.String(), Kind: "AgentSession",
		Name: s.Name, UID: s.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}}
	return t
}

// create creates the tasks.
func create(tasks ...*agentlanev1alpha1.ExternalTask) {
	GinkgoHelper()
	for _, t := range tasks {
		Expect(k8sClient.Create(suiteCtx, t)).To(Succeed())
	}
}

// phaseOf reads the task's phase.
func phaseOf(t *agentlanev1alpha1.ExternalTask) func(Gomega) agentlanev1alpha1.ExternalTaskPhase {
	return func(g Gomega) agentlanev1alpha1.ExternalTaskPhase {
		g.Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(t), t)).To(Succeed())
		return t.Status.Phase
	}
}

// tasksIn lists the tasks of namespace ns.
func tasksIn(g Gomega, ns string) []agentlanev1alpha1.ExternalTask {
	list := &agentlanev1alpha1.ExternalTaskList{}
	g.Expect(k8sClient.List(suiteCtx, list, client.InNamespace(ns))).To(Succeed())
	return list.Items
}

// countPhases counts the tasks of ns by phase.
func countPhases(g Gomega, ns string) map[agentlanev1alpha1.ExternalTaskPhase]int {
	out := map[agentlanev1alpha1.ExternalTaskPhase]int{}
	for _, t := range tasksIn(g, ns) {
		out[t.Status.Phase]++
	}
	return out
}

// taskName numbers task names.
func taskName(prefix string, i int) string { return fmt.Sprintf("%s-%03d", prefix, i) }
