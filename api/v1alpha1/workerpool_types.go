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

// Condition types and reasons of a WorkerPool.
const (
	// WorkerPoolReadyCondition is True when the pool's Deployment runs the
	// current spec with the replicas the pool asks for, all of them ready.
	WorkerPoolReadyCondition = "Ready"
	// WorkerPoolScalingLimitedCondition is True when the replicas the
	// backlog needs (or an external autoscaler asks for) were cut to the
	// pool's bounds: minReplicas, maxReplicas or the manager's own bound.
	WorkerPoolScalingLimitedCondition = "ScalingLimited"

	// WorkerPoolAvailableReason: every replica the pool asks for is ready.
	WorkerPoolAvailableReason = "Available"
	// WorkerPoolProgressingReason: the Deployment has fewer ready replicas
	// than the pool asks for.
	WorkerPoolProgressingReason = "Progressing"
	// WorkerPoolInvalidTemplateReason: spec.podTemplate sets something a
	// worker pod cannot take; the pool runs no worker until it is fixed.
	WorkerPoolInvalidTemplateReason = "InvalidTemplate"
	// WorkerPoolTooManyReason: the namespace holds more pools than the
	// manager runs per namespace; this one, among the newest, runs none.
	WorkerPoolTooManyReason = "TooManyPools"
	// WorkerPoolAtMaxReason, WorkerPoolAtMinReason and
	// WorkerPoolManagerBoundReason say which bound cut the replicas.
	WorkerPoolAtMaxReason        = "AtMaxReplicas"
	WorkerPoolAtMinReason        = "AtMinReplicas"
	WorkerPoolManagerBoundReason = "ManagerBound"
	// WorkerPoolWithinBoundsReason: nothing was cut.
	WorkerPoolWithinBoundsReason = "WithinBounds"

	// WorkerPoolScaledReason is the reason of the Event recorded each time
	// the manager changes a pool's replicas.
	WorkerPoolScaledReason = "Scaled"

	// WorkerPoolLabel names, on a pool's Deployment and pods, the pool.
	WorkerPoolLabel = "agentlane.io/workerpool"
)

// WorkerPoolAutoscaling says who sets a pool's replicas.
// +kubebuilder:validation:Enum=Manager;External
type WorkerPoolAutoscaling string

const (
	// WorkerPoolAutoscalingManager: the manager sizes the pool from the
	// backlog of the lanes it serves, and writes spec.replicas.
	WorkerPoolAutoscalingManager WorkerPoolAutoscaling = "Manager"
	// WorkerPoolAutoscalingExternal: something else (an HPA, KEDA, a person)
	// writes spec.replicas through the scale subresource; the manager only
	// bounds it by minReplicas and maxReplicas.
	WorkerPoolAutoscalingExternal WorkerPoolAutoscaling = "External"
)

// WorkerPoolScalingRules is how fast the pool follows its backlog in one
// direction, as an HPA's behavior.
type WorkerPoolScalingRules struct {
	// stabilizationWindowSeconds is how long past recommendations count:
	// scaling up takes the lowest recommendation of the window, scaling
	// down the highest, so a short burst or lull moves nothing. At most
	// 3600.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	// +optional
	StabilizationWindowSeconds *int32 `json:"stabilizationWindowSeconds,omitempty"`
}

// WorkerPoolBehavior is the pool's scaling behaviour.
type WorkerPoolBehavior struct {
	// scaleUp: its window defaults to 0 (scale up at once).
	// +optional
	ScaleUp *WorkerPoolScalingRules `json:"scaleUp,omitempty"`
	// scaleDown: its window defaults to 300 (five minutes).
	// +optional
	ScaleDown *WorkerPoolScalingRules `json:"scaleDown,omitempty"`
}

// WorkerPoolSpec is the desired state of a WorkerPool.
// +kubebuilder:validation:XValidation:rule="!has(self.minReplicas) || self.minReplicas <= self.maxReplicas",message="minReplicas must not exceed maxReplicas"
type WorkerPoolSpec struct {
	// queues are the names of the LaneQueues, in the pool's namespace,
	// whose tasks the pool's workers run (the worker's --queues).
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	// +listType=set
	// +required
	Queues []string `json:"queues"`

	// lanes are the lanes of those queues the workers serve (the worker's
	// --lanes); empty serves every lane. Only the lanes whose external
	// target is Workers are counted: the tasks of Job, Handler, Delegate
	// and Direct lanes never reach a pool worker.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	// +listType=set
	// +optional
	Lanes []string `json:"lanes,omitempty"`

	// capacity is how many tasks one worker runs at once (--capacity).
	// +kubebuilder:default=4
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=256
	// +optional
	Capacity int32 `json:"capacity,omitempty"`

	// image is the worker container's image; the manager's
	// --workerpool-image when empty.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Image string `json:"image,omitempty"`

	// runnerImage is the image of the runner container, where tasks run:
	// the programs a task may start are those of this image. image when
	// empty.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	RunnerImage string `json:"runnerImage,omitempty"`

	// minReplicas is the fewest workers the pool keeps, idle or not; 0
	// lets an idle pool go to zero.
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +optional
	MinReplicas *int32 `json:"minReplicas,omitempty"`

	// maxReplicas is the most workers the pool runs, however long its
	// backlog. The manager also holds every pool to its own bound
	// (--workerpool-max-replicas).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +required
	MaxReplicas int32 `json:"maxReplicas"`

	// replicas is the number of workers asked for: written by the manager
	// when autoscaling is Manager, by whoever drives the scale subresource
	// when it is External. The manager bounds it by minReplicas and
	// maxReplicas either way.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// autoscaling says who sets replicas: Manager (default) or External.
	// +kubebuilder:default=Manager
	// +optional
	Autoscaling WorkerPoolAutoscaling `json:"autoscaling,omitempty"`

	// behavior is how fast the manager follows the backlog.
	// +optional
	Behavior *WorkerPoolBehavior `json:"behavior,omitempty"`

	// podTemplate adds to the worker pods the manager builds: labels and
	// annotations; the pod's nodeSelector, affinity, tolerations,
	// priorityClassName, runtimeClassName, imagePullSecrets and
	// topologySpreadConstraints; and the resources of the containers named
	// "worker" and "runner". Anything else it sets is refused (condition
	// Ready, reason InvalidTemplate). It is checked against the Pod schema
	// and the namespace's template policy at admission, as a session's.
	// +optional
	PodTemplate *corev1.PodTemplateSpec `json:"podTemplate,omitempty"`
}

// WorkerPoolStatus is the observed state of a WorkerPool.
type WorkerPoolStatus struct {
	// replicas is the number of worker pods of the pool's Deployment (for
	// the scale subresource).
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// desiredReplicas is the replicas the manager set on the Deployment.
	// +optional
	DesiredReplicas int32 `json:"desiredReplicas,omitempty"`
	// readyReplicas is the number of ready workers.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// busyReplicas is the number of the pool's workers holding at least
	// one task.
	// +optional
	BusyReplicas int32 `json:"busyReplicas,omitempty"`
	// backlog is the queued and running Workers-target commands of the
	// lanes the pool serves, when the manager last sized the pool.
	// +optional
	Backlog int32 `json:"backlog,omitempty"`
	// selector is the label selector of the pool's pods, for the scale
	// subresource.
	// +optional
	Selector string `json:"selector,omitempty"`
	// lastScaleTime is when the manager last changed the replicas.
	// +optional
	LastScaleTime *metav1.Time `json:"lastScaleTime,omitempty"`
	// lastScaleReason says why.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	LastScaleReason string `json:"lastScaleReason,omitempty"`
	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions: Ready and ScalingLimited.
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=wp,categories=agentlane
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.status.desiredReplicas`,description="Workers the pool asks for"
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`,description="Ready workers"
// +kubebuilder:printcolumn:name="Busy",type=integer,JSONPath=`.status.busyReplicas`,description="Workers holding a task"
// +kubebuilder:printcolumn:name="Backlog",type=integer,JSONPath=`.status.backlog`,description="Queued and running commands of the lanes served"
// +kubebuilder:printcolumn:name="Min",type=integer,JSONPath=`.spec.minReplicas`,priority=1
// +kubebuilder:printcolumn:name="Max",type=integer,JSONPath=`.spec.maxReplicas`,priority=1
// +kubebuilder:printcolumn:name="Autoscaling",type=string,JSONPath=`.spec.autoscaling`,priority=1
// +kubebuilder:printcolumn:name="Last Scale",type=string,JSONPath=`.status.lastScaleReason`,description="Why the replicas last changed"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 40",message="WorkerPool name must be at most 40 characters, so that its Deployment's pod names fit"

// WorkerPool is a pool of worker pods that run the Workers-target tasks of
// some lanes of its namespace, sized by the manager from their backlog or
// by an external autoscaler through the scale subresource.
type WorkerPool struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the pool's desired state.
	// +required
	Spec WorkerPoolSpec `json:"spec"`

	// status is the pool's observed state, written by the manager.
	// +optional
	Status WorkerPoolStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// WorkerPoolList is a list of WorkerPools.
type WorkerPoolList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WorkerPool `json:"items"`
}

func init() {
	SchemeBuilder.Register(&WorkerPool{}, &WorkerPoolList{})
}
