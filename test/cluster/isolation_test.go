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
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// readTaskYAML is a read task created directly.
const readTaskYAML = `
apiVersion: agentlane.io/v1alpha1
kind: ExternalTask
metadata: {name: %[1]s, namespace: default}
spec:
  sessionRef: {name: %[2]s}
  queueRef: {name: e2e}
  lane: %[3]s
  commandType: read
  payload: {path: %[4]q}
  timeout: 2m
`

// expectTasksIsolated runs tasks on the worker pods that look for the
// worker's credential and environment: cat of the service-account token, a
// read of it, and env. They must find neither. Another tries to remove the
// worker's runner socket, which the runner mounts read-only.
func expectTasksIsolated() {
	const tokenPath = "/var/run/secrets/kubernetes.io/serviceaccount/token"
	apply(fmt.Sprintf(plainSessionYAML, "isolation"))
	commands := map[string]string{
		"iso-env":  "env; echo iso-env",
		"iso-cat":  "if cat " + tokenPath + "; then echo token-read; fi; ls -a /var/run/secrets 2>&1; echo iso-cat",
		"iso-sock": "rm -f /run/agentlane/runner.sock 2>&1; ls /run/agentlane 2>&1; echo iso-sock",
	}
	createTasks("isolation", "iso", "execute", 3, func(i int) string { return commands[[]string{"iso-env", "iso-cat", "iso-sock"}[i-1]] })
	apply(fmt.Sprintf(readTaskYAML, "iso-read", "isolation", "execute", tokenPath))
	tasks := waitForTasks("isolation", 4, 3*time.Minute)
	expectRanOnce(tasks)

	env := tasks["iso-env"]
	Expect(env.Status.Worker).To(HavePrefix("agentlane-worker-"), describe(env))
	By("the task's environment, on " + env.Status.Worker + ":\n" + stdout(env))
	for _, name := range []string{"POD_NAME", "NODE_NAME", "KUBERNETES_SERVICE_HOST", "KUBERNETES_PORT", "KUBECONFIG"} {
		Expect(stdout(env)).NotTo(MatchRegexp(`(?m)^`+name+`=`), "the task sees the worker's %s", name)
	}
	Expect(stdout(env)).To(MatchRegexp(`(?m)^HOME=/tmp/tasks/attempt-`), "HOME is the attempt's own directory")

	cat := tasks["iso-cat"]
	Expect(stdout(cat)).NotTo(ContainSubstring("token-read"), "cat of the token succeeded: %s", stdout(cat))
	Expect(stdout(cat)).NotTo(ContainSubstring("eyJ"), "a JWT reached the task")

	sock := tasks["iso-sock"]
	By("a task's attempt on the worker's socket, on " + sock.Status.Worker + ":\n" + stdout(sock))
	Expect(stdout(sock)).To(ContainSubstring("Read-only file system"), "the task could remove the worker's socket")
	Expect(stdout(sock)).To(ContainSubstring("runner.sock"), "the worker's socket is gone")

	read := &agentlanev1alpha1.ExternalTask{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "iso-read"}, read)).To(Succeed())
	Expect(read.Status.Phase).NotTo(Equal(agentlanev1alpha1.ExternalTaskSucceeded), describe(read))
	Expect(read.Status.Result).NotTo(BeNil(), describe(read))
	Expect(read.Status.Result.Result).To(BeNil(), "the read returned content")
	Expect(read.Status.Result.Error).To(ContainSubstring("invalid payload: path"), describe(read))

	By("the worker itself still reaches the API server with its own token: it reported every result")
}
