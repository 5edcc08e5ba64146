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
	"errors"
	"fmt"
	"maps"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// TaskLabel carries the name of the ExternalTask a Job runs.
const TaskLabel = "agentlane.io/task"

// WorkerContainerName is the container of a lane's jobTemplate that runs
// the one-shot worker. When the template has no container of that name, the
// first container is used.
const WorkerContainerName = "worker"

// errNoJobTemplate: the lane has no jobTemplate that can make a Job.
var errNoJobTemplate = errors.New("the lane's externalTarget has no usable jobTemplate")

// maxJobName keeps Job names short enough for the job-name label its pods
// carry.
const maxJobName = 63

// jobName names the Job of one attempt of a task: "<task>-<attempt>", or a
// shortened task name and a hash of it when that would be too long.
func jobName(task string, attempt int32) string {
	suffix := "-" + strconv.Itoa(int(attempt))
	if len(task)+len(suffix) <= maxJobName {
		return task + suffix
	}
	sum := sha256.Sum256([]byte(task))
	hash := "-" + hex.EncodeToString(sum[:])[:8]
	return trimName(task[:maxJobName-len(suffix)-len(hash)]) + hash + suffix
}

// trimName drops the characters a name may not end with.
func trimName(s string) string {
	for len(s) > 0 && (s[len(s)-1] == '-' || s[len(s)-1] == '.') {
		s = s[:len(s)-1]
	}
	return s
}

// buildJob makes the Job that runs attempt of task from the lane's template.
// The worker container gets the task to run (--task), its namespace, pod and
// node names and the Job's name, which the one-shot worker fences on; the Job
// is owned by the task. A template without backoffLimit gets 0: retries are
// the lane's business, as new attempts.
func buildJob(task *agentlanev1alpha1.ExternalTask, tmpl *batchv1.JobTemplateSpec, attempt int32, scheme *runtime.Scheme) (*batchv1.Job, error) {
	if tmpl == nil {
		return nil, errNoJobTemplate
	}
	job := &batchv1.Job{
		ObjectMeta: *tmpl.ObjectMeta.DeepCopy(),
		Spec:       *tmpl.Spec.DeepCopy(),
	}
	job.Name, job.Namespace, job.GenerateName = jobName(task.Name, attempt), task.Namespace, ""
	job.ResourceVersion, job.UID = "", ""
	job.Labels = maps.Clone(job.Labels)
	if job.Labels == nil {
		job.Labels = map[string]string{}
	}
	maps.Copy(job.Labels, map[string]string{
		TaskLabel:                    task.Name,
		agentlanev1alpha1.QueueLabel: task.Labels[agentlanev1alpha1.QueueLabel],
		agentlanev1alpha1.LaneLabel:  string(task.Status.Lane),
	})
	if s := task.Labels[agentlanev1alpha1.SessionLabel]; s != "" {
		job.Labels[agentlanev1alpha1.SessionLabel] = s
	}
	if job.Spec.BackoffLimit == nil {
		job.Spec.BackoffLimit = ptr.To[int32](0)
	}
	pod := &job.Spec.Template.Spec
	if len(pod.Containers) == 0 {
		return nil, fmt.Errorf("%w: it has no containers", errNoJobTemplate)
	}
	if pod.RestartPolicy == "" {
		pod.RestartPolicy = corev1.RestartPolicyNever
	}
	RestrictPodSpec(pod)
	c := &pod.Containers[0]
	for i := range pod.Containers {
		if pod.Containers[i].Name == WorkerContainerName {
			c = &pod.Containers[i]
		}
	}
	c.Args = append(c.Args, "--task="+task.Name)
	c.Env = append(c.Env,
		corev1.EnvVar{Name: "JOB_NAME", Value: job.Name},
		fieldEnv("POD_NAME", "metadata.name"),
		fieldEnv("POD_NAMESPACE", "metadata.namespace"),
		fieldEnv("NODE_NAME", "spec.nodeName"),
	)
	if err := controllerutil.SetControllerReference(task, job, scheme); err != nil {
		return nil, fmt.Errorf("own the Job: %w", err)
	}
	return job, nil
}

func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
}

// jobFailure returns why a Job failed, if it did.
func jobFailure(job *batchv1.Job) (string, bool) {
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			return fmt.Sprintf("Job %s failed: %s: %s", job.Name, c.Reason, c.Message), true
		}
	}
	return "", false
}

// jobCompleted returns when a Job completed, if it did.
func jobCompleted(job *batchv1.Job) (metav1.Time, bool) {
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime, true
		}
	}
	return metav1.Time{}, false
}
