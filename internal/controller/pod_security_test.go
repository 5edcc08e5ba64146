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
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// restricted is what a container of a plain template gets.
var restricted = &corev1.SecurityContext{
	AllowPrivilegeEscalation: ptr.To(false),
	Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
}

// restrictedPod is what a plain template's pod gets.
var restrictedPod = &corev1.PodSecurityContext{
	RunAsNonRoot:   ptr.To(true),
	SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
}

func TestRestrictPodSpecFillsTheRestrictedSettings(t *testing.T) {
	spec := corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "setup", Image: "a"}},
		Containers:     []corev1.Container{{Name: "agent", Image: "a"}},
	}
	RestrictPodSpec(&spec)
	if d := cmp.Diff(restrictedPod, spec.SecurityContext); d != "" {
		t.Errorf("pod security context (-want +got):\n%s", d)
	}
	for _, c := range append(spec.InitContainers, spec.Containers...) {
		if d := cmp.Diff(restricted, c.SecurityContext); d != "" {
			t.Errorf("container %s (-want +got):\n%s", c.Name, d)
		}
	}
}

func TestRestrictPodSpecKeepsWhatATemplateSets(t *testing.T) {
	spec := corev1.PodSpec{
		SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](0),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("p.json")}},
		Containers: []corev1.Container{
			{Name: "priv", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}},
			{Name: "admin", SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}}},
			{Name: "escalates", SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(true),
				Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"NET_RAW"}}}},
		},
	}
	RestrictPodSpec(&spec)
	if spec.SecurityContext.RunAsNonRoot != nil {
		t.Errorf("runAsNonRoot set on a pod that runs as user 0: the kubelet would refuse to start it")
	}
	if spec.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeLocalhost {
		t.Errorf("seccomp profile replaced: %v", spec.SecurityContext.SeccompProfile)
	}
	for _, c := range spec.Containers[:2] {
		if c.SecurityContext.AllowPrivilegeEscalation != nil {
			t.Errorf("container %s: allowPrivilegeEscalation false set, which the API server refuses with privileged or SYS_ADMIN", c.Name)
		}
	}
	if e := spec.Containers[2].SecurityContext; !*e.AllowPrivilegeEscalation || !cmp.Equal(e.Capabilities.Drop, []corev1.Capability{"NET_RAW"}) {
		t.Errorf("container escalates: the template's settings were replaced: %+v", e)
	}
}

func TestRuntimePodsAndJobsAreBuiltRestricted(t *testing.T) {
	tmpl := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "a"}}}}
	s := &agentlanev1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}}
	s.Spec.Runtime = &agentlanev1alpha1.SessionRuntime{PodTemplate: *tmpl.DeepCopy()}
	pod := (&AgentSessionReconciler{}).newRuntimePod(s, nil)
	if d := cmp.Diff(restrictedPod, pod.Spec.SecurityContext); d != "" {
		t.Errorf("runtime pod (-want +got):\n%s", d)
	}
	if d := cmp.Diff(restricted, pod.Spec.Containers[0].SecurityContext); d != "" {
		t.Errorf("runtime pod's container (-want +got):\n%s", d)
	}

	scheme := runtime.NewScheme()
	if err := agentlanev1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	task := &agentlanev1alpha1.ExternalTask{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "t", UID: "u"}}
	job, err := buildJob(task, &batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: *tmpl.DeepCopy()}}, 1, scheme)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(restrictedPod, job.Spec.Template.Spec.SecurityContext); d != "" {
		t.Errorf("Job's pod (-want +got):\n%s", d)
	}
	if d := cmp.Diff(restricted, job.Spec.Template.Spec.Containers[0].SecurityContext); d != "" {
		t.Errorf("Job's container (-want +got):\n%s", d)
	}
}
