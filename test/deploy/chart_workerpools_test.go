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
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/controller"
)

// helmTemplateError renders the chart with valuesYAML and returns helm's
// output; the render must fail.
func helmTemplateError(valuesYAML string) string {
	GinkgoHelper()
	helm, err := helmBinary()
	Expect(err).NotTo(HaveOccurred())
	values := filepath.Join(GinkgoT().TempDir(), "values.yaml")
	Expect(os.WriteFile(values, []byte(valuesYAML), 0o644)).To(Succeed())
	home := GinkgoT().TempDir()
	cmd := exec.CommandContext(ctx, helm, "template", "agentlane", filepath.Join(repoRoot(), "charts", "agentlane"),
		"--namespace", namespace, "--kube-version", makefileVar("KUBE_VERSION"), "--values", values)
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home, "HELM_CACHE_HOME="+home, "HELM_DATA_HOME="+home)
	out, err := cmd.CombinedOutput()
	Expect(err).To(HaveOccurred(), "rendered:\n%s", out)
	return string(out)
}

// chartPools returns the WorkerPools among objs by namespace/name.
func chartPools(objs []*unstructured.Unstructured) map[string]agentlanev1alpha1.WorkerPool {
	GinkgoHelper()
	pools := map[string]agentlanev1alpha1.WorkerPool{}
	for _, o := range kindOf(objs, "WorkerPool") {
		pools[o.GetNamespace()+"/"+o.GetName()] = as[agentlanev1alpha1.WorkerPool](o)
	}
	return pools
}

var _ = Describe("charts/agentlane's workerPools", Ordered, func() {
	const (
		tenantTools = "tenant-wp-tools"
		tenantChat  = "tenant-wp-chat"
	)
	// poolsValues declares two pools beside the fixed worker Deployment.
	const poolsValues = `
image: {repository: registry.example/agentlane, tag: v2}
workers:
  runnerImage: {repository: registry.example/agentlane-shell, tag: v2}
workerPools:
- name: tools
  namespace: tenant-wp-tools
  queues: [a3s, batch]
  lanes: [execute]
  capacity: 8
  minReplicas: 0
  maxReplicas: 20
  behavior:
    scaleUp: {stabilizationWindowSeconds: 0}
    scaleDown: {stabilizationWindowSeconds: 20}
  labels: {example.com/team: tools}
  podTemplate:
    spec:
      nodeSelector: {kubernetes.io/os: linux}
      containers:
      - name: runner
        resources: {requests: {cpu: 250m, memory: 256Mi}, limits: {memory: 1Gi}}
- name: chat
  namespace: tenant-wp-chat
  queues: [chat]
  maxReplicas: 4
  autoscaling: External
  image: {repository: registry.example/agentlane-pool, tag: v3}
  runnerImage: {repository: registry.example/chat-tools, tag: "1.0"}
`

	BeforeAll(func() {
		By("installing the CRDs, the admission policies and the template policy's ConfigMap for real")
		installPolicies("agentlane-template-policy")
		for _, ns := range []string{tenantTools, tenantChat} {
			Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
		}
		By("waiting until the API server knows WorkerPools and enforces the template policy on them")
		Eventually(func(g Gomega) {
			bad := templateObject("pool", tenantTools, "probe", "containers: [{name: runner, securityContext: {privileged: true}}]")
			err := k8sClient.Create(ctx, bad, client.DryRunAll)
			g.Expect(err).To(HaveOccurred())
			g.Expect(meta.IsNoMatchError(err)).To(BeFalse(), "%v", err)
			g.Expect(err.Error()).To(ContainSubstring("privileged containers are not allowed in spec.podTemplate"))
		}).WithTimeout(30 * time.Second).Should(Succeed())
	})

	It("renders no WorkerPool by default, and keeps the fixed worker Deployment beside the pools", func() {
		Expect(kindOf(helmTemplate(""), "WorkerPool")).To(BeEmpty())
		chart := helmTemplate(poolsValues)
		Expect(keys(kindOf(chart, "Deployment"))).To(ConsistOf(
			"Deployment "+namespace+"/"+managerDeployment, "Deployment "+namespace+"/"+workerDeployment))
	})

	It("renders a WorkerPool per entry in the namespace it serves, with the chart's images where it names none", func() {
		chart := helmTemplate(poolsValues)
		pools := chartPools(chart)
		Expect(pools).To(HaveLen(2))

		tools := pools[tenantTools+"/tools"]
		Expect(tools.Labels).To(HaveKeyWithValue("example.com/team", "tools"))
		Expect(tools.Labels).To(HaveKeyWithValue("app.kubernetes.io/managed-by", "Helm"))
		Expect(tools.Spec.Queues).To(Equal([]string{"a3s", "batch"}))
		Expect(tools.Spec.Lanes).To(Equal([]string{"execute"}))
		Expect(tools.Spec.Capacity).To(Equal(int32(8)))
		Expect(tools.Spec.MinReplicas).To(HaveValue(BeZero()))
		Expect(tools.Spec.MaxReplicas).To(Equal(int32(20)))
		Expect(tools.Spec.Replicas).To(BeNil(), "the manager sizes the pool; the chart leaves spec.replicas alone")
		Expect(tools.Spec.Behavior.ScaleDown.StabilizationWindowSeconds).To(HaveValue(Equal(int32(20))))
		Expect(tools.Spec.Image).To(Equal("registry.example/agentlane:v2"))
		Expect(tools.Spec.RunnerImage).To(Equal("registry.example/agentlane-shell:v2"))
		Expect(tools.Spec.PodTemplate.Spec.NodeSelector).To(HaveKeyWithValue("kubernetes.io/os", "linux"))

		chat := pools[tenantChat+"/chat"]
		Expect(chat.Spec.Autoscaling).To(Equal(agentlanev1alpha1.WorkerPoolAutoscalingExternal))
		Expect(chat.Spec.MinReplicas).To(BeNil())
		Expect(chat.Spec.Image).To(Equal("registry.example/agentlane-pool:v3"))
		Expect(chat.Spec.RunnerImage).To(Equal("registry.example/chat-tools:1.0"))

		By("a pool with neither its own nor workers.runnerImage runs the chart's image in both containers")
		plain := chartPools(helmTemplate("workerPools: [{name: p, namespace: tenant-wp-tools, queues: [q], maxReplicas: 1}]\n"))
		Expect(plain[tenantTools+"/p"].Spec.Image).To(Equal("agentlane:dev"))
		Expect(plain[tenantTools+"/p"].Spec.RunnerImage).To(Equal("agentlane:dev"))

		By("the manager gives pools that name no image the chart's, by a flag it defines, only when it is not its default")
		Expect(managerArgs(chart)).To(ContainElement("--workerpool-image=registry.example/agentlane:v2"))
		Expect(managerFlags).To(HaveKey("workerpool-image"))
		Expect(controller.DefaultWorkerPoolImage).To(Equal("agentlane:dev"), "the chart passes no flag for this image")
		for _, a := range managerArgs(helmTemplate("")) {
			Expect(a).NotTo(HavePrefix("--workerpool-image"))
		}
	})

	It("server-side applies the rendered WorkerPools against the real CRD and admission policies", func() {
		chart := helmTemplate(poolsValues)
		pools := kindOf(chart, "WorkerPool")
		Expect(pools).To(HaveLen(2))
		applyDryRun(chart, tenantTools, tenantChat)
		By("and for real: the API server stores them with the CRD's defaults")
		for _, o := range pools {
			Expect(k8sClient.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), fieldOwner, client.ForceOwnership)).To(Succeed(), objectKey(o))
		}
		chat := &agentlanev1alpha1.WorkerPool{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: tenantChat, Name: "chat"}, chat)).To(Succeed())
		Expect(chat.Spec.Capacity).To(Equal(int32(4)), "the CRD's default capacity")
		Expect(chat.Spec.MinReplicas).To(HaveValue(BeZero()), "the CRD's default minReplicas")
	})

	DescribeTable("refuses a bad pool at admission with a clear message",
		func(pool, fragment string) {
			chart := helmTemplate("workerPools:\n" + pool)
			objs := kindOf(chart, "WorkerPool")
			Expect(objs).To(HaveLen(1))
			err := k8sClient.Apply(ctx, client.ApplyConfigurationFromUnstructured(objs[0].DeepCopy()), fieldOwner,
				client.ForceOwnership, client.DryRunAll)
			Expect(err).To(HaveOccurred(), "admitted")
			Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
			Expect(err.Error()).To(ContainSubstring(fragment))
		},
		Entry("a privileged runner", `- name: bad
  namespace: tenant-wp-tools
  queues: [q]
  maxReplicas: 2
  podTemplate:
    spec:
      containers:
      - name: runner
        securityContext: {privileged: true}
`, "privileged containers are not allowed in spec.podTemplate"),
		Entry("workers on the host network", `- name: bad
  namespace: tenant-wp-tools
  queues: [q]
  maxReplicas: 2
  podTemplate: {spec: {hostNetwork: true, containers: [{name: worker}]}}
`, "hostNetwork, hostPID and hostIPC are not allowed in spec.podTemplate"),
		Entry("minReplicas over maxReplicas", `- {name: bad, namespace: tenant-wp-tools, queues: [q], minReplicas: 5, maxReplicas: 2}
`, "minReplicas must not exceed maxReplicas"),
		Entry("maxReplicas over 1000", `- {name: bad, namespace: tenant-wp-tools, queues: [q], maxReplicas: 5000}
`, "spec.maxReplicas"),
		Entry("a capacity over 256", `- {name: bad, namespace: tenant-wp-tools, queues: [q], capacity: 1000, maxReplicas: 2}
`, "spec.capacity"),
		Entry("a name too long for its pods'", `- {name: a-pool-name-that-is-far-too-long-for-its-pods, namespace: tenant-wp-tools, queues: [q], maxReplicas: 2}
`, "WorkerPool name must be at most 40 characters"),
		Entry("an unknown autoscaling mode", `- {name: bad, namespace: tenant-wp-tools, queues: [q], maxReplicas: 2, autoscaling: Sometimes}
`, "spec.autoscaling"),
	)

	DescribeTable("fails the render of a pool the chart cannot place, saying why",
		func(pool, fragment string) {
			Expect(helmTemplateError("workerPools:\n" + pool)).To(ContainSubstring(fragment))
		},
		Entry("no name", "- {namespace: t, queues: [q], maxReplicas: 1}\n", "workerPools[0] needs a name"),
		Entry("no namespace", "- {name: p, queues: [q], maxReplicas: 1}\n", "workerPools[0] (p) needs a namespace"),
		Entry("no queues", "- {name: p, namespace: t, maxReplicas: 1}\n", "workerPools[0] (p) needs queues"),
		Entry("no maxReplicas", "- {name: p, namespace: t, queues: [q]}\n", "workerPools[0] (p) needs maxReplicas"),
		Entry("two pools of one name in one namespace",
			"- {name: p, namespace: t, queues: [q], maxReplicas: 1}\n- {name: p, namespace: t, queues: [r], maxReplicas: 1}\n",
			`two workerPools are named "p" in namespace "t"`),
	)

	It("renders pools of one name in two namespaces", func() {
		pools := chartPools(helmTemplate(strings.Join([]string{"workerPools:",
			"- {name: p, namespace: tenant-wp-tools, queues: [q], maxReplicas: 1}",
			"- {name: p, namespace: tenant-wp-chat, queues: [q], maxReplicas: 1}", ""}, "\n")))
		Expect(pools).To(HaveKey(tenantTools + "/p"))
		Expect(pools).To(HaveKey(tenantChat + "/p"))
		Expect(pools[tenantTools+"/p"].Spec.MinReplicas).To(BeNil())
		Expect(ptr.Deref(pools[tenantChat+"/p"].Spec.MinReplicas, 0)).To(BeZero())
	})
})
