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
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// RestrictPodSpec fills in the settings of the Pod Security Standard
// restricted that a template leaves unset, so that a plain template makes a
// restricted pod (config/policy/manager_workloads.yaml checks that it does
// in a restricted namespace):
//   - the pod runs as non-root (runAsNonRoot true) unless the pod or a
//     container sets runAsUser 0, with the RuntimeDefault seccomp profile;
//   - each container may not escalate its privileges (allowPrivilegeEscalation
//     false) unless it is privileged or adds CAP_SYS_ADMIN, which the API
//     server refuses together with it, and drops every capability
//     (capabilities.drop [ALL]) unless its template lists what to drop.
//
// What a template sets is kept: the admission policies judge it against its
// namespace's level (config/policy/template_security.yaml).
func RestrictPodSpec(spec *corev1.PodSpec) {
	if spec.SecurityContext == nil {
		spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	sc := spec.SecurityContext
	all := make([]*corev1.Container, 0, len(spec.InitContainers)+len(spec.Containers))
	for i := range spec.InitContainers {
		all = append(all, &spec.InitContainers[i])
	}
	for i := range spec.Containers {
		all = append(all, &spec.Containers[i])
	}
	root := ptr.Deref(sc.RunAsUser, 1) == 0
	for _, c := range all {
		if c.SecurityContext != nil && ptr.Deref(c.SecurityContext.RunAsUser, 1) == 0 {
			root = true
		}
	}
	if sc.RunAsNonRoot == nil && !root {
		sc.RunAsNonRoot = ptr.To(true)
	}
	if sc.SeccompProfile == nil {
		sc.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	}
	for _, c := range all {
		restrictContainer(c)
	}
	for i := range spec.EphemeralContainers {
		ec := &spec.EphemeralContainers[i].EphemeralContainerCommon
		if ec.SecurityContext == nil {
			ec.SecurityContext = &corev1.SecurityContext{}
		}
		restrictSecurityContext(ec.SecurityContext)
	}
}

func restrictContainer(c *corev1.Container) {
	if c.SecurityContext == nil {
		c.SecurityContext = &corev1.SecurityContext{}
	}
	restrictSecurityContext(c.SecurityContext)
}

func restrictSecurityContext(sc *corev1.SecurityContext) {
	if sc.Capabilities == nil {
		sc.Capabilities = &corev1.Capabilities{}
	}
	if sc.Capabilities.Drop == nil {
		sc.Capabilities.Drop = []corev1.Capability{"ALL"}
	}
	sysAdmin := slices.ContainsFunc(sc.Capabilities.Add, func(c corev1.Capability) bool {
		return c == "SYS_ADMIN" || c == "CAP_SYS_ADMIN"
	})
	if sc.AllowPrivilegeEscalation == nil && !ptr.Deref(sc.Privileged, false) && !sysAdmin {
		sc.AllowPrivilegeEscalation = ptr.To(false)
	}
}
