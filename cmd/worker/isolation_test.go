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

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/executor"
	"github.com/agentlane/agentlane/internal/workerproto"
)

// testIsolation runs tasks that look for the worker's credentials on a
// worker process whose tasks run either in-process (runner false) or in a
// runner process of their own, and expects them to find none. Both the
// worker and the runner are started with the worker's environment, KUBECONFIG
// included, so what the tasks do not see was taken away by the sandbox.
func testIsolation(t *testing.T, c client.Client, bin, kubeconfig string, runner bool) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(20 * time.Second)
	ctx := t.Context()
	dir, err := os.MkdirTemp("", "agentlane-isolation-") // short: a socket path is at most 107 bytes
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	taskRoot := filepath.Join(dir, "tasks")
	name := "iso-inproc"
	args := []string{"--namespace=default", "--heartbeat-interval=200ms", "--grace-period=1s"}
	taskFlags := []string{"--task-root=" + taskRoot, "--task-env=DECLARED=by-the-operator",
		"--task-executor=wordcount=wc -w", "--task-executor=printenv=env"}
	if runner {
		name = "iso-runner"
		socket := filepath.Join(dir, "runner.sock")
		startProcess(t, bin, kubeconfig, append([]string{"runner", "--socket=" + socket}, taskFlags...)...)
		args = append(args, "--runner-socket="+socket)
	} else {
		args = append(args, taskFlags...)
	}
	startProcess(t, bin, kubeconfig, append(args, "--name="+name)...)
	g.Eventually(func(g Gomega) {
		lease := &coordinationv1.Lease{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "agentlane-worker-" + name}, lease)).To(Succeed())
		g.Expect(lease.Annotations).To(HaveKeyWithValue(workerproto.CommandTypesAnnotation, "bash,exec,printenv,read,wordcount"))
	}).Should(Succeed())

	env := dispatchedTask(t, c, name+"-env", name, "bash", executor.ProcessPayload{Command: "env"})
	cat := dispatchedTask(t, c, name+"-cat", name, "bash", executor.ProcessPayload{Command: `cat "$KUBECONFIG"`})
	read := dispatchedTask(t, c, name+"-read", name, "read", executor.ReadPayload{Path: kubeconfig})
	climb := dispatchedTask(t, c, name+"-climb", name, "read", executor.ReadPayload{Path: "../../../../../../../../" + kubeconfig})
	words := dispatchedTask(t, c, name+"-words", name, "wordcount", map[string]string{"text": "one two three four"})
	printenv := dispatchedTask(t, c, name+"-printenv", name, "printenv", map[string]string{})
	unknown := dispatchedTask(t, c, name+"-unknown", name, "translate", map[string]string{})
	for _, task := range []*agentlanev1alpha1.ExternalTask{env, cat, read, climb, words, printenv, unknown} {
		g.Eventually(func(g Gomega) {
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(task), task)).To(Succeed())
			g.Expect(task.Status.Result).NotTo(BeNil())
		}).Should(Succeed(), task.Name)
	}

	vars := map[string]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(stdout(t, env)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		vars[k] = v
	}
	g.Expect(vars).NotTo(HaveKey("KUBECONFIG"))
	g.Expect(vars).To(HaveKeyWithValue("DECLARED", "by-the-operator"))
	g.Expect(vars).To(HaveKeyWithValue("PATH", executor.DefaultPath))
	g.Expect(filepath.Dir(vars["HOME"])).To(Equal(taskRoot), "HOME is the attempt's own directory")
	g.Expect(filepath.Dir(vars[executor.HeartbeatEnv])).To(Equal(vars["HOME"]), "the heartbeat file is the attempt's own")
	for k := range vars {
		g.Expect([]string{"PATH", "HOME", "TMPDIR", "DECLARED", executor.HeartbeatEnv, "PWD", "SHLVL", "_"}).To(ContainElement(k), "variable %s reached the task", k)
	}

	g.Expect(words.Status.Result.Success).To(BeTrue())
	g.Expect(strings.TrimSpace(stdout(t, words))).To(Equal("4"), "the configured command line read the payload on stdin")
	configured := map[string]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(stdout(t, printenv)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		configured[k] = v
	}
	g.Expect(configured).NotTo(HaveKey("KUBECONFIG"), "a configured executor runs in the sandbox too")
	g.Expect(configured).To(HaveKeyWithValue(executor.CommandTypeEnv, "printenv"))
	g.Expect(filepath.Dir(configured["HOME"])).To(Equal(taskRoot))
	g.Expect(unknown.Status.Result.Success).To(BeFalse())
	g.Expect(unknown.Status.Result.Error).To(Equal(`no executor for command type "translate"`))

	secret, err := os.ReadFile(kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cat.Status.Result.Success).To(BeFalse(), "cat of an unset KUBECONFIG fails")
	g.Expect(string(cat.Status.Result.Result.Raw)).NotTo(ContainSubstring("client-certificate-data"))
	g.Expect(read.Status.Result.Success).To(BeFalse())
	g.Expect(read.Status.Result.Result).To(BeNil(), "no content")
	g.Expect(read.Status.Result.Error).To(ContainSubstring("invalid payload: path"))
	g.Expect(climb.Status.Result.Success).To(BeFalse())
	g.Expect(climb.Status.Result.Error).To(ContainSubstring("invalid payload: path"))
	g.Expect(secret).To(ContainSubstring("client-certificate-data"), "the kubeconfig holds the worker's credential")

	entries, err := os.ReadDir(taskRoot)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(BeEmpty(), "every attempt's directory is removed")
}

// dispatchedTask creates a task of commandType in the default namespace and
// dispatches attempt 1 to workerName, as the manager does.
func dispatchedTask(t *testing.T, c client.Client, name, workerName string, commandType agentlanev1alpha1.CommandType, payload any) *agentlanev1alpha1.ExternalTask {
	t.Helper()
	ctx := context.WithoutCancel(t.Context())
	raw, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	task := &agentlanev1alpha1.ExternalTask{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: agentlanev1alpha1.ExternalTaskSpec{
			QueueRef:    &agentlanev1alpha1.LaneQueueReference{Name: "q1"},
			CommandType: commandType,
			Payload:     &runtime.RawExtension{Raw: raw},
		},
	}
	if err := c.Create(ctx, task); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	task.Status = agentlanev1alpha1.ExternalTaskStatus{
		Phase: agentlanev1alpha1.ExternalTaskDispatched, Lane: "tools", Attempt: 1,
		Worker: workerName, QueuedAt: &now, DispatchedAt: &now,
	}
	if err := c.Status().Update(ctx, task); err != nil {
		t.Fatal(err)
	}
	return task
}
