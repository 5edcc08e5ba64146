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
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/agentlane/agentlane/internal/manifest"
)

var _ = Describe("config/components/cert-manager", Ordered, func() {
	// withComponent is config/default rendered with the component, as an
	// overlay of a user renders it; cert-manager itself is not installed.
	var withComponent []*unstructured.Unstructured
	findIn := func(kind, name string) *unstructured.Unstructured {
		for _, o := range withComponent {
			if o.GetKind() == kind && o.GetName() == name {
				return o
			}
		}
		return nil
	}
	str := func(o *unstructured.Unstructured, fields ...string) string {
		GinkgoHelper()
		Expect(o).NotTo(BeNil())
		v, _, _ := unstructured.NestedString(o.Object, fields...)
		return v
	}

	BeforeAll(func() {
		dir := GinkgoT().TempDir()
		base, err := filepath.Rel(dir, filepath.Join(repoRoot(), "config", "default"))
		Expect(err).NotTo(HaveOccurred())
		component, err := filepath.Rel(dir, filepath.Join(repoRoot(), "config", "components", "cert-manager"))
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(filepath.Join(dir, "kustomization.yaml"),
			[]byte("resources: ["+base+"]\ncomponents: ["+component+"]\n"), 0o644)).To(Succeed())
		kustomize, err := kustomizeBinary()
		Expect(err).NotTo(HaveOccurred())
		out, err := run(exec.CommandContext(ctx, kustomize, "build", dir))
		Expect(err).NotTo(HaveOccurred())
		withComponent, err = manifest.Decode("kustomize build (config/default + cert-manager)", out)
		Expect(err).NotTo(HaveOccurred())
	})

	It("issues a certificate for the Session API's address from a CA of its own", func() {
		cert := findIn("Certificate", "agentlane-session-api")
		Expect(cert).NotTo(BeNil(), "the serving Certificate is not rendered")
		Expect(cert.GetNamespace()).To(Equal(namespace))
		dnsNames, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
		_, c := deployment(managerDeployment)
		u, err := url.Parse(arg(c, "session-api-url"))
		Expect(err).NotTo(HaveOccurred())
		Expect(dnsNames).To(ContainElement(u.Hostname()), "runtimes verify the certificate for the host of --session-api-url")

		By("chaining the issuer to a CA Certificate")
		issuer := findIn("Issuer", str(cert, "spec", "issuerRef", "name"))
		caSecret := str(issuer, "spec", "ca", "secretName")
		Expect(caSecret).NotTo(BeEmpty())
		var ca *unstructured.Unstructured
		for _, o := range withComponent {
			if o.GetKind() == "Certificate" && str(o, "spec", "secretName") == caSecret {
				ca = o
			}
		}
		Expect(ca).NotTo(BeNil(), "no Certificate makes the CA Secret %s", caSecret)
		isCA, _, _ := unstructured.NestedBool(ca.Object, "spec", "isCA")
		Expect(isCA).To(BeTrue())
	})

	It("serves the Session API with the mounted certificate and hands its CA to runtimes", func() {
		var d *unstructured.Unstructured
		for _, o := range withComponent {
			if o.GetKind() == "Deployment" && o.GetName() == managerDeployment {
				d = o
			}
		}
		Expect(d).NotTo(BeNil())
		dep := as[appsv1.Deployment](d)
		c := dep.Spec.Template.Spec.Containers[0]
		Expect(unknownFlags(c, managerFlags)).To(BeEmpty(), "arguments cmd/manager does not define")
		secretName := str(findIn("Certificate", "agentlane-session-api"), "spec", "secretName")
		var mountPath string
		for _, v := range dep.Spec.Template.Spec.Volumes {
			if v.Secret != nil && v.Secret.SecretName == secretName {
				for _, m := range c.VolumeMounts {
					if m.Name == v.Name {
						mountPath = m.MountPath
					}
				}
			}
		}
		Expect(mountPath).NotTo(BeEmpty(), "the manager does not mount Secret %s", secretName)
		for flag, key := range map[string]string{"session-api-cert-file": corev1.TLSCertKey,
			"session-api-key-file": corev1.TLSPrivateKeyKey, "session-api-ca-file": "ca.crt"} {
			Expect(arg(c, flag)).To(Equal(path.Join(mountPath, key)), "--%s", flag)
		}
	})
})

var _ = Describe("config/rbac for TLS and metrics", func() {
	It("lets the manager read and replace only its certificate's Secret, and read its store key's, in its own namespace", func() {
		o := find("Role", "agentlane-manager-role")
		Expect(o).NotTo(BeNil(), "the manager's namespaced Role is not rendered")
		Expect(o.GetNamespace()).To(Equal(namespace))
		role := as[rbacv1.Role](o)
		named := map[string][]string{}
		for _, r := range role.Rules {
			if !strings.Contains(strings.Join(r.Resources, ","), "secrets") {
				continue
			}
			if len(r.ResourceNames) == 0 {
				Expect(r.Verbs).To(Equal([]string{"create"}), "secrets of any name only for create")
			}
			for _, name := range r.ResourceNames {
				named[name] = append(named[name], r.Verbs...)
			}
		}
		Expect(named).To(Equal(map[string][]string{
			"agentlane-session-api-tls":   {"get", "update"},
			"agentlane-session-store-key": {"get"},
		}))
		binding := as[rbacv1.RoleBinding](find("RoleBinding", "agentlane-manager-rolebinding"))
		Expect(binding.RoleRef.Kind).To(Equal("Role"))
		Expect(binding.Subjects).To(ContainElement(HaveField("Name", "agentlane-controller-manager")))
		for _, cr := range all[rbacv1.ClusterRole]("ClusterRole") {
			for _, r := range cr.Rules {
				Expect(r.Resources).NotTo(ContainElement("secrets"), "ClusterRole %s grants Secrets", cr.Name)
			}
		}
	})

	It("ships a metrics-reader ClusterRole for scrapers", func() {
		role := as[rbacv1.ClusterRole](find("ClusterRole", "agentlane-metrics-reader"))
		Expect(role.Rules).To(ConsistOf(HaveField("NonResourceURLs", []string{"/metrics"})))
	})
})
