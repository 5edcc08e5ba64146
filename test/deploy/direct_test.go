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
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/agentlane/agentlane/internal/manifest"
)

// directMount is where a Direct worker's worker container finds the token
// and the CA of its stream.
const directMount = "/var/run/secrets/agentlane.io/direct"

// renderOverlay renders config/default with the kustomize components at
// paths relative to config/, in that order, as a user's overlay does.
func renderOverlay(ctx context.Context, components ...string) []*unstructured.Unstructured {
	GinkgoHelper()
	dir := GinkgoT().TempDir()
	rel := func(p string) string {
		r, err := filepath.Rel(dir, filepath.Join(repoRoot(), "config", p))
		Expect(err).NotTo(HaveOccurred())
		return r
	}
	var paths []string
	for _, c := range components {
		paths = append(paths, rel(c))
	}
	kustomization := "resources: [" + rel("default") + "]\ncomponents: [" + strings.Join(paths, ", ") + "]\n"
	Expect(os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization), 0o644)).To(Succeed())
	kustomize, err := kustomizeBinary()
	Expect(err).NotTo(HaveOccurred())
	out, err := run(exec.CommandContext(ctx, kustomize, "build", dir))
	Expect(err).NotTo(HaveOccurred())
	objs, err := manifest.Decode("kustomize build (config/default + "+strings.Join(components, ", ")+")", out)
	Expect(err).NotTo(HaveOccurred())
	return objs
}

// withoutNamespace drops the Namespace object, which the chart leaves to
// helm --create-namespace.
func withoutNamespace(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() != "Namespace" {
			out = append(out, o)
		}
	}
	return out
}

// workerDeployments returns the worker pools' Deployments among objs.
func workerDeployments(objs []*unstructured.Unstructured) []appsv1.Deployment {
	var out []appsv1.Deployment
	for _, o := range kindOf(objs, "Deployment") {
		if o.GetName() != managerDeployment {
			out = append(out, as[appsv1.Deployment](o))
		}
	}
	return out
}

// directVolume returns the projected volume "direct" of d, nil when it has
// none.
func directVolume(d appsv1.Deployment) *corev1.ProjectedVolumeSource {
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "direct" {
			return v.Projected
		}
	}
	return nil
}

// expectDirectWorker checks that d's workers hold the Direct stream to
// server, with capacity, a token for audience agentlane that lives
// expiration seconds, and the CA from caSource ("secret/<name>" or
// "configmap/<name>"), in the worker container only.
func expectDirectWorker(d appsv1.Deployment, server, capacity string, expiration int64, caSource string) {
	GinkgoHelper()
	w := container(d, "worker")
	Expect(unknownFlags(w, workerFlags)).To(BeEmpty(), "arguments cmd/worker does not define")
	Expect(arg(w, "direct-server")).To(Equal(server), d.Name)
	Expect(arg(w, "direct-capacity")).To(Equal(capacity), d.Name)
	Expect(arg(w, "direct-token-file")).To(Equal(directMount+"/token"), d.Name)
	Expect(arg(w, "direct-ca-file")).To(Equal(directMount+"/ca.crt"), d.Name)
	Expect(mountPaths(w)).To(HaveKeyWithValue(directMount, "direct"), d.Name)
	Expect(w.VolumeMounts).To(ContainElement(And(HaveField("Name", "direct"), HaveField("ReadOnly", true))))

	By("giving the runner, where tasks run, neither the token nor the flags")
	r := container(d, "runner")
	Expect(mountPaths(r)).NotTo(ContainElement("direct"), d.Name)
	for _, a := range r.Args {
		Expect(a).NotTo(HavePrefix("--direct"), d.Name)
	}

	v := directVolume(d)
	Expect(v).NotTo(BeNil(), "%s has no volume direct", d.Name)
	Expect(v.Sources).To(HaveLen(2), d.Name)
	token := v.Sources[0].ServiceAccountToken
	Expect(token).NotTo(BeNil(), d.Name)
	Expect(token.Audience).To(Equal("agentlane"), d.Name)
	Expect(token.Path).To(Equal("token"))
	Expect(token.ExpirationSeconds).To(HaveValue(Equal(expiration)), d.Name)
	kind, name, _ := strings.Cut(caSource, "/")
	Expect(kind).To(Equal("configmap"), "the CA comes from a ConfigMap, never the Secret of the certificate and its key")
	Expect(v.Sources[1].Secret).To(BeNil(), d.Name)
	Expect(v.Sources[1].ConfigMap).NotTo(BeNil(), d.Name)
	Expect(v.Sources[1].ConfigMap.Name).To(Equal(name), d.Name)
	Expect(v.Sources[1].ConfigMap.Items).To(Equal([]corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}), d.Name)
	for _, vol := range d.Spec.Template.Spec.Volumes {
		Expect(vol.Secret).To(BeNil(), "%s mounts the Secret %s", d.Name, vol.Name)
	}
}

var _ = Describe("Direct workers (config/worker/direct, workers.direct in the chart)", func() {
	DescribeTable("the chart renders what config/worker/direct adds to config/default, field by field",
		func(values string, components ...string) {
			want := withoutNamespace(renderOverlay(ctx, components...))
			chart := helmTemplate(values)
			Expect(keys(chart)).To(Equal(keys(want)))
			if diff := cmp.Diff(byKey(want, "app.kubernetes.io/part-of"), byKey(chart, append(helmLabels, "app.kubernetes.io/part-of")...)); diff != "" {
				Fail("the overlay (-) and the chart with " + values + " (+) differ:\n" + diff)
			}
		},
		Entry("workers.direct.enabled", "workers: {direct: {enabled: true}}\n", "worker/direct"),
		Entry("with the NetworkPolicies", "workers: {direct: {enabled: true}}\nnetworkPolicy: {enabled: true}\n",
			"components/network-policy", "worker/direct"),
	)

	It("renders no Direct stream by default", func() {
		for _, d := range workerDeployments(helmTemplate("")) {
			Expect(directVolume(d)).To(BeNil(), d.Name)
			_, ok := argValue(container(d, "worker"), "direct-server")
			Expect(ok).To(BeFalse(), d.Name)
		}
	})

	It("connects the workers to the Session API the manager serves, with a token for audience agentlane and the Session API's CA", func() {
		objs := renderOverlay(ctx, "worker/direct")
		var manager, worker appsv1.Deployment
		for _, o := range kindOf(objs, "Deployment") {
			switch d := as[appsv1.Deployment](o); d.Name {
			case managerDeployment:
				manager = d
			case workerDeployment:
				worker = d
			}
		}
		url := arg(manager.Spec.Template.Spec.Containers[0], "session-api-url")
		expectDirectWorker(worker, url, "8", 3600, "configmap/agentlane-session-api-ca")

		By("pointing at the session-api Service's port")
		for _, o := range kindOf(objs, "Service") {
			if o.GetName() == "agentlane-session-api" {
				Expect(as[corev1.Service](o).Spec.Ports).To(ContainElement(HaveField("Port", int32(8443))))
				Expect(url).To(HavePrefix("https://agentlane-session-api." + namespace + ".svc:8443"))
			}
		}
	})

	It("opens the workers' egress to the manager pods' Session API port, and nothing else more", func() {
		base := kindOf(renderOverlay(ctx, "components/network-policy"), "NetworkPolicy")
		objs := renderOverlay(ctx, "components/network-policy", "worker/direct")
		var managerPods map[string]string
		for _, o := range kindOf(objs, "Deployment") {
			if o.GetName() == managerDeployment {
				managerPods = as[appsv1.Deployment](o).Spec.Template.Labels
			}
		}
		for _, o := range kindOf(objs, "NetworkPolicy") {
			p := as[networkingv1.NetworkPolicy](o)
			i := slices.IndexFunc(base, func(b *unstructured.Unstructured) bool { return b.GetName() == p.Name })
			before := as[networkingv1.NetworkPolicy](base[i])
			if p.Name != "agentlane-worker" {
				Expect(p.Spec).To(Equal(before.Spec), p.Name)
				continue
			}
			Expect(p.Spec.Egress[:len(before.Spec.Egress)]).To(Equal(before.Spec.Egress))
			added := p.Spec.Egress[len(before.Spec.Egress):]
			Expect(added).To(HaveLen(1))
			Expect(added[0].Ports).To(ConsistOf(HaveField("Port", HaveValue(Equal(intstr.FromInt32(8443))))))
			Expect(added[0].To).To(HaveLen(1))
			Expect(added[0].To[0].IPBlock).To(BeNil())
			Expect(added[0].To[0].NamespaceSelector).To(BeNil(), "the manager's namespace only")
			Expect(added[0].To[0].PodSelector.MatchLabels).To(Equal(map[string]string{
				"app.kubernetes.io/name": "agentlane", "app.kubernetes.io/component": "manager"}))
			for k, v := range added[0].To[0].PodSelector.MatchLabels {
				Expect(managerPods).To(HaveKeyWithValue(k, v))
			}
		}
	})

	DescribeTable("takes the CA from the ConfigMap the manager publishes, never from the certificate's Secret, in every TLS mode",
		func(values string) {
			workers := workerDeployments(helmTemplate("workers: {direct: {enabled: true}}\n" + values))
			Expect(workers).To(HaveLen(1))
			expectDirectWorker(workers[0], "https://agentlane-session-api."+namespace+".svc:8443", "8", 3600, "configmap/agentlane-session-api-ca")
		},
		Entry("the certificate the manager generates", ""),
		Entry("an existing Secret", "sessionAPI: {tls: {mode: secret, existingSecret: my-tls}}\n"),
		Entry("cert-manager's certificate", "sessionAPI: {tls: {mode: certManager}}\n"),
	)

	It("renders each pool's Direct settings, a pool's own over workers.direct, in the release's namespace", func() {
		const ns = "direct-test"
		chart := helmTemplateIn(ns, `
sessionAPI: {url: "https://10.96.100.100:8443"}
workers:
  direct: {enabled: true, capacity: 16, tokenExpirationSeconds: 900, caConfigMap: session-api-ca}
  pools:
  - {name: quick, namespace: tenant-a, replicas: 2, capacity: 1, direct: {capacity: 64}}
  - {name: builds, namespace: tenant-a, replicas: 1, capacity: 4, direct: {enabled: false}}
  - {name: other, namespace: tenant-b, replicas: 1, capacity: 4}
`)
		byName := map[string]appsv1.Deployment{}
		for _, d := range workerDeployments(chart) {
			byName[d.Name] = d
		}
		Expect(byName).To(HaveLen(3))
		expectDirectWorker(byName["agentlane-worker-quick"], "https://10.96.100.100:8443", "64", 900, "configmap/session-api-ca")
		expectDirectWorker(byName["agentlane-worker-other"], "https://10.96.100.100:8443", "16", 900, "configmap/session-api-ca")
		builds := byName["agentlane-worker-builds"]
		Expect(directVolume(builds)).To(BeNil())
		_, ok := argValue(container(builds, "worker"), "direct-server")
		Expect(ok).To(BeFalse())
	})

	DescribeTable("refuses to render Direct settings the worker or the API server would refuse",
		func(values, message string) {
			helm, err := helmBinary()
			Expect(err).NotTo(HaveOccurred())
			path := filepath.Join(GinkgoT().TempDir(), "values.yaml")
			Expect(os.WriteFile(path, []byte(values), 0o644)).To(Succeed())
			home := GinkgoT().TempDir()
			cmd := exec.CommandContext(ctx, helm, "template", "agentlane", filepath.Join(repoRoot(), "charts", "agentlane"),
				"--namespace", namespace, "--kube-version", makefileVar("KUBE_VERSION"), "--values", path)
			cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home, "HELM_CACHE_HOME="+home, "HELM_DATA_HOME="+home)
			_, err = run(cmd)
			Expect(err).To(MatchError(ContainSubstring(message)))
		},
		Entry("capacity 0", "workers: {direct: {enabled: true, capacity: 0}}\n", "must be 1 to 1024"),
		Entry("a pool's capacity over 1024", "workers: {direct: {enabled: true}, pools: [{namespace: default, replicas: 1, capacity: 1, direct: {capacity: 1025}}]}\n", "must be 1 to 1024"),
		Entry("a token shorter than the API server allows", "workers: {direct: {enabled: true, tokenExpirationSeconds: 60}}\n", "at least 600"),
	)

	It("gives the workers' identity the right the Session API admits a stream on, in the namespace they serve only", func() {
		installPolicies("")
		user := "system:serviceaccount:" + namespace + ":agentlane-worker"
		groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}
		allowed := func(ns string) bool {
			GinkgoHelper()
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: user, Groups: groups,
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: ns, Verb: "patch", Group: "agentlane.io", Resource: "externaltasks", Subresource: "status"},
			}}
			Expect(k8sClient.Create(ctx, sar)).To(Succeed())
			return sar.Status.Allowed
		}
		// config/default's workers serve the namespace default.
		Eventually(func() bool { return allowed("default") }).Should(BeTrue())
		Expect(allowed("kube-system")).To(BeFalse())
		Expect(allowed(namespace)).To(BeFalse())
	})

	It("applies every object rendered with workers.direct and the NetworkPolicies to the API server (dry run)", func() {
		applyDryRun(helmTemplate("workers: {direct: {enabled: true}}\nnetworkPolicy: {enabled: true}\n"))
	})
})
