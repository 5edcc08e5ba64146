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

package deploy

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// otelEnv returns, per Deployment and container, the OTEL_* variables of
// the rendered objects.
func otelEnv(objs []*unstructured.Unstructured) map[string][]corev1.EnvVar {
	GinkgoHelper()
	out := map[string][]corev1.EnvVar{}
	for _, o := range kindOf(objs, "Deployment") {
		d := as[appsv1.Deployment](o)
		for _, c := range d.Spec.Template.Spec.Containers {
			for _, e := range c.Env {
				if strings.HasPrefix(e.Name, "OTEL_") {
					key := d.Name + "/" + c.Name
					out[key] = append(out[key], e)
				}
			}
		}
	}
	return out
}

var _ = Describe("charts/agentlane's tracing values", func() {
	It("sets no OTEL_* variable by default: tracing is off", func() {
		Expect(otelEnv(helmTemplate(""))).To(BeEmpty())
	})

	It("gives the manager and the workers the collector and the sampler, never the runner where tasks run", func() {
		env := otelEnv(helmTemplate(`
tracing:
  otlpEndpoint: http://otel-collector.observability:4318
  sampler: parentbased_traceidratio
  samplerArg: "0.1"
`))
		want := []corev1.EnvVar{
			{Name: "OTEL_EXPORTER_OTLP_ENDPOINT", Value: "http://otel-collector.observability:4318"},
			{Name: "OTEL_TRACES_SAMPLER", Value: "parentbased_traceidratio"},
			{Name: "OTEL_TRACES_SAMPLER_ARG", Value: "0.1"},
		}
		Expect(env).To(HaveKeyWithValue("agentlane-controller-manager/manager", want))
		Expect(env).To(HaveKeyWithValue("agentlane-worker/worker", want))
		Expect(env).To(HaveLen(2), "only the manager and worker containers: %v", env)
	})
})
