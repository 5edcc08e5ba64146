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

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/agentscript"
	"github.com/agentlane/agentlane/internal/testenv"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// sessionToken creates a service account in ns bound to the session-user
// ClusterRole of config/rbac, and returns a token of it.
func sessionToken(ns string) string {
	GinkgoHelper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "session_user_role.yaml"))
	Expect(err).NotTo(HaveOccurred())
	role := &rbacv1.ClusterRole{}
	Expect(yaml.Unmarshal(raw, role)).To(Succeed())
	role.Name = "session-user-" + ns
	Expect(k8sClient.Create(suiteCtx, role)).To(Succeed())
	DeferCleanup(func() { _ = k8sClient.Delete(suiteCtx, role) })
	token, err := testenv.ServiceAccountToken(suiteCtx, k8sClient, ns, "agent", rbacv1.RoleRef{Kind: "ClusterRole", Name: role.Name})
	Expect(err).NotTo(HaveOccurred())
	return token
}

var _ = Describe("A scripted agent runtime on the Session API", func() {
	BeforeEach(showManagerLogOnFailure)

	It("runs its reads in parallel and its bash commands in order on worker processes, and gets their results", func() {
		ns := newNamespace()
		query := externalLane("query", 1, 0, 4)
		execute := externalLane("execute", 2, 0, 1)
		createQueue(ns, agentlanev1alpha1.LaneQueueSpec{Lanes: []agentlanev1alpha1.Lane{
			query, execute, {Name: "generate", Priority: 3, MaxConcurrencyPerSession: 1},
		}})
		startPool(ns, 4)
		token := sessionToken(ns)
		c, err := sessionapi.NewClient(sessionAPI, sessionapi.WithToken(token))
		Expect(err).NotTo(HaveOccurred())
		session := c.Session(ns, "s1")

		dir := GinkgoT().TempDir()
		for _, f := range []string{"a", "b", "c"} {
			Expect(os.WriteFile(filepath.Join(dir, f+".txt"), []byte("contents of "+f), 0o644)).To(Succeed())
		}
		out := filepath.Join(dir, "order.log")
		script, err := agentscript.Parse(fmt.Appendf(nil, `
turns:
- prompt: read three files, then build and test
  llm: {inputTokens: 1200, outputTokens: 300, duration: 50ms}
  steps:
  - parallel:
    - {type: bash, lane: query, payload: {command: "sleep 1; cat %[1]s/a.txt"}}
    - {type: bash, lane: query, payload: {command: "sleep 1; cat %[1]s/b.txt"}}
    - {type: bash, lane: query, payload: {command: "sleep 1; cat %[1]s/c.txt"}}
  - {type: bash, payload: {command: "sleep 0.2; echo build >> %[2]s; echo built"}}
  - {type: bash, payload: {command: "echo test >> %[2]s; echo tested"}}
`, dir, out))
		Expect(err).NotTo(HaveOccurred())

		events, err := session.Events(suiteCtx, sessionapi.EventsOptions{Reconnect: true})
		Expect(err).NotTo(HaveOccurred())
		defer func() { _ = events.Close() }()

		rt := &agentscript.Runtime{Session: session, Script: script}
		ctx, cancel := context.WithTimeout(suiteCtx, 2*time.Minute)
		defer cancel()
		report := rt.RunScript(ctx)
		Expect(report.Refusal()).NotTo(HaveOccurred())
		Expect(report.Turns).To(HaveLen(1))
		turn := report.Turns[0]
		Expect(turn.Commands).To(HaveLen(6))

		var reads, bashes []agentscript.CommandReport
		for _, cmd := range turn.Commands {
			Expect(cmd.State).To(Equal(sessionapi.StateSucceeded), "%s %s: %s", cmd.Type, cmd.ID, cmd.Error)
			// The reads are shell commands in the query lane: a worker's
			// read task reads only its own attempt's directory.
			switch {
			case cmd.Lane == "query":
				Expect(cmd.Mode).To(Equal(sessionapi.ModeExternal))
				reads = append(reads, cmd)
			case cmd.Type == "bash":
				Expect(cmd.Mode).To(Equal(sessionapi.ModeExternal))
				bashes = append(bashes, cmd)
			case cmd.Type == "llm":
				Expect(cmd.Mode).To(Equal(sessionapi.ModeInternal))
				Expect(cmd.Lane).To(Equal("generate"))
			}
		}
		Expect(reads).To(HaveLen(3))
		Expect(bashes).To(HaveLen(2))
		for i, r := range reads {
			var got struct{ Stdout string }
			Expect(json.Unmarshal(r.Output, &got)).To(Succeed())
			Expect(got.Stdout).To(Equal("contents of " + []string{"a", "b", "c"}[i]))
		}
		Expect(string(bashes[0].Output)).To(ContainSubstring("built"))
		Expect(string(bashes[1].Output)).To(ContainSubstring("tested"))
		log, err := os.ReadFile(out)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(log)).To(Equal("build\ntest\n"))

		// The session's events tell how the commands ran: every read had
		// started before the first read completed (each takes a second, so
		// that a slow dispatch on a loaded machine does not look serial);
		// the second bash command started only after the first had
		// completed.
		var order []string
		ids := map[string]string{}
		for i, r := range reads {
			ids[r.ID] = fmt.Sprintf("read%d", i+1)
		}
		for i, b := range bashes {
			ids[b.ID] = fmt.Sprintf("bash%d", i+1)
		}
		for len(order) < 10 {
			ev, err := events.Next()
			Expect(err).NotTo(HaveOccurred())
			if name, ok := ids[ev.CommandID]; ok && (ev.Type == "started" || ev.Type == "completed") {
				order = append(order, name+" "+ev.Type)
			}
		}
		GinkgoWriter.Printf("event order: %v\n", order)
		firstReadDone := slices.IndexFunc(order, func(s string) bool { return strings.HasPrefix(s, "read") && strings.HasSuffix(s, "completed") })
		for _, r := range []string{"read1", "read2", "read3"} {
			Expect(slices.Index(order, r+" started")).To(BeNumerically("<", firstReadDone), "%s started after a read completed: %v", r, order)
		}
		Expect(slices.Index(order, "bash1 completed")).To(BeNumerically("<", slices.Index(order, "bash2 started")), "%v", order)

		// Each command was an ExternalTask run by a worker process.
		workers := map[string]bool{}
		for _, t := range tasksIn(Default, ns) {
			Expect(t.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskSucceeded))
			Expect(t.Status.Worker).NotTo(BeEmpty())
			Expect(t.Labels).To(HaveKeyWithValue(agentlanev1alpha1.SessionLabel, "s1"))
			workers[t.Status.Worker] = true
		}
		GinkgoWriter.Printf("workers used: %v\n", workers)
	})

	It("refuses a runtime of another namespace", func() {
		ns := newNamespace()
		createQueue(ns, agentlanev1alpha1.LaneQueueSpec{Lanes: []agentlanev1alpha1.Lane{externalLane("execute", 0, 0, 1)}})
		other := newNamespace()
		c, err := sessionapi.NewClient(sessionAPI, sessionapi.WithToken(sessionToken(other)))
		Expect(err).NotTo(HaveOccurred())
		_, err = c.Session(ns, "s1").Submit(suiteCtx, sessionapi.SubmitRequest{Type: "bash", Payload: json.RawMessage(`{"command":"true"}`)})
		Expect(sessionapi.IsCode(err, sessionapi.CodeForbidden)).To(BeTrue(), "%v", err)
		Consistently(func(g Gomega) []agentlanev1alpha1.ExternalTask { return tasksIn(g, ns) }, "500ms").Should(BeEmpty())
	})
})
