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
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/controller"
)

// The Pod Security Standard templates are held to, per namespace, and what
// the manager may build from them.
var _ = Describe("config/policy template levels, installed", Ordered, func() {
	const (
		restricted = "tenant-restricted"
		baseline   = "tenant-baseline"
		privileged = "tenant-privileged"
		allowing   = "tenant-allowing"
	)
	var manager client.Client

	// template is an object of kind ("session", "job" or "delegate") in ns
	// whose one pod template has the pod spec spec.
	template := templateObject
	paths := map[string]string{
		"session":  "spec.runtime.podTemplate",
		"job":      "spec.lanes[build].externalTarget.jobTemplate",
		"delegate": "spec.lanes[review].externalTarget.delegate.sessionTemplate.spec.runtime.podTemplate",
		"pool":     "spec.podTemplate",
		"rpool":    "spec.template",
	}
	kinds := []string{"session", "job", "delegate", "pool", "rpool"}
	// pod is a pod spec in flow style with one container, agent, and more.
	pod := func(podFields, containerFields string) string {
		c := "{name: agent, image: agentlane:dev"
		if containerFields != "" {
			c += ", " + containerFields
		}
		s := "{containers: [" + c + "}]"
		if podFields != "" {
			s += ", " + podFields
		}
		return s + "}"
	}
	// refused expects creating obj to be refused by the template policy
	// with every fragment in its message.
	refused := func(obj *unstructured.Unstructured, fragments ...string) {
		GinkgoHelper()
		err := k8sClient.Create(ctx, obj, client.DryRunAll)
		Expect(err).To(HaveOccurred(), "admitted")
		Expect(err.Error()).To(ContainSubstring("agentlane-template-security"))
		for _, f := range fragments {
			Expect(err.Error()).To(ContainSubstring(f))
		}
	}
	// built is the pod the manager builds from a pod spec of template.
	built := func(ns string, spec corev1.PodSpec) *corev1.Pod {
		controller.RestrictPodSpec(&spec)
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "runtime-", OwnerReferences: []metav1.OwnerReference{{
				APIVersion: agentlanev1alpha1.GroupVersion.String(), Kind: "AgentSession",
				Name: "owner", UID: "00000000-0000-0000-0000-000000000001", Controller: ptr.To(true)}}},
			Spec: spec,
		}
	}
	plainSpec := func() corev1.PodSpec {
		return corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "agentlane:dev"}}}
	}
	// relabel sets the namespace's level label (none when empty) and
	// annotations, and waits until the policy sees them.
	relabel := func(ns, level string, annotations map[string]string, probe *unstructured.Unstructured, admitted bool) {
		GinkgoHelper()
		n := &corev1.Namespace{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: ns}, n)).To(Succeed())
		n.Labels = map[string]string{"kubernetes.io/metadata.name": ns}
		if level != "" {
			n.Labels["agentlane.io/template-policy"] = level
		}
		n.Annotations = annotations
		Expect(k8sClient.Update(ctx, n)).To(Succeed())
		Eventually(func() bool {
			return (k8sClient.Create(ctx, probe.DeepCopy(), client.DryRunAll) == nil) == admitted
		}).WithTimeout(30*time.Second).Should(BeTrue(), "the policy does not see namespace %s's new labels", ns)
	}

	BeforeAll(func() {
		By("installing the Namespace, the CRDs, RBAC and config/policy's objects for real")
		installPolicies("agentlane-template-policy")
		for ns, level := range map[string]string{restricted: "", baseline: "baseline", privileged: "privileged", allowing: ""} {
			n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
			if level != "" {
				n.Labels = map[string]string{"agentlane.io/template-policy": level}
			}
			if ns == allowing {
				n.Annotations = map[string]string{
					"agentlane.io/template-service-accounts": "agent, job-worker",
					"agentlane.io/template-secrets":          "llm-key",
				}
			}
			Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, n))).To(Succeed())
		}
		manager = impersonating(managerUser, nil)
		By("waiting until the API server enforces the policies, with the namespaces' labels")
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Create(ctx, template("session", restricted, "probe", pod("", "securityContext: {runAsUser: 0}")), client.DryRunAll)).NotTo(Succeed())
			g.Expect(k8sClient.Create(ctx, template("session", baseline, "probe", pod("", "securityContext: {runAsUser: 0}")), client.DryRunAll)).To(Succeed())
			g.Expect(k8sClient.Create(ctx, template("session", allowing, "probe", pod("serviceAccountName: agent", "")), client.DryRunAll)).To(Succeed())
			err := manager.Create(ctx, built(restricted, corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Image: "a"}}, NodeName: "n"}), client.DryRunAll)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring("agentlane-manager-workloads"))
		}).WithTimeout(30 * time.Second).Should(Succeed())
	})

	attacks := []struct {
		name, spec string
		fragments  []string
	}{
		{"the namespace's most privileged service account", pod("serviceAccountName: admin", ""),
			[]string{`serviceAccountName "admin" (allowed: default;`}},
		{"the deprecated serviceAccount field", pod("serviceAccount: admin", ""), []string{`serviceAccountName "admin"`}},
		{"a Secret volume", pod("volumes: [{name: creds, secret: {secretName: admin-token}}]", ""), []string{"Secret volume creds"}},
		{"a Secret in a projected volume", pod("volumes: [{name: creds, projected: {sources: [{secret: {name: admin-token}}]}}]", ""),
			[]string{"a Secret in projected volume creds"}},
		{"a Secret in the environment", pod("", "env: [{name: T, valueFrom: {secretKeyRef: {name: admin-token, key: token}}}]"),
			[]string{"a Secret in the environment of container agent"}},
		{"nodeName and a toleration of every taint", pod("nodeName: control-plane-1, tolerations: [{operator: Exists}]", ""),
			[]string{"nodeName", "a toleration of every taint or of the control plane's"}},
		{"a toleration of the control plane's taint", pod("tolerations: [{key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}]", ""),
			[]string{"a toleration of every taint or of the control plane's"}},
		{"an added capability", pod("", "securityContext: {capabilities: {add: [NET_ADMIN, NET_BIND_SERVICE]}}"),
			[]string{"capabilities.add NET_ADMIN in container agent"}},
		{"runAsUser 0", pod("securityContext: {runAsUser: 0}", ""), []string{"runAsUser 0 in the pod"}},
		{"runAsNonRoot false", pod("", "securityContext: {runAsNonRoot: false}"), []string{"runAsNonRoot false in container agent"}},
		{"allowPrivilegeEscalation true", pod("", "securityContext: {allowPrivilegeEscalation: true}"),
			[]string{"allowPrivilegeEscalation true in container agent"}},
		{"priorityClassName system-node-critical", pod("priorityClassName: system-node-critical", ""),
			[]string{"priorityClassName system-node-critical"}},
		{"an Unconfined seccomp profile", pod("securityContext: {seccompProfile: {type: Unconfined}}", ""), []string{"seccompProfile Unconfined in the pod"}},
		{"a hostPort", pod("", "ports: [{containerPort: 80, hostPort: 80}]"), []string{"a hostPort in container agent"}},
		{"an unsafe sysctl", pod("securityContext: {sysctls: [{name: kernel.msgmax, value: '65536'}]}", ""), []string{"sysctl kernel.msgmax"}},
		{"capabilities kept", pod("", "securityContext: {capabilities: {drop: [NET_RAW]}}"), []string{"capabilities.drop without ALL in container agent"}},
	}
	for _, a := range attacks {
		for _, kind := range kinds {
			It(fmt.Sprintf("refuses %s in a %s template of a restricted namespace, naming the template", a.name, kind), func() {
				refused(template(kind, restricted, "bad", a.spec), append([]string{paths[kind] + " may not set "}, a.fragments...)...)
			})
		}
	}

	It("names every refusal of every template at once, and the namespace's level", func() {
		q := template("job", restricted, "bad", pod("serviceAccountName: admin", "securityContext: {runAsUser: 0}"))
		refused(q, `spec.lanes[build].externalTarget.jobTemplate may not set serviceAccountName "admin"`,
			"runAsUser 0 in container agent", "the namespace's agentlane.io/template-policy is restricted")
	})

	It("admits a plain template of each kind, and the manager admits the pod it builds from one", func() {
		for _, kind := range kinds {
			Expect(k8sClient.Create(ctx, template(kind, restricted, "plain-"+kind, pod("", "")), client.DryRunAll)).To(Succeed(), kind)
		}
		Expect(manager.Create(ctx, built(restricted, plainSpec()), client.DryRunAll)).To(Succeed())
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: restricted, GenerateName: "task-", OwnerReferences: []metav1.OwnerReference{{
				APIVersion: agentlanev1alpha1.GroupVersion.String(), Kind: "ExternalTask",
				Name: "owner", UID: "00000000-0000-0000-0000-000000000001", Controller: ptr.To(true)}}},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "worker", Image: "agentlane:dev"}},
			}}},
		}
		controller.RestrictPodSpec(&job.Spec.Template.Spec)
		Expect(manager.Create(ctx, job, client.DryRunAll)).To(Succeed())
	})

	It("refuses the manager a pod in a restricted namespace without the restricted settings, or that loosens them", func() {
		bare := built(restricted, plainSpec())
		bare.Spec.SecurityContext, bare.Spec.Containers[0].SecurityContext = nil, nil
		expectRefused(manager.Create(ctx, bare, client.DryRunAll), "Pod containers agent do not meet the restricted Pod Security Standard")
		for fragment, mutate := range map[string]func(*corev1.PodSpec){
			`Pod spec may not set serviceAccountName "admin"`: func(s *corev1.PodSpec) { s.ServiceAccountName = "admin" },
			"Pod spec may not set Secret volume creds": func(s *corev1.PodSpec) {
				s.Volumes = []corev1.Volume{{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "admin-token"}}}}
			},
			"Pod spec may not set nodeName":                               func(s *corev1.PodSpec) { s.NodeName = "control-plane-1" },
			"Pod spec may not set priorityClassName system-node-critical": func(s *corev1.PodSpec) { s.PriorityClassName = "system-node-critical" },
			"Pod spec may not set runAsUser 0 in the pod":                 func(s *corev1.PodSpec) { s.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](0)} },
		} {
			spec := plainSpec()
			mutate(&spec)
			expectRefused(manager.Create(ctx, built(restricted, spec), client.DryRunAll), fragment)
		}
	})

	It("admits in a baseline namespace what baseline allows and no more", func() {
		root := pod("securityContext: {runAsUser: 0}", "securityContext: {allowPrivilegeEscalation: true, capabilities: {add: [CHOWN, SETUID]}}")
		for _, kind := range kinds {
			Expect(k8sClient.Create(ctx, template(kind, baseline, "root-"+kind, root), client.DryRunAll)).To(Succeed(), kind)
		}
		spec := plainSpec()
		spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](0)}
		Expect(manager.Create(ctx, built(baseline, spec), client.DryRunAll)).To(Succeed(), "the manager builds a root pod in a baseline namespace")

		refused(template("session", baseline, "bad", pod("", "securityContext: {capabilities: {add: [SYS_ADMIN]}}")), "capabilities.add SYS_ADMIN in container agent",
			"the namespace's agentlane.io/template-policy is baseline")
		refused(template("session", baseline, "bad", pod("nodeName: n1", "")), "may not set nodeName")
		refused(template("session", baseline, "bad", pod("priorityClassName: system-cluster-critical", "")), "priorityClassName system-cluster-critical")
		refused(template("session", baseline, "bad", pod("serviceAccountName: admin", "")), `serviceAccountName "admin"`)
		refused(template("session", baseline, "bad", pod("volumes: [{name: creds, secret: {secretName: admin-token}}]", "")), "Secret volume creds")
		refused(template("session", baseline, "bad", pod("", "securityContext: {privileged: true}")), "privileged containers are not allowed")
		refused(template("session", baseline, "bad", pod("hostNetwork: true", "")), "hostNetwork, hostPID and hostIPC are not allowed")
	})

	It("admits in a privileged namespace any pod placement and privilege, but only the namespace's listed credentials", func() {
		anything := pod("nodeName: control-plane-1, tolerations: [{operator: Exists}], priorityClassName: system-node-critical, hostNetwork: true, volumes: [{name: root, hostPath: {path: /}}]",
			"securityContext: {privileged: true, runAsUser: 0, capabilities: {add: [SYS_ADMIN]}}")
		for _, kind := range kinds {
			Expect(k8sClient.Create(ctx, template(kind, privileged, "any-"+kind, anything), client.DryRunAll)).To(Succeed(), kind)
		}
		refused(template("session", privileged, "bad", pod("serviceAccountName: admin", "")), `serviceAccountName "admin"`,
			"the namespace's agentlane.io/template-policy is privileged")
		refused(template("job", privileged, "bad", pod("volumes: [{name: creds, secret: {secretName: admin-token}}]", "")), "Secret volume creds")
	})

	It("admits the service accounts and Secrets a namespace lists, and no others", func() {
		for _, kind := range kinds {
			Expect(k8sClient.Create(ctx, template(kind, allowing, "listed-"+kind,
				pod("serviceAccountName: job-worker, volumes: [{name: key, secret: {secretName: llm-key}}]",
					"env: [{name: K, valueFrom: {secretKeyRef: {name: llm-key, key: k}}}], envFrom: [{secretRef: {name: llm-key}}]")),
				client.DryRunAll)).To(Succeed(), kind)
		}
		refused(template("session", allowing, "bad", pod("serviceAccountName: admin", "")), `serviceAccountName "admin" (allowed: default, agent, job-worker;`)
		refused(template("session", allowing, "bad", pod("", "envFrom: [{secretRef: {name: admin-token}}]")), "a Secret in the environment of container agent")
		spec := plainSpec()
		spec.ServiceAccountName = "agent"
		Expect(manager.Create(ctx, built(allowing, spec), client.DryRunAll)).To(Succeed())
		spec.ServiceAccountName = "admin"
		expectRefused(manager.Create(ctx, built(allowing, spec), client.DryRunAll), `serviceAccountName "admin"`)
	})

	It("lets an object stored under a looser level be written unchanged, refuses changes to its templates, and the manager its pods", func() {
		const ns = "tenant-relabelled"
		Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
			Labels: map[string]string{"agentlane.io/template-policy": "baseline"}}}))).To(Succeed())
		rootSpec := pod("securityContext: {runAsUser: 0}", "")
		Eventually(func() error {
			return k8sClient.Create(ctx, template("session", ns, "probe", rootSpec), client.DryRunAll)
		}).WithTimeout(30 * time.Second).Should(Succeed())
		s := template("session", ns, "stored", rootSpec)
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, s))).To(Succeed()) })

		relabel(ns, "", nil, template("session", ns, "probe", rootSpec), false)

		By("a write that keeps the template, as the manager's finalizer and labels")
		s.SetLabels(map[string]string{"touched": "yes"})
		Expect(k8sClient.Update(ctx, s)).To(Succeed())
		By("a change of the template")
		containers, _, _ := unstructured.NestedSlice(s.Object, "spec", "runtime", "podTemplate", "spec", "containers")
		containers[0].(map[string]any)["image"] = "agentlane:v2"
		Expect(unstructured.SetNestedSlice(s.Object, containers, "spec", "runtime", "podTemplate", "spec", "containers")).To(Succeed())
		err := k8sClient.Update(ctx, s)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("runAsUser 0 in the pod"))

		By("the pod the manager would build from the stored template")
		spec := plainSpec()
		spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](0)}
		expectRefused(manager.Create(ctx, built(ns, spec), client.DryRunAll), "runAsUser 0 in the pod")
	})

	It("ships the manager policy with the template policy's rules, word for word", func() {
		vars := func(name string) map[string]string {
			for _, o := range rendered {
				if o.GetKind() == "ValidatingAdmissionPolicy" && o.GetName() == name {
					list, _, _ := unstructured.NestedSlice(o.Object, "spec", "variables")
					out := map[string]string{}
					for _, v := range list {
						m := v.(map[string]any)
						out[m["name"].(string)] = strings.Join(strings.Fields(m["expression"].(string)), " ")
					}
					return out
				}
			}
			Fail("no policy " + name)
			return nil
		}
		templates, manager := vars("agentlane-template-security"), vars("agentlane-manager-workloads")
		for _, name := range []string{"level", "serviceAccounts", "secrets", "capabilities", "refusals"} {
			Expect(manager).To(HaveKeyWithValue(name, templates[name]), name)
		}
	})
})
