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

package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// queueYAML is the suite's LaneQueue: reads on the runtime (Internal), shell
// commands on the worker pods two at a time per session, a lane without a
// per-session cap that fills the worker pool, and a Job lane.
const queueYAML = `
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {name: e2e, namespace: default}
spec:
  lanes:
  - {name: query, priority: 1, maxConcurrencyPerSession: 4}
  - name: execute
    priority: 2
    handlerMode: External
    maxConcurrency: 12
    maxConcurrencyPerSession: 2
    timeout: 2m
    externalTarget: {type: Workers}
  - {name: generate, priority: 3, maxConcurrencyPerSession: 1}
  - name: bulk
    priority: 2
    handlerMode: External
    maxConcurrency: 12
    timeout: 2m
    externalTarget: {type: Workers}
  - name: jobs
    priority: 2
    handlerMode: External
    maxConcurrency: 2
    timeout: 3m
    externalTarget:
      type: Job
      jobTemplate:
        spec:
          ttlSecondsAfterFinished: 600
          template:
            spec:
              serviceAccountName: job-worker
              containers:
              - name: worker
                image: agentlane-shell:dev
                command: ["/worker"]
  retryPolicy: {strategy: Exponential, maxRetries: 3, initialDelay: 200ms, maxDelay: 2s}
  defaultTimeout: 2m
`

// runtimeSessionYAML is an AgentSession whose runtime (cmd/agent in serve
// mode, its script from a ConfigMap) runs in a pod the operator creates. The
// pod keeps off the leading manager's node (%[3]s), so draining it never
// moves the leader (a standby may move: it serves nothing).
const runtimeSessionYAML = `
apiVersion: agentlane.io/v1alpha1
kind: AgentSession
metadata: {name: %[1]s, namespace: default}
spec:
  queueRef: {name: e2e}
  identity: {tenantId: e2e, principal: agent}
  runtime:
    passivationDeadline: 2m
    podTemplate:
      metadata:
        labels: {app: e2e-agent}
      spec:
        serviceAccountName: agent
        terminationGracePeriodSeconds: 10
        affinity:
          nodeAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
              nodeSelectorTerms:
              - matchExpressions:
                - {key: kubernetes.io/hostname, operator: NotIn, values: [%[3]s]}
        containers:
        - name: agent
          image: agentlane:dev
          command: ["/agent"]
          # The manager mounts a token for the Session API's audience and its
          # CA, and names them in the environment the agent reads.
          args: ["--mode=serve", "--script=/scripts/script.yaml"]
          volumeMounts: [{name: script, mountPath: /scripts}]
        volumes:
        - name: script
          configMap: {name: %[1]s-script}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: %[1]s-script, namespace: default}
data:
  script.yaml: |
%[2]s
`

// taskYAML is an ExternalTask created directly, as with kubectl create.
const taskYAML = `
apiVersion: agentlane.io/v1alpha1
kind: ExternalTask
metadata: {name: %[1]s, namespace: default}
spec:
  sessionRef: {name: %[2]s}
  queueRef: {name: e2e}
  lane: %[3]s
  commandType: bash
  payload: {command: %[4]q}
  timeout: 2m
`

// plainSessionYAML is an AgentSession with no runtime pod.
const plainSessionYAML = `
apiVersion: agentlane.io/v1alpha1
kind: AgentSession
metadata: {name: %s, namespace: default}
spec:
  queueRef: {name: e2e}
  identity: {tenantId: e2e, principal: agent}
`

// indent indents a block for a YAML literal.
func indent(s string, by int) string {
	pad := strings.Repeat(" ", by)
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := range lines {
		lines[i] = pad + lines[i]
	}
	return strings.Join(lines, "\n")
}

// createTasks creates n bash tasks of a session directly; task i runs
// command(i), which must end with "echo <marker>".
func createTasks(session, prefix, lane string, n int, cmd func(i int) string) {
	GinkgoHelper()
	var docs []string
	for i := 1; i <= n; i++ {
		docs = append(docs, fmt.Sprintf(taskYAML, fmt.Sprintf("%s-%d", prefix, i), session, lane, cmd(i)))
	}
	apply(strings.Join(docs, "\n---\n"))
}

var _ = Describe("agentlane on a real cluster", Ordered, func() {
	BeforeAll(func() {
		apply(queueYAML)
		expectReady(&agentlanev1alpha1.LaneQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "e2e"}},
			func() []metav1.Condition { return lq("e2e").Status.Conditions })
	})

	It("applies config/samples and brings every sample to Ready", func() {
		manifests, err := run(kustomizeBin, "build", "../../config/samples")
		Expect(err).NotTo(HaveOccurred())
		_, err = runStdin(manifests, kubectlBin, "apply", "-n", ns, "-f", "-")
		Expect(err).NotTo(HaveOccurred())
		for _, name := range []string{"a3s", "openclaw", "batch"} {
			q := &agentlanev1alpha1.LaneQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
			expectReady(q, func() []metav1.Condition { return q.Status.Conditions })
		}
		s := &agentlanev1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reviewer-42"}}
		expectReady(s, func() []metav1.Condition { return s.Status.Conditions })
		Expect(s.Status.Phase).To(Equal(agentlanev1alpha1.SessionActive))

		By("the sample ExternalTask runs on a worker pod")
		task := &agentlanev1alpha1.ExternalTask{}
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "01jdq8m9k2v7f3w4x5y6z7a8b9"}, task)).To(Succeed())
			g.Expect(task.Status.Phase.IsTerminal()).To(BeTrue(), describe(task))
		}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
		Expect(task.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskSucceeded), describe(task))
		Expect(stdout(task)).To(ContainSubstring("hello from " + task.Status.Worker))
		Expect(nodeOf(systemNamespace, task.Status.Worker)).To(Equal(task.Status.NodeName))
	})

	It("refuses a session whose runtime pod template loosens the restricted Pod Security Standard or takes the namespace's credentials", func() {
		for spec, want := range map[string]string{
			"containers: [{name: agent, image: agentlane:dev, securityContext: {privileged: true}}]":                                                "privileged containers are not allowed in spec.runtime.podTemplate",
			"containers: [{name: agent, image: agentlane:dev}]\nvolumes: [{name: root, hostPath: {path: /}}]":                                       "hostPath volumes are not allowed in spec.runtime.podTemplate",
			"serviceAccountName: agentlane-admin\nautomountServiceAccountToken: true\ncontainers: [{name: agent, image: agentlane:dev}]":            `serviceAccountName "agentlane-admin"`,
			"containers: [{name: agent, image: agentlane:dev}]\nvolumes: [{name: s, secret: {secretName: any}}]":                                    "Secret volume s",
			"nodeName: any\ntolerations: [{operator: Exists}]\ncontainers: [{name: agent, image: agentlane:dev}]":                                   "nodeName, a toleration of every taint",
			"containers: [{name: agent, image: agentlane:dev, securityContext: {capabilities: {add: [NET_ADMIN]}}}]":                                "capabilities.add NET_ADMIN in container agent",
			"securityContext: {runAsUser: 0}\ncontainers: [{name: agent, image: agentlane:dev, securityContext: {allowPrivilegeEscalation: true}}]": "runAsUser 0 in the pod, allowPrivilegeEscalation true in container agent",
			"priorityClassName: system-node-critical\ncontainers: [{name: agent, image: agentlane:dev}]":                                            "priorityClassName system-node-critical",
		} {
			doc := fmt.Sprintf(`
apiVersion: agentlane.io/v1alpha1
kind: AgentSession
metadata: {name: escape, namespace: default}
spec:
  queueRef: {name: e2e}
  runtime:
    podTemplate:
      spec:
%s
`, indent(spec, 8))
			_, err := runStdin(doc, kubectlBin, "apply", "-f", "-")
			Expect(err).To(MatchError(ContainSubstring(want)))
		}
		err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "escape"}, &agentlanev1alpha1.AgentSession{})
		Expect(err).To(HaveOccurred(), "the session was stored")
	})

	It("gives namespace viewers and editors agentlane objects through the built-in roles", func() {
		can := func(user, verb, resource, sub string) func() bool {
			return func() bool {
				sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
					User: user,
					ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Group: agentlanev1alpha1.GroupVersion.Group,
						Resource: resource, Subresource: sub, Verb: verb},
				}}
				Expect(k8sClient.Create(ctx, sar)).To(Succeed())
				return sar.Status.Allowed
			}
		}
		for user, role := range map[string]string{"e2e-viewer": "view", "e2e-editor": "edit"} {
			Expect(k8sClient.Create(ctx, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
				Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
			})).To(Succeed())
		}
		// The controller manager aggregates the labelled roles into view,
		// edit and admin.
		Eventually(can("e2e-viewer", "list", "externaltasks", "")).Should(BeTrue())
		Eventually(can("e2e-editor", "create", "agentsessions", "")).Should(BeTrue())
		Expect(can("e2e-editor", "create", "agentsessions", "api")()).To(BeTrue())
		Expect(can("e2e-viewer", "create", "lanequeues", "")()).To(BeFalse())
		Expect(can("e2e-viewer", "create", "agentsessions", "api")()).To(BeFalse())
		Expect(can("e2e-editor", "patch", "externaltasks", "status")()).To(BeFalse(), "task status is the manager's and the workers'")
	})

	It("runs a runtime pod's External commands on worker pods on several nodes, in order and within the per-session cap", func() {
		rebalanceWorkers()
		script := `turns:
- prompt: work
  llm: {inputTokens: 100, outputTokens: 10, duration: 50ms}
  steps:
  - {type: read, payload: {path: /scripts/script.yaml}}
  - {type: bash, payload: {command: "sleep 1; echo seq-1"}}
  - {type: bash, payload: {command: "sleep 1; echo seq-2"}}
  - {type: bash, payload: {command: "sleep 1; echo seq-3"}}
  - parallel:
    - {type: bash, payload: {command: "sleep 2; echo par-1"}}
    - {type: bash, payload: {command: "sleep 2; echo par-2"}}
    - {type: bash, payload: {command: "sleep 2; echo par-3"}}
    - {type: bash, payload: {command: "sleep 2; echo par-4"}}
    - {type: bash, payload: {command: "sleep 2; echo par-5"}}
    - {type: bash, payload: {command: "sleep 2; echo par-6"}}
`
		apply(fmt.Sprintf(runtimeSessionYAML, "pods", indent(script, 4), managerPod().Spec.NodeName))
		pod := runtimePod("pods")
		Expect(pod.Spec.NodeName).NotTo(Equal(managerPod().Spec.NodeName))
		By("the runtime pod runs restricted: the manager filled in what its template left unset")
		Expect(pod.Spec.SecurityContext.RunAsNonRoot).To(HaveValue(BeTrue()))
		Expect(pod.Spec.SecurityContext.SeccompProfile.Type).To(Equal(corev1.SeccompProfileTypeRuntimeDefault))
		Expect(pod.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation).To(HaveValue(BeFalse()))
		Expect(pod.Spec.Containers[0].SecurityContext.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")))
		snapshot("runtime-session")

		post("pods", "run the checks")
		tasks := waitForTasks("pods", 9, 3*time.Minute)
		expectRanOnce(tasks)
		expectCounted("pods", 11) // the 9 above, the read and the model call

		By("the commands ran on worker pods of at least two nodes")
		nodes := map[string]bool{}
		for _, t := range tasks {
			Expect(t.Status.Worker).To(HavePrefix("agentlane-worker-"), describe(t))
			nodes[t.Status.NodeName] = true
		}
		Expect(len(nodes)).To(BeNumerically(">=", 2), "nodes %v", nodes)

		By("the sequential commands ran one after another, in submission order")
		for i := 1; i < 3; i++ {
			prev, next := tasks[fmt.Sprintf("seq-%d", i)], tasks[fmt.Sprintf("seq-%d", i+1)]
			Expect(next.Status.StartedAt.Time).NotTo(BeTemporally("<", prev.Status.FinishedAt.Time), "%s\n%s", describe(prev), describe(next))
		}

		By("the parallel group ran two at a time (the per-session cap), the first submitted first")
		var group []*agentlanev1alpha1.ExternalTask
		for i := 1; i <= 6; i++ {
			group = append(group, tasks[fmt.Sprintf("par-%d", i)])
		}
		Expect(maxOverlap(group)).To(Equal(2))
		for _, early := range group[:2] {
			for _, late := range group[4:] {
				Expect(early.Status.StartedAt.Time).To(BeTemporally("<", late.Status.StartedAt.Time), "%s\n%s", describe(early), describe(late))
			}
		}
	})

	It("gives a task on a worker pod neither the worker's service-account token nor its environment", expectTasksIsolated)

	It("runs a Job-target lane's tasks in Jobs whose pods complete them", func() {
		apply(fmt.Sprintf(plainSessionYAML, "jobs"))
		apply(`
apiVersion: v1
kind: ServiceAccount
metadata: {name: job-worker, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: job-worker, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: agentlane-worker-role}
subjects: [{kind: ServiceAccount, name: job-worker, namespace: default}]
`)
		createTasks("jobs", "job", "jobs", 3, func(i int) string { return fmt.Sprintf("sleep 1; echo job-%d", i) })
		tasks := waitForTasks("jobs", 3, 4*time.Minute)
		expectRanOnce(tasks)
		expectCounted("jobs", 3)
		for _, t := range tasks {
			Expect(t.Status.JobName).NotTo(BeEmpty(), describe(t))
			job := &batchv1.Job{}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: t.Status.JobName}, job)).To(Succeed())
			Expect(job.Labels).To(HaveKeyWithValue("agentlane.io/task", t.Name))
			Eventually(func(g Gomega) {
				g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(job), job)).To(Succeed())
				g.Expect(job.Status.Succeeded).To(Equal(int32(1)))
			}).WithTimeout(time.Minute).Should(Succeed())
			By(fmt.Sprintf("%s ran in pod %s of Job %s on %s", t.Name, t.Status.Worker, job.Name, t.Status.NodeName))
			Expect(t.Status.Worker).To(HavePrefix(job.Name), describe(t))
			Expect(nodeOf(ns, t.Status.Worker)).To(Equal(t.Status.NodeName))
		}
	})

	It("refuses a worker pod's own token writing another worker's task or Lease, while the workers run their tasks", func() {
		apply(fmt.Sprintf(plainSessionYAML, "tenancy"))
		createTasks("tenancy", "tenancy", "bulk", 1, func(int) string { return "sleep 15; echo tenancy-1" })
		task := &agentlanev1alpha1.ExternalTask{}
		Eventually(func(g Gomega) {
			tasks := tasksOf("tenancy")
			g.Expect(tasks).To(HaveLen(1))
			g.Expect(tasks[0].Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskRunning), describe(&tasks[0]))
			*task = tasks[0]
		}).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
		holder := task.Status.Worker
		var attacker corev1.Pod
		for _, p := range podsOf("worker") {
			if p.Name != holder {
				attacker = p
				break
			}
		}
		Expect(attacker.Name).NotTo(BeEmpty(), "a worker pod other than %s", holder)
		By(fmt.Sprintf("worker %s, with a token bound to its pod, attacks the task and Lease of worker %s", attacker.Name, holder))
		c := workerPodClient(attacker)

		err := c.Status().Patch(ctx, task.DeepCopy(), client.RawPatch(types.MergePatchType,
			[]byte(`{"status":{"phase":"Succeeded","result":{"success":true,"result":{"stdout":"forged\n"}}}}`)))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "complete another worker's task: %v", err)
		Expect(err.Error()).To(ContainSubstring("may not write the status of this task"))
		err = c.Status().Patch(ctx, task.DeepCopy(), client.RawPatch(types.MergePatchType,
			[]byte(fmt.Sprintf(`{"status":{"worker":%q}}`, attacker.Name))))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "take over another worker's task: %v", err)

		lease := &coordinationv1.Lease{}
		Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "agentlane-worker-" + holder}, lease)).To(Succeed())
		lease.Spec.HolderIdentity = ptr.To(attacker.Name)
		err = c.Update(ctx, lease)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "take over another worker's Lease: %v", err)
		Expect(err.Error()).To(ContainSubstring("may write only its own Lease"))
		err = c.Delete(ctx, lease)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "delete another worker's Lease: %v", err)
		err = c.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "agentlane-worker-" + attacker.Name}})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "create a Lease in kube-system: %v", err)
		err = c.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "my-app-leader",
				Labels: map[string]string{"agentlane.io/worker": "true"}, Annotations: map[string]string{"agentlane.io/capacity": "10000"}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(attacker.Name)}})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "create a labelled Lease under another name: %v", err)
		own := &coordinationv1.Lease{}
		Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "agentlane-worker-" + attacker.Name}, own)).To(Succeed())
		own.Spec.HolderIdentity = ptr.To(holder)
		err = c.Update(ctx, own)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "hold its own Lease as another worker: %v", err)
		Expect(err.Error()).To(ContainSubstring("may hold its Lease only as itself"))
		err = c.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: "not-a-token"}})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "create a TokenReview: %v", err)
		err = c.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               "system:serviceaccount:" + systemNamespace + ":agentlane-controller-manager",
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "secrets"}}})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "create a SubjectAccessReview: %v", err)
		err = c.List(ctx, &agentlanev1alpha1.ExternalTaskList{}, client.InNamespace(systemNamespace))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "list the tasks of a namespace the worker does not serve: %v", err)

		By("the task finishes on its own worker with its own output")
		tasks := waitForTasks("tenancy", 1, 2*time.Minute)
		expectRanOnce(tasks)
		t := tasks["tenancy-1"]
		Expect(t.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskSucceeded), describe(t))
		Expect(t.Status.Worker).To(Equal(holder))
		Expect(stdout(t)).To(Equal("tenancy-1\n"))
	})

	It("keeps one of two managers ready and behind the Session API Service, and fails over to the standby when the leader's pod is deleted, every task run once", expectFailoverOnDelete)

	It("fails over to the standby manager when the leader's process is killed (SIGKILL), every task run once", expectFailoverOnKill)

	It("moves a session off a drained node: checkpoint, eviction through the Eviction API, resume on another node", func() {
		var steps []string
		for i := 1; i <= 8; i++ {
			steps = append(steps, fmt.Sprintf(`  - {type: bash, payload: {command: "sleep 1.5; echo step-%d"}}`, i))
		}
		script := "turns:\n- prompt: work\n  steps:\n" + strings.Join(steps, "\n") + "\n"
		apply(fmt.Sprintf(runtimeSessionYAML, "drained", indent(script, 4), managerPod().Spec.NodeName))
		first := runtimePod("drained")
		drainedNode := first.Spec.NodeName
		Expect(drainedNode).NotTo(Equal(managerPod().Spec.NodeName))
		Eventually(func() agentlanev1alpha1.SessionPhase { return session("drained").Status.Phase }).
			WithTimeout(time.Minute).Should(Equal(agentlanev1alpha1.SessionActive))

		By("watching the runtime pods, to see how the first one leaves")
		seen := watchPods("drained")

		post("drained", "work")
		Eventually(func() int { return len(tasksOf("drained")) }).WithTimeout(time.Minute).Should(BeNumerically(">=", 3))

		By("draining " + drainedNode + ", which hosts the runtime pod " + first.Name)
		began := time.Now()
		drained := make(chan string, 1)
		go func() {
			defer GinkgoRecover()
			cmd := exec.CommandContext(ctx, kubectlBin, "drain", drainedNode, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=4m")
			cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
			out, err := cmd.CombinedOutput()
			if err != nil {
				out = append(out, []byte("\nkubectl drain: "+err.Error())...)
			}
			drained <- string(out)
		}()
		DeferCleanup(func() { kubectl("uncordon", drainedNode) })

		second := runtimePodOtherThan("drained", first.Name)
		GinkgoWriter.Printf("drain of %s to the resumed pod %s on %s: %s\n", drainedNode, second.Name, second.Spec.NodeName, time.Since(began).Round(time.Millisecond))
		Expect(second.Spec.NodeName).NotTo(Equal(drainedNode), "the session resumed on the drained node")
		snapshot("after-drain")

		tasks := waitForTasks("drained", 8, 3*time.Minute)
		expectRanOnce(tasks)
		expectCounted("drained", 8)
		var drainOutput string
		Eventually(drained).WithTimeout(4 * time.Minute).Should(Receive(&drainOutput))
		GinkgoWriter.Printf("kubectl drain:\n%s\n", drainOutput)
		Expect(drainOutput).To(ContainSubstring("node/" + drainedNode + " drained"))
		By("the drain's eviction of the runtime pod was refused while the session's PodDisruptionBudget held it")
		Expect(drainOutput).To(MatchRegexp(`evicting pod default/` + first.Name + `[\s\S]*disruption budget`))

		By("the first pod was evicted through the Eviction API")
		Expect(seen.disruption(first.Name)).To(Equal("EvictionByEvictionAPI"))
		s := session("drained")
		Expect(s.Status.Phase).To(Equal(agentlanev1alpha1.SessionActive))
		Expect(s.Status.LastCheckpoint).NotTo(BeNil())
		Expect(eventReasons("AgentSession", "drained")).To(ContainElements("PassivationRequested", "Evicted", "Resumed"))
		Expect(eventReasons("AgentSession", "drained")).NotTo(ContainElement("PassivationDeadlineExceeded"))

		By("the runtime ran the steps in order under two runs: the checkpoint's and the resumed one")
		runIDs := map[string]bool{}
		ordered := slices.Collect(func(yield func(*agentlanev1alpha1.ExternalTask) bool) {
			for i := 1; i <= 8; i++ {
				if !yield(tasks[fmt.Sprintf("step-%d", i)]) {
					return
				}
			}
		})
		for i, t := range ordered {
			runIDs[t.Spec.RunID] = true
			if i > 0 {
				Expect(t.Status.StartedAt.Time).NotTo(BeTemporally("<", ordered[i-1].Status.FinishedAt.Time))
			}
		}
		Expect(runIDs).To(HaveLen(2), "run ids %v", runIDs)
	})

	It("retries a deleted worker pod's tasks on workers elsewhere, none lost, none counted twice", func() {
		rebalanceWorkers()
		apply(fmt.Sprintf(plainSessionYAML, "lost-pod"))
		createTasks("lost-pod", "lost-pod", "bulk", 9, func(i int) string { return fmt.Sprintf("sleep 8; echo lost-pod-%d", i) })
		victim := busyWorker("lost-pod", "")
		By("deleting worker pod " + victim + " with a one-second grace period while it runs tasks")
		kubectl("delete", "pod", "-n", systemNamespace, victim, "--grace-period=1", "--wait=false")
		expectRetriedElsewhere("lost-pod", 9, victim)
	})

	It("retries the tasks of a node killed outright on workers of other nodes", func() {
		rebalanceWorkers()
		apply(fmt.Sprintf(plainSessionYAML, "lost-node"))
		createTasks("lost-node", "lost-node", "bulk", 9, func(i int) string { return fmt.Sprintf("sleep 8; echo lost-node-%d", i) })
		victim := busyWorker("lost-node", managerPod().Spec.NodeName)
		node := nodeOf(systemNamespace, victim)
		By("killing " + node + " (every process of it) while worker " + victim + " runs tasks")
		_, err := run("../../hack/cluster.sh", "kill-node", node)
		Expect(err).NotTo(HaveOccurred())
		expectRetriedElsewhere("lost-node", 9, victim)
	})
})

func lq(name string) *agentlanev1alpha1.LaneQueue {
	GinkgoHelper()
	q := &agentlanev1alpha1.LaneQueue{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, q)).To(Succeed())
	return q
}

// rebalanceWorkers restarts the worker Deployment until its pods run one
// per node (the spread is a scheduling preference, not a rule), and waits
// for it.
func rebalanceWorkers() {
	GinkgoHelper()
	for try := 1; ; try++ {
		kubectl("rollout", "restart", "-n", systemNamespace, "deployment/agentlane-worker")
		kubectl("rollout", "status", "-n", systemNamespace, "deployment/agentlane-worker", "--timeout=3m")
		var pods []corev1.Pod
		Eventually(func() []corev1.Pod {
			pods = podsOf("worker")
			return pods
		}).WithTimeout(2 * time.Minute).Should(HaveLen(workerReplicas))
		nodes := map[string]bool{}
		for _, p := range pods {
			nodes[p.Spec.NodeName] = true
		}
		if len(nodes) == workerReplicas {
			break
		}
		Expect(try).To(BeNumerically("<", 3), "workers on nodes %v after %d rollouts", nodes, try)
	}
	snapshot("workers")
}

// busyWorker waits until workers run the session's tasks and returns a
// worker that runs at least two of them, not on the node avoid.
func busyWorker(session, avoid string) string {
	GinkgoHelper()
	var victim string
	Eventually(func(g Gomega) {
		count := map[string]int{}
		for _, t := range tasksOf(session) {
			if t.Status.Phase == agentlanev1alpha1.ExternalTaskRunning && t.Status.NodeName != avoid {
				count[t.Status.Worker]++
			}
		}
		workers := make([]string, 0, len(count))
		for w, n := range count {
			if n >= 2 {
				workers = append(workers, w)
			}
		}
		g.Expect(workers).NotTo(BeEmpty(), "running: %v", count)
		sort.Strings(workers)
		victim = workers[0]
	}).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
	return victim
}

// expectRetriedElsewhere waits for the session's tasks and checks that
// every task the victim held was run again by another worker and counted
// once, and that the others ran once.
func expectRetriedElsewhere(session string, n int, victim string) {
	GinkgoHelper()
	tasks := waitForTasks(session, n, 4*time.Minute)
	moved := 0
	for marker, t := range tasks {
		Expect(t.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskSucceeded), describe(t))
		Expect(t.Status.Worker).NotTo(Equal(victim), describe(t))
		Expect(stdout(t)).To(ContainSubstring(marker), describe(t))
		held := slices.ContainsFunc(t.Status.Attempts, func(a agentlanev1alpha1.TaskAttempt) bool { return a.Worker == victim })
		if held {
			moved++
			Expect(t.Status.Attempt).To(BeNumerically(">=", 2), describe(t))
		} else {
			Expect(runs(t)).To(Equal(1), "ran once: %s", describe(t))
		}
	}
	Expect(moved).To(BeNumerically(">=", 2), "tasks of %s retried elsewhere", victim)
	expectCounted(session, n)
}

// podWatch records, per pod, the reason of its DisruptionTarget condition.
type podWatch struct {
	mu      sync.Mutex
	reasons map[string]string
}

func (w *podWatch) disruption(pod string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.reasons[pod]
}

// watchPods watches the runtime pods of a session until the spec ends.
func watchPods(session string) *podWatch {
	GinkgoHelper()
	w := &podWatch{reasons: map[string]string{}}
	wi, err := clientset.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: "agentlane.io/session-runtime=" + session})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(wi.Stop)
	go func() {
		for ev := range wi.ResultChan() {
			if ev.Type == watch.Error {
				continue
			}
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			for _, c := range pod.Status.Conditions {
				if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
					w.mu.Lock()
					w.reasons[pod.Name] = c.Reason
					w.mu.Unlock()
				}
			}
		}
	}()
	return w
}
