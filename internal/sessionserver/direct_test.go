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
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/executor"
	"github.com/agentlane/agentlane/internal/taskstate"
	"github.com/agentlane/agentlane/internal/testenv"
	"github.com/agentlane/agentlane/internal/worker"
	"github.com/agentlane/agentlane/internal/workerproto"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// directLanes have one Direct lane, "direct": records after 500ms, one
// retry after 50ms.
func directLanes() agentlanev1alpha1.LaneQueueSpec { return directLanesAfter(500 * time.Millisecond) }

// directLanesAfter are directLanes that record after materializeAfter.
func directLanesAfter(materializeAfter time.Duration) agentlanev1alpha1.LaneQueueSpec {
	return agentlanev1alpha1.LaneQueueSpec{DefaultLane: "direct", Lanes: []agentlanev1alpha1.Lane{{
		Name: "direct", Priority: 1, HandlerMode: agentlanev1alpha1.HandlerModeExternal,
		Timeout: &metav1.Duration{Duration: time.Minute},
		ExternalTarget: &agentlanev1alpha1.ExternalTarget{Type: agentlanev1alpha1.ExternalTargetDirect,
			Direct: &agentlanev1alpha1.DirectTarget{MaterializeAfter: &metav1.Duration{Duration: materializeAfter}}},
		RetryPolicy: &agentlanev1alpha1.RetryPolicy{Strategy: agentlanev1alpha1.RetryFixed, MaxRetries: ptr.To[int32](1),
			FixedDelay: &metav1.Duration{Duration: 50 * time.Millisecond}},
	}}}
}

// workerToken returns the token of a service account of namespace ns with
// the access a worker of the ExternalTask path has there (or, without
// rights, none).
func workerToken(ns, name string, rights bool) string {
	GinkgoHelper()
	verbs := []string{"get"}
	if rights {
		verbs = []string{"get", "patch"}
	}
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{agentlanev1alpha1.GroupVersion.Group},
			Resources: []string{"externaltasks/status"}, Verbs: verbs}},
	}
	Expect(k8sClient.Create(ctx, role)).To(Succeed())
	token, err := testenv.ServiceAccountToken(ctx, k8sClient, ns, name, rbacv1.RoleRef{Kind: "Role", Name: role.Name})
	Expect(err).NotTo(HaveOccurred())
	return token
}

// startDirectWorker runs a Direct worker of namespace ns with token until
// the spec ends (or stop is called).
func startDirectWorker(ns, name, token string, capacity int) (stop func()) {
	GinkgoHelper()
	return startDirectWorkerOf(server, baseURL, ns, name, token, capacity)
}

// startDirectWorkerOf runs a Direct worker of the Session API srv serves
// at url.
func startDirectWorkerOf(srv *Server, url, ns, name, token string, capacity int) (stop func()) {
	GinkgoHelper()
	dir := GinkgoT().TempDir()
	caFile, tokenFile := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "token")
	Expect(os.WriteFile(caFile, srv.CABundle(), 0o600)).To(Succeed())
	Expect(os.WriteFile(tokenFile, []byte(token), 0o600)).To(Succeed())
	reg := executor.NewSandboxedRegistry(64<<10, executor.Sandbox{Root: filepath.Join(dir, "tasks")})
	reg.Register(executor.NoopCommandType, executor.NoopExecutor{})
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		err := worker.RunDirect(wctx, worker.DirectOptions{Server: url, CAFile: caFile, TokenFile: tokenFile,
			Name: name, NodeName: "node-" + name, Namespace: ns, Capacity: capacity, Registry: reg, GracePeriod: time.Second})
		Expect(err).NotTo(HaveOccurred())
	}()
	var once bool
	stop = func() {
		if !once {
			once = true
			cancel()
			<-done
		}
	}
	DeferCleanup(stop)
	Eventually(func() bool {
		for _, w := range srv.DirectHub().Workers() {
			if w.Namespace == ns && w.Name == name {
				return true
			}
		}
		return false
	}).Should(BeTrue(), "the worker's stream is admitted")
	return stop
}

// busyWorkers counts the attempts the workers of srv run.
func busyWorkers(srv *Server) int {
	n := 0
	for _, w := range srv.DirectHub().Workers() {
		n += w.Busy
	}
	return n
}

// externalTasks lists the ExternalTasks of namespace ns.
func externalTasks(ns string) []agentlanev1alpha1.ExternalTask {
	GinkgoHelper()
	list := &agentlanev1alpha1.ExternalTaskList{}
	Expect(k8sClient.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	return list.Items
}

// directHello opens a Direct stream with token and hello, and returns the
// status of the manager's answer.
func directHello(token string, hello workerproto.DirectHello) (int, string) {
	GinkgoHelper()
	b, err := json.Marshal(workerproto.WorkerFrame{Hello: &hello})
	Expect(err).NotTo(HaveOccurred())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+workerproto.DirectPath, bytes.NewReader(append(b, '\n')))
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", workerproto.DirectContentType)
	resp, err := apiHTTPClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	var e sessionapi.Error
	_ = json.NewDecoder(resp.Body).Decode(&e)
	return resp.StatusCode, e.Message
}

var _ = Describe("Direct lanes", func() {
	It("runs a short command on a streaming worker and writes no ExternalTask", func() {
		t := newTenant()
		t.newQueue(directLanes())
		t.newSession("s", nil)
		startDirectWorker(t.ns, "w1", workerToken(t.ns, "worker", true), 4)

		for i := range 20 {
			code, cmd := t.rawCall(t.token, http.MethodPost, "s", "/commands", map[string]any{
				"type": "bash", "payload": map[string]any{"command": "echo hello-" + strings.Repeat("x", i)}})
			Expect(code).To(Equal(http.StatusOK), "%v", cmd)
			Expect(cmd["state"]).To(Equal(sessionapi.StateSucceeded), "%v", cmd)
			Expect(cmd["mode"]).To(Equal(sessionapi.ModeExternal))
			out := cmd["result"].(map[string]any)["output"].(map[string]any)
			Expect(out["stdout"]).To(Equal("hello-" + strings.Repeat("x", i) + "\n"))
			Expect(cmd).NotTo(HaveKey("task"), "a short command has no ExternalTask")
		}
		submitted := time.Now()
		code, cmd := t.rawCall(t.token, http.MethodPost, "s", "/commands", map[string]any{"type": executor.NoopCommandType})
		answered := time.Now()
		Expect(code).To(Equal(http.StatusOK), "%v", cmd)
		Expect(cmd["state"]).To(Equal(sessionapi.StateSucceeded), "%v", cmd)
		By("the answer tells when the worker started the command, between its submission and its answer")
		Expect(cmd).To(HaveKeyWithValue("startedAt", BeAssignableToTypeOf("")), "%v", cmd)
		startedAt, err := time.Parse(time.RFC3339Nano, cmd["startedAt"].(string))
		Expect(err).NotTo(HaveOccurred())
		Expect(startedAt).To(BeTemporally(">=", submitted.Truncate(0)))
		Expect(startedAt).To(BeTemporally("<=", answered.Truncate(0)))
		Consistently(func() []agentlanev1alpha1.ExternalTask { return externalTasks(t.ns) }, "500ms").Should(BeEmpty())
		Expect(server.Schedulers.DirectTasks().Len()).To(BeZero())

		By("the LaneQueue's status counts them as any lane's commands")
		Eventually(func(g Gomega) {
			lq := &agentlanev1alpha1.LaneQueue{}
			g.Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: t.ns, Name: "q"}, lq)).To(Succeed())
			g.Expect(lq.Status.Lanes).To(ContainElement(And(
				HaveField("Name", agentlanev1alpha1.LaneName("direct")), HaveField("Completed", BeEquivalentTo(21)))))
		}).Should(Succeed())
	})

	It("records a command that fails for good, with its last attempt's result", func() {
		t := newTenant()
		t.newQueue(directLanes())
		t.newSession("s", nil)
		startDirectWorker(t.ns, "w1", workerToken(t.ns, "worker", true), 4)

		code, cmd := t.rawCall(t.token, http.MethodPost, "s", "/commands", map[string]any{
			"id": "fails", "type": "bash", "payload": map[string]any{"command": "exit 3"}})
		Expect(code).To(Equal(http.StatusOK), "%v", cmd)
		Expect(cmd["state"]).To(BeElementOf(sessionapi.StateFailed, sessionapi.StateDeadLettered), "%v", cmd)
		Expect(cmd["attempt"]).To(BeEquivalentTo(2), "one retry")
		task := &agentlanev1alpha1.ExternalTask{}
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: t.ns, Name: "fails"}, task)).To(Succeed())
			g.Expect(task.Status.Phase.IsTerminal()).To(BeTrue())
		}).Should(Succeed())
		Expect(task.Labels).To(HaveKeyWithValue(agentlanev1alpha1.TargetLabel, "Direct"))
		Expect(task.Status.Holder).To(Equal(agentlanev1alpha1.HolderDirect))
		Expect(string(task.Status.Phase)).To(Equal(cmd["state"]))
		Expect(task.Status.Attempt).To(BeEquivalentTo(2))
		Expect(task.Status.Result).NotTo(BeNil())
		Expect(task.Status.Result.ExitCode).To(HaveValue(BeEquivalentTo(3)))
		Expect(task.Status.Worker).To(Equal("w1"))
		Expect(meta.IsStatusConditionTrue(task.Status.Conditions, agentlanev1alpha1.ExternalTaskFinishedCondition)).To(BeTrue())
		Expect(task.Spec.SessionRef.Name).To(Equal("s"))
		Eventually(server.Schedulers.DirectTasks().Len).Should(BeZero())
	})

	It("records a command that runs long, Running on its worker, then its end", func() {
		t := newTenant()
		t.newQueue(directLanes())
		t.newSession("s", nil)
		startDirectWorker(t.ns, "w1", workerToken(t.ns, "worker", true), 4)

		done := make(chan map[string]any, 1)
		go func() {
			defer GinkgoRecover()
			code, cmd := t.rawCall(t.token, http.MethodPost, "s", "/commands", map[string]any{
				"id": "long", "type": "bash", "payload": map[string]any{"command": "sleep 2; echo done"}})
			Expect(code).To(Equal(http.StatusOK), "%v", cmd)
			done <- cmd
		}()
		task := &agentlanev1alpha1.ExternalTask{}
		key := types.NamespacedName{Namespace: t.ns, Name: "long"}
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, key, task)).To(Succeed())
			g.Expect(task.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskRunning))
		}).Should(Succeed())
		Expect(task.Status.Worker).To(Equal("w1"))
		Expect(task.Status.NodeName).To(Equal("node-w1"))
		Expect(task.Status.Holder).To(Equal(agentlanev1alpha1.HolderDirect))
		var cmd map[string]any
		Eventually(done, "20s").Should(Receive(&cmd))
		Expect(cmd["state"]).To(Equal(sessionapi.StateSucceeded))
		Expect(cmd["task"]).To(Equal("long"), "the command names its record")
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, key, task)).To(Succeed())
			g.Expect(task.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskSucceeded))
		}).Should(Succeed())
		Expect(string(task.Status.Result.Result.Raw)).To(ContainSubstring(`"stdout":"done\n"`))
	})

	It("records a command that waits for a worker, which runs it once one connects", func() {
		t := newTenant()
		t.newQueue(directLanes())
		t.newSession("s", nil)
		token := workerToken(t.ns, "worker", true)

		code, cmd := t.rawCall(t.token, http.MethodPost, "s", "/commands", map[string]any{
			"id": "waits", "type": executor.NoopCommandType, "wait": "50ms"})
		Expect(code).To(Equal(http.StatusAccepted), "%v", cmd)
		task := &agentlanev1alpha1.ExternalTask{}
		key := types.NamespacedName{Namespace: t.ns, Name: "waits"}
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, key, task)).To(Succeed())
			g.Expect(task.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskDispatched))
		}).Should(Succeed())
		Expect(task.Status.Holder).To(Equal(agentlanev1alpha1.HolderDirect))
		Expect(task.Status.Worker).To(BeEmpty())

		startDirectWorker(t.ns, "w1", token, 1)
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, key, task)).To(Succeed())
			g.Expect(task.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskSucceeded))
		}).Should(Succeed())
		got, err := t.session("s").Get(ctx, "waits", 0)
		Expect(err).NotTo(HaveOccurred())
		Expect(got.State).To(Equal(sessionapi.StateSucceeded))
	})

	It("admits a worker only for a namespace whose tasks its identity may serve", func() {
		a, b := newTenant(), newTenant()
		hello := workerproto.DirectHello{Worker: "w1", Namespace: a.ns, Capacity: 1, CommandTypes: []string{"bash"}}

		code, msg := directHello(workerToken(a.ns, "reader", false), hello)
		Expect(code).To(Equal(http.StatusForbidden), msg)
		Expect(msg).To(ContainSubstring("externaltasks/status"))

		hello.Namespace = b.ns
		code, msg = directHello(workerToken(a.ns, "worker", true), hello)
		Expect(code).To(Equal(http.StatusForbidden), "a worker of %s claiming %s: %s", a.ns, b.ns, msg)

		code, _ = directHello("not-a-token", hello)
		Expect(code).To(Equal(http.StatusUnauthorized))

		code, _ = directHello(a.token, workerproto.DirectHello{Worker: "w1", Namespace: a.ns, Capacity: 1, CommandTypes: []string{"bash"}})
		Expect(code).To(Equal(http.StatusForbidden), "a session's token is not a worker's")
	})

	It("fails, interrupted, a record that an earlier manager run left unfinished", func() {
		t := newTenant()
		t.newQueue(directLanes())
		s := t.newSession("s", nil)
		task := &agentlanev1alpha1.ExternalTask{
			ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: "orphan", Labels: map[string]string{
				agentlanev1alpha1.TargetLabel: "Direct", agentlanev1alpha1.QueueLabel: "q", agentlanev1alpha1.SessionLabel: "s"}},
			Spec: agentlanev1alpha1.ExternalTaskSpec{SessionRef: &agentlanev1alpha1.AgentSessionReference{Name: s.Name},
				Lane: "direct", CommandType: "bash"},
		}
		Expect(k8sClient.Create(ctx, task)).To(Succeed())
		key := client.ObjectKeyFromObject(task)
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, key, task)).To(Succeed())
			g.Expect(task.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskFailed))
		}).Should(Succeed())
		c := meta.FindStatusCondition(task.Status.Conditions, agentlanev1alpha1.ExternalTaskFinishedCondition)
		Expect(c).NotTo(BeNil())
		Expect(c.Message).To(Equal(taskstate.DirectInterruptedMessage))
	})

	It("retries, on another worker, an attempt whose worker stopped while it ran", func() {
		t := newTenant()
		t.newQueue(directLanesAfter(time.Minute))
		t.newSession("s", nil)
		token := workerToken(t.ns, "worker", true)
		stopFirst := startDirectWorker(t.ns, "w1", token, 1)

		done := make(chan map[string]any, 1)
		go func() {
			defer GinkgoRecover()
			code, cmd := t.rawCall(t.token, http.MethodPost, "s", "/commands", map[string]any{
				"id": "moves", "type": "bash", "payload": map[string]any{"command": "sleep 30"}, "timeout": "10s"})
			Expect(code).To(Equal(http.StatusOK), "%v", cmd)
			done <- cmd
		}()
		Eventually(func() int { return busyWorkers(server) }).Should(Equal(1))
		// The second worker is free when the first one stops: the retry
		// goes there.
		startDirectWorker(t.ns, "w2", token, 1)
		stopFirst()
		// The retry runs the same sleep on w2; cancel it once it runs, to
		// see its attempt number.
		Eventually(func(g Gomega) {
			for _, w := range server.DirectHub().Workers() {
				if w.Name == "w2" {
					g.Expect(w.Busy).To(Equal(1))
				}
			}
		}).Should(Succeed())
		n, err := t.session("s").Cancel(ctx, sessionapi.CancelRequest{CommandID: "moves"})
		Expect(err).NotTo(HaveOccurred())
		Expect(n).To(Equal(1))
		var cmd map[string]any
		Eventually(done, "20s").Should(Receive(&cmd))
		Expect(cmd["state"]).To(Equal(sessionapi.StateCancelled), "%v", cmd)
		Expect(cmd["attempt"]).To(BeEquivalentTo(2), "the attempt its worker gave up is retried once")
		Expect(externalTasks(t.ns)).To(BeEmpty(), "a cancelled command that ran shorter than materializeAfter is not recorded")
	})

	It("answers a waiting submitter Interrupted when the manager stops leading", func() {
		t := newTenant()
		t.newQueue(directLanesAfter(time.Minute))
		t.newSession("s", nil)
		stopping := mustNew(Config{Addr: "127.0.0.1:0", Client: server.Client, Reader: server.Reader, Schedulers: server.Schedulers,
			Budgets: server.Budgets, Auth: server.Auth, RetainedEvents: retainedEvents,
			TLS: TLS{Secret: types.NamespacedName{Namespace: tlsSecret.Namespace, Name: "direct-stop-tls"}, Hosts: []string{"127.0.0.1"}}})
		sctx, stop := context.WithCancel(ctx)
		DeferCleanup(stop)
		go func() {
			defer GinkgoRecover()
			Expect(stopping.Start(sctx)).To(Succeed())
		}()
		addr, err := stopping.BoundAddr(ctx)
		Expect(err).NotTo(HaveOccurred())
		url := "https://" + addr
		startDirectWorkerOf(stopping, url, t.ns, "w1", workerToken(t.ns, "worker", true), 1)
		c, err := sessionapi.NewClient(url, sessionapi.WithToken(t.token), sessionapi.WithCA(stopping.CABundle()), sessionapi.WithNotLeaderRetries(0))
		Expect(err).NotTo(HaveOccurred())

		errc := make(chan error, 1)
		go func() {
			defer GinkgoRecover()
			cmd, err := c.Session(t.ns, "s").Submit(ctx, sessionapi.SubmitRequest{ID: "cut", Type: "bash",
				Payload: json.RawMessage(`{"command":"sleep 30"}`)})
			if err == nil {
				err = fmt.Errorf("answered %+v", cmd)
			}
			errc <- err
		}()
		Eventually(func() int { return busyWorkers(stopping) }).Should(Equal(1))
		stop()
		var got error
		Eventually(errc, "10s").Should(Receive(&got))
		Expect(sessionapi.IsCode(got, sessionapi.CodeInterrupted)).To(BeTrue(), "%v", got)
		Expect(got.Error()).To(ContainSubstring("submit it again"))
		Expect(got.Error()).NotTo(ContainSubstring("ExternalTask"), "it was never recorded")
		Expect(externalTasks(t.ns)).To(BeEmpty())
	})

	It("ends a worker's stream once its access is revoked, and gives its name to no other user", func() {
		t := newTenant()
		token := workerToken(t.ns, "worker", true)
		startDirectWorker(t.ns, "w1", token, 1)

		By("another user cannot take over the connected worker's name")
		code, msg := directHello(workerToken(t.ns, "intruder", true),
			workerproto.DirectHello{Worker: "w1", Namespace: t.ns, Capacity: 1, CommandTypes: []string{"bash"}})
		Expect(code).To(Equal(http.StatusConflict), msg)
		Expect(server.DirectHub().Workers()).To(ContainElement(HaveField("Name", "w1")), "the worker keeps its stream")

		By("deleting the worker's RoleBinding ends its stream")
		Expect(k8sClient.Delete(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: "worker-worker"}})).To(Succeed())
		Eventually(func() []string {
			var names []string
			for _, w := range server.DirectHub().Workers() {
				if w.Namespace == t.ns {
					names = append(names, w.Name)
				}
			}
			return names
		}, "40s").Should(BeEmpty(), "the stream ends at the next check after the review's answer expires")
	})
})
