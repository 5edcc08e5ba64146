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
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// managerArgs returns the arguments of the rendered manager container.
func managerArgs(objs []*unstructured.Unstructured) []string {
	GinkgoHelper()
	for _, o := range kindOf(objs, "Deployment") {
		if o.GetName() == "agentlane-controller-manager" {
			d := as[appsv1.Deployment](o)
			return d.Spec.Template.Spec.Containers[0].Args
		}
	}
	Fail("no Deployment agentlane-controller-manager")
	return nil
}

var _ = Describe("charts/agentlane's bound values", func() {
	It("passes no bound flag by default", func() {
		for _, a := range managerArgs(helmTemplate("")) {
			for _, p := range []string{"--session-api-max-", "--session-api-rate", "--session-store-", "--delegation-", "--workerpool-max-", "--runtimepool-max-"} {
				Expect(a).NotTo(HavePrefix(p))
			}
		}
	})

	It("renders the flag of a value set in each group, with numbers as the manager parses them", func() {
		args := managerArgs(helmTemplate(`
sessionAPI:
  bounds:
    maxConnections: 2000
    readTimeout: 45s
    maxStreamsPerCaller: 0
    maxPendingBytes: 104857600
    pendingNamespaceShare: 0.25
    checkpointRate: -1
    inboxWriteInterval: 0s
    maxDelegationsPerNamespace: 500
    maxAssignmentWaitsPerNamespace: 32
sessionStore:
  namespaceWriteRate: 65536
delegation:
  maxDepth: 2
  timeout: 30m
capacity:
  workerPoolMaxReplicas: 20
  runtimePoolMaxPods: 64
`))
		Expect(args).To(ContainElements(
			"--session-api-max-connections=2000",
			"--session-api-read-timeout=45s",
			"--session-api-max-streams-per-caller=0",
			"--session-api-max-pending-bytes=104857600",
			"--session-api-pending-namespace-share=0.25",
			"--session-api-checkpoint-rate=-1",
			"--session-api-inbox-write-interval=0s",
			"--session-api-max-delegations-per-namespace=500",
			"--session-store-namespace-write-rate=65536",
			"--delegation-max-depth=2",
			"--delegation-timeout=30m",
			"--session-api-max-assignment-waits-per-namespace=32",
			"--workerpool-max-replicas=20",
			"--runtimepool-max-pods=64",
		))
		Expect(args).NotTo(ContainElement(HavePrefix("--session-api-write-timeout")), "a value left empty passes no flag")
	})

	It("names only flags the manager defines, for every value of values.yaml", func() {
		raw, err := os.ReadFile(filepath.Join(repoRoot(), "charts", "agentlane", "values.yaml"))
		Expect(err).NotTo(HaveOccurred())
		var values struct {
			SessionAPI struct {
				Bounds map[string]any `json:"bounds"`
			} `json:"sessionAPI"`
			SessionStore map[string]any `json:"sessionStore"`
			Delegation   map[string]any `json:"delegation"`
			Capacity     map[string]any `json:"capacity"`
		}
		Expect(yaml.Unmarshal(raw, &values)).To(Succeed())
		set := map[string]any{
			"sessionAPI":   map[string]any{"bounds": fill(values.SessionAPI.Bounds)},
			"sessionStore": fill(values.SessionStore),
			"delegation":   fill(values.Delegation),
			"capacity":     fill(values.Capacity),
		}
		n := len(values.SessionAPI.Bounds) + len(values.SessionStore) + len(values.Delegation) + len(values.Capacity)
		Expect(n).To(BeNumerically(">=", 46))
		out, err := yaml.Marshal(set)
		Expect(err).NotTo(HaveOccurred())

		seen := map[string]bool{}
		for _, a := range managerArgs(helmTemplate(string(out))) {
			name, _, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
			if !ok || !strings.HasSuffix(a, "=7") {
				continue
			}
			Expect(managerFlags).To(HaveKey(name), "cmd/manager defines no flag --%s", name)
			seen[name] = true
		}
		Expect(seen).To(HaveLen(n), "every value passes a flag of its own")
	})

	It("fails the render for a value it does not know", func() {
		helm, err := helmBinary()
		Expect(err).NotTo(HaveOccurred())
		values := filepath.Join(GinkgoT().TempDir(), "values.yaml")
		Expect(os.WriteFile(values, []byte("delegation: {maxDeph: 2}\n"), 0o644)).To(Succeed())
		home := GinkgoT().TempDir()
		cmd := exec.CommandContext(ctx, helm, "template", "agentlane", filepath.Join(repoRoot(), "charts", "agentlane"),
			"--kube-version", makefileVar("KUBE_VERSION"), "--values", values)
		cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home, "HELM_CACHE_HOME="+home, "HELM_DATA_HOME="+home)
		out, err := cmd.CombinedOutput()
		Expect(err).To(HaveOccurred())
		Expect(string(out)).To(ContainSubstring("delegation.maxDeph"))
	})
})

// fill gives every key of m the value 7; the rendered flags that end in =7
// are the ones the values passed.
func fill(m map[string]any) map[string]any {
	out := map[string]any{}
	for k := range m {
		out[k] = 7
	}
	return out
}
