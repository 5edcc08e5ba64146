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
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/testenv"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// apply applies YAML with kubectl, as a user would.
func apply(manifest string) {
	GinkgoHelper()
	_, err := runStdin(manifest, kubectlBin, "apply", "-f", "-")
	Expect(err).NotTo(HaveOccurred())
}

// tasksOf lists the ExternalTasks of a session.
func tasksOf(session string) []agentlanev1alpha1.ExternalTask {
	GinkgoHelper()
	list := &agentlanev1alpha1.ExternalTaskList{}
	Expect(k8sClient.List(ctx, list, client.InNamespace(ns),
		client.MatchingLabels{agentlanev1alpha1.SessionLabel: session})).To(Succeed())
	return list.Items
}

// command is the shell command of a bash task.
func command(t *agentlanev1alpha1.ExternalTask) string {
	if t.Spec.Payload == nil {
		return ""
	}
	var p struct {
		Command string `json:"command"`
	}
	_ = json.Unmarshal(t.Spec.Payload.Raw, &p)
	return p.Command
}

// stdout is what a finished bash task printed.
func stdout(t *agentlanev1alpha1.ExternalTask) string {
	if t.Status.Result == nil || t.Status.Result.Result == nil {
		return ""
	}
	var out struct {
		Stdout string `json:"stdout"`
	}
	_ = json.Unmarshal(t.Status.Result.Result.Raw, &out)
	return out.Stdout
}

// byMarker indexes tasks by the marker their command echoes ("echo <marker>"
// ends each command the suite submits); a marker seen twice fails the spec,
// since every command must become exactly one task.
func byMarker(tasks []agentlanev1alpha1.ExternalTask) map[string]*agentlanev1alpha1.ExternalTask {
	GinkgoHelper()
	m := make(map[string]*agentlanev1alpha1.ExternalTask, len(tasks))
	for i := range tasks {
		t := &tasks[i]
		cmd := command(t)
		k := strings.LastIndex(cmd, "echo ")
		if k < 0 {
			continue
		}
		marker := strings.TrimSpace(cmd[k+len("echo "):])
		Expect(m).NotTo(HaveKey(marker), "two tasks for the command %q", cmd)
		m[marker] = t
	}
	return m
}

// runs counts the attempts of a task that a worker started. status.attempts
// lists the attempts that ended without success; a successful attempt is
// the current one. A task that ran exactly once has one.
func runs(t *agentlanev1alpha1.ExternalTask) int {
	n := 0
	for _, a := range t.Status.Attempts {
		if a.StartedAt != nil {
			n++
		}
	}
	if t.Status.Phase == agentlanev1alpha1.ExternalTaskSucceeded && t.Status.StartedAt != nil {
		n++
	}
	return n
}

// describe is a task in one line, for failure messages.
func describe(t *agentlanev1alpha1.ExternalTask) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %q phase=%s attempt=%d worker=%s node=%s", t.Name, command(t), t.Status.Phase, t.Status.Attempt, t.Status.Worker, t.Status.NodeName)
	for _, a := range t.Status.Attempts {
		fmt.Fprintf(&b, " [#%d %s on %s/%s started=%v]", a.Attempt, a.Outcome, a.Worker, a.NodeName, a.StartedAt != nil)
	}
	return b.String()
}

// expectRanOnce asserts that every task succeeded in its first attempt and
// was started by a worker exactly once.
func expectRanOnce(tasks map[string]*agentlanev1alpha1.ExternalTask) {
	GinkgoHelper()
	for marker, t := range tasks {
		Expect(t.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskSucceeded), describe(t))
		Expect(stdout(t)).To(ContainSubstring(marker), describe(t))
		Expect(t.Status.Attempt).To(Equal(int32(1)), describe(t))
		Expect(t.Status.Attempts).To(BeEmpty(), describe(t))
		Expect(runs(t)).To(Equal(1), "ran once: %s", describe(t))
	}
}

// waitForTasks waits until the session has want tasks, all finished, and
// returns them by marker.
func waitForTasks(session string, want int, timeout time.Duration) map[string]*agentlanev1alpha1.ExternalTask {
	GinkgoHelper()
	var out map[string]*agentlanev1alpha1.ExternalTask
	Eventually(func(g Gomega) {
		tasks := tasksOf(session)
		g.Expect(tasks).To(HaveLen(want))
		for i := range tasks {
			g.Expect(tasks[i].Status.Phase.IsTerminal()).To(BeTrue(), describe(&tasks[i]))
		}
		out = byMarker(tasks)
	}).WithTimeout(timeout).WithPolling(time.Second).Should(Succeed())
	return out
}

// maxOverlap is the largest number of tasks running at one instant, from
// their start and finish times. The times have whole seconds; rounding both
// down keeps apart intervals that were apart, so it never counts more
// overlap than there was.
func maxOverlap(tasks []*agentlanev1alpha1.ExternalTask) int {
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, t := range tasks {
		edges = append(edges, edge{t.Status.StartedAt.Time, +1}, edge{t.Status.FinishedAt.Time, -1})
	}
	sort.Slice(edges, func(i, j int) bool {
		if !edges[i].at.Equal(edges[j].at) {
			return edges[i].at.Before(edges[j].at)
		}
		return edges[i].delta < edges[j].delta // a finish before a start at the same instant
	})
	n, best := 0, 0
	for _, e := range edges {
		n += e.delta
		best = max(best, n)
	}
	return best
}

// sessionClient is the Session API of a session, as the tenant "agent".
func sessionClient(session string) *sessionapi.SessionClient {
	GinkgoHelper()
	c, err := sessionapi.NewClient(sessionAPIURL(), sessionapi.WithToken(tenantToken), sessionapi.WithHTTPClient(sessionAPIHTTP()))
	Expect(err).NotTo(HaveOccurred())
	return c.Session(ns, session)
}

// expectCounted asserts that the session's commands were counted by the
// lane scheduler as completed exactly once each, none dead-lettered.
func expectCounted(session string, completed int) {
	GinkgoHelper()
	stats, err := sessionClient(session).Stats(ctx)
	Expect(err).NotTo(HaveOccurred())
	Expect(stats.Session.Completed).To(Equal(uint64(completed)), "%+v", stats.Session)
	Expect(stats.Session.DeadLettered).To(BeZero(), "%+v", stats.Session)
	Expect(stats.Session.Pending+stats.Session.Active).To(BeZero(), "%+v", stats.Session)
}

// post sends a user message to a session through the Session API.
func post(session, text string) {
	GinkgoHelper()
	Eventually(func() error {
		_, err := sessionClient(session).Post(ctx, sessionapi.Message{Text: text})
		return err
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
}

// session gets an AgentSession.
func session(name string) *agentlanev1alpha1.AgentSession {
	GinkgoHelper()
	s := &agentlanev1alpha1.AgentSession{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s)).To(Succeed())
	return s
}

// runtimePod is a session's live runtime pod, once it runs.
func runtimePod(name string) *corev1.Pod {
	GinkgoHelper()
	return runtimePodOtherThan(name, "")
}

// runtimePodOtherThan is a session's live runtime pod, once one other than
// except runs.
func runtimePodOtherThan(name, except string) *corev1.Pod {
	GinkgoHelper()
	var pod *corev1.Pod
	Eventually(func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(k8sClient.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"agentlane.io/session-runtime": name})).To(Succeed())
		var live []corev1.Pod
		for _, p := range pods.Items {
			if p.Name != except && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && ready(&p) {
				live = append(live, p)
			}
		}
		g.Expect(live).To(HaveLen(1))
		pod = &live[0]
	}).WithTimeout(3 * time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
	return pod
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// expectReady waits for an object's Ready condition to be True.
func expectReady(obj client.Object, conditions func() []metav1.Condition) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		c := meta.FindStatusCondition(conditions(), "Ready")
		g.Expect(c).NotTo(BeNil(), "%s has no Ready condition", obj.GetName())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "%s: %s %s", obj.GetName(), c.Reason, c.Message)
	}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
}

// eventReasons lists the reasons of the Kubernetes Events about an object,
// oldest first.
func eventReasons(kind, name string) []string {
	GinkgoHelper()
	events := &corev1.EventList{}
	Expect(k8sClient.List(ctx, events, client.InNamespace(ns))).To(Succeed())
	sort.Slice(events.Items, func(i, j int) bool {
		return eventTime(&events.Items[i]).Before(eventTime(&events.Items[j]))
	})
	var reasons []string
	for _, e := range events.Items {
		if e.InvolvedObject.Kind == kind && e.InvolvedObject.Name == name {
			reasons = append(reasons, e.Reason)
		}
	}
	return reasons
}

func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

// nodeOf is the node a pod of the given name runs on ("" when it is gone).
func nodeOf(namespace, pod string) string {
	p := &corev1.Pod{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: pod}, p); err != nil {
		return ""
	}
	return p.Spec.NodeName
}

// workerPodClient authenticates as the worker running in pod, with a token
// of the workers' service account bound to that pod, as the pod's own
// projected token is: the API server knows the caller by the pod's name.
func workerPodClient(pod corev1.Pod) client.Client {
	GinkgoHelper()
	tr, err := clientset.CoreV1().ServiceAccounts(systemNamespace).CreateToken(ctx, pod.Spec.ServiceAccountName,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: ptr.To[int64](600),
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	c := rest.AnonymousClientConfig(cfg)
	c.BearerToken = tr.Status.Token
	cl, err := client.New(c, client.Options{Scheme: testenv.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	return cl
}

// nodeReady tells whether the node reports itself Ready (a node an earlier
// spec killed turns NotReady once its heartbeats are missed, and keeps its
// pods listed, those being deleted included, until it is removed).
func nodeReady(g Gomega, name string) bool {
	node := &corev1.Node{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: name}, node)).To(Succeed())
	return slices.ContainsFunc(node.Status.Conditions, func(c corev1.NodeCondition) bool {
		return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
	})
}
