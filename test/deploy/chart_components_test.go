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
	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// added returns the objects of objs that base does not have.
func added(objs, base []*unstructured.Unstructured) []*unstructured.Unstructured {
	have := map[string]bool{}
	for _, o := range base {
		have[objectKey(o)] = true
	}
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if !have[objectKey(o)] {
			out = append(out, o)
		}
	}
	return out
}

var _ = Describe("charts/agentlane with the components' values", func() {
	DescribeTable("renders the objects the kustomize component adds to config/default, field by field, and changes nothing else",
		func(values string, components ...string) {
			withComponents, err := renderWithComponents(ctx, components...)
			Expect(err).NotTo(HaveOccurred())
			want := added(withComponents, rendered)
			Expect(want).NotTo(BeEmpty())

			base := helmTemplate("")
			chart := helmTemplate(values)
			got := added(chart, base)
			Expect(keys(got)).To(Equal(keys(want)))
			// The chart labels every object as its own; the components'
			// objects carry no labels.
			if diff := cmp.Diff(byKey(want), byKey(got, append(helmLabels, "app.kubernetes.io/part-of")...)); diff != "" {
				Fail("the components (-) and the chart with " + values + " (+) differ:\n" + diff)
			}
			if diff := cmp.Diff(byKey(base), byKey(added(chart, got))); diff != "" {
				Fail("the chart's other objects changed:\n" + diff)
			}
		},
		Entry("prometheus.enabled: config/components/prometheus", "prometheus: {enabled: true}\n", "prometheus"),
		Entry("networkPolicy.enabled: config/components/network-policy", "networkPolicy: {enabled: true}\n", "network-policy"),
		Entry("both", "prometheus: {enabled: true}\nnetworkPolicy: {enabled: true}\n", "prometheus", "network-policy"),
	)

	It("renders nothing of the components by default", func() {
		chart := helmTemplate("")
		for _, kind := range []string{"ServiceMonitor", "PrometheusRule", "NetworkPolicy"} {
			Expect(kindOf(chart, kind)).To(BeEmpty(), kind)
		}
	})

	It("puts the components' objects and references in the release's namespace, with the values' labels and API server range", func() {
		const ns = "monitoring-test"
		chart := helmTemplateIn(ns, `
prometheus: {enabled: true, labels: {release: kube-prometheus-stack}}
networkPolicy: {enabled: true, apiServerCIDR: 10.96.0.1/32}
`)
		for _, o := range added(chart, helmTemplateIn(ns, "")) {
			if o.GetKind() != "ClusterRoleBinding" {
				Expect(o.GetNamespace()).To(Equal(ns), objectKey(o))
			}
		}
		sm := kindOf(chart, "ServiceMonitor")[0]
		matchNames, _, _ := unstructured.NestedStringSlice(sm.Object, "spec", "namespaceSelector", "matchNames")
		Expect(matchNames).To(Equal([]string{ns}))
		Expect(sm.GetLabels()).To(HaveKeyWithValue("release", "kube-prometheus-stack"))
		Expect(kindOf(chart, "PrometheusRule")[0].GetLabels()).To(HaveKeyWithValue("release", "kube-prometheus-stack"))
		for _, o := range kindOf(chart, "ClusterRoleBinding") {
			if b := as[rbacv1.ClusterRoleBinding](o); b.Name == "agentlane-metrics-scraper" {
				Expect(b.Subjects).To(ConsistOf(HaveField("Namespace", ns)))
			}
		}
		for _, o := range kindOf(chart, "NetworkPolicy") {
			p := as[networkingv1.NetworkPolicy](o)
			Expect(p.Labels).NotTo(HaveKey("release"), "the Prometheus labels are for the Prometheus objects")
			for _, rule := range p.Spec.Egress {
				Expect(rule.To).To(ConsistOf(HaveField("IPBlock.CIDR", "10.96.0.1/32")), p.Name)
			}
		}
	})

	It("scrapes plain HTTP without the token when metrics.secure is off", func() {
		chart := helmTemplate("prometheus: {enabled: true}\nmetrics: {secure: false}\n")
		endpoints, _, _ := unstructured.NestedSlice(kindOf(chart, "ServiceMonitor")[0].Object, "spec", "endpoints")
		Expect(endpoints).To(HaveLen(2))
		for _, e := range endpoints {
			ep := e.(map[string]any)
			Expect(ep).To(HaveKeyWithValue("scheme", "http"))
			Expect(ep).NotTo(HaveKey("authorization"))
			Expect(ep).NotTo(HaveKey("tlsConfig"))
		}
	})

	It("applies the NetworkPolicies to the API server (dry run)", func() {
		applyDryRun(kindOf(helmTemplate("networkPolicy: {enabled: true}\n"), "NetworkPolicy"))
	})
})
