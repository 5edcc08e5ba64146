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

// Package controller holds the reconcilers that connect agentlane's custom
// resources to the lane schedulers: LaneQueue builds and updates a scheduler,
// AgentSession binds a session to it, ExternalTask carries External-lane
// work to workers and Jobs, and the delegation controller runs Delegate
// lanes through worker sessions. Setup registers them all with the manager
// and returns the Controllers whose methods the caller binds as the
// schedulers' hooks (scheduling.Hooks) and whose metrics it registers.
package controller

// The manager's permissions, generated into config/rbac/role.yaml.
//
// +kubebuilder:rbac:groups=agentlane.io,resources=lanequeues;agentsessions;externaltasks,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=agentlane.io,resources=externaltasks,verbs=deletecollection
// +kubebuilder:rbac:groups=agentlane.io,resources=lanequeues/status;agentsessions/status;externaltasks/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=agentlane.io,resources=lanequeues/finalizers;agentsessions/finalizers;externaltasks/finalizers,verbs=update
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=pods/eviction,verbs=create
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
