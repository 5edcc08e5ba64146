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

package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types and reasons of a RuntimePool.
const (
	// RuntimePoolReadyCondition is True when the pool keeps as many ready,
	// unassigned warm pods as it asks for.
	RuntimePoolReadyCondition = "Ready"

	// RuntimePoolAvailableReason (Ready=True): every warm pod the pool
	// keeps is ready.
	RuntimePoolAvailableReason = "Available"
	// RuntimePoolProgressingReason (Ready=False): fewer warm pods are ready
	// than the pool keeps; the manager is creating or waiting for them.
	RuntimePoolProgressingReason = "Progressing"
	// RuntimePoolInvalidTemplateReason (Ready=False): spec.template makes
	// no pod the manager may create (the API server refuses the pod, or the
	// template sets what the manager sets on a warm pod); the pool keeps no
	// pod until it is fixed.
	RuntimePoolInvalidTemplateReason = "InvalidTemplate"
	// RuntimePoolTooManyReason (Ready=False): the namespace holds more
	// pools than the manager runs per namespace; this one, among the
	// newest, keeps no pod.
	RuntimePoolTooManyReason = "TooManyPools"
	// RuntimePoolNamespaceBoundReason (Ready=False): the warm pods of the
	// namespace's pools together reached the manager's bound; this pool
	// keeps fewer than spec.replicas.
	RuntimePoolNamespaceBoundReason = "NamespaceBound"

	// RuntimePoolLabel names, on a warm pod, the RuntimePool that keeps it.
	// A session that adopts the pod removes it.
	RuntimePoolLabel = "agentlane.io/runtime-pool"
	// TemplateHashLabel is, on a warm pod and on a runtime pod adopted from
	// a pool, the hash of the pod template it was built from (a
	// RuntimePool's status.templateHash).
	TemplateHashLabel = "agentlane.io/template-hash"
	// AdoptedAtAnnotation is when a session adopted the pod (RFC 3339 with
	// nanoseconds).
	AdoptedAtAnnotation = "agentlane.io/adopted-at"
)

// Reasons of the Kubernetes Events recorded on an AgentSession for warm
// runtime pods.
const (
	// AgentSessionRuntimePodAdoptedReason (Normal): the session took a
	// ready warm pod of a RuntimePool as its runtime pod; the message names
	// the pod and the pool.
	AgentSessionRuntimePodAdoptedReason = "RuntimePodAdopted"
	// AgentSessionWarmPoolEmptyReason (Normal): a RuntimePool of the
	// session's namespace matches its template but had no ready warm pod
	// to hand over; the session gets a new pod as without a pool.
	AgentSessionWarmPoolEmptyReason = "WarmPoolEmpty"
)

// RuntimePoolSpec is the desired state of a RuntimePool.
type RuntimePoolSpec struct {
	// replicas is the number of ready, unassigned warm pods the pool keeps.
	// A session that adopts one takes it out of the pool, which then
	// creates another. At most 50; the manager also bounds the warm pods of
	// a namespace's pools together.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=50
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// template is the pod the pool keeps warm: an AgentSession of the
	// pool's namespace whose spec.runtime.podTemplate is the same template
	// adopts one of its pods instead of waiting for a new one. The manager
	// builds the pods as a session's runtime pods (the restricted settings,
	// the Session API's address, token and CA), without a session's
	// identity: the runtime learns its session when one adopts the pod.
	// The template is checked against the Pod schema and the namespace's
	// template policy at admission, as a session's.
	// +required
	Template corev1.PodTemplateSpec `json:"template"`
}

// RuntimePoolStatus is the observed state of a RuntimePool.
type RuntimePoolStatus struct {
	// replicas is the number of the pool's warm pods, unassigned and not
	// being deleted.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// desiredReplicas is the number of warm pods the manager keeps: the
	// spec's replicas, cut to the manager's bounds.
	// +optional
	DesiredReplicas int32 `json:"desiredReplicas,omitempty"`
	// readyReplicas is the number of those that are ready to be adopted.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// adopted counts the warm pods sessions adopted since the pool was
	// created (as the manager recorded them).
	// +optional
	Adopted int64 `json:"adopted,omitempty"`
	// lastAdoptionTime is when a session last adopted one of its pods.
	// +optional
	LastAdoptionTime *metav1.Time `json:"lastAdoptionTime,omitempty"`
	// templateHash identifies spec.template: a session whose
	// spec.runtime.podTemplate has the same hash matches the pool.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	TemplateHash string `json:"templateHash,omitempty"`
	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions: Ready.
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rpool,categories=agentlane
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.status.desiredReplicas`,description="Warm pods the pool keeps"
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`,description="Ready warm pods"
// +kubebuilder:printcolumn:name="Adopted",type=integer,JSONPath=`.status.adopted`,description="Warm pods sessions adopted"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,description="Why the pool is or is not ready",priority=1
// +kubebuilder:printcolumn:name="Hash",type=string,JSONPath=`.status.templateHash`,description="Hash of the template",priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 52",message="RuntimePool name must be at most 52 characters, so that it fits in a label value and its pods' names"

// RuntimePool keeps ready runtime pods of one pod template, which the
// AgentSessions of its namespace with that template adopt instead of
// waiting for a new pod.
type RuntimePool struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the pool's desired state.
	// +required
	Spec RuntimePoolSpec `json:"spec"`

	// status is the pool's observed state, written by the manager.
	// +optional
	Status RuntimePoolStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// RuntimePoolList is a list of RuntimePools.
type RuntimePoolList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RuntimePool `json:"items"`
}

func init() {
	SchemeBuilder.Register(&RuntimePool{}, &RuntimePoolList{})
}
