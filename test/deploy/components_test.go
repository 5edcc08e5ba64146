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
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/agentlane/agentlane/internal/manifest"
)

// renderWithComponents renders config/default with the named components of
// config/components, as a user's overlay does.
func renderWithComponents(ctx context.Context, components ...string) ([]*unstructured.Unstructured, error) {
	dir, err := os.MkdirTemp("", "agentlane-overlay-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	base, err := filepath.Rel(dir, filepath.Join(repoRoot(), "config", "default"))
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, c := range components {
		p, err := filepath.Rel(dir, filepath.Join(repoRoot(), "config", "components", c))
		if err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	kustomization := "resources: [" + base + "]\ncomponents: [" + strings.Join(paths, ", ") + "]\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		return nil, err
	}
	kustomize, err := kustomizeBinary()
	if err != nil {
		return nil, err
	}
	out, err := run(exec.CommandContext(ctx, kustomize, "build", dir))
	if err != nil {
		return nil, err
	}
	return manifest.Decode("kustomize build (config/default + "+strings.Join(components, ", ")+")", out)
}

// labelRef is a label an alert's annotation shows: {{ $labels.lane }}.
var labelRef = regexp.MustCompile(`\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)`)

// TestPrometheusRuleNamesRegisteredMetrics checks that every agentlane
// series the alerts of config/components/prometheus query is one the
// manager or the workers register: an alert on a renamed metric would never
// fire.
func TestPrometheusRuleNamesRegisteredMetrics(t *testing.T) {
	registered := registeredMetrics(t)
	objs, err := renderWithComponents(context.Background(), "prometheus")
	if err != nil {
		t.Fatal(err)
	}
	var alerts int
	for _, o := range objs {
		if o.GetKind() != "PrometheusRule" {
			continue
		}
		groups, _, _ := unstructured.NestedSlice(o.Object, "spec", "groups")
		for _, g := range groups {
			rules, _ := g.(map[string]any)["rules"].([]any)
			for _, r := range rules {
				rule := r.(map[string]any)
				expr, _ := rule["expr"].(string)
				_, problems := queryProblems(expr, registered)
				for _, p := range problems {
					t.Errorf("alert %v %s: %s", rule["alert"], p, expr)
				}
				// The annotations may show only labels the expression keeps.
				kept := groupingLabels(expr)
				annotations, _ := rule["annotations"].(map[string]any)
				for _, text := range annotations {
					for _, ref := range labelRef.FindAllStringSubmatch(fmt.Sprint(text), -1) {
						if !slices.Contains(kept, ref[1]) {
							t.Errorf("alert %v shows $labels.%s, which its expression drops (it keeps %v)", rule["alert"], ref[1], kept)
						}
					}
				}
				alerts++
			}
		}
	}
	if alerts < 4 {
		t.Fatalf("the PrometheusRule has %d alerts; want dead letters, pressure, critical depth and no live workers", alerts)
	}
}

var _ = Describe("config/components/prometheus", Ordered, func() {
	var objs []*unstructured.Unstructured
	BeforeAll(func() {
		var err error
		objs, err = renderWithComponents(ctx, "prometheus")
		Expect(err).NotTo(HaveOccurred())
	})

	It("scrapes the manager over HTTPS with the token of a service account bound to the metrics reader, and the workers over plain HTTP", func() {
		monitors := kindOf(objs, "ServiceMonitor")
		Expect(monitors).To(HaveLen(1))
		sm := monitors[0]
		Expect(sm.GetNamespace()).To(Equal(namespace))
		matchLabels, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
		var scraped []string
		for _, o := range kindOf(objs, "Service") {
			svc := as[corev1.Service](o)
			if labels.SelectorFromSet(matchLabels).Matches(labels.Set(svc.Labels)) &&
				len(svc.Spec.Ports) > 0 && (svc.Spec.Ports[0].Name == "metrics" || svc.Spec.Ports[0].Name == "http-metrics") {
				scraped = append(scraped, svc.Name)
			}
		}
		Expect(scraped).To(ConsistOf("agentlane-controller-manager-metrics", "agentlane-worker-metrics"))

		endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		Expect(endpoints).To(HaveLen(2))
		workers := endpoints[1].(map[string]any)
		Expect(workers).To(HaveKeyWithValue("port", "http-metrics"))
		Expect(workers).To(HaveKeyWithValue("scheme", "http"))
		Expect(workers).NotTo(HaveKey("authorization"), "the workers hold no right to review a token")
		Expect(workers).NotTo(HaveKeyWithValue("honorLabels", true))
		ep := endpoints[0].(map[string]any)
		Expect(ep).To(HaveKeyWithValue("port", "metrics"))
		Expect(ep).To(HaveKeyWithValue("scheme", "https"))
		// A scraped process may not overwrite its job or instance labels.
		Expect(ep).NotTo(HaveKeyWithValue("honorLabels", true))
		secret, _, _ := unstructured.NestedString(ep, "authorization", "credentials", "name")
		key, _, _ := unstructured.NestedString(ep, "authorization", "credentials", "key")
		Expect(key).To(Equal("token"))

		By("keeping the token in a service-account token Secret of an account bound to agentlane-metrics-reader")
		var tokenSecret *corev1.Secret
		for _, o := range kindOf(objs, "Secret") {
			if o.GetName() == secret && o.GetNamespace() == sm.GetNamespace() {
				s := as[corev1.Secret](o)
				tokenSecret = &s
			}
		}
		Expect(tokenSecret).NotTo(BeNil(), "the Secret %s the ServiceMonitor names is not rendered", secret)
		Expect(tokenSecret.Type).To(Equal(corev1.SecretTypeServiceAccountToken))
		account := tokenSecret.Annotations[corev1.ServiceAccountNameKey]
		Expect(find("ClusterRole", "agentlane-metrics-reader")).NotTo(BeNil())
		var bound bool
		for _, o := range kindOf(objs, "ClusterRoleBinding") {
			b := o.Object
			ref, _, _ := unstructured.NestedString(b, "roleRef", "name")
			subjects, _, _ := unstructured.NestedSlice(b, "subjects")
			for _, s := range subjects {
				s := s.(map[string]any)
				if ref == "agentlane-metrics-reader" && s["name"] == account && s["namespace"] == tokenSecret.Namespace {
					bound = true
				}
			}
		}
		Expect(bound).To(BeTrue(), "service account %s is not bound to agentlane-metrics-reader", account)

		By("applying the scraper's account, token Secret and binding to the API server (dry run)")
		var plain []*unstructured.Unstructured
		for _, o := range objs {
			if o.GetKind() != "ServiceMonitor" && o.GetKind() != "PrometheusRule" {
				plain = append(plain, o)
			}
		}
		applyDryRun(plain)
	})

	It("alerts on dead letters, pressure, critical depth and missing workers", func() {
		rules := kindOf(objs, "PrometheusRule")
		Expect(rules).To(HaveLen(1))
		groups, _, _ := unstructured.NestedSlice(rules[0].Object, "spec", "groups")
		var names []string
		for _, g := range groups {
			for _, r := range g.(map[string]any)["rules"].([]any) {
				r := r.(map[string]any)
				Expect(r).To(HaveKey("expr"))
				Expect(r).To(HaveKey("labels"))
				names = append(names, r["alert"].(string))
			}
		}
		Expect(names).To(ContainElements("AgentlaneDeadLettersGrowing", "AgentlaneQueueUnderPressure", "AgentlaneQueueCritical", "AgentlaneNoLiveWorkers"))
	})
})

var _ = Describe("config/components/network-policy", Ordered, func() {
	var objs []*unstructured.Unstructured
	policy := func(name string) networkingv1.NetworkPolicy {
		GinkgoHelper()
		for _, o := range kindOf(objs, "NetworkPolicy") {
			if o.GetName() == name {
				return as[networkingv1.NetworkPolicy](o)
			}
		}
		Fail("NetworkPolicy " + name + " is not rendered")
		return networkingv1.NetworkPolicy{}
	}
	selects := func(p networkingv1.NetworkPolicy, deployment string) bool {
		GinkgoHelper()
		s, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
		Expect(err).NotTo(HaveOccurred())
		return s.Matches(labels.Set(deploymentOf(deployment).Spec.Template.Labels))
	}

	BeforeAll(func() {
		var err error
		objs, err = renderWithComponents(ctx, "network-policy")
		Expect(err).NotTo(HaveOccurred())
	})

	It("applies its NetworkPolicies to the API server (dry run)", func() {
		Expect(kindOf(objs, "NetworkPolicy")).To(HaveLen(2))
		applyDryRun(kindOf(objs, "NetworkPolicy"))
	})

	It("lets in the manager's Session API and metrics, by the ports its container names", func() {
		p := policy("agentlane-controller-manager")
		Expect(selects(p, managerDeployment)).To(BeTrue())
		Expect(selects(p, workerDeployment)).To(BeFalse())
		_, c := deployment(managerDeployment)
		var ports []string
		for _, rule := range p.Spec.Ingress {
			for _, port := range rule.Ports {
				containerPort(c, port.Port.StrVal)
				ports = append(ports, port.Port.StrVal)
			}
		}
		Expect(ports).To(ContainElements("session-api", "metrics"))
	})

	It("lets the worker pods, runner included, reach nothing but the API server's ports", func() {
		p := policy("agentlane-worker")
		Expect(selects(p, workerDeployment)).To(BeTrue())
		Expect(selects(p, managerDeployment)).To(BeFalse())
		Expect(p.Spec.PolicyTypes).To(ContainElement(networkingv1.PolicyTypeEgress))
		Expect(p.Spec.Egress).To(HaveLen(1))
		var ports []int32
		for _, port := range p.Spec.Egress[0].Ports {
			Expect(port.Protocol).To(HaveValue(Equal(corev1.ProtocolTCP)))
			ports = append(ports, port.Port.IntVal)
		}
		Expect(ports).To(ConsistOf(int32(443), int32(6443)), "the API server's Service port and its usual endpoint port")
		for _, rule := range p.Spec.Ingress {
			for _, port := range rule.Ports {
				Expect(port.Port.StrVal).To(Equal("metrics"))
			}
		}
	})
})
