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

package worker

import (
	"context"
	"encoding/json"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/executor"
	"github.com/agentlane/agentlane/internal/workerproto"
)

// Defaults of the workers the specs start: quick heartbeats and grace
// periods keep the suite fast.
const (
	testHeartbeat = 200 * time.Millisecond
	testGrace     = 2 * time.Second
	testQueue     = "q1"
	testLane      = "tools"
)

// newNamespace creates a namespace of its own for one spec, so that workers
// of different specs never see each other's tasks.
func newNamespace() string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "worker-test-"}}
	Expect(k8sClient.Create(suiteCtx, ns)).To(Succeed())
	return ns.Name
}

// runningWorker is a worker started by a spec.
type runningWorker struct {
	opts   Options
	cancel context.CancelFunc
	done   chan error
}

// startWorker runs a worker in the background until the spec ends or stop
// is called. Zero fields of opts get the suite's defaults.
func startWorker(opts Options) *runningWorker {
	GinkgoHelper()
	if opts.Capacity == 0 {
		opts.Capacity = 2
	}
	if opts.HeartbeatInterval == 0 {
		opts.HeartbeatInterval = testHeartbeat
	}
	if opts.GracePeriod == 0 {
		opts.GracePeriod = testGrace
	}
	if opts.NodeName == "" {
		opts.NodeName = "node-a"
	}
	w, err := New(cfg, opts)
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(suiteCtx)
	rw := &runningWorker{opts: opts, cancel: cancel, done: make(chan error, 1)}
	go func() {
		defer GinkgoRecover()
		rw.done <- w.Run(ctx)
	}()
	DeferCleanup(func() {
		cancel()
		Eventually(rw.done, 2*opts.GracePeriod+5*time.Second).Should(Receive())
	})
	// The worker takes tasks once its Lease exists and its cache synced;
	// the Lease comes first, so wait for it.
	Eventually(func() error { return k8sClient.Get(suiteCtx, leaseKey(opts), &coordinationv1.Lease{}) }).Should(Succeed())
	return rw
}

// stop sends the worker the equivalent of SIGTERM.
func (rw *runningWorker) stop() { rw.cancel() }

func leaseKey(opts Options) client.ObjectKey {
	return client.ObjectKey{Namespace: opts.Namespace, Name: workerproto.LeaseName(opts.Name)}
}

// taskBuilder builds ExternalTasks for the specs.
type taskBuilder struct {
	task *agentlanev1alpha1.ExternalTask
}

// bashTask returns a task that runs command with bash in queue q1.
func bashTask(ns, name, command string) *taskBuilder {
	raw, err := json.Marshal(executor.ProcessPayload{Command: command})
	Expect(err).NotTo(HaveOccurred())
	return &taskBuilder{task: &agentlanev1alpha1.ExternalTask{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Labels: map[string]string{agentlanev1alpha1.QueueLabel: testQueue},
		},
		Spec: agentlanev1alpha1.ExternalTaskSpec{
			QueueRef:    &agentlanev1alpha1.LaneQueueReference{Name: testQueue},
			CommandType: "bash",
			Payload:     &runtime.RawExtension{Raw: raw},
		},
	}}
}

func (b *taskBuilder) commandType(t string) *taskBuilder {
	b.task.Spec.CommandType = agentlanev1alpha1.CommandType(t)
	return b
}

func (b *taskBuilder) queue(q string) *taskBuilder {
	b.task.Labels[agentlanev1alpha1.QueueLabel] = q
	b.task.Spec.QueueRef.Name = q
	return b
}

func (b *taskBuilder) timeout(d time.Duration) *taskBuilder {
	b.task.Spec.Timeout = &metav1.Duration{Duration: d}
	return b
}

// create creates the task, not yet dispatched.
func (b *taskBuilder) create() *agentlanev1alpha1.ExternalTask {
	GinkgoHelper()
	Expect(k8sClient.Create(suiteCtx, b.task)).To(Succeed())
	return b.task
}

// dispatch creates the task and dispatches attempt 1 to worker in lane
// tools, as the manager does.
func (b *taskBuilder) dispatch(worker string) *agentlanev1alpha1.ExternalTask {
	GinkgoHelper()
	t := b.create()
	return dispatch(t, worker, testLane, 1)
}

// dispatch writes the manager's dispatch of attempt to worker in lane.
func dispatch(t *agentlanev1alpha1.ExternalTask, worker, lane string, attempt int32) *agentlanev1alpha1.ExternalTask {
	GinkgoHelper()
	return updateStatus(t, func(st *agentlanev1alpha1.ExternalTaskStatus) { dispatchStatus(st, worker, lane, attempt) })
}

// dispatchStatus sets what the manager's dispatch of attempt to worker in
// lane writes.
func dispatchStatus(st *agentlanev1alpha1.ExternalTaskStatus, worker, lane string, attempt int32) {
	now := metav1.Now()
	st.Phase = agentlanev1alpha1.ExternalTaskDispatched
	st.Lane = agentlanev1alpha1.LaneName(lane)
	st.Attempt = attempt
	st.Worker = worker
	st.NodeName = "node-a"
	st.QueuedAt, st.DispatchedAt = &now, &now
}

// dispatchTo writes the manager's dispatch of attempt to the process
// incarnation of worker, in lane tools.
func dispatchTo(t *agentlanev1alpha1.ExternalTask, worker, incarnation string, attempt int32) *agentlanev1alpha1.ExternalTask {
	GinkgoHelper()
	return updateStatus(t, func(st *agentlanev1alpha1.ExternalTaskStatus) {
		dispatchStatus(st, worker, testLane, attempt)
		st.WorkerIncarnation = incarnation
	})
}

// incarnationOf returns the incarnation the worker's Lease advertises.
func incarnationOf(rw *runningWorker) string {
	GinkgoHelper()
	lease := &coordinationv1.Lease{}
	Expect(k8sClient.Get(suiteCtx, leaseKey(rw.opts), lease)).To(Succeed())
	inc := lease.Annotations[workerproto.IncarnationAnnotation]
	Expect(inc).To(HaveLen(26), "a ULID")
	return inc
}

// updateStatus changes the task's status as the manager would, retrying on
// conflicts with the worker's own writes.
func updateStatus(t *agentlanev1alpha1.ExternalTask, change func(*agentlanev1alpha1.ExternalTaskStatus)) *agentlanev1alpha1.ExternalTask {
	GinkgoHelper()
	cur := &agentlanev1alpha1.ExternalTask{}
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(t), cur); err != nil {
			return err
		}
		change(&cur.Status)
		return k8sClient.Status().Update(suiteCtx, cur)
	})).To(Succeed())
	return cur
}

// get reads the task's current state.
func get(g Gomega, t *agentlanev1alpha1.ExternalTask) *agentlanev1alpha1.ExternalTask {
	cur := &agentlanev1alpha1.ExternalTask{}
	g.Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(t), cur)).To(Succeed())
	return cur
}

// phaseOf returns a function that polls the task's phase.
func phaseOf(t *agentlanev1alpha1.ExternalTask) func(Gomega) agentlanev1alpha1.ExternalTaskPhase {
	return func(g Gomega) agentlanev1alpha1.ExternalTaskPhase { return get(g, t).Status.Phase }
}

// resultOf waits for the task's result and returns the task.
func resultOf(t *agentlanev1alpha1.ExternalTask) *agentlanev1alpha1.ExternalTask {
	GinkgoHelper()
	var cur *agentlanev1alpha1.ExternalTask
	Eventually(func(g Gomega) {
		cur = get(g, t)
		g.Expect(cur.Status.Result).NotTo(BeNil())
	}).Should(Succeed())
	return cur
}

// output decodes the command output the worker put in result.result.
func output(t *agentlanev1alpha1.ExternalTask) executor.Output {
	GinkgoHelper()
	Expect(t.Status.Result.Result).NotTo(BeNil())
	var out executor.Output
	Expect(json.Unmarshal(t.Status.Result.Result.Raw, &out)).To(Succeed())
	return out
}

// counter reads one of the worker's counters.
func counter(m prometheus.Metric) float64 {
	GinkgoHelper()
	var d dto.Metric
	Expect(m.Write(&d)).To(Succeed())
	return d.GetCounter().GetValue()
}
