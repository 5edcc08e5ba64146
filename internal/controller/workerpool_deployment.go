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
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get;create
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings,verbs=get;create
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=bind,resourceNames=agentlane-worker-role

// A pool's workers run in the pool's namespace as the service account
// WorkerPoolServiceAccount, which the manager creates there and binds,
// there alone, to the workers' ClusterRole. A pool's worker can therefore
// read and write only its own namespace's tasks and Leases, whatever its
// pod template says.
const (
	// WorkerPoolServiceAccount is the service account of every pool's
	// workers in a namespace, and the name of its RoleBinding.
	WorkerPoolServiceAccount = "agentlane-workerpool"
	// DefaultWorkerRole is the workers' ClusterRole as config/default
	// installs it.
	DefaultWorkerRole = "agentlane-worker-role"
	// DefaultWorkerPoolImage is the workers' image when neither the pool
	// nor the manager names one.
	DefaultWorkerPoolImage = "agentlane:dev"

	// workerPoolTemplateHash is the annotation of a pool's Deployment with
	// the hash of the pod template the manager built, so that an unchanged
	// spec writes nothing.
	workerPoolTemplateHash = "agentlane.io/workerpool-template-hash"
)

// workerPoolDeploymentName is the name of pool's Deployment.
func workerPoolDeploymentName(pool *agentlanev1alpha1.WorkerPool) string {
	return "workerpool-" + pool.Name
}

// workerPoolSelector is the label set of a pool's pods.
func workerPoolSelector(pool *agentlanev1alpha1.WorkerPool) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":          "agentlane",
		"app.kubernetes.io/component":     "worker",
		agentlanev1alpha1.WorkerPoolLabel: pool.Name,
	}
}

// workerPoolTemplateProblems lists what spec.podTemplate sets that a
// worker pod does not take (see WorkerPoolSpec.PodTemplate); empty when it
// is acceptable.
func workerPoolTemplateProblems(t *corev1.PodTemplateSpec) []string {
	if t == nil {
		return nil
	}
	var problems []string
	// Keep what the pool may set; anything left over is refused.
	rest := t.Spec.DeepCopy()
	rest.NodeSelector, rest.Affinity, rest.Tolerations = nil, nil, nil
	rest.PriorityClassName, rest.RuntimeClassName = "", nil
	rest.ImagePullSecrets, rest.TopologySpreadConstraints = nil, nil
	for _, c := range rest.Containers {
		if c.Name != "worker" && c.Name != "runner" {
			problems = append(problems, fmt.Sprintf("container %q (only \"worker\" and \"runner\" may be named)", c.Name))
			continue
		}
		left := c.DeepCopy()
		left.Name, left.Resources = "", corev1.ResourceRequirements{}
		if !equality.Semantic.DeepEqual(*left, corev1.Container{}) {
			problems = append(problems, fmt.Sprintf("container %q sets more than resources", c.Name))
		}
	}
	rest.Containers = nil
	if !equality.Semantic.DeepEqual(*rest, corev1.PodSpec{}) {
		problems = append(problems, "spec sets fields other than nodeSelector, affinity, tolerations, priorityClassName, "+
			"runtimeClassName, imagePullSecrets, topologySpreadConstraints and the containers' resources")
	}
	for k := range t.Labels {
		if _, ours := workerPoolSelector(&agentlanev1alpha1.WorkerPool{})[k]; ours {
			problems = append(problems, fmt.Sprintf("label %q (set by the manager)", k))
		}
	}
	return problems
}

// workerPoolDeployment builds the Deployment of pool with replicas:
// config/worker's pod, serving the pool's namespace, queues and lanes, with
// the additions of spec.podTemplate, and env in the worker container.
func workerPoolDeployment(pool *agentlanev1alpha1.WorkerPool, replicas int32, defaultImage string, env []corev1.EnvVar) *appsv1.Deployment {
	image := pool.Spec.Image
	if image == "" {
		image = defaultImage
	}
	if image == "" {
		image = DefaultWorkerPoolImage
	}
	runnerImage := pool.Spec.RunnerImage
	if runnerImage == "" {
		runnerImage = image
	}
	capacity := max(pool.Spec.Capacity, 1)
	sel := workerPoolSelector(pool)
	args := []string{
		"--name=$(POD_NAME)",
		"--node-name=$(NODE_NAME)",
		"--namespace=" + pool.Namespace,
		fmt.Sprintf("--capacity=%d", capacity),
		"--queues=" + strings.Join(pool.Spec.Queues, ","),
		"--lanes=" + strings.Join(pool.Spec.Lanes, ","),
		"--grace-period=25s",
		"--metrics-bind-address=:8080",
		"--runner-socket=/run/agentlane/runner.sock",
		"--metrics-secure=false",
	}
	readOnly := corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	worker := corev1.Container{
		Name:    "worker",
		Image:   image,
		Command: []string{"/worker"},
		Args:    args,
		Env: []corev1.EnvVar{
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
		},
		Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 8080}},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
		},
		SecurityContext: readOnly.DeepCopy(),
		VolumeMounts: []corev1.VolumeMount{
			{Name: "runner-socket", MountPath: "/run/agentlane"},
			{Name: "worker-token", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true},
		},
	}
	worker.Env = append(worker.Env, env...)
	runner := corev1.Container{
		Name:    "runner",
		Image:   runnerImage,
		Command: []string{"/worker", "runner"},
		Args: []string{
			"--socket=/run/agentlane/runner.sock",
			"--task-root=/tmp/tasks",
			"--max-output-bytes=65536",
			"--shutdown-timeout=28s",
		},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
		},
		SecurityContext: readOnly.DeepCopy(),
		WorkingDir:      "/tmp",
		VolumeMounts: []corev1.VolumeMount{
			{Name: "runner-socket", MountPath: "/run/agentlane", ReadOnly: true},
			{Name: "tmp", MountPath: "/tmp"},
		},
	}
	spec := corev1.PodSpec{
		ServiceAccountName:            WorkerPoolServiceAccount,
		AutomountServiceAccountToken:  ptr.To(false),
		EnableServiceLinks:            ptr.To(false),
		ShareProcessNamespace:         ptr.To(false),
		TerminationGracePeriodSeconds: ptr.To[int64](30),
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr.To(true),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
			MaxSkew:           1,
			TopologyKey:       corev1.LabelHostname,
			WhenUnsatisfiable: corev1.ScheduleAnyway,
			LabelSelector:     &metav1.LabelSelector{MatchLabels: sel},
			MatchLabelKeys:    []string{appsv1.DefaultDeploymentUniqueLabelKey},
		}},
		Containers: []corev1.Container{worker, runner},
		Volumes: []corev1.Volume{
			{Name: "runner-socket", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
				Medium: corev1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("1Mi"))}}},
			{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "worker-token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}},
					{ConfigMap: &corev1.ConfigMapProjection{
						LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
						Items:                []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
					{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
						{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
				}}}},
		},
	}
	podMeta := metav1.ObjectMeta{Labels: map[string]string{}}
	if t := pool.Spec.PodTemplate; t != nil {
		podMeta.Labels = maps.Clone(t.Labels)
		if podMeta.Labels == nil {
			podMeta.Labels = map[string]string{}
		}
		podMeta.Annotations = maps.Clone(t.Annotations)
		spec.NodeSelector = t.Spec.NodeSelector
		spec.Affinity = t.Spec.Affinity
		spec.Tolerations = t.Spec.Tolerations
		spec.PriorityClassName = t.Spec.PriorityClassName
		spec.RuntimeClassName = t.Spec.RuntimeClassName
		spec.ImagePullSecrets = t.Spec.ImagePullSecrets
		if len(t.Spec.TopologySpreadConstraints) > 0 {
			spec.TopologySpreadConstraints = t.Spec.TopologySpreadConstraints
		}
		for _, c := range t.Spec.Containers {
			for i := range spec.Containers {
				if spec.Containers[i].Name == c.Name && (len(c.Resources.Requests) > 0 || len(c.Resources.Limits) > 0) {
					spec.Containers[i].Resources = c.Resources
				}
			}
		}
	}
	maps.Copy(podMeta.Labels, sel)
	// The restricted settings, as for every pod agentlane builds.
	RestrictPodSpec(&spec)
	template := corev1.PodTemplateSpec{ObjectMeta: podMeta, Spec: spec}
	sum, _ := json.Marshal(template)
	hash := sha256.Sum256(sum)

	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name:        workerPoolDeploymentName(pool),
			Namespace:   pool.Namespace,
			Labels:      maps.Clone(sel),
			Annotations: map[string]string{workerPoolTemplateHash: hex.EncodeToString(hash[:16])},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: template,
		},
	}
	return d
}

// workerPoolRoleBinding binds role to the pool service account of
// namespace, in namespace only.
func workerPoolRoleBinding(namespace, role string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: WorkerPoolServiceAccount, Namespace: namespace,
			Labels: map[string]string{"app.kubernetes.io/name": "agentlane", "app.kubernetes.io/component": "worker"}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: WorkerPoolServiceAccount, Namespace: namespace}},
	}
}
