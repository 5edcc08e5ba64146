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

package kubectlplugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/testenv"
)

// The namespaces of the suite: the editor may write only in teamA.
const (
	teamA = "team-a"
	teamB = "team-b"
)

// cluster is the suite's control plane with one kubeconfig per user.
type cluster struct {
	env   *envtest.Environment
	admin client.Client
	// viewer holds queue-viewer in every namespace (a ClusterRoleBinding);
	// editor holds queue-viewer and editor in teamA only (RoleBindings),
	// as the built-in edit role grants them there; writer holds editor
	// alone in teamA, which is enough for the verbs that only patch.
	viewer, editor, writer string
	dir                    string
}

// TestVerbs runs every verb in-process against an envtest API server, as
// a user who holds only the shipped ClusterRoles the verb needs.
func TestVerbs(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run `make test`, or set it to $(hack/envtest-assets.sh)")
	}
	cl := startCluster(t)
	seed(t, cl.admin)

	t.Run("queues: a table, -A, -o wide/json/yaml/name, as the viewer", func(t *testing.T) {
		g := NewWithT(t)
		out, errOut, err := run(t, cl.viewer, "queues", "-n", teamA)
		g.Expect(err).NotTo(HaveOccurred(), errOut)
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		g.Expect(lines).To(HaveLen(2))
		g.Expect(lines[0]).To(MatchRegexp(`^NAME +READY +LANES +PENDING +ACTIVE +SUCCEEDED +FAILED +DEAD +PAUSED +DRAIN +AGE$`))
		g.Expect(lines[1]).To(MatchRegexp(`^agents +True +2 +1 +3 +6 +1 +2 +0 +No +\d+s$`))
		g.Expect(strings.Index(lines[0], "AGE")).To(Equal(strings.LastIndex(lines[1], " ")+1), "aligned columns")
		g.Expect(strings.Index(lines[0], "DRAIN")).To(Equal(strings.Index(lines[1], "No ")), "aligned columns")

		out, _, err = run(t, cl.viewer, "queues", "-A")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(MatchRegexp(`(?m)^NAMESPACE +NAME +READY `))
		g.Expect(out).To(MatchRegexp(`(?m)^team-a +agents +True `))
		g.Expect(out).To(MatchRegexp(`(?m)^team-b +other +Unknown +1 `))

		out, _, err = run(t, cl.viewer, "queues", "-n", teamA, "-o", "wide")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(MatchRegexp(`(?m)^agents/query +- +Internal +0 +1 +5 +0 +0 +false +- +-$`))
		g.Expect(out).To(MatchRegexp(`(?m)^agents/execute +- +External +1 +2 +1 +1 +2 +false +- +-$`))

		out, _, err = run(t, cl.viewer, "queues", "-n", teamA, "-o", "json")
		g.Expect(err).NotTo(HaveOccurred())
		var list struct {
			Kind  string `json:"kind"`
			Items []struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
				Metadata   struct {
					Name string `json:"name"`
				} `json:"metadata"`
			} `json:"items"`
		}
		g.Expect(json.Unmarshal([]byte(out), &list)).To(Succeed())
		g.Expect(list.Kind).To(Equal("LaneQueueList"))
		g.Expect(list.Items).To(HaveLen(1))
		g.Expect(list.Items[0].APIVersion).To(Equal("agentlane.io/v1alpha1"))
		g.Expect(list.Items[0].Kind).To(Equal("LaneQueue"))
		g.Expect(list.Items[0].Metadata.Name).To(Equal("agents"))

		out, _, err = run(t, cl.viewer, "queues", "-n", teamA, "-o", "yaml")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(ContainSubstring("kind: LaneQueueList\n"))
		g.Expect(out).To(ContainSubstring("  kind: LaneQueue\n"))

		out, _, err = run(t, cl.viewer, "queues", "-A", "-o", "name")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(Equal("lanequeue.agentlane.io/agents\nlanequeue.agentlane.io/other\n"))

		out, _, err = run(t, cl.viewer, "queues", "-n", teamA, "agents", "missing", "-o", "name")
		g.Expect(err).To(MatchError(`lanequeues.agentlane.io "missing" not found`))
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
		g.Expect(out).To(BeEmpty())

		out, errOut, err = run(t, cl.viewer, "queues", "-n", "empty")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(BeEmpty())
		g.Expect(errOut).To(Equal("No LaneQueues found in empty namespace.\n"))
	})

	t.Run("the kubeconfig's namespace and --context choose the namespace, as in kubectl", func(t *testing.T) {
		g := NewWithT(t)
		kubeconfig := withContexts(t, cl.viewer)
		out, _, err := run(t, kubeconfig, "queues", "-o", "name")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(Equal("lanequeue.agentlane.io/agents\n"))
		out, _, err = run(t, kubeconfig, "queues", "-o", "name", "--context", "b")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(Equal("lanequeue.agentlane.io/other\n"))
		out, _, err = run(t, kubeconfig, "queues", "-o", "name", "--context", "b", "-n", teamA)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(Equal("lanequeue.agentlane.io/agents\n"))

		// --as impersonates, as in kubectl: an administrator acting as the
		// editor is held to the editor's namespace.
		admin := kubeconfigOf(t, cl.env, t.TempDir(), "admin", "system:masters")
		_, _, err = run(t, admin, "lane", "drain", "-n", teamB, "other", "--as", "editor")
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		g.Expect(err).To(MatchError(ContainSubstring(`User "editor" cannot patch resource "lanequeues"`)))
		_, _, err = run(t, admin, "queues", "-n", teamB, "other", "--as", "editor")
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		out, _, err = run(t, admin, "queues", "-n", teamB, "-o", "name")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(Equal("lanequeue.agentlane.io/other\n"))
	})

	t.Run("sessions: table, --queue, -o name", func(t *testing.T) {
		g := NewWithT(t)
		out, errOut, err := run(t, cl.viewer, "sessions", "-n", teamA)
		g.Expect(err).NotTo(HaveOccurred(), errOut)
		g.Expect(out).To(MatchRegexp(`^NAME +QUEUE +PHASE +DESIRED +NODE +TENANT +PENDING +ACTIVE +SUCCEEDED +FAILED +DEAD +AGE\n`))
		g.Expect(out).To(MatchRegexp(`(?m)^reviewer-42 +agents +Active +Active +node-a +acme-corp +1 +3 +6 +1 +2 +\d+s$`))
		g.Expect(out).To(MatchRegexp(`(?m)^reviewer-43 +agents +<none> +Passivated +<none> +<none> +0 +0 +0 +0 +0 +\d+s$`))
		_, _, err = run(t, cl.viewer, "sessions", "-n", teamA, "solo")
		g.Expect(err).To(MatchError(`agentsessions.agentlane.io "solo" not found`))
		out, _, err = run(t, cl.viewer, "sessions", "-A", "--queue", "other", "-o", "name")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(Equal("agentsession.agentlane.io/solo\n"))
	})

	t.Run("tasks: filters by session, lane, queue and phase", func(t *testing.T) {
		g := NewWithT(t)
		out, errOut, err := run(t, cl.viewer, "tasks", "-n", teamA)
		g.Expect(err).NotTo(HaveOccurred(), errOut)
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		g.Expect(lines[0]).To(MatchRegexp(`^NAME +SESSION +LANE +COMMAND +PHASE +ATTEMPT +WORKER +AGE$`))
		g.Expect(lines[1:]).To(ConsistOf(
			MatchRegexp(`^build-1 +reviewer-42 +execute +bash +Running +1 +worker-a +\d+s$`),
			MatchRegexp(`^build-2 +reviewer-42 +execute +bash +DeadLettered +3 +worker-b +\d+s$`),
			MatchRegexp(`^lookup-1 +reviewer-43 +query +read +Queued +<none> +<none> +\d+s$`),
			MatchRegexp(`^fresh-1 +reviewer-43 +execute +bash +<none> +<none> +<none> +\d+s$`),
			MatchRegexp(`^delegated-1 +reviewer-43 +delegate +delegate +DeadLettered +1 +<none> +\d+s$`),
		))
		names := func(args ...string) string {
			out, errOut, err := run(t, cl.viewer, append([]string{"tasks", "-o", "name"}, args...)...)
			g.Expect(err).NotTo(HaveOccurred(), errOut)
			lines := strings.SplitAfter(out, "\n")
			sort.Strings(lines)
			return strings.Join(lines, "")
		}
		g.Expect(names("-n", teamA, "--session", "reviewer-42")).To(Equal("externaltask.agentlane.io/build-1\nexternaltask.agentlane.io/build-2\n"))
		g.Expect(names("-n", teamA, "--lane", "query")).To(Equal("externaltask.agentlane.io/lookup-1\n"))
		g.Expect(names("-n", teamA, "--phase", "queued,deadlettered")).To(Equal("externaltask.agentlane.io/build-2\nexternaltask.agentlane.io/delegated-1\nexternaltask.agentlane.io/lookup-1\n"))
		g.Expect(names("-n", teamA, "--session", "reviewer-42", "--phase", "Running")).To(Equal("externaltask.agentlane.io/build-1\n"))
		g.Expect(names("-A", "--queue", "other")).To(Equal("externaltask.agentlane.io/solo-1\n"))
		g.Expect(names("-A", "-l", "agentlane.io/session=reviewer-43")).To(Equal("externaltask.agentlane.io/lookup-1\n"))

		out, _, err = run(t, cl.viewer, "tasks", "-n", teamA, "--session", "reviewer-42", "-o", "wide")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(MatchRegexp(`(?m)^build-2 +reviewer-42 +execute +bash +DeadLettered +3 +worker-b +\d+s +node-b +exit status 2: disk full \[1\] \[2\] \[3\]$`))

		_, _, err = run(t, cl.viewer, "tasks", "-n", teamA, "--phase", "Sleeping")
		g.Expect(err).To(MatchError(ContainSubstring(`--phase "Sleeping" is not a task phase`)))
	})

	t.Run("dead-letters lists the DeadLettered tasks", func(t *testing.T) {
		g := NewWithT(t)
		out, errOut, err := run(t, cl.viewer, "dead-letters", "-n", teamA)
		g.Expect(err).NotTo(HaveOccurred(), errOut)
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		g.Expect(lines[0]).To(MatchRegexp(`^NAME +SESSION +QUEUE +LANE +COMMAND +ATTEMPTS +FAILED +ERROR$`))
		g.Expect(lines[1:]).To(ConsistOf(
			MatchRegexp(`^build-2 +reviewer-42 +agents +execute +bash +3 +\d+[sm] ago +exit status 2: disk full \[1\] \[2\] \[3\]$`),
			MatchRegexp(`^delegated-1 +reviewer-43 +agents +delegate +delegate +1 +<none> +<none>$`),
		))
		_, errOut, err = run(t, cl.viewer, "dead-letters", "-n", teamB)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(errOut).To(Equal("No dead letters found in team-b namespace.\n"))
	})

	t.Run("dead-letters retry needs the editor role; it copies the dead letter once", func(t *testing.T) {
		g := NewWithT(t)
		_, _, err := run(t, cl.viewer, "dead-letters", "retry", "-n", teamA, "build-2")
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the viewer may not create tasks: %v", err)
		g.Expect(cl.admin.Get(t.Context(), client.ObjectKey{Namespace: teamA, Name: "build-2-retry"}, &agentlanev1alpha1.ExternalTask{})).
			To(Satisfy(apierrors.IsNotFound))

		out, errOut, err := run(t, cl.editor, "dead-letters", "retry", "-n", teamA, "build-2")
		g.Expect(err).NotTo(HaveOccurred(), errOut)
		g.Expect(out).To(Equal("externaltask.agentlane.io/build-2-retry created\n"))
		dead, retried := &agentlanev1alpha1.ExternalTask{}, &agentlanev1alpha1.ExternalTask{}
		g.Expect(cl.admin.Get(t.Context(), client.ObjectKey{Namespace: teamA, Name: "build-2"}, dead)).To(Succeed())
		g.Expect(cl.admin.Get(t.Context(), client.ObjectKey{Namespace: teamA, Name: "build-2-retry"}, retried)).To(Succeed())
		g.Expect(retried.Annotations).To(HaveKeyWithValue(RetryOfAnnotation, "build-2"))
		g.Expect(retried.Spec.SessionRef).To(Equal(dead.Spec.SessionRef))
		g.Expect(retried.Spec.QueueRef).To(Equal(dead.Spec.QueueRef))
		g.Expect(retried.Spec.Lane).To(Equal(dead.Spec.Lane))
		g.Expect(retried.Spec.CommandType).To(Equal(dead.Spec.CommandType))
		g.Expect(string(retried.Spec.Payload.Raw)).To(MatchJSON(dead.Spec.Payload.Raw))
		g.Expect(retried.Spec.Identity).To(Equal(dead.Spec.Identity))
		g.Expect(retried.Spec.RunID).To(Equal(dead.Spec.RunID))
		g.Expect(retried.Spec.Timeout.Duration).To(Equal(dead.Spec.Timeout.Duration))
		g.Expect(retried.Spec.Deadline).To(BeNil(), "the deadline had passed")
		g.Expect(retried.Status.Phase).To(BeEmpty(), "the copy starts as a new task")

		_, _, err = run(t, cl.editor, "dead-letters", "retry", "-n", teamA, "build-2")
		g.Expect(err).To(MatchError(ContainSubstring("was retried already: externaltask build-2-retry exists")))
		_, _, err = run(t, cl.editor, "dead-letters", "retry", "-n", teamA, "delegated-1")
		g.Expect(err).To(MatchError(ContainSubstring("is delegated work: its producer submits it again through the Session API")))
		g.Expect(cl.admin.Get(t.Context(), client.ObjectKey{Namespace: teamA, Name: "delegated-1-retry"}, &agentlanev1alpha1.ExternalTask{})).
			To(Satisfy(apierrors.IsNotFound))
		_, _, err = run(t, cl.editor, "dead-letters", "retry", "-n", teamA, "build-1")
		g.Expect(err).To(MatchError(ContainSubstring("is not a dead letter (phase Running)")))
		_, _, err = run(t, cl.editor, "dead-letters", "retry", "-n", teamB, "solo-1")
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the editor of team-a may not read team-b: %v", err)
	})

	t.Run("lane pause and resume need the editor role and change only the named lanes", func(t *testing.T) {
		g := NewWithT(t)
		_, _, err := run(t, cl.viewer, "lane", "pause", "-n", teamA, "agents", "execute")
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		g.Expect(lanePaused(t, cl.admin)).To(Equal(map[string]bool{"query": false, "execute": false}))

		out, errOut, err := run(t, cl.editor, "lane", "pause", "-n", teamA, "agents", "execute")
		g.Expect(err).NotTo(HaveOccurred(), errOut)
		g.Expect(out).To(Equal("lanequeue.agentlane.io/agents paused\n"))
		g.Expect(lanePaused(t, cl.admin)).To(Equal(map[string]bool{"query": false, "execute": true}))

		out, _, err = run(t, cl.editor, "lane", "pause", "-n", teamA, "agents", "execute")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(Equal("lanequeue.agentlane.io/agents unchanged\n"))

		_, _, err = run(t, cl.editor, "lane", "resume", "-n", teamA, "agents", "execute", "-o", "wide")
		g.Expect(err).To(MatchError(ContainSubstring("unable to match a printer suitable for the output format \"wide\"")))
		g.Expect(lanePaused(t, cl.admin)).To(Equal(map[string]bool{"query": false, "execute": true}), "a wrong -o changes nothing")
		_, _, err = run(t, cl.viewer, "tasks", "-n", teamA, "-o", "table")
		g.Expect(err).To(MatchError(ContainSubstring(`unable to match a printer suitable for the output format "table"`)))

		_, _, err = run(t, cl.editor, "lane", "pause", "-n", teamA, "agents", "nope")
		g.Expect(err).To(MatchError(ContainSubstring(`has no lane "nope" (its lanes: query, execute)`)))
		_, _, err = run(t, cl.editor, "lane", "pause", "-n", teamA, "agents")
		g.Expect(err).To(MatchError(ContainSubstring("name the lanes to pause, or give --all")))

		out, _, err = run(t, cl.editor, "lane", "pause", "-n", teamA, "agents", "--all", "-o", "json")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(ContainSubstring(`"paused": true`))
		g.Expect(lanePaused(t, cl.admin)).To(Equal(map[string]bool{"query": true, "execute": true}))

		out, _, err = run(t, cl.editor, "lane", "resume", "-n", teamA, "agents", "query")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(Equal("lanequeue.agentlane.io/agents resumed\n"))
		g.Expect(lanePaused(t, cl.admin)).To(Equal(map[string]bool{"query": false, "execute": true}))
		_, _, err = run(t, cl.editor, "lane", "resume", "-n", teamA, "agents", "--all")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(lanePaused(t, cl.admin)).To(Equal(map[string]bool{"query": false, "execute": false}))

		_, _, err = run(t, cl.editor, "lane", "pause", "-n", teamB, "other", "--all")
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
	})

	t.Run("lane drain and undrain patch spec.drain", func(t *testing.T) {
		g := NewWithT(t)
		_, _, err := run(t, cl.viewer, "lane", "drain", "-n", teamA, "agents")
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)

		out, errOut, err := run(t, cl.editor, "lane", "drain", "-n", teamA, "agents", "--timeout", "5m")
		g.Expect(err).NotTo(HaveOccurred(), errOut)
		g.Expect(out).To(Equal("lanequeue.agentlane.io/agents draining\n"))
		q := getQueue(t, cl.admin)
		g.Expect(q.Spec.Drain).NotTo(BeNil())
		g.Expect(q.Spec.Drain.Timeout.Duration).To(Equal(5 * time.Minute))
		out, _, err = run(t, cl.viewer, "queues", "-n", teamA)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(MatchRegexp(`(?m)^agents +True .* Requested +\d+s$`))

		_, _, err = run(t, cl.editor, "lane", "drain", "-n", teamA, "agents", "--timeout", "48h")
		g.Expect(err).To(MatchError(ContainSubstring("--timeout must be between 1s and 24h0m0s")))

		out, _, err = run(t, cl.editor, "lane", "undrain", "-n", teamA, "agents")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(Equal("lanequeue.agentlane.io/agents undrained\n"))
		g.Expect(getQueue(t, cl.admin).Spec.Drain).To(BeNil())

		_, _, err = run(t, cl.editor, "lane", "drain", "-n", teamA, "agents")
		g.Expect(err).NotTo(HaveOccurred())
		q = getQueue(t, cl.admin)
		g.Expect(q.Spec.Drain).NotTo(BeNil())
		g.Expect(q.Spec.Drain.Timeout).To(BeNil())
		_, _, err = run(t, cl.editor, "lane", "undrain", "-n", teamA, "agents")
		g.Expect(err).NotTo(HaveOccurred())

		_, _, err = run(t, cl.editor, "lane", "drain", "-n", teamA, "missing")
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
	})

	t.Run("session passivate, resume and migrate need the editor role", func(t *testing.T) {
		g := NewWithT(t)
		session := func() *agentlanev1alpha1.AgentSession {
			s := &agentlanev1alpha1.AgentSession{}
			g.Expect(cl.admin.Get(t.Context(), client.ObjectKey{Namespace: teamA, Name: "reviewer-42"}, s)).To(Succeed())
			return s
		}
		for _, verb := range []string{"passivate", "resume", "migrate"} {
			_, _, err := run(t, cl.viewer, "session", verb, "-n", teamA, "reviewer-42")
			g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s: %v", verb, err)
		}
		g.Expect(session().Spec.DesiredState).To(Equal(agentlanev1alpha1.DesiredStateActive))

		out, errOut, err := run(t, cl.editor, "session", "passivate", "-n", teamA, "reviewer-42")
		g.Expect(err).NotTo(HaveOccurred(), errOut)
		g.Expect(out).To(Equal("agentsession.agentlane.io/reviewer-42 passivated\n"))
		g.Expect(session().Spec.DesiredState).To(Equal(agentlanev1alpha1.DesiredStatePassivated))

		out, _, err = run(t, cl.editor, "session", "resume", "-n", teamA, "reviewer-42", "reviewer-43")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(Equal("agentsession.agentlane.io/reviewer-42 resumed\nagentsession.agentlane.io/reviewer-43 resumed\n"))
		g.Expect(session().Spec.DesiredState).To(Equal(agentlanev1alpha1.DesiredStateActive))

		out, _, err = run(t, cl.editor, "session", "migrate", "-n", teamA, "reviewer-42", "--reason", "rebalance")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(Equal("agentsession.agentlane.io/reviewer-42 migrating\n"))
		g.Expect(session().Annotations).To(HaveKeyWithValue(agentlanev1alpha1.MigrateAnnotation, "rebalance"))

		_, _, err = run(t, cl.editor, "session", "migrate", "-n", teamA, "reviewer-42", "--reason", "a\x1b[2Jb")
		g.Expect(err).To(MatchError(ContainSubstring("must not hold control characters")))
		_, _, err = run(t, cl.editor, "session", "migrate", "-n", teamA, "reviewer-42", "--reason", strings.Repeat("x", 257))
		g.Expect(err).To(MatchError(ContainSubstring("at most 256 bytes")))

		out, _, err = run(t, cl.editor, "session", "passivate", "-n", teamA, "missing", "reviewer-43")
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
		g.Expect(out).To(Equal("agentsession.agentlane.io/reviewer-43 passivated\n"), "goes on past a missing session")
		_, _, err = run(t, cl.editor, "session", "passivate", "-n", teamB, "solo")
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
	})

	t.Run("drain, undrain, passivate, resume and migrate need the editor role alone; pause also reads", func(t *testing.T) {
		g := NewWithT(t)
		for _, args := range [][]string{
			{"lane", "drain", "agents", "--timeout", "1m"}, {"lane", "undrain", "agents"},
			{"session", "passivate", "reviewer-43"}, {"session", "resume", "reviewer-43"}, {"session", "migrate", "reviewer-43"},
		} {
			_, errOut, err := run(t, cl.writer, append(args, "-n", teamA)...)
			g.Expect(err).NotTo(HaveOccurred(), "%v: %s", args, errOut)
		}
		_, _, err := run(t, cl.writer, "lane", "pause", "-n", teamA, "agents", "query")
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "pause reads the queue first: %v", err)
		g.Expect(lanePaused(t, cl.admin)).To(Equal(map[string]bool{"query": false, "execute": false}))
	})

	t.Run("top prints lanetop's dashboard and strip as the viewer", func(t *testing.T) {
		g := NewWithT(t)
		out, errOut, err := run(t, cl.viewer, "top", "-n", teamA, "--view", "strip")
		g.Expect(err).NotTo(HaveOccurred(), errOut)
		g.Expect(out).To(HavePrefix("agents ●3/"))
		out, _, err = run(t, cl.viewer, "top", "-A", "--task", "build-2")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(HavePrefix("agentlane · all namespaces · "))
		g.Expect(out).To(MatchRegexp(`(?m)^── QUEUES \(2\) ─+$`))
		g.Expect(out).To(MatchRegexp(`(?m)^── TASK team-a/build-2 ─+$`))
		_, _, err = run(t, cl.viewer, "top", "--view", "graph")
		g.Expect(err).To(MatchError(ContainSubstring(`--view must be dashboard or strip, got "graph"`)))
	})

	t.Run("top --watch prints a frame at each change until interrupted", func(t *testing.T) {
		g := NewWithT(t)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		out := &testenv.LockedBuffer{}
		cmd := NewCommand("kubectl agentlane", genericiooptions.IOStreams{In: strings.NewReader(""), Out: out, ErrOut: out})
		cmd.SetArgs([]string{"--kubeconfig", cl.viewer, "top", "-n", teamA, "--view", "strip", "--watch"})
		done := make(chan error, 1)
		go func() { done <- cmd.ExecuteContext(ctx) }()
		g.Eventually(out.String, 30*time.Second).Should(MatchRegexp(`^agents ●3/\S+ ○1 ✓6 ✗1 ☠2`))
		q := getQueue(t, cl.admin)
		q.Status.Lanes[1].Completed = 40
		g.Expect(cl.admin.Status().Update(t.Context(), q)).To(Succeed())
		g.Eventually(out.String, 30*time.Second).Should(MatchRegexp(`\nagents ●3/\S+ ○1 ✓45 ✗1 ☠2`))
		cancel()
		g.Eventually(done, 30*time.Second).Should(Receive(BeNil()))
	})

	t.Run("kubectl finds the plugin on the PATH and runs it as kubectl agentlane", func(t *testing.T) {
		g := NewWithT(t)
		kubectl := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl")
		if _, err := os.Stat(kubectl); err != nil {
			t.Fatalf("the envtest assets hold no kubectl (hack/envtest-assets.sh builds one): %v", err)
		}
		binDir := t.TempDir()
		if err := testenv.GoBuild(filepath.Join("..", ".."), "./cmd/kubectl-agentlane", filepath.Join(binDir, "kubectl-agentlane")); err != nil {
			t.Fatal(err)
		}
		kubectlRun := func(args ...string) string {
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, kubectl, args...)
			// The PATH holds the plugin alone, so that no other kubectl-*
			// file on this machine can make `kubectl plugin list` warn.
			cmd.Env = append(os.Environ(), "PATH="+binDir, "KUBECONFIG="+cl.viewer)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			g.Expect(err).NotTo(HaveOccurred(), "kubectl %s: %s", strings.Join(args, " "), stderr.String())
			return string(out)
		}
		g.Expect(kubectlRun("plugin", "list")).To(ContainSubstring(filepath.Join(binDir, "kubectl-agentlane")))
		out := kubectlRun("agentlane", "queues", "-n", teamA)
		g.Expect(out).To(MatchRegexp(`^NAME +READY +LANES `))
		g.Expect(out).To(MatchRegexp(`(?m)^agents +True +2 `))
		g.Expect(strings.Fields(kubectlRun("agentlane", "tasks", "-A", "--phase", "DeadLettered", "-o", "name"))).
			To(ConsistOf("externaltask.agentlane.io/build-2", "externaltask.agentlane.io/delegated-1"))
		g.Expect(kubectlRun("agentlane", "--help")).To(ContainSubstring("kubectl agentlane [command]"))

		// A refused call: exit status 1 and kubectl's "error: " line.
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, kubectl, "agentlane", "lane", "undrain", "agents", "-n", teamA)
		cmd.Env = append(os.Environ(), "PATH="+binDir, "KUBECONFIG="+cl.viewer)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		g.Expect(errors.As(err, &exit)).To(BeTrue(), "%v", err)
		g.Expect(exit.ExitCode()).To(Equal(1))
		g.Expect(stderr.String()).To(HavePrefix(`error: lanequeues.agentlane.io "agents" is forbidden: User "viewer" cannot patch resource "lanequeues"`))
	})
}

// run runs the plugin in-process with kubeconfig and args, and returns what
// it wrote to stdout and stderr and its error.
func run(t *testing.T, kubeconfig string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := NewCommand("kubectl agentlane", genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	cmd.SetArgs(append([]string{"--kubeconfig", kubeconfig}, args...))
	err := cmd.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

// startCluster starts the control plane with the shipped queue-viewer and
// editor ClusterRoles and the suite's two users.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	env, _, c, err := testenv.Start(testenv.Scheme())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop the control plane: %v", err)
		}
	})
	cl := &cluster{env: env, admin: c, dir: t.TempDir()}
	ctx := t.Context()
	for _, ns := range []string{teamA, teamB} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	viewerRole := clusterRole(t, c, "queue_viewer_role.yaml")
	editorRole := clusterRole(t, c, "editor_role.yaml")
	must(t, c.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "viewer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: viewerRole},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "viewer"}},
	}))
	for _, role := range []string{viewerRole, editorRole} {
		must(t, c.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: teamA, Name: "editor-" + role},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "editor"}},
		}))
	}
	must(t, c.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: teamA, Name: "writer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: editorRole},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "writer"}},
	}))
	cl.writer = kubeconfigOf(t, env, cl.dir, "writer")
	cl.viewer = kubeconfigOf(t, env, cl.dir, "viewer")
	cl.editor = kubeconfigOf(t, env, cl.dir, "editor")
	return cl
}

// clusterRole creates the ClusterRole of config/rbac/file and returns its
// name.
func clusterRole(t *testing.T, c client.Client, file string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", file))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(data, role); err != nil {
		t.Fatal(err)
	}
	must(t, c.Create(t.Context(), role))
	return role.Name
}

// kubeconfigOf writes a kubeconfig that authenticates as user, a member of
// groups.
func kubeconfigOf(t *testing.T, env *envtest.Environment, dir, user string, groups ...string) string {
	t.Helper()
	u, err := env.ControlPlane.AddUser(envtest.User{Name: user, Groups: groups}, nil)
	if err != nil {
		t.Fatal(err)
	}
	data, err := u.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, user+".kubeconfig")
	must(t, os.WriteFile(path, data, 0o600))
	return path
}

// withContexts copies the kubeconfig with its current context's namespace
// set to teamA, and adds a context "b" for the same user in teamB.
func withContexts(t *testing.T, path string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cur := cfg.Contexts[cfg.CurrentContext]
	cur.Namespace = teamA
	b := cur.DeepCopy()
	b.Namespace = teamB
	cfg.Contexts["b"] = b
	out := filepath.Join(t.TempDir(), "contexts.kubeconfig")
	must(t, clientcmd.WriteToFile(*cfg, out))
	return out
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// seed creates the suite's queues, sessions and tasks with their status,
// as the manager and the workers would have written it.
func seed(t *testing.T, c client.Client) {
	t.Helper()
	now := metav1.Now()
	ago := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(-d)} }
	agents := &agentlanev1alpha1.LaneQueue{
		ObjectMeta: metav1.ObjectMeta{Namespace: teamA, Name: "agents"},
		Spec: agentlanev1alpha1.LaneQueueSpec{Lanes: []agentlanev1alpha1.Lane{
			{Name: "query", Priority: 1, HandlerMode: agentlanev1alpha1.HandlerModeInternal, MaxConcurrencyPerSession: 4},
			{Name: "execute", Priority: 2, HandlerMode: agentlanev1alpha1.HandlerModeExternal, MaxConcurrency: 4, MaxConcurrencyPerSession: 2},
		}},
		Status: agentlanev1alpha1.LaneQueueStatus{
			Pending: 1, Active: 3, Sessions: 2,
			Lanes: []agentlanev1alpha1.LaneStatus{
				{Name: "query", Active: 1, Completed: 5},
				{Name: "execute", Pending: 1, Active: 2, Completed: 1, Failed: 1, DeadLettered: 2},
			},
			Conditions: []metav1.Condition{{
				Type: agentlanev1alpha1.LaneQueueReadyCondition, Status: metav1.ConditionTrue,
				Reason: agentlanev1alpha1.LaneQueueSchedulingReason, LastTransitionTime: now,
			}},
		},
	}
	put(t, c, agents)
	put(t, c, &agentlanev1alpha1.LaneQueue{
		ObjectMeta: metav1.ObjectMeta{Namespace: teamB, Name: "other"},
		Spec:       agentlanev1alpha1.LaneQueueSpec{DefaultLane: "default", Lanes: []agentlanev1alpha1.Lane{{Name: "default", Priority: 1}}},
		Status:     agentlanev1alpha1.LaneQueueStatus{Pending: 1},
	})
	r42 := &agentlanev1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Namespace: teamA, Name: "reviewer-42"},
		Spec: agentlanev1alpha1.AgentSessionSpec{QueueRef: agentlanev1alpha1.LaneQueueReference{Name: "agents"},
			Identity: &agentlanev1alpha1.Identity{TenantID: "acme-corp", Principal: "user:42"}},
	}
	r42.Status.Phase, r42.Status.NodeName = agentlanev1alpha1.SessionActive, "node-a"
	r42.Status.Queue = agentlanev1alpha1.SessionQueueStatus{Pending: 1, Active: 3, Completed: 6, Failed: 1, DeadLettered: 2}
	put(t, c, r42)
	put(t, c, &agentlanev1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Namespace: teamA, Name: "reviewer-43"},
		Spec: agentlanev1alpha1.AgentSessionSpec{QueueRef: agentlanev1alpha1.LaneQueueReference{Name: "agents"},
			DesiredState: agentlanev1alpha1.DesiredStatePassivated},
	})
	put(t, c, &agentlanev1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Namespace: teamB, Name: "solo"},
		Spec:       agentlanev1alpha1.AgentSessionSpec{QueueRef: agentlanev1alpha1.LaneQueueReference{Name: "other"}},
	})

	task := func(ns, name, session, queue, lane, command string, labels map[string]string, status func(*agentlanev1alpha1.ExternalTaskStatus)) {
		et := &agentlanev1alpha1.ExternalTask{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			Spec: agentlanev1alpha1.ExternalTaskSpec{
				SessionRef:  &agentlanev1alpha1.AgentSessionReference{Name: session},
				QueueRef:    &agentlanev1alpha1.LaneQueueReference{Name: queue},
				Lane:        agentlanev1alpha1.LaneName(lane),
				CommandType: agentlanev1alpha1.CommandType(command),
				Payload:     &runtime.RawExtension{Raw: []byte(`{"command":"make ` + name + `"}`)},
			},
		}
		status(&et.Status)
		put(t, c, et)
	}
	task(teamA, "build-1", "reviewer-42", "agents", "execute", "bash", nil, func(s *agentlanev1alpha1.ExternalTaskStatus) {
		s.Phase, s.Lane, s.Attempt, s.Worker, s.NodeName = agentlanev1alpha1.ExternalTaskRunning, "execute", 1, "worker-a", "node-a"
		s.QueuedAt, s.DispatchedAt, s.StartedAt = ago(time.Minute), ago(time.Minute), ago(50*time.Second)
	})
	timeout := metav1.Duration{Duration: 2 * time.Minute}
	deadline := metav1.NewTime(now.Add(-time.Hour).Truncate(time.Second))
	dead := &agentlanev1alpha1.ExternalTask{
		ObjectMeta: metav1.ObjectMeta{Namespace: teamA, Name: "build-2"},
		Spec: agentlanev1alpha1.ExternalTaskSpec{
			SessionRef: &agentlanev1alpha1.AgentSessionReference{Name: "reviewer-42"},
			QueueRef:   &agentlanev1alpha1.LaneQueueReference{Name: "agents"},
			Lane:       "execute", CommandType: "bash",
			Payload:  &runtime.RawExtension{Raw: []byte(`{"command":"make build-2","env":{"A":"b"}}`)},
			Timeout:  &timeout,
			Deadline: &deadline,
			Identity: &agentlanev1alpha1.Identity{TenantID: "acme-corp", Principal: "user:42"},
			RunID:    "run-7",
		},
	}
	dead.Status.Phase, dead.Status.Lane, dead.Status.Attempt = agentlanev1alpha1.ExternalTaskDeadLettered, "execute", 3
	dead.Status.Worker, dead.Status.NodeName, dead.Status.FinishedAt = "worker-b", "node-b", ago(30*time.Second)
	exit := int32(2)
	// The error holds a newline and an escape: a table shows them as spaces.
	dead.Status.Result = &agentlanev1alpha1.TaskResult{Success: false, ExitCode: &exit, Error: "exit status 2: disk full\n[1]\x1b[2]\t[3]"}
	put(t, c, dead)
	task(teamA, "lookup-1", "reviewer-43", "agents", "query", "read", map[string]string{agentlanev1alpha1.SessionLabel: "reviewer-43"}, func(s *agentlanev1alpha1.ExternalTaskStatus) {
		s.Phase, s.Lane, s.QueuedAt = agentlanev1alpha1.ExternalTaskQueued, "query", ago(5*time.Second)
	})
	task(teamA, "fresh-1", "reviewer-43", "agents", "execute", "bash", nil, func(*agentlanev1alpha1.ExternalTaskStatus) {})
	task(teamA, "delegated-1", "reviewer-43", "agents", "delegate", "delegate", map[string]string{agentlanev1alpha1.DelegatedLabel: "true"}, func(s *agentlanev1alpha1.ExternalTaskStatus) {
		s.Phase, s.Lane, s.Attempt = agentlanev1alpha1.ExternalTaskDeadLettered, "delegate", 1
	})
	task(teamB, "solo-1", "solo", "other", "default", "bash", nil, func(s *agentlanev1alpha1.ExternalTaskStatus) {
		s.Phase, s.Lane, s.QueuedAt = agentlanev1alpha1.ExternalTaskQueued, "default", ago(time.Second)
	})
}

// put creates obj, then writes its status through the status subresource,
// as the manager and the workers would.
func put(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	withStatus := obj.DeepCopyObject().(client.Object)
	if err := c.Create(t.Context(), obj); err != nil {
		t.Fatalf("create %s: %v", obj.GetName(), err)
	}
	withStatus.SetResourceVersion(obj.GetResourceVersion())
	if err := c.Status().Update(t.Context(), withStatus); err != nil {
		t.Fatalf("write the status of %s: %v", obj.GetName(), err)
	}
}

func getQueue(t *testing.T, c client.Client) *agentlanev1alpha1.LaneQueue {
	t.Helper()
	q := &agentlanev1alpha1.LaneQueue{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: teamA, Name: "agents"}, q); err != nil {
		t.Fatal(err)
	}
	return q
}

// lanePaused is spec.lanes[].paused of team-a's queue, by lane.
func lanePaused(t *testing.T, c client.Client) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, l := range getQueue(t, c).Spec.Lanes {
		out[string(l.Name)] = l.Paused
	}
	return out
}
