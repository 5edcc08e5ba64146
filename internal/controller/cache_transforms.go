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
	"unique"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// What the manager's cache keeps of each object. The cache holds every
// queued ExternalTask, so what one costs is what a queued task costs the
// manager; the transforms drop what no controller reads and share the
// strings that thousands of objects repeat (namespace, labels, owner,
// queue, lane, session, command type, condition types and reasons), which
// the decoder otherwise allocates once per object.

// lastAppliedAnnotation is where kubectl apply keeps a copy of the whole
// object, payload included.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// leanTask is how the manager caches an ExternalTask: without
// managedFields, kubectl's last-applied copy and spec.payload, which it
// never reads (workers read the payload from the API server themselves; a
// controller that needs it reads the task with the APIReader), and with its
// repeated strings shared. A queued task then costs the manager its
// metadata and status only. Status writes are merge patches of the status,
// so the missing spec is never written back.
func leanTask(obj any) (any, error) {
	task, ok := obj.(*agentlanev1alpha1.ExternalTask)
	if !ok {
		return obj, nil
	}
	task.ManagedFields = nil
	if _, ok := task.Annotations[lastAppliedAnnotation]; ok {
		delete(task.Annotations, lastAppliedAnnotation)
		if len(task.Annotations) == 0 {
			task.Annotations = nil
		}
	}
	task.Spec.Payload = nil
	internMeta(&task.ObjectMeta)
	sp := &task.Spec
	if sp.SessionRef != nil {
		sp.SessionRef.Name = intern(sp.SessionRef.Name)
	}
	if sp.QueueRef != nil {
		sp.QueueRef.Name = intern(sp.QueueRef.Name)
	}
	sp.Lane = agentlanev1alpha1.LaneName(intern(string(sp.Lane)))
	sp.CommandType = agentlanev1alpha1.CommandType(intern(string(sp.CommandType)))
	sp.RunID = intern(sp.RunID)
	if id := sp.Identity; id != nil {
		id.TenantID, id.Principal, id.AgentTemplateID = intern(id.TenantID), intern(id.Principal), intern(id.AgentTemplateID)
	}
	st := &task.Status
	st.Phase = agentlanev1alpha1.ExternalTaskPhase(intern(string(st.Phase)))
	st.Lane = agentlanev1alpha1.LaneName(intern(string(st.Lane)))
	st.Worker, st.NodeName = intern(st.Worker), intern(st.NodeName)
	internConditions(st.Conditions)
	return task, nil
}

// leanNode is how the manager caches a Node: its metadata and spec (what
// passivation reads: unschedulable, taints), without its status, which
// the kubelet rewrites every few seconds and which lists every image on
// the node.
func leanNode(obj any) (any, error) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	node.ManagedFields = nil
	node.Annotations = nil
	node.Status = corev1.NodeStatus{}
	return node, nil
}

// leanSession is how the manager caches an AgentSession: without
// managedFields and with its repeated strings shared.
func leanSession(obj any) (any, error) {
	s, ok := obj.(*agentlanev1alpha1.AgentSession)
	if !ok {
		return obj, nil
	}
	s.ManagedFields = nil
	internMeta(&s.ObjectMeta)
	s.Spec.QueueRef.Name = intern(s.Spec.QueueRef.Name)
	internConditions(s.Status.Conditions)
	return s, nil
}

// internMeta shares the repeated strings of an object's metadata.
func internMeta(m *metav1.ObjectMeta) {
	m.Namespace = intern(m.Namespace)
	if len(m.Labels) > 0 {
		labels := make(map[string]string, len(m.Labels))
		for k, v := range m.Labels {
			labels[intern(k)] = intern(v)
		}
		m.Labels = labels
	}
	for i := range m.OwnerReferences {
		o := &m.OwnerReferences[i]
		o.APIVersion, o.Kind, o.Name = intern(o.APIVersion), intern(o.Kind), intern(o.Name)
		o.UID = types.UID(intern(string(o.UID)))
	}
	for i := range m.Finalizers {
		m.Finalizers[i] = intern(m.Finalizers[i])
	}
}

// internConditions shares the condition types and reasons; messages are
// mostly an object's own.
func internConditions(cs []metav1.Condition) {
	for i := range cs {
		cs[i].Type, cs[i].Reason = intern(cs[i].Type), intern(cs[i].Reason)
		cs[i].Status = metav1.ConditionStatus(intern(string(cs[i].Status)))
	}
}

// intern returns the canonical copy of s: equal strings of many cached
// objects share one allocation (unique keeps it while any is in use).
func intern(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}
