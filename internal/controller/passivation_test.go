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

package controller

import (
	"context"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/testenv"
)

// The specs below play the parts no envtest control plane runs: the
// scheduler (binding pods to nodes), the kubelet (marking pods Running and
// finishing their deletion) and the session's runtime (running commands and
// saving checkpoints, which the Session API records in status).

// newNode creates a schedulable Node.
func newNode(prefix string) *corev1.Node {
	GinkgoHelper()
	n, err := testenv.NewNode(ctx, k8sClient, prefix)
	Expect(err).NotTo(HaveOccurred())
	return n
}

// cordon marks the node unschedulable, as kubectl cordon and drain do.
func cordon(n *corev1.Node) {
	GinkgoHelper()
	Expect(testenv.Cordon(ctx, k8sClient, n)).To(Succeed())
}

// runtimeSession creates a queue and a session with a runtime pod.
func runtimeSession(name string, runtime agentlanev1alpha1.SessionRuntime) (*agentlanev1alpha1.AgentSession, *lanequeue.Queue) {
	GinkgoHelper()
	lq := &agentlanev1alpha1.LaneQueue{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name + "-q"},
		Spec: agentlanev1alpha1.LaneQueueSpec{Lanes: []agentlanev1alpha1.Lane{
			{Name: "execute", Priority: 0, MaxConcurrencyPerSession: 1},
		}},
	}
	Expect(k8sClient.Create(ctx, lq)).To(Succeed())
	runtime.PodTemplate = corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "agent:test"}}},
	}
	s := testSession(name, lq.Name)
	s.Spec.Runtime = &runtime
	s.Spec.Identity = &agentlanev1alpha1.Identity{TenantID: "acme"}
	Expect(k8sClient.Create(ctx, s)).To(Succeed())
	var q *lanequeue.Queue
	Eventually(func() bool {
		var ok bool
		q, ok = schedulers.Get(types.NamespacedName{Namespace: "default", Name: lq.Name})
		return ok
	}).Should(BeTrue())
	return s, q
}

// runtimePodOf waits for the session's live runtime pod other than except.
func runtimePodOf(s *agentlanev1alpha1.AgentSession, except string) *corev1.Pod {
	GinkgoHelper()
	var pod *corev1.Pod
	Eventually(func(g Gomega) {
		var err error
		pod, err = testenv.LivePod(ctx, k8sClient, s.Namespace, map[string]string{RuntimeLabel: s.Name}, except)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pod).NotTo(BeNil(), "no runtime pod besides %q", except)
	}).Should(Succeed())
	return pod
}

// run binds the pod to the node and marks it Running and Ready.
func run(pod *corev1.Pod, node *corev1.Node) {
	GinkgoHelper()
	Expect(testenv.BindAndRun(ctx, k8sClient, pod, node.Name)).To(Succeed())
}

// finishDeletion completes the deletion of an evicted pod, as its kubelet
// would once the containers stopped.
func finishDeletion(pod *corev1.Pod) {
	GinkgoHelper()
	Expect(testenv.FinishDeletion(ctx, k8sClient, pod)).To(Succeed())
}

// checkpoint records a checkpoint of run in the session's status, as the
// Session API does when the runtime saves one.
func checkpoint(s *agentlanev1alpha1.AgentSession, run string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		cur := getSession(client.ObjectKeyFromObject(s))(g)
		orig := cur.DeepCopy()
		cur.Status.LastCheckpoint = &agentlanev1alpha1.Checkpoint{RunID: run, Turn: 1, Time: metav1.NewTime(time.Now().Add(time.Second))}
		g.Expect(k8sClient.Status().Patch(ctx, cur, client.MergeFrom(orig))).To(Succeed())
	}).Should(Succeed())
}

// phaseOf reads the session's phase.
func phaseOf(s *agentlanev1alpha1.AgentSession) func(Gomega) agentlanev1alpha1.SessionPhase {
	return func(g Gomega) agentlanev1alpha1.SessionPhase {
		return getSession(client.ObjectKeyFromObject(s))(g).Status.Phase
	}
}

// sessionEvents lists the reasons of the session's Kubernetes Events.
func sessionEvents(s *agentlanev1alpha1.AgentSession) func(Gomega) []string {
	return func(g Gomega) []string {
		list := &eventsv1.EventList{}
		g.Expect(k8sClient.List(ctx, list, client.InNamespace(s.Namespace))).To(Succeed())
		var out []string
		for _, e := range list.Items {
			if e.Regarding.Name == s.Name && e.Regarding.Kind == "AgentSession" {
				out = append(out, e.Reason)
			}
		}
		return out
	}
}

// sessionEvent finds the session's Kubernetes Event with reason.
func sessionEvent(s *agentlanev1alpha1.AgentSession, reason string) func(Gomega) *eventsv1.Event {
	return func(g Gomega) *eventsv1.Event {
		list := &eventsv1.EventList{}
		g.Expect(k8sClient.List(ctx, list, client.InNamespace(s.Namespace))).To(Succeed())
		for i, e := range list.Items {
			if e.Regarding.Name == s.Name && e.Regarding.Kind == "AgentSession" && e.Reason == reason {
				return &list.Items[i]
			}
		}
		return nil
	}
}

// counter counts how many times each command ran; a command blocks until
// released.
type counter struct {
	mu      sync.Mutex
	runs    map[string]int
	release chan struct{}
}

func newCounter() *counter { return &counter{runs: map[string]int{}, release: make(chan struct{})} }

func (c *counter) handler() lanequeue.Handler {
	return lanequeue.HandlerFunc(func(ctx context.Context, a lanequeue.Attempt) (lanequeue.Result, error) {
		c.mu.Lock()
		c.runs[a.ID]++
		c.mu.Unlock()
		select {
		case <-c.release:
		case <-ctx.Done():
			return lanequeue.Result{}, ctx.Err()
		}
		return lanequeue.Result{Success: true}, nil
	})
}

func (c *counter) count(id string) func() int {
	return func() int {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.runs[id]
	}
}

var _ = Describe("Session runtime pods and passivation", func() {
	It("moves a session off a cordoned node: checkpoint, eviction, a new pod elsewhere, no command lost or run twice", func() {
		nodeA, nodeB := newNode("node-a"), newNode("node-b")
		s, q := runtimeSession("drained", agentlanev1alpha1.SessionRuntime{PassivationDeadline: &metav1.Duration{Duration: time.Minute}})

		first := runtimePodOf(s, "")
		Expect(metav1.IsControlledBy(first, s)).To(BeTrue())
		env := map[string]string{}
		for _, e := range first.Spec.Containers[0].Env {
			env[e.Name] = e.Value
		}
		Expect(env).To(HaveKeyWithValue(EnvSession, "drained"))
		Expect(env).To(HaveKeyWithValue(EnvTenantID, "acme"))
		Expect(env).NotTo(HaveKey(EnvResumeRunID))
		Expect(first.Spec.Containers[0].Env).To(ContainElement(corev1.EnvVar{Name: EnvPodName,
			ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}}))
		pdb := &policyv1.PodDisruptionBudget{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: "default", Name: "agentlane-runtime-drained"}, pdb)).To(Succeed())
		run(first, nodeA)
		Eventually(func(g Gomega) {
			cur := getSession(client.ObjectKeyFromObject(s))(g)
			g.Expect(cur.Status.Phase).To(Equal(agentlanev1alpha1.SessionActive))
			g.Expect(cur.Status.NodeName).To(Equal(nodeA.Name))
			g.Expect(cur.Status.PodName).To(Equal(first.Name))
			expectReady(g, cur, metav1.ConditionTrue, agentlanev1alpha1.AgentSessionActiveReason)
		}).Should(Succeed())

		By("evicting the pod as a drain would")
		// The disruption controller, which envtest does not run, would
		// find no disruption allowed.
		pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation,
			DisruptionsAllowed: 0, CurrentHealthy: 1, DesiredHealthy: 1, ExpectedPods: 1}
		Expect(k8sClient.Status().Update(ctx, pdb)).To(Succeed())
		err := k8sClient.SubResource("eviction").Create(ctx, first, &policyv1.Eviction{})
		Expect(apierrors.IsTooManyRequests(err)).To(BeTrue(), "a drain evicting the pod: %v", err)

		By("running one command and queueing one behind it")
		c := newCounter()
		running, err := q.Submit(lanequeue.Command{ID: "c1", SessionKey: "drained", Type: "bash", Handler: c.handler()})
		Expect(err).NotTo(HaveOccurred())
		Eventually(c.count("c1")).Should(Equal(1))
		waiting, err := q.Submit(lanequeue.Command{ID: "c2", SessionKey: "drained", Type: "bash", Handler: c.handler()})
		Expect(err).NotTo(HaveOccurred())

		By("cordoning the node")
		cordon(nodeA)
		Eventually(func(g Gomega) {
			cur := getSession(client.ObjectKeyFromObject(s))(g)
			g.Expect(cur.Status.Phase).To(Equal(agentlanev1alpha1.SessionPassivating))
			g.Expect(cur.Status.Passivation).NotTo(BeNil())
			g.Expect(cur.Status.Passivation.Reason).To(Equal(agentlanev1alpha1.PassivationNodeDrain))
		}).Should(Succeed())
		Eventually(sessionEvents(s)).Should(ContainElement("PassivationRequested"))

		// Nothing is evicted while a command runs or before a checkpoint.
		close(c.release)
		Eventually(running.Done()).Should(BeClosed())
		Consistently(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(first), first)).To(Succeed())
			g.Expect(first.DeletionTimestamp).To(BeNil())
		}, "500ms").Should(Succeed())
		Expect(waiting.State()).To(Equal(lanequeue.StateQueued), "the session starts no new command while passivating")

		checkpoint(s, "run-1")
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(first), first)).To(Succeed())
			g.Expect(first.DeletionTimestamp).NotTo(BeNil(), "evicted")
		}).Should(Succeed())
		Eventually(sessionEvents(s)).Should(ContainElement("Evicted"))
		finishDeletion(first)

		second := runtimePodOf(s, first.Name)
		Expect(second.Spec.Containers[0].Env).To(ContainElement(corev1.EnvVar{Name: EnvResumeRunID, Value: "run-1"}))
		// The reconcile that creates the pod writes the phase just after.
		Eventually(phaseOf(s)).Should(Equal(agentlanev1alpha1.SessionResuming))
		Consistently(waiting.State, "300ms").Should(Equal(lanequeue.StateQueued), "queued work waits for the new pod")
		run(second, nodeB)
		Eventually(func(g Gomega) {
			cur := getSession(client.ObjectKeyFromObject(s))(g)
			g.Expect(cur.Status.Phase).To(Equal(agentlanev1alpha1.SessionActive))
			g.Expect(cur.Status.NodeName).To(Equal(nodeB.Name))
			g.Expect(cur.Status.Passivation).To(BeNil())
		}).Should(Succeed())
		Eventually(waiting.Done()).Should(BeClosed())
		Expect(waiting.State()).To(Equal(lanequeue.StateSucceeded))
		Expect(c.count("c1")()).To(Equal(1))
		Expect(c.count("c2")()).To(Equal(1))
	})

	It("evicts at the deadline when no checkpoint comes, and says so", func() {
		node := newNode("node-d")
		s, q := runtimeSession("late", agentlanev1alpha1.SessionRuntime{PassivationDeadline: &metav1.Duration{Duration: time.Second}})
		pod := runtimePodOf(s, "")
		run(pod, node)
		Eventually(phaseOf(s)).Should(Equal(agentlanev1alpha1.SessionActive))
		c := newCounter()
		DeferCleanup(func() { close(c.release) })
		_, err := q.Submit(lanequeue.Command{ID: "stuck", SessionKey: "late", Type: "bash", Handler: c.handler()})
		Expect(err).NotTo(HaveOccurred())
		Eventually(c.count("stuck")).Should(Equal(1))

		cordon(node)
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
			g.Expect(pod.DeletionTimestamp).NotTo(BeNil())
		}).Should(Succeed())
		Eventually(sessionEvents(s)).Should(ContainElement("PassivationDeadlineExceeded"))
		Eventually(sessionEvent(s, "Passivated")).Should(And(
			HaveField("Type", corev1.EventTypeNormal),
			HaveField("Note", And(ContainSubstring("passivated (node_drain)"), ContainSubstring("no checkpoint yet"),
				ContainSubstring("the deadline passed before a newer checkpoint"))),
		))
		finishDeletion(pod)
		Eventually(func(g Gomega) {
			cur := getSession(client.ObjectKeyFromObject(s))(g)
			c := meta.FindStatusCondition(cur.Status.Conditions, agentlanev1alpha1.AgentSessionReadyCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Message).To(Or(ContainSubstring("deadline passed"), ContainSubstring("new runtime pod")))
		}).Should(Succeed())
	})

	It("passivates on desiredState Passivated, keeps no pod, and resumes on Active", func() {
		node := newNode("node-m")
		s, _ := runtimeSession("manual", agentlanev1alpha1.SessionRuntime{})
		pod := runtimePodOf(s, "")
		run(pod, node)
		Eventually(phaseOf(s)).Should(Equal(agentlanev1alpha1.SessionActive))

		setDesired := func(d agentlanev1alpha1.DesiredState) {
			GinkgoHelper()
			Eventually(func(g Gomega) {
				cur := getSession(client.ObjectKeyFromObject(s))(g)
				cur.Spec.DesiredState = d
				g.Expect(k8sClient.Update(ctx, cur)).To(Succeed())
			}).Should(Succeed())
		}
		setDesired(agentlanev1alpha1.DesiredStatePassivated)
		Eventually(phaseOf(s)).Should(Equal(agentlanev1alpha1.SessionPassivating))
		checkpoint(s, "run-m")
		Eventually(phaseOf(s)).Should(Equal(agentlanev1alpha1.SessionPassivated))
		Eventually(sessionEvent(s, "Passivated")).Should(And(
			HaveField("Type", corev1.EventTypeNormal),
			HaveField("Action", "Passivate"),
			HaveField("Note", And(ContainSubstring("passivated (manual)"), ContainSubstring("checkpoint of run run-m, turn 1"))),
		))
		finishDeletion(pod)
		Consistently(func(g Gomega) []corev1.Pod {
			pods := &corev1.PodList{}
			g.Expect(k8sClient.List(ctx, pods, client.InNamespace("default"), client.MatchingLabels{RuntimeLabel: "manual"})).To(Succeed())
			return pods.Items
		}, "500ms").Should(BeEmpty())

		setDesired(agentlanev1alpha1.DesiredStateActive)
		next := runtimePodOf(s, pod.Name)
		run(next, node)
		Eventually(phaseOf(s)).Should(Equal(agentlanev1alpha1.SessionActive))
		// Events are recorded asynchronously.
		Eventually(sessionEvents(s)).Should(ContainElements("PassivationRequested", "Evicted", "Resuming", "Resumed"))
	})

	It("passivates a session idle past its idleTimeout and resumes it when work arrives", func() {
		node := newNode("node-i")
		s, q := runtimeSession("idle", agentlanev1alpha1.SessionRuntime{IdleTimeout: &metav1.Duration{Duration: time.Second}})
		pod := runtimePodOf(s, "")
		run(pod, node)
		Eventually(phaseOf(s)).Should(Equal(agentlanev1alpha1.SessionActive))
		Eventually(func(g Gomega) agentlanev1alpha1.PassivationReason {
			cur := getSession(client.ObjectKeyFromObject(s))(g)
			g.Expect(cur.Status.Passivation).NotTo(BeNil())
			return cur.Status.Passivation.Reason
		}, "10s").Should(Equal(agentlanev1alpha1.PassivationIdleReaper))
		checkpoint(s, "run-i")
		Eventually(phaseOf(s)).Should(Equal(agentlanev1alpha1.SessionPassivated))
		finishDeletion(pod)
		Consistently(phaseOf(s), "1500ms").Should(Equal(agentlanev1alpha1.SessionPassivated), "no work, no resume")

		c := newCounter()
		close(c.release)
		tk, err := q.Submit(lanequeue.Command{ID: "wake", SessionKey: "idle", Type: "bash", Handler: c.handler()})
		Expect(err).NotTo(HaveOccurred())
		next := runtimePodOf(s, pod.Name)
		Expect(tk.State()).To(Equal(lanequeue.StateQueued))
		run(next, node)
		Eventually(tk.Done()).Should(BeClosed())
		Expect(c.count("wake")()).To(Equal(1))
		Eventually(phaseOf(s)).Should(Equal(agentlanev1alpha1.SessionActive))
	})
})
