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
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// warmTemplate is the runtime pod template of the drain-to-answer spec:
// cmd/agent serving the script of the ConfigMap warm-script, never on a
// node that has a pod of the same app label (%[1]s), so that a
// RuntimePool's warm pod waits on a node the session does not run on. Two
// schedulable nodes are enough (the suite may have killed its third): the
// drain only cordons the node and evicts the session's pod, whatever else
// runs there, the manager included.
const warmTemplate = `metadata:
  labels: {app: %[1]s}
spec:
  serviceAccountName: agent
  terminationGracePeriodSeconds: 10
  affinity:
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - labelSelector: {matchLabels: {app: %[1]s}}
        topologyKey: kubernetes.io/hostname
  containers:
  - name: agent
    image: agentlane:dev
    command: ["/agent"]
    args: ["--mode=serve", "--script=/scripts/script.yaml"]
    volumeMounts: [{name: script, mountPath: /scripts}]
  volumes:
  - name: script
    configMap: {name: warm-script}
`

// warmScriptYAML is the script: every turn reads one file on the runtime
// (the Internal query lane), so a turn is the runtime answering.
const warmScriptYAML = `
apiVersion: v1
kind: ConfigMap
metadata: {name: warm-script, namespace: default}
data:
  script.yaml: |
    turns:
    - prompt: ping
      steps:
      - {type: read, payload: {path: /etc/hostname}}
`

const warmSessionYAML = `
apiVersion: agentlane.io/v1alpha1
kind: AgentSession
metadata: {name: %s, namespace: default}
spec:
  queueRef: {name: e2e}
  identity: {tenantId: e2e, principal: agent}
  runtime:
    passivationDeadline: 2m
    podTemplate:
%s
`

const runtimePoolYAML = `
apiVersion: agentlane.io/v1alpha1
kind: RuntimePool
metadata: {name: %s, namespace: default}
spec:
  replicas: 1
  template:
%s
`

// drainsPerKind is how many drains the spec measures, warm and cold.
const drainsPerKind = 5

var _ = Describe("warm runtime pods on a real cluster", Ordered, func() {
	BeforeAll(func() {
		apply(queueYAML)
		expectReady(&agentlanev1alpha1.LaneQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "e2e"}},
			func() []metav1.Condition { return lq("e2e").Status.Conditions })
	})

	It("measures drain-to-answer with a warm pod adopted and with a cold pod, five drains each", func() {
		warmTmpl := fmt.Sprintf(warmTemplate, "warm-e2e")
		coldTmpl := fmt.Sprintf(warmTemplate, "cold-e2e")
		apply(warmScriptYAML)

		By("a RuntimePool of the warm session's template, ready before the session")
		apply(fmt.Sprintf(runtimePoolYAML, "warm-e2e", indent(warmTmpl, 4)))
		DeferCleanup(func() { kubectl("delete", "runtimepool", "-n", ns, "warm-e2e", "--wait=false") })
		waitForWarmPod("warm-e2e", "")
		apply(fmt.Sprintf(warmSessionYAML, "warm", indent(warmTmpl, 6)))
		apply(fmt.Sprintf(warmSessionYAML, "cold", indent(coldTmpl, 6)))
		DeferCleanup(func() { kubectl("delete", "agentsession", "-n", ns, "warm", "cold", "--wait=false") })

		var warm, cold []time.Duration
		for i := range drainsPerKind {
			warm = append(warm, drainToAnswer("warm", "warm-e2e", i))
			cold = append(cold, drainToAnswer("cold", "", i))
		}
		warmP50, coldP50 := median(warm), median(cold)
		line := fmt.Sprintf("drain to answer over %d drains each: warm (adopted pod) p50 %s %s (target <= 500ms), cold (new pod) p50 %s %s (load average %s)",
			drainsPerKind, warmP50, roundAll(warm), coldP50, roundAll(cold), loadAverage())
		AddReportEntry("drain to answer, warm versus cold", line)
		GinkgoWriter.Println(line)
		fmt.Fprintln(os.Stderr, line)
		// The times are reported against the 500 ms target for a warm p50,
		// not asserted: a loaded machine moves them, and five drains of
		// each kind are too few to rank two distributions on it. What makes
		// a pod warm is asserted for every drain in drainToAnswer: the
		// adopted pod was ready before the old one was evicted, a cold one
		// was made after.
	})
})

// waitForWarmPod waits until the pool keeps a ready warm pod on a node
// other than avoid, and returns it.
func waitForWarmPod(pool, avoid string) *corev1.Pod {
	GinkgoHelper()
	var warm *corev1.Pod
	Eventually(func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(k8sClient.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{agentlanev1alpha1.RuntimePoolLabel: pool})).To(Succeed())
		i := slices.IndexFunc(pods.Items, func(p corev1.Pod) bool {
			return p.DeletionTimestamp == nil && ready(&p) && p.Spec.NodeName != avoid
		})
		g.Expect(i).NotTo(Equal(-1), "a ready warm pod of %s off %q among %d", pool, avoid, len(pods.Items))
		warm = &pods.Items[i]
	}).WithTimeout(3 * time.Minute).WithPolling(250 * time.Millisecond).Should(Succeed())
	return warm
}

// drainToAnswer drains the node of the session's runtime pod (only that
// pod: kubectl drain --pod-selector) and returns the time from the pod's
// eviction to the resumed runtime answering a turn posted then. With a
// pool, a warm pod on another node is ready first and the resumed pod
// must be it (adopted); without, the resumed pod must be a new one.
func drainToAnswer(name, pool string, round int) time.Duration {
	GinkgoHelper()
	Eventually(func() agentlanev1alpha1.SessionPhase { return session(name).Status.Phase }).
		WithTimeout(3 * time.Minute).Should(Equal(agentlanev1alpha1.SessionActive))
	first := runtimePod(name)
	node := first.Spec.NodeName
	if pool != "" {
		waitForWarmPod(pool, node)
	}
	By(fmt.Sprintf("drain %d of %s: its runtime %s answers on %s", round+1, name, first.Name, node))
	answer(name, time.Minute)

	evicted := make(chan time.Time, 1)
	w, err := clientset.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: "agentlane.io/session-runtime=" + name})
	Expect(err).NotTo(HaveOccurred())
	defer w.Stop()
	go func() {
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type != watch.Error && p.Name == first.Name && p.DeletionTimestamp != nil {
				evicted <- time.Now()
				return
			}
		}
	}()
	drained := make(chan string, 1)
	go func() {
		cmd := exec.CommandContext(ctx, kubectlBin, "drain", node, "--ignore-daemonsets", "--delete-emptydir-data",
			"--pod-selector=agentlane.io/session-runtime="+name, "--timeout=3m")
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
		out, err := cmd.CombinedOutput()
		if err != nil {
			out = append(out, []byte("\nkubectl drain: "+err.Error())...)
		}
		drained <- string(out)
	}()
	defer kubectl("uncordon", node)

	var at time.Time
	Eventually(evicted).WithTimeout(3*time.Minute).Should(Receive(&at), "the manager evicts the runtime pod")
	took := answer(name, 2*time.Minute)
	d := took.Sub(at)

	resumed := runtimePodOtherThan(name, first.Name)
	Expect(resumed.Spec.NodeName).NotTo(Equal(node))
	adoptedAt, adopted := resumed.Annotations[agentlanev1alpha1.AdoptedAtAnnotation]
	Expect(adopted).To(Equal(pool != ""), "pod %s adopted (annotation %s): %v", resumed.Name, agentlanev1alpha1.AdoptedAtAnnotation, resumed.Annotations)
	// Timestamps of the API are whole seconds: compare with the eviction
	// cut to its second.
	evictedSecond := at.Truncate(time.Second)
	detail := ""
	if adopted {
		// Warm: no pod start lies between the eviction and the answer.
		readyAt := readySince(resumed)
		Expect(readyAt.IsZero()).To(BeFalse(), "adopted pod %s has no Ready condition", resumed.Name)
		Expect(readyAt.After(evictedSecond)).To(BeFalse(),
			"adopted pod %s was ready at %s, after %s was evicted at %s: it was no warm pod", resumed.Name, readyAt, first.Name, at)
		if t, err := time.Parse(time.RFC3339Nano, adoptedAt); err == nil {
			detail = fmt.Sprintf(" (adopted %s after the eviction)", t.Sub(at).Round(time.Millisecond))
		}
	} else {
		// Cold: the resumed pod was made for the resume.
		Expect(resumed.CreationTimestamp.Time.Before(evictedSecond)).To(BeFalse(),
			"pod %s, created at %s, resumed %s evicted at %s: a cold resume makes a new pod", resumed.Name, resumed.CreationTimestamp, name, at)
	}
	var out string
	Eventually(drained).WithTimeout(3 * time.Minute).Should(Receive(&out))
	Expect(out).To(ContainSubstring("node/"+node+" drained"), out)
	GinkgoWriter.Printf("%s drain %d: evicted %s on %s, %s answered on %s after %s%s\n", name, round+1, first.Name, node,
		resumed.Name, resumed.Spec.NodeName, d.Round(time.Millisecond), detail)
	return d
}

// answer posts a turn to the session and returns when its runtime ran it
// (the session's completed commands went up), polling the session's
// counters every 20ms.
func answer(name string, timeout time.Duration) time.Time {
	GinkgoHelper()
	s := sessionClient(name)
	stats, err := s.Stats(ctx)
	Expect(err).NotTo(HaveOccurred())
	before := stats.Session.Completed
	Eventually(func() error {
		_, err := s.Post(ctx, sessionapi.Message{Text: "ping"})
		return err
	}).WithTimeout(timeout).WithPolling(20 * time.Millisecond).Should(Succeed())
	var at time.Time
	Eventually(func(g Gomega) {
		stats, err := s.Stats(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(stats.Session.Completed).To(BeNumerically(">", before))
		at = time.Now()
	}).WithTimeout(timeout).WithPolling(20 * time.Millisecond).Should(Succeed())
	return at
}

// readySince is when the pod last became ready, zero when it is not.
func readySince(p *corev1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// median is the middle duration of ds (the upper one of an even count).
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2].Round(time.Millisecond)
}

// roundAll lists ds to the millisecond.
func roundAll(ds []time.Duration) string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond).String()
	}
	return "[" + strings.Join(out, " ") + "]"
}
