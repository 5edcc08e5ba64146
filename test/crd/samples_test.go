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

package crd

import (
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/manifest"
)

const samplesDir = "../../config/samples"

// readObjects decodes every YAML document of a file into unstructured objects.
func readObjects(path string) []*unstructured.Unstructured {
	GinkgoHelper()
	objs, err := manifest.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	return objs
}

var _ = Describe("CRD installation", func() {
	It("installs the three CRDs with their short names and status subresources", func() {
		for name, short := range map[string]string{
			"lanequeues.agentlane.io":    "lq",
			"agentsessions.agentlane.io": "asn",
			"externaltasks.agentlane.io": "xt",
		} {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Name: name}, crd)).To(Succeed())
			Expect(crd.Spec.Names.ShortNames).To(ContainElement(short), name)
			Expect(crd.Spec.Versions).To(HaveLen(1))
			Expect(crd.Spec.Versions[0].Name).To(Equal("v1alpha1"))
			Expect(crd.Spec.Versions[0].Subresources).NotTo(BeNil(), name)
			Expect(crd.Spec.Versions[0].Subresources.Status).NotTo(BeNil(), name)
			Expect(crd.Spec.Versions[0].AdditionalPrinterColumns).NotTo(BeEmpty(), name)
			established := false
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					established = true
				}
			}
			Expect(established).To(BeTrue(), "%s is not Established", name)
		}
	})
})

var _ = Describe("Samples", func() {
	It("accepts every object in config/samples", func() {
		files, err := filepath.Glob(filepath.Join(samplesDir, "*.yaml"))
		Expect(err).NotTo(HaveOccurred())
		kinds := map[string]int{}
		for _, f := range files {
			if filepath.Base(f) == "kustomization.yaml" {
				continue
			}
			for _, obj := range readObjects(f) {
				Expect(obj.GetAPIVersion()).To(HavePrefix("agentlane.io/"), f)
				obj.SetNamespace("default")
				Expect(k8sClient.Create(ctx, obj)).To(Succeed(), "sample %s (%s %s)", filepath.Base(f), obj.GetKind(), obj.GetName())
				kinds[obj.GetKind()]++
			}
		}
		Expect(kinds).To(HaveKey("LaneQueue"))
		Expect(kinds).To(HaveKey("AgentSession"))
		Expect(kinds).To(HaveKey("ExternalTask"))
		Expect(kinds["LaneQueue"]).To(BeNumerically(">=", 2))
	})

	It("lists every sample file in the samples kustomization", func() {
		files, err := filepath.Glob(filepath.Join(samplesDir, "*.yaml"))
		Expect(err).NotTo(HaveOccurred())
		kustomization, err := os.ReadFile(filepath.Join(samplesDir, "kustomization.yaml"))
		Expect(err).NotTo(HaveOccurred())
		for _, f := range files {
			if base := filepath.Base(f); base != "kustomization.yaml" {
				Expect(strings.Contains(string(kustomization), base)).To(BeTrue(), "%s is not listed in kustomization.yaml", base)
			}
		}
	})
})

var _ = Describe("ExternalTask field selectors", func() {
	It("lets a worker list only the tasks assigned to it", func() {
		ns := "default"
		for _, w := range []string{"worker-a", "worker-b", "worker-a"} {
			u := object(taskBase)
			Expect(k8sClient.Create(ctx, u)).To(Succeed())
			set(w, "status", "worker")(u)
			set("Dispatched", "status", "phase")(u)
			Expect(k8sClient.Status().Update(ctx, u)).To(Succeed())
		}
		var list agentlanev1alpha1.ExternalTaskList
		Expect(k8sClient.List(ctx, &list, client.InNamespace(ns),
			client.MatchingFields{"status.worker": "worker-a"})).To(Succeed())
		Expect(list.Items).To(HaveLen(2))
		for _, x := range list.Items {
			Expect(x.Status.Worker).To(Equal("worker-a"))
		}
	})
})
