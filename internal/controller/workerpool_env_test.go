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
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// A pool's workers get where the manager's traces go and how they are
// sampled, never the exporter's headers or certificates (a collector's
// token), which the tenant could read from the pool's Deployment.
func TestTraceExportEnv(t *testing.T) {
	environ := []string{
		"PATH=/bin",
		"OTEL_EXPORTER_OTLP_HEADERS=authorization=Bearer collector-secret",
		"OTEL_EXPORTER_OTLP_TRACES_HEADERS=x-token=collector-secret",
		"OTEL_EXPORTER_OTLP_CERTIFICATE=/etc/otel/ca.crt",
		"OTEL_EXPORTER_OTLP_CLIENT_KEY=/etc/otel/tls.key",
		"OTEL_TRACES_SAMPLER_ARG=0.25",
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://collector.observability:4318",
		"OTEL_TRACES_SAMPLER=parentbased_traceidratio",
		"OTEL_SERVICE_NAME=agentlane-manager",
		"KUBERNETES_SERVICE_HOST=10.0.0.1",
	}
	got := TraceExportEnv(environ)
	want := []corev1.EnvVar{
		{Name: "OTEL_EXPORTER_OTLP_ENDPOINT", Value: "http://collector.observability:4318"},
		{Name: "OTEL_TRACES_SAMPLER", Value: "parentbased_traceidratio"},
		{Name: "OTEL_TRACES_SAMPLER_ARG", Value: "0.25"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("TraceExportEnv = %v, want %v", got, want)
	}
	if env := TraceExportEnv([]string{"PATH=/bin"}); env != nil {
		t.Fatalf("no trace export in the manager's environment: got %v, want none", env)
	}

	pool := &agentlanev1alpha1.WorkerPool{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "tools"},
		Spec: agentlanev1alpha1.WorkerPoolSpec{Queues: []string{"q"}, Capacity: 2}}
	plain := workerPoolDeployment(pool, 1, "", nil)
	traced := workerPoolDeployment(pool, 1, "", got)
	var worker, runner *corev1.Container
	for i := range traced.Spec.Template.Spec.Containers {
		switch c := &traced.Spec.Template.Spec.Containers[i]; c.Name {
		case "worker":
			worker = c
		case "runner":
			runner = c
		}
	}
	if worker == nil || runner == nil {
		t.Fatalf("the pool's pod lacks its worker or runner container: %+v", traced.Spec.Template.Spec.Containers)
	}
	for _, e := range want {
		if !slices.Contains(worker.Env, e) {
			t.Errorf("the worker container lacks %s: %v", e.Name, worker.Env)
		}
		if slices.ContainsFunc(runner.Env, func(have corev1.EnvVar) bool { return have.Name == e.Name }) {
			t.Errorf("the runner container, where tasks run, has %s", e.Name)
		}
	}
	if plain.Annotations[workerPoolTemplateHash] == traced.Annotations[workerPoolTemplateHash] {
		t.Errorf("the Deployment's template hash does not change with the trace variables: a running pool would keep its old workers")
	}
}
