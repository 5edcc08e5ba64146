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
	"regexp"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// TestTemplateHash: a template's hash is a label value that depends on
// everything the pod gets from the template, and not on how a quantity or
// a map was written.
func TestTemplateHash(t *testing.T) {
	base := func() *corev1.PodTemplateSpec {
		tmpl := agentTemplate("agent:1")
		tmpl.Annotations = map[string]string{"a": "1", "b": "2"}
		tmpl.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
		return &tmpl
	}
	want := TemplateHash(base())
	if !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(want) {
		t.Fatalf("TemplateHash = %q, want 16 hex digits", want)
	}
	same := map[string]func(*corev1.PodTemplateSpec){
		"the same template": func(*corev1.PodTemplateSpec) {},
		"a quantity written otherwise": func(p *corev1.PodTemplateSpec) {
			p.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory] = resource.MustParse("1024Mi")
		},
		"annotations written in another order": func(p *corev1.PodTemplateSpec) {
			p.Annotations = map[string]string{"b": "2", "a": "1"}
		},
	}
	for name, mutate := range same {
		t.Run(name, func(t *testing.T) {
			tmpl := base()
			mutate(tmpl)
			// As the API server hands it back: decoded from its JSON.
			b, err := yaml.Marshal(tmpl)
			if err != nil {
				t.Fatal(err)
			}
			decoded := &corev1.PodTemplateSpec{}
			if err := yaml.Unmarshal(b, decoded); err != nil {
				t.Fatal(err)
			}
			if got := TemplateHash(decoded); got != want {
				t.Errorf("TemplateHash = %s, want %s", got, want)
			}
		})
	}
	differs := map[string]func(*corev1.PodTemplateSpec){
		"another image":      func(p *corev1.PodTemplateSpec) { p.Spec.Containers[0].Image = "agent:2" },
		"another label":      func(p *corev1.PodTemplateSpec) { p.Labels["tier"] = "gold" },
		"another annotation": func(p *corev1.PodTemplateSpec) { p.Annotations["a"] = "3" },
		"another service account": func(p *corev1.PodTemplateSpec) {
			p.Spec.ServiceAccountName = "reviewer"
		},
		"a name in the template's metadata": func(p *corev1.PodTemplateSpec) {
			p.ObjectMeta = metav1.ObjectMeta{Name: "x", Labels: p.Labels, Annotations: p.Annotations}
		},
	}
	for name, mutate := range differs {
		t.Run(name, func(t *testing.T) {
			tmpl := base()
			mutate(tmpl)
			if got := TemplateHash(tmpl); got == want {
				t.Errorf("TemplateHash = %s for a different template", got)
			}
		})
	}
}
