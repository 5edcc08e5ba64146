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
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentlane/agentlane/internal/manifest"
)

// helmLabels are the labels the chart adds to config/default's.
var helmLabels = []string{"helm.sh/chart", "app.kubernetes.io/managed-by"}

// helmBinary is $HELM (set by `make test`), else the bin/helm-<version>
// that `make helm` builds.
func helmBinary() (string, error) { return toolBinary("helm") }

// makefileVar returns the value the Makefile gives name with ?=.
func makefileVar(name string) string {
	GinkgoHelper()
	makefile, err := os.ReadFile(filepath.Join(repoRoot(), "Makefile"))
	Expect(err).NotTo(HaveOccurred())
	m := regexp.MustCompile(`(?m)^` + name + ` \?= (\S+)$`).FindSubmatch(makefile)
	Expect(m).NotTo(BeNil(), "the Makefile sets no %s", name)
	return string(m[1])
}

// helmTemplate renders charts/agentlane, its CRDs included, into namespace
// as `helm install -n <namespace>` would, with the values of valuesYAML
// (none when empty).
func helmTemplate(valuesYAML string) []*unstructured.Unstructured {
	GinkgoHelper()
	return helmTemplateIn(namespace, valuesYAML)
}

// helmTemplateIn is helmTemplate for a release in namespace ns.
func helmTemplateIn(ns, valuesYAML string) []*unstructured.Unstructured {
	GinkgoHelper()
	helm, err := helmBinary()
	Expect(err).NotTo(HaveOccurred())
	// The chart requires a Kubernetes version (kubeVersion), and a Helm built
	// with go install assumes an old one: render for the Kubernetes the
	// envtest control plane is built from.
	version := makefileVar("KUBE_VERSION")
	args := []string{"template", "agentlane", filepath.Join(repoRoot(), "charts", "agentlane"),
		"--namespace", ns, "--include-crds", "--kube-version", version}
	if valuesYAML != "" {
		values := filepath.Join(GinkgoT().TempDir(), "values.yaml")
		Expect(os.WriteFile(values, []byte(valuesYAML), 0o644)).To(Succeed())
		args = append(args, "--values", values)
	}
	cmd := exec.CommandContext(ctx, helm, args...)
	// No repositories, no plugins, no cache of the user's: helm template
	// reads only the chart.
	home := GinkgoT().TempDir()
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home, "HELM_CACHE_HOME="+home, "HELM_DATA_HOME="+home)
	out, err := run(cmd)
	Expect(err).NotTo(HaveOccurred())
	objs, err := manifest.Decode("helm template charts/agentlane", out)
	Expect(err).NotTo(HaveOccurred())
	Expect(objs).NotTo(BeEmpty())
	return objs
}

// applyDryRun creates the Namespaces and CRDs among objs and the extra
// namespaces for real, then applies every object with server-side apply as a
// dry run and fails with every refusal.
func applyDryRun(objs []*unstructured.Unstructured, namespaces ...string) {
	GinkgoHelper()
	for _, ns := range namespaces {
		Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
	}
	Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}))).To(Succeed())
	var crds []string
	for _, o := range objs {
		switch o.GetKind() {
		case "CustomResourceDefinition":
			crds = append(crds, o.GetName())
		case "Namespace":
		default:
			continue
		}
		Expect(k8sClient.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), fieldOwner, client.ForceOwnership)).To(Succeed(), "%s %s", o.GetKind(), o.GetName())
	}
	for _, name := range crds {
		Eventually(func(g Gomega) {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: name}, crd)).To(Succeed())
			g.Expect(crd.Status.Conditions).To(ContainElement(And(
				HaveField("Type", apiextensionsv1.Established),
				HaveField("Status", apiextensionsv1.ConditionTrue),
			)), name)
		}).WithTimeout(30 * time.Second).Should(Succeed())
	}
	var errs []error
	for _, o := range objs {
		err := k8sClient.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), fieldOwner, client.ForceOwnership, client.DryRunAll)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err))
		}
	}
	Expect(errors.Join(errs...)).NotTo(HaveOccurred())
}

// sortContainers orders the containers of the Deployments among objs by
// name.
func sortContainers(objs []*unstructured.Unstructured) {
	GinkgoHelper()
	for _, o := range kindOf(objs, "Deployment") {
		containers, _, err := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		Expect(err).NotTo(HaveOccurred())
		slices.SortFunc(containers, func(a, b any) int {
			return strings.Compare(a.(map[string]any)["name"].(string), b.(map[string]any)["name"].(string))
		})
		Expect(unstructured.SetNestedSlice(o.Object, containers, "spec", "template", "spec", "containers")).To(Succeed())
	}
}

// objectKey names an object by kind, namespace and name.
func objectKey(o *unstructured.Unstructured) string {
	return o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
}

// byKey indexes objs by objectKey, each object without the labels drop.
func byKey(objs []*unstructured.Unstructured, drop ...string) map[string]map[string]any {
	GinkgoHelper()
	m := map[string]map[string]any{}
	for _, o := range objs {
		o = o.DeepCopy()
		l := o.GetLabels()
		for _, k := range drop {
			delete(l, k)
		}
		if len(l) == 0 {
			l = nil
		}
		o.SetLabels(l)
		Expect(m).NotTo(HaveKey(objectKey(o)), "rendered twice")
		m[objectKey(o)] = o.Object
	}
	return m
}

// keys lists the objects of objs by objectKey.
func keys(objs []*unstructured.Unstructured) []string {
	var k []string
	for _, o := range objs {
		k = append(k, objectKey(o))
	}
	slices.Sort(k)
	return k
}

// kindOf returns the objects of objs of kind.
func kindOf(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

var _ = Describe("make build-installer (hack/render.sh)", Ordered, func() {
	const (
		img       = "registry.example/agentlane:v1.2.3"
		workerImg = "registry.example/agentlane-shell:v1.2.3"
	)
	var installer []*unstructured.Unstructured

	BeforeAll(func() {
		kustomize, err := kustomizeBinary()
		Expect(err).NotTo(HaveOccurred())
		cmd := exec.CommandContext(ctx, filepath.Join(repoRoot(), "hack", "render.sh"), img, workerImg)
		cmd.Env = append(os.Environ(), "KUSTOMIZE="+kustomize)
		out, err := run(cmd)
		Expect(err).NotTo(HaveOccurred())
		installer, err = manifest.Decode("hack/render.sh", out)
		Expect(err).NotTo(HaveOccurred())
	})

	It("writes config/default's objects, with IMG in every container but the runner's, which runs WORKER_IMG", func() {
		Expect(keys(installer)).To(Equal(keys(rendered)))
		deployments := kindOf(installer, "Deployment")
		Expect(deployments).To(HaveLen(2))
		for _, o := range deployments {
			d := as[appsv1.Deployment](o)
			for _, c := range d.Spec.Template.Spec.Containers {
				want := img
				if d.Name == workerDeployment && c.Name == "runner" {
					want = workerImg
				}
				Expect(c.Image).To(Equal(want), "image of %s in %s", c.Name, d.Name)
			}
		}
	})

	It("applies every object to the API server with server-side apply (dry run)", func() {
		applyDryRun(installer)
	})
})

var _ = Describe("charts/agentlane", func() {
	It("renders config/default's objects with the default values, the Namespace left to helm --create-namespace", func() {
		chart := helmTemplate("")
		var want []*unstructured.Unstructured
		for _, o := range rendered {
			if o.GetKind() != "Namespace" {
				want = append(want, o)
			}
		}
		Expect(keys(chart)).To(Equal(keys(want)))
		for _, o := range chart {
			for _, l := range helmLabels {
				if o.GetKind() != "CustomResourceDefinition" {
					Expect(o.GetLabels()).To(HaveKey(l), objectKey(o))
				}
			}
		}
		// The chart's crds/ are copies of config/crd/bases, which Helm does
		// not template: they lack the part-of label kustomize adds.
		if diff := cmp.Diff(byKey(want, "app.kubernetes.io/part-of"), byKey(chart, append(helmLabels, "app.kubernetes.io/part-of")...)); diff != "" {
			Fail("config/default (-) and the chart with default values (+) differ:\n" + diff)
		}
		for _, o := range chart {
			if o.GetKind() != "CustomResourceDefinition" {
				Expect(o.GetLabels()).To(HaveKeyWithValue("app.kubernetes.io/part-of", "agentlane"), objectKey(o))
			}
		}
	})

	It("renders test/cluster/overlay's objects with test/cluster/values.yaml, but for the second manager replica", func() {
		// The real-cluster suite installs the chart with these values and
		// dry-runs the overlay: both must be the same agentlane.
		kustomize, err := kustomizeBinary()
		Expect(err).NotTo(HaveOccurred())
		out, err := run(exec.CommandContext(ctx, kustomize, "build", filepath.Join(repoRoot(), "test", "cluster", "overlay")))
		Expect(err).NotTo(HaveOccurred())
		overlay, err := manifest.Decode("kustomize build test/cluster/overlay", out)
		Expect(err).NotTo(HaveOccurred())
		var want []*unstructured.Unstructured
		for _, o := range overlay {
			if o.GetKind() != "Namespace" {
				want = append(want, o)
			}
		}
		values, err := os.ReadFile(filepath.Join(repoRoot(), "test", "cluster", "values.yaml"))
		Expect(err).NotTo(HaveOccurred())
		chart := helmTemplate(string(values))
		for _, o := range kindOf(chart, "Deployment") {
			if o.GetName() == managerDeployment {
				Expect(as[appsv1.Deployment](o).Spec.Replicas).To(HaveValue(Equal(int32(2))))
				// Decoded YAML numbers are float64s.
				Expect(unstructured.SetNestedField(o.Object, float64(1), "spec", "replicas")).To(Succeed())
			}
		}
		Expect(keys(chart)).To(Equal(keys(want)))
		// kustomize's patch of the runner's image moves the runner to the
		// front of the worker's containers; the order means nothing here.
		sortContainers(want)
		sortContainers(chart)
		if diff := cmp.Diff(byKey(want, "app.kubernetes.io/part-of"), byKey(chart, append(helmLabels, "app.kubernetes.io/part-of")...)); diff != "" {
			Fail("test/cluster/overlay (-) and the chart with test/cluster/values.yaml (+) differ:\n" + diff)
		}
	})

	It("applies every object rendered with the default values to the API server (dry run)", func() {
		applyDryRun(helmTemplate(""))
	})

	It("renders a Deployment and a binding of the worker role per worker pool, in the namespace each serves", func() {
		chart := helmTemplate(`
image: {repository: registry.example/agentlane, tag: v2}
workers:
  runnerImage: {repository: registry.example/agentlane-shell, tag: v2}
  pools:
  - name: builds
    namespace: tenant-builds
    replicas: 5
    capacity: 8
    labels: {example.com/team: builds}
  - name: chat
    namespace: tenant-chat
    replicas: 2
    capacity: 1
    runnerImage: {repository: registry.example/agentlane-chat, tag: v3}
`)
		applyDryRun(chart, "tenant-builds", "tenant-chat")

		deployments := kindOf(chart, "Deployment")
		Expect(keys(deployments)).To(ConsistOf(
			"Deployment "+namespace+"/"+managerDeployment,
			"Deployment "+namespace+"/agentlane-worker-builds",
			"Deployment "+namespace+"/agentlane-worker-chat"))
		type pool struct {
			namespace string
			replicas  int32
			capacity  string
			runner    string
		}
		want := map[string]pool{
			"agentlane-worker-builds": {"tenant-builds", 5, "8", "registry.example/agentlane-shell:v2"},
			"agentlane-worker-chat":   {"tenant-chat", 2, "1", "registry.example/agentlane-chat:v3"},
		}
		var pools []appsv1.Deployment
		for _, o := range deployments {
			d := as[appsv1.Deployment](o)
			if d.Name == managerDeployment {
				Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal("registry.example/agentlane:v2"))
				continue
			}
			pools = append(pools, d)
			p := want[d.Name]
			w := container(d, "worker")
			Expect(arg(w, "namespace")).To(Equal(p.namespace), d.Name)
			Expect(arg(w, "capacity")).To(Equal(p.capacity), d.Name)
			Expect(d.Spec.Replicas).To(HaveValue(Equal(p.replicas)), d.Name)
			Expect(w.Image).To(Equal("registry.example/agentlane:v2"), d.Name)
			Expect(container(d, "runner").Image).To(Equal(p.runner), d.Name)
			Expect(unknownFlags(w, workerFlags)).To(BeEmpty())
			Expect(d.Spec.Template.Spec.ServiceAccountName).To(Equal("agentlane-worker"))
		}
		builds := pools[slices.IndexFunc(pools, func(d appsv1.Deployment) bool { return d.Name == "agentlane-worker-builds" })]
		Expect(builds.Spec.Template.Labels).To(HaveKeyWithValue("example.com/team", "builds"))

		By("keeping each pool's pods out of the other's selector and spread")
		for _, d := range pools {
			for _, other := range pools {
				selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
				Expect(err).NotTo(HaveOccurred())
				Expect(selector.Matches(labels.Set(other.Spec.Template.Labels))).To(Equal(d.Name == other.Name), "%s selects the pods of %s", d.Name, other.Name)
				spread, err := metav1.LabelSelectorAsSelector(d.Spec.Template.Spec.TopologySpreadConstraints[0].LabelSelector)
				Expect(err).NotTo(HaveOccurred())
				Expect(spread.Matches(labels.Set(other.Spec.Template.Labels))).To(Equal(d.Name == other.Name), "%s spreads with the pods of %s", d.Name, other.Name)
			}
		}

		By("binding the worker role in each pool's namespace, and nowhere else")
		var bound []string
		for _, o := range kindOf(chart, "RoleBinding") {
			b := as[rbacv1.RoleBinding](o)
			if b.RoleRef.Name != "agentlane-worker-role" {
				continue
			}
			Expect(b.RoleRef.Kind).To(Equal("ClusterRole"))
			Expect(b.Subjects).To(ConsistOf(rbacv1.Subject{Kind: "ServiceAccount", Name: "agentlane-worker", Namespace: namespace}))
			bound = append(bound, b.Namespace)
		}
		Expect(bound).To(ConsistOf("tenant-builds", "tenant-chat"))

		By("scraping every pool through the one worker metrics Service")
		services := kindOf(chart, "Service")
		i := slices.IndexFunc(services, func(o *unstructured.Unstructured) bool { return o.GetName() == "agentlane-worker-metrics" })
		Expect(i).NotTo(Equal(-1))
		svc := as[corev1.Service](services[i])
		for _, d := range pools {
			Expect(labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels))).To(BeTrue(), d.Name)
		}
	})

	It("renders no admission policy, and none of their parameters, with policies off", func() {
		chart := helmTemplate("policies: {enabled: false}\n")
		for _, kind := range []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
			Expect(kindOf(chart, kind)).To(BeEmpty(), kind)
		}
		Expect(keys(kindOf(chart, "ConfigMap"))).To(BeEmpty())
		Expect(kindOf(chart, "Deployment")).To(HaveLen(2))
	})

	It("serves plain-HTTP metrics with metrics.secure off, with a flag both binaries define", func() {
		chart := helmTemplate("metrics: {secure: false}\n")
		for _, o := range kindOf(chart, "Deployment") {
			d := as[appsv1.Deployment](o)
			c, defined := d.Spec.Template.Spec.Containers[0], managerFlags
			if d.Name == workerDeployment {
				c, defined = container(d, "worker"), workerFlags
			}
			Expect(arg(c, "metrics-secure")).To(Equal("false"), d.Name)
			Expect(unknownFlags(c, defined)).To(BeEmpty(), d.Name)
		}
	})

	DescribeTable("serves the Session API with a mounted certificate",
		func(values, secret string, certificates int) {
			chart := helmTemplate(values)
			Expect(kindOf(chart, "Certificate")).To(HaveLen(certificates))
			d := as[appsv1.Deployment](kindOf(chart, "Deployment")[slices.IndexFunc(kindOf(chart, "Deployment"), func(o *unstructured.Unstructured) bool {
				return o.GetName() == managerDeployment
			})])
			c := d.Spec.Template.Spec.Containers[0]
			Expect(unknownFlags(c, managerFlags)).To(BeEmpty())
			Expect(d.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("Secret.SecretName", secret)))
			dir := mountPaths(c)
			for _, flag := range []string{"session-api-cert-file", "session-api-key-file", "session-api-ca-file"} {
				Expect(dir).To(HaveKey(filepath.Dir(arg(c, flag))), flag)
			}
		},
		Entry("from an existing Secret", "sessionAPI: {tls: {mode: secret, existingSecret: my-tls}}\n", "my-tls", 0),
		Entry("issued by cert-manager, as config/components/cert-manager does", "sessionAPI: {tls: {mode: certManager}}\n", "agentlane-session-api-cert", 2),
	)
})
