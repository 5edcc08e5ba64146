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

package sessionserver

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/agentscript"
	"github.com/agentlane/agentlane/internal/controller"
	"github.com/agentlane/agentlane/internal/executor"
	"github.com/agentlane/agentlane/internal/testenv"
	"github.com/agentlane/agentlane/internal/worker"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// The specs below run the scripted runtime in-process as a session's
// runtime pod, against the Session API and the controllers. No kubelet or
// scheduler runs, so the specs bind pods to Nodes, mark them Running and
// finish their deletion; the disruption controller is played by writing
// the PodDisruptionBudget's status.

// ledger records every execution of the scripts' tools, on the runtime
// (Internal commands) and on a worker (External ones): each appends the
// mark in its payload. A "block" tool then waits until its mark is
// released.
type ledger struct {
	mu    sync.Mutex
	marks []string
	gates map[string]*gate
}

type gate struct {
	started, released      chan struct{}
	startOnce, releaseOnce sync.Once
}

func newLedger() *ledger { return &ledger{gates: map[string]*gate{}} }

func (l *ledger) gate(mark string) *gate {
	l.mu.Lock()
	defer l.mu.Unlock()
	g := l.gates[mark]
	if g == nil {
		g = &gate{started: make(chan struct{}), released: make(chan struct{})}
		l.gates[mark] = g
	}
	return g
}

// started is closed once the block tool of mark runs.
func (l *ledger) started(mark string) <-chan struct{} { return l.gate(mark).started }

// release lets the block tool of mark end.
func (l *ledger) release(mark string) {
	g := l.gate(mark)
	g.releaseOnce.Do(func() { close(g.released) })
}

// counts is how many times each mark was executed.
func (l *ledger) counts() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for _, m := range l.marks {
		out[m]++
	}
	return out
}

// registry runs "record" and "block" for the runtime and the worker.
func (l *ledger) registry() *executor.Registry {
	reg := executor.NewRegistry(executor.DefaultMaxOutputBytes)
	run := func(ctx context.Context, payload json.RawMessage, block bool) (executor.Output, error) {
		var p struct {
			Mark string `json:"mark"`
		}
		if err := json.Unmarshal(payload, &p); err != nil || p.Mark == "" {
			return executor.Output{}, fmt.Errorf("payload %s has no mark", payload)
		}
		l.mu.Lock()
		l.marks = append(l.marks, p.Mark)
		l.mu.Unlock()
		if block {
			g := l.gate(p.Mark)
			g.startOnce.Do(func() { close(g.started) })
			select {
			case <-g.released:
			case <-ctx.Done():
				return executor.Output{}, ctx.Err()
			}
		}
		return executor.Output{Success: true, Stdout: p.Mark}, nil
	}
	reg.Register("record", executor.ExecutorFunc(func(ctx context.Context, payload json.RawMessage) (executor.Output, error) {
		return run(ctx, payload, false)
	}))
	reg.Register("block", executor.ExecutorFunc(func(ctx context.Context, payload json.RawMessage) (executor.Output, error) {
		return run(ctx, payload, true)
	}))
	return reg
}

// tool is a script step of type typ in lane with the given mark.
func tool(typ, lane, mark string) agentscript.Step {
	return agentscript.Step{Type: typ, Lane: lane, Payload: json.RawMessage(fmt.Sprintf(`{"mark":%q}`, mark))}
}

// drainLanes share one slot for the whole queue (maxConcurrent 1), so that
// the commands of a parallel step queue behind each other: "urgent" ones
// start first, "remote" ones run on workers.
func drainLanes() agentlanev1alpha1.LaneQueueSpec {
	return agentlanev1alpha1.LaneQueueSpec{
		MaxConcurrent: 1,
		Lanes: []agentlanev1alpha1.Lane{
			{Name: "urgent", Priority: 0},
			{Name: "execute", Priority: 1},
			{Name: "remote", Priority: 2, HandlerMode: agentlanev1alpha1.HandlerModeExternal},
			{Name: "generate", Priority: 3},
		},
	}
}

// runtimeSession creates an AgentSession on queue "q" with a runtime pod
// run by the tenant's service account.
func (t tenant) runtimeSession(name string, rt agentlanev1alpha1.SessionRuntime, mode *agentlanev1alpha1.QueueModeOptions) *agentlanev1alpha1.AgentSession {
	GinkgoHelper()
	rt.PodTemplate = corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}},
		Spec: corev1.PodSpec{ServiceAccountName: "agent",
			Containers: []corev1.Container{{Name: "agent", Image: "agent:test", Args: []string{"--mode=script"}}}},
	}
	s := &agentlanev1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: name},
		Spec: agentlanev1alpha1.AgentSessionSpec{
			QueueRef:  agentlanev1alpha1.LaneQueueReference{Name: "q"},
			QueueMode: mode,
			Identity:  &agentlanev1alpha1.Identity{TenantID: t.ns, Principal: "agent"},
			Runtime:   &rt,
		},
	}
	Expect(k8sClient.Create(ctx, s)).To(Succeed())
	return s
}

// newNode creates a schedulable Node.
func newNode(prefix string) *corev1.Node {
	GinkgoHelper()
	n, err := testenv.NewNode(ctx, k8sClient, prefix)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, n))).To(Succeed()) })
	return n
}

// cordon marks the node unschedulable, as kubectl cordon and drain do.
func cordon(n *corev1.Node) {
	GinkgoHelper()
	Expect(testenv.Cordon(ctx, k8sClient, n)).To(Succeed())
}

// schedulable tells whether the scheduler could place pod on node, by the
// constraints a session's runtime pod can carry: a fixed nodeName, a
// nodeSelector, and a cordoned node, which only a pod that tolerates the
// unschedulable taint may land on.
func schedulable(pod *corev1.Pod, node *corev1.Node) bool {
	GinkgoHelper()
	Expect(pod.Spec.Affinity).To(BeNil(), "the spec checks no affinity")
	if pod.Spec.NodeName != "" && pod.Spec.NodeName != node.Name {
		return false
	}
	for k, v := range pod.Spec.NodeSelector {
		if node.Labels[k] != v {
			return false
		}
	}
	if !node.Spec.Unschedulable {
		return true
	}
	for _, t := range pod.Spec.Tolerations {
		if t.ToleratesTaint(GinkgoLogr, &corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}, false) {
			return true
		}
	}
	return false
}

// runtimePodOf waits for the session's live runtime pod other than except.
func runtimePodOf(s *agentlanev1alpha1.AgentSession, except string) *corev1.Pod {
	GinkgoHelper()
	var pod *corev1.Pod
	Eventually(func(g Gomega) {
		var err error
		pod, err = testenv.LivePod(ctx, k8sClient, s.Namespace, map[string]string{controller.RuntimeLabel: s.Name}, except)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pod).NotTo(BeNil(), "no runtime pod besides %q", except)
	}).Should(Succeed())
	return pod
}

// bindAndRun binds the pod to the node, as the scheduler does, and marks
// it Running and Ready, as its kubelet does.
func bindAndRun(pod *corev1.Pod, node *corev1.Node) {
	GinkgoHelper()
	Expect(testenv.BindAndRun(ctx, k8sClient, pod, node.Name)).To(Succeed())
}

// expectEvicted waits until the pod is being deleted by the Eviction API:
// the API server marks the pods it evicts with a DisruptionTarget
// condition before deleting them, which a plain delete does not.
func expectEvicted(pod *corev1.Pod) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		cur := &corev1.Pod{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), cur)).To(Succeed())
		g.Expect(cur.DeletionTimestamp).NotTo(BeNil(), "pod %s is not being deleted", pod.Name)
		var disruption *corev1.PodCondition
		for i, c := range cur.Status.Conditions {
			if c.Type == corev1.DisruptionTarget {
				disruption = &cur.Status.Conditions[i]
			}
		}
		g.Expect(disruption).NotTo(BeNil(), "pod %s was deleted without the Eviction API", pod.Name)
		g.Expect(disruption.Reason).To(Equal("EvictionByEvictionAPI"))
	}).Should(Succeed())
}

// finishDeletion completes the deletion of an evicted pod, as its kubelet
// would once the containers stopped.
func finishDeletion(pod *corev1.Pod) {
	GinkgoHelper()
	Expect(testenv.FinishDeletion(ctx, k8sClient, pod)).To(Succeed())
}

// phaseOf reads the session's phase.
func phaseOf(s *agentlanev1alpha1.AgentSession) func(Gomega) agentlanev1alpha1.SessionPhase {
	return func(g Gomega) agentlanev1alpha1.SessionPhase {
		cur := &agentlanev1alpha1.AgentSession{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(s), cur)).To(Succeed())
		return cur.Status.Phase
	}
}

// setDesired sets the session's desiredState.
func setDesired(s *agentlanev1alpha1.AgentSession, d agentlanev1alpha1.DesiredState) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		cur := &agentlanev1alpha1.AgentSession{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(s), cur)).To(Succeed())
		cur.Spec.DesiredState = d
		g.Expect(k8sClient.Update(ctx, cur)).To(Succeed())
	}).Should(Succeed())
}

// sessionEvents returns the Kubernetes Events of the session by reason.
func sessionEvents(s *agentlanev1alpha1.AgentSession) func(Gomega) map[string]string {
	return func(g Gomega) map[string]string {
		list := &eventsv1.EventList{}
		g.Expect(k8sClient.List(ctx, list, client.InNamespace(s.Namespace))).To(Succeed())
		out := map[string]string{}
		for _, e := range list.Items {
			if e.Regarding.Name == s.Name && e.Regarding.Kind == "AgentSession" {
				out[e.Reason] = e.Note
			}
		}
		return out
	}
}

// envOf returns the first container's environment by name.
func envOf(pod *corev1.Pod) map[string]corev1.EnvVar {
	out := map[string]corev1.EnvVar{}
	for _, e := range pod.Spec.Containers[0].Env {
		out[e.Name] = e
	}
	return out
}

// startWorker runs a worker for the namespace's External tasks until the
// spec ends.
func startWorker(ns string, reg *executor.Registry) {
	GinkgoHelper()
	w, err := worker.New(restConfig, worker.Options{Name: "worker-1", NodeName: "worker-node", Namespace: ns,
		Capacity: 2, HeartbeatInterval: 200 * time.Millisecond, GracePeriod: time.Second, Registry: reg, Log: GinkgoLogr})
	Expect(err).NotTo(HaveOccurred())
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	DeferCleanup(func() {
		stop()
		Eventually(done, "10s").Should(Receive())
	})
}

// runScript runs rt.RunScript on a goroutine of its own.
func runScript(rctx context.Context, rt *agentscript.Runtime) <-chan agentscript.Report {
	done := make(chan agentscript.Report, 1)
	go func() {
		defer GinkgoRecover()
		done <- rt.RunScript(rctx)
	}()
	return done
}

// served is what Serve returned.
type served struct {
	rep agentscript.Report
	err error
}

// serve runs rt.Serve on a goroutine of its own.
func serve(rctx context.Context, rt *agentscript.Runtime, maxTurns int) <-chan served {
	done := make(chan served, 1)
	go func() {
		defer GinkgoRecover()
		rep, err := rt.Serve(rctx, maxTurns)
		done <- served{rep, err}
	}()
	return done
}

// commandIDs lists the IDs of a turn's commands.
func commandIDs(tr agentscript.TurnReport) []string {
	var out []string
	for _, c := range tr.Commands {
		out = append(out, c.ID)
	}
	return out
}

var _ = Describe("Passivation with the scripted runtime", func() {
	var a tenant

	BeforeEach(func() {
		a = newTenant()
		a.newQueue(drainLanes())
	})

	It("moves a running script off a drained node: the round in flight ends, queued commands wait, and each tool runs exactly once", func() {
		nodeA, nodeB := newNode("node-a"), newNode("node-b")
		sess := a.runtimeSession("drained", agentlanev1alpha1.SessionRuntime{PassivationDeadline: &metav1.Duration{Duration: time.Minute}}, nil)
		first := runtimePodOf(sess, "")
		env := envOf(first)
		Expect(env).To(HaveKeyWithValue(controller.EnvSession, corev1.EnvVar{Name: controller.EnvSession, Value: "drained"}))
		Expect(env).To(HaveKey(controller.EnvPodName))
		Expect(env[controller.EnvPodName].ValueFrom.FieldRef.FieldPath).To(Equal("metadata.name"))
		Expect(env).NotTo(HaveKey(controller.EnvResumeRunID))
		bindAndRun(first, nodeA)
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(sess), sess)).To(Succeed())
			g.Expect(sess.Status.Phase).To(Equal(agentlanev1alpha1.SessionActive))
			g.Expect(sess.Status.NodeName).To(Equal(nodeA.Name))
		}).Should(Succeed())

		tools := newLedger()
		startWorker(a.ns, tools.registry())
		// Step 2 is a round of three commands: the slow one runs, the two
		// behind it (one Internal, one External) are still queued when the
		// node is drained.
		script := agentscript.Script{Turns: []agentscript.Turn{
			{
				Prompt: "fix the build",
				LLM:    &agentscript.LLMCall{InputTokens: 10, OutputTokens: 5},
				Steps: []agentscript.Step{
					tool("block", "urgent", "gate"),
					{Parallel: []agentscript.Step{
						tool("block", "urgent", "slow"),
						tool("record", "execute", "queued-internal"),
						tool("record", "remote", "queued-external"),
					}},
					tool("record", "execute", "after"),
					tool("record", "remote", "after-external"),
				},
			},
			{Prompt: "and then", Steps: []agentscript.Step{tool("record", "execute", "second-turn")}},
		}}
		s := a.session("drained")
		events := follow(s, sessionapi.EventsOptions{})
		old := &agentscript.Runtime{Session: s, Script: script, Executors: tools.registry(), Pod: first.Name, Log: GinkgoLogr.WithName("old")}
		oldDone := runScript(ctx, old)

		By("holding the queue's one slot while the round is submitted, so that its commands queue")
		Eventually(tools.started("gate")).Should(BeClosed())
		a.newSession("holder", nil)
		holder := a.session("holder")
		hold, err := holder.Submit(ctx, sessionapi.SubmitRequest{ID: "hold", Type: "record", Lane: "execute",
			Wait: &metav1.Duration{Duration: 10 * time.Millisecond}})
		Expect(err).NotTo(HaveOccurred())
		Expect(hold.State).To(Equal(sessionapi.StateQueued))
		tools.release("gate")
		hold, err = holder.Await(ctx, "hold")
		Expect(err).NotTo(HaveOccurred())
		Expect(hold.Grant).NotTo(BeNil())
		Eventually(func(g Gomega) int {
			st, err := s.Stats(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			return st.Session.Pending
		}).Should(Equal(3))
		_, err = holder.Report(ctx, "hold", sessionapi.ReportRequest{Attempt: hold.Grant.Attempt, Result: sessionapi.Result{Success: true}})
		Expect(err).NotTo(HaveOccurred())
		Eventually(tools.started("slow")).Should(BeClosed())

		By("refusing a drain's eviction while the session has not checkpointed")
		pdb := &policyv1.PodDisruptionBudget{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: a.ns, Name: "agentlane-runtime-drained"}, pdb)).To(Succeed())
		// What the disruption controller, which envtest does not run, would
		// write for maxUnavailable 0.
		pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation,
			DisruptionsAllowed: 0, CurrentHealthy: 1, DesiredHealthy: 1, ExpectedPods: 1}
		Expect(k8sClient.Status().Update(ctx, pdb)).To(Succeed())
		err = k8sClient.SubResource("eviction").Create(ctx, first, &policyv1.Eviction{})
		Expect(apierrors.IsTooManyRequests(err)).To(BeTrue(), "a drain evicting the pod: %v", err)

		By("cordoning node-a")
		cordon(nodeA)
		request := events.next(sessionapi.EventPassivationRequested)
		Expect(request.Passivation.Reason).To(Equal(string(agentlanev1alpha1.PassivationNodeDrain)))
		Expect(request.Passivation.Pod).To(Equal(first.Name))
		Eventually(phaseOf(sess)).Should(Equal(agentlanev1alpha1.SessionPassivating))
		Eventually(sessionEvents(sess)).Should(HaveKey(sessionapi.EventPassivationRequested))
		// The tool in flight is never cut short, nor checkpointed around.
		Consistently(func(g Gomega) {
			cur := &corev1.Pod{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(first), cur)).To(Succeed())
			g.Expect(cur.DeletionTimestamp).To(BeNil())
			g.Expect(oldDone).NotTo(Receive())
		}, "500ms").Should(Succeed())

		By("ending the slow tool: the runtime checkpoints at the boundary and stops")
		tools.release("slow")
		var stopped agentscript.Report
		Eventually(oldDone).Should(Receive(&stopped))
		Expect(stopped.Refusal()).NotTo(HaveOccurred())
		Expect(stopped.Unfinished()).To(BeEmpty())
		p := stopped.Passivated
		Expect(p).NotTo(BeNil())
		Expect(p.Reason).To(Equal(string(agentlanev1alpha1.PassivationNodeDrain)))
		Expect(p.Pod).To(Equal(first.Name))
		Expect(p.CheckpointError).To(BeEmpty())
		Expect(stopped.Turns).To(HaveLen(1))
		oldTurn := stopped.Turns[0]
		Expect(oldTurn.Passivated).To(BeTrue())
		Expect(p.RunID).To(Equal(oldTurn.RunID))
		Expect(p.Step).To(Equal(2), "the round in flight resumes")
		byMark := map[string]agentscript.CommandReport{}
		for _, c := range oldTurn.Commands {
			var out struct {
				Stdout string `json:"stdout"`
			}
			_ = json.Unmarshal(c.Output, &out)
			byMark[out.Stdout] = c
		}
		Expect(byMark).To(HaveKey("slow"))
		Expect(byMark["slow"].State).To(Equal(sessionapi.StateSucceeded))
		var held []agentscript.CommandReport
		for _, c := range oldTurn.Commands {
			if c.Held {
				held = append(held, c)
				Expect(c.State).To(Equal(sessionapi.StateQueued))
			}
		}
		Expect(held).To(HaveLen(2))
		Expect(p.Held).To(ConsistOf(held[0].ID, held[1].ID))
		cp, err := s.LoadCheckpoint(ctx, "")
		Expect(err).NotTo(HaveOccurred())
		Expect(cp.RunID).To(Equal(p.RunID))
		Expect(cp.Time).To(BeTemporally(">", request.Time), "a checkpoint newer than the request")

		By("evicting the pod through the Eviction API")
		expectEvicted(first)
		Eventually(sessionEvents(sess)).Should(HaveKey("Evicted"))
		Consistently(tools.counts, "500ms").ShouldNot(Or(HaveKey("queued-internal"), HaveKey("queued-external")),
			"queued commands wait for the resumed runtime")

		By("creating the new pod elsewhere, from the checkpoint")
		second := runtimePodOf(sess, first.Name)
		env = envOf(second)
		Expect(env[controller.EnvResumeRunID].Value).To(Equal(p.RunID))
		Expect(env[controller.EnvCheckpointLocation].Value).To(HavePrefix("configmap/agentlane-ckpt-drained-"))
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(nodeA), nodeA)).To(Succeed())
		Expect(schedulable(second, nodeA)).To(BeFalse(), "the cordoned node takes no new pod")
		Expect(schedulable(second, nodeB)).To(BeTrue())
		Expect(phaseOf(sess)(Default)).To(Equal(agentlanev1alpha1.SessionResuming))
		bindAndRun(second, nodeB)
		finishDeletion(first)
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(sess), sess)).To(Succeed())
			g.Expect(sess.Status.Phase).To(Equal(agentlanev1alpha1.SessionActive))
			g.Expect(sess.Status.NodeName).To(Equal(nodeB.Name))
			g.Expect(sess.Status.PodName).To(Equal(second.Name))
		}).Should(Succeed())

		By("resuming the script in the new pod")
		resumed := &agentscript.Runtime{Session: s, Script: script, Executors: tools.registry(), Pod: second.Name,
			Resume: env[controller.EnvResumeRunID].Value != "", Log: GinkgoLogr.WithName("resumed")}
		var rep agentscript.Report
		Eventually(runScript(ctx, resumed), "30s").Should(Receive(&rep))
		Expect(rep.ResumeError).To(BeEmpty())
		Expect(rep.Passivated).To(BeNil(), "the request that moved the session is not taken again")
		Expect(rep.Unfinished()).To(BeEmpty())
		Expect(rep.Turns).To(HaveLen(2))
		tr := rep.Turns[0]
		Expect(tr.RunID).NotTo(Equal(oldTurn.RunID))
		Expect(tr.ResumedFrom).To(Equal(&agentscript.Resumption{RunID: oldTurn.RunID, Step: 2}))
		for _, t := range rep.Turns {
			for _, c := range t.Commands {
				Expect(c.State).To(Equal(sessionapi.StateSucceeded), "command %+v", c)
			}
		}
		// The queued commands are followed under their IDs, not submitted
		// again; the slow one and the model call are not repeated.
		ids := commandIDs(tr)
		Expect(ids).To(HaveLen(4))
		Expect(ids[:2]).To(ConsistOf(p.Held))

		Expect(tools.counts()).To(Equal(map[string]int{
			"gate": 1, "slow": 1, "queued-internal": 1, "queued-external": 1,
			"after": 1, "after-external": 1, "second-turn": 1,
		}))
		st, err := s.Stats(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(st.Session.Pending + st.Session.Active).To(BeZero())
		Expect(st.Session.Failed + st.Session.Cancelled + st.Session.DeadLettered).To(BeZero())
		Expect(phaseOf(sess)(Default)).To(Equal(agentlanev1alpha1.SessionActive))
	})

	It("evicts at the deadline a runtime whose tool does not end, and says its checkpoint is older", func() {
		node := newNode("node-d")
		sess := a.runtimeSession("late", agentlanev1alpha1.SessionRuntime{PassivationDeadline: &metav1.Duration{Duration: time.Second}}, nil)
		pod := runtimePodOf(sess, "")
		bindAndRun(pod, node)
		Eventually(phaseOf(sess)).Should(Equal(agentlanev1alpha1.SessionActive))

		tools := newLedger()
		DeferCleanup(func() { tools.release("stuck") })
		script := agentscript.Script{Turns: []agentscript.Turn{{Steps: []agentscript.Step{
			tool("record", "execute", "first"), tool("block", "urgent", "stuck"),
		}}}}
		rctx, stop := context.WithCancel(ctx)
		defer stop()
		done := runScript(rctx, &agentscript.Runtime{Session: a.session("late"), Script: script,
			Executors: tools.registry(), Pod: pod.Name, Log: GinkgoLogr})
		Eventually(tools.started("stuck")).Should(BeClosed())
		cp, err := a.session("late").LoadCheckpoint(ctx, "")
		Expect(err).NotTo(HaveOccurred())

		cordon(node)
		expectEvicted(pod)
		Eventually(sessionEvents(sess)).Should(HaveKeyWithValue("PassivationDeadlineExceeded",
			ContainSubstring("is older than the request")))
		// The runtime never reached a boundary: nothing newer was saved.
		latest, err := a.session("late").LoadCheckpoint(ctx, "")
		Expect(err).NotTo(HaveOccurred())
		Expect(latest.Time).To(Equal(cp.Time))

		// The kubelet would now stop the runtime.
		stop()
		var rep agentscript.Report
		Eventually(done).Should(Receive(&rep))
		Expect(rep.Passivated).To(BeNil())
		Expect(rep.Turns[0].Error).To(ContainSubstring("stopped"))
	})

	It("serves a turn through desiredState Passivated and back, resuming the run where it stopped", func() {
		sess := a.newSession("manual", modeOptions(agentlanev1alpha1.QueueModeFollowup, 0, 20, agentlanev1alpha1.DropOld))
		s := a.session("manual")
		tools := newLedger()
		script := agentscript.Script{Turns: []agentscript.Turn{
			{Steps: []agentscript.Step{tool("block", "urgent", "serve-a"), tool("record", "execute", "serve-b")}},
			{Steps: []agentscript.Step{tool("record", "execute", "serve-c")}},
		}}
		first := serve(ctx, &agentscript.Runtime{Session: s, Script: script, Executors: tools.registry(), Log: GinkgoLogr.WithName("first")}, 0)
		_, err := s.Post(ctx, sessionapi.Message{Text: "one"})
		Expect(err).NotTo(HaveOccurred())
		Eventually(tools.started("serve-a")).Should(BeClosed())

		setDesired(sess, agentlanev1alpha1.DesiredStatePassivated)
		Eventually(phaseOf(sess)).Should(Equal(agentlanev1alpha1.SessionPassivating))
		Consistently(first, "300ms").ShouldNot(Receive())
		tools.release("serve-a")
		var stopped served
		Eventually(first).Should(Receive(&stopped))
		Expect(stopped.err).NotTo(HaveOccurred())
		Expect(stopped.rep.Passivated).NotTo(BeNil())
		Expect(stopped.rep.Passivated.Reason).To(Equal(string(agentlanev1alpha1.PassivationManual)))
		Expect(stopped.rep.Passivated.Step).To(Equal(2))
		Expect(stopped.rep.Passivated.Held).To(BeEmpty())
		Expect(stopped.rep.Turns).To(HaveLen(1))
		oldRun := stopped.rep.Turns[0].RunID
		Eventually(phaseOf(sess)).Should(Equal(agentlanev1alpha1.SessionPassivated))
		st, err := s.Stats(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(st.Session.ActiveRun).To(Equal(oldRun), "the run is not over: it resumes")

		setDesired(sess, agentlanev1alpha1.DesiredStateActive)
		Eventually(phaseOf(sess)).Should(Equal(agentlanev1alpha1.SessionActive))
		sctx, cancelServe := context.WithTimeout(ctx, 30*time.Second)
		defer cancelServe()
		second := serve(sctx, &agentscript.Runtime{Session: s, Script: script, Executors: tools.registry(), Log: GinkgoLogr.WithName("second")}, 2)
		_, err = s.Post(ctx, sessionapi.Message{Text: "two"})
		Expect(err).NotTo(HaveOccurred())
		var rep served
		Eventually(second, "30s").Should(Receive(&rep))
		Expect(rep.err).NotTo(HaveOccurred())
		Expect(rep.rep.Passivated).To(BeNil(), "the request answered before is not taken again")
		Expect(rep.rep.Turns).To(HaveLen(2))
		Expect(rep.rep.Turns[0].ResumedFrom).To(Equal(&agentscript.Resumption{RunID: oldRun, Step: 2}))
		Expect(rep.rep.Turns[0].RunID).NotTo(Equal(oldRun))
		Expect(rep.rep.Turns[1].Prompt).To(Equal("two"))
		Expect(tools.counts()).To(Equal(map[string]int{"serve-a": 1, "serve-b": 1, "serve-c": 1}))
	})

	It("passivates an idle serving runtime and resumes the session in a new pod when a message comes", func() {
		node := newNode("node-i")
		sess := a.runtimeSession("idle", agentlanev1alpha1.SessionRuntime{IdleTimeout: &metav1.Duration{Duration: time.Second}},
			modeOptions(agentlanev1alpha1.QueueModeFollowup, 0, 20, agentlanev1alpha1.DropOld))
		pod := runtimePodOf(sess, "")
		bindAndRun(pod, node)
		Eventually(phaseOf(sess)).Should(Equal(agentlanev1alpha1.SessionActive))
		s := a.session("idle")
		tools := newLedger()
		script := agentscript.Script{Turns: []agentscript.Turn{{Steps: []agentscript.Step{tool("record", "execute", "woken")}}}}

		first := serve(ctx, &agentscript.Runtime{Session: s, Script: script, Executors: tools.registry(), Pod: pod.Name, Log: GinkgoLogr.WithName("first")}, 0)
		var stopped served
		Eventually(first, "10s").Should(Receive(&stopped))
		Expect(stopped.err).NotTo(HaveOccurred())
		Expect(stopped.rep.Turns).To(BeEmpty())
		Expect(stopped.rep.Passivated).NotTo(BeNil())
		Expect(stopped.rep.Passivated.Reason).To(Equal(string(agentlanev1alpha1.PassivationIdleReaper)))
		Expect(stopped.rep.Passivated.RunID).NotTo(BeEmpty())
		expectEvicted(pod)
		Eventually(phaseOf(sess)).Should(Equal(agentlanev1alpha1.SessionPassivated))
		finishDeletion(pod)
		Consistently(phaseOf(sess), "1500ms").Should(Equal(agentlanev1alpha1.SessionPassivated), "no work, no resume")

		_, err := s.Post(ctx, sessionapi.Message{Text: "wake up"})
		Expect(err).NotTo(HaveOccurred())
		next := runtimePodOf(sess, pod.Name)
		Expect(envOf(next)[controller.EnvResumeRunID].Value).To(Equal(stopped.rep.Passivated.RunID))
		bindAndRun(next, node)
		Eventually(phaseOf(sess)).Should(Equal(agentlanev1alpha1.SessionActive))
		sctx, cancelServe := context.WithTimeout(ctx, 30*time.Second)
		defer cancelServe()
		var rep served
		Eventually(serve(sctx, &agentscript.Runtime{Session: s, Script: script, Executors: tools.registry(), Pod: next.Name, Log: GinkgoLogr.WithName("next")}, 1), "30s").Should(Receive(&rep))
		Expect(rep.err).NotTo(HaveOccurred())
		Expect(rep.rep.Passivated).To(BeNil())
		Expect(rep.rep.Turns).To(HaveLen(1))
		Expect(rep.rep.Turns[0].ResumedFrom).To(BeNil(), "an idle runtime left no turn to resume")
		Expect(rep.rep.Turns[0].Prompt).To(Equal("wake up"))
		Expect(tools.counts()).To(Equal(map[string]int{"woken": 1}))
	})
})
