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
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/agentscript"
	"github.com/agentlane/agentlane/internal/sessionstore"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// suiteServer is the suite's Server.
var suiteServer *Server

// withStore gives the suite's server the ConfigMap session store, reading
// around the cache as the manager does, builds it and keeps it for the
// specs.
func withStore(mgr ctrl.Manager, cfg Config) *Server {
	cfg.Store = sessionstore.NewConfigMaps(mgr.GetClient(), mgr.GetAPIReader())
	cfg.Recorder = mgr.GetEventRecorder("agentlane-session-api")
	suiteServer = mustNew(cfg)
	return suiteServer
}

// expectCode checks that err is an API error with status and code, and
// returns its message.
func expectCode(err error, status int, code string) string {
	GinkgoHelper()
	var e *sessionapi.Error
	Expect(err).To(BeAssignableToTypeOf(e), "error %v", err)
	e = err.(*sessionapi.Error)
	Expect(e.Code).To(Equal(code), "error %v", err)
	Expect(e.Status).To(Equal(status), "error %v", err)
	return e.Message
}

// checkpointConfigMap reads the ConfigMap holding the session's first
// checkpoint slot.
func (t tenant) checkpointConfigMap(session string) *corev1.ConfigMap {
	GinkgoHelper()
	cm := &corev1.ConfigMap{}
	Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: t.ns, Name: sessionstore.SlotName(session, 0)}, cm)).To(Succeed())
	return cm
}

// resumeScript is one turn of three steps whose second takes long enough
// for a runtime to be stopped while it runs.
func resumeScript() agentscript.Script {
	bash := func(cmd string) agentscript.Step {
		return agentscript.Step{Type: "bash", Payload: json.RawMessage(fmt.Sprintf(`{"command":%q}`, cmd))}
	}
	return agentscript.Script{Turns: []agentscript.Turn{{
		Prompt: "fix the build",
		LLM:    &agentscript.LLMCall{InputTokens: 10, OutputTokens: 5},
		Steps:  []agentscript.Step{bash("echo one"), bash("sleep 2"), bash("echo three")},
	}}}
}

// awaitRound waits until the session's latest checkpoint is round of a run
// other than notRun, and returns its run.
func awaitRound(s *sessionapi.SessionClient, round int, notRun string) string {
	GinkgoHelper()
	var run string
	Eventually(func(g Gomega) {
		cp, err := s.LoadCheckpoint(ctx, "")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cp.RunID).NotTo(Equal(notRun))
		g.Expect(cp.Round).To(Equal(round))
		run = cp.RunID
	}).Should(Succeed())
	return run
}

// stepsOf lists the steps of the commands of a turn.
func stepsOf(tr agentscript.TurnReport) []int {
	var out []int
	for _, c := range tr.Commands {
		Expect(c.State).To(Equal(sessionapi.StateSucceeded), "command %+v", c)
		out = append(out, c.Step)
	}
	return out
}

var _ = Describe("Checkpoints", func() {
	var a tenant

	BeforeEach(func() {
		a = newTenant()
		a.newQueue(internalLanes())
	})

	It("saves checkpoints in a ConfigMap the session owns, loads them back and shows the last in the status", func() {
		sess := a.newSession("s1", nil)
		s := a.session("s1")
		saved, err := s.SaveCheckpoint(ctx, sessionapi.Checkpoint{RunID: "run-1", Turn: 0, Round: 2,
			Identity: sessionapi.Identity{CorrelationID: "req-9"}, State: json.RawMessage(`{"nextStep":2}`)})
		Expect(err).NotTo(HaveOccurred())
		Expect(saved.Location).To(Equal("configmap/agentlane-ckpt-s1-0#run-1"))
		want := saved.Checkpoint
		Expect(want.SchemaVersion).To(Equal(sessionstore.CurrentSchemaVersion))
		Expect(want.Time).NotTo(BeZero())
		// Identity fields left empty are the session's; the caller's win.
		Expect(want.Identity).To(Equal(sessionapi.Identity{TenantID: a.ns, Principal: "agent", CorrelationID: "req-9"}))

		for _, run := range []string{"", "run-1"} {
			got, err := s.LoadCheckpoint(ctx, run)
			Expect(err).NotTo(HaveOccurred())
			Expect(got.State).To(MatchJSON(`{"nextStep":2}`))
			got.State = want.State
			Expect(*got).To(Equal(want), "LoadCheckpoint(%q)", run)
		}

		cm := a.checkpointConfigMap("s1")
		Expect(metav1.IsControlledBy(cm, sess)).To(BeTrue(), "owners %v", cm.OwnerReferences)
		Expect(cm.Labels).To(HaveKeyWithValue(agentlanev1alpha1.SessionLabel, "s1"))
		Expect(cm.Annotations).To(HaveKeyWithValue(sessionstore.RunAnnotation, "run-1"))

		_, err = s.SaveCheckpoint(ctx, sessionapi.Checkpoint{RunID: "run-2", Turn: 1, Round: 1,
			Identity: sessionapi.Identity{TenantID: "someone-else"}})
		Expect(err).NotTo(HaveOccurred())
		latest, err := s.LoadCheckpoint(ctx, "")
		Expect(err).NotTo(HaveOccurred())
		Expect(latest.RunID).To(Equal("run-2"))
		Expect(latest.Identity.TenantID).To(Equal("someone-else"))
		first, err := s.LoadCheckpoint(ctx, "run-1")
		Expect(err).NotTo(HaveOccurred())
		Expect(first.Round).To(Equal(2), "run-1 keeps its own checkpoint")

		// The controller writes the status too; the last checkpoint stays.
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(sess), sess)).To(Succeed())
			cp := sess.Status.LastCheckpoint
			g.Expect(cp).NotTo(BeNil())
			g.Expect(cp.RunID).To(Equal("run-2"))
			g.Expect(cp.Turn).To(Equal(int32(1)))
			g.Expect(cp.Location).To(Equal("configmap/agentlane-ckpt-s1-1#run-2"))
			g.Expect(cp.Time.Time).To(BeTemporally("~", latest.Time, time.Second))
		}).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(sess), sess)).To(Succeed())
			g.Expect(sess.Status.LastCheckpoint.RunID).To(Equal("run-2"))
		}, 500*time.Millisecond).Should(Succeed())
	})

	It("says which run or session has no checkpoint", func() {
		a.newSession("s1", nil)
		s := a.session("s1")
		_, err := s.LoadCheckpoint(ctx, "")
		Expect(expectCode(err, http.StatusNotFound, sessionapi.CodeCheckpointNotFound)).To(
			Equal(fmt.Sprintf("no checkpoint for session %s/s1", a.ns)))
		_, err = s.SaveCheckpoint(ctx, sessionapi.Checkpoint{RunID: "run-1"})
		Expect(err).NotTo(HaveOccurred())
		_, err = s.LoadCheckpoint(ctx, "run-7")
		Expect(expectCode(err, http.StatusNotFound, sessionapi.CodeCheckpointNotFound)).To(Equal("no checkpoint for run run-7"))
		_, err = s.SaveCheckpoint(ctx, sessionapi.Checkpoint{RunID: "not/a/run"})
		expectCode(err, http.StatusBadRequest, sessionapi.CodeInvalidRequest)
	})

	It("refuses a newer checkpoint schema, on save and on load", func() {
		a.newSession("s1", nil)
		s := a.session("s1")
		_, err := s.SaveCheckpoint(ctx, sessionapi.Checkpoint{RunID: "run-1", SchemaVersion: sessionstore.CurrentSchemaVersion + 1})
		Expect(expectCode(err, http.StatusBadRequest, sessionapi.CodeSchemaTooNew)).To(ContainSubstring("schema version 2"))

		// A newer runtime's body may carry fields this server does not know:
		// the schema is what it is told about.
		req, _ := http.NewRequestWithContext(ctx, http.MethodPut,
			fmt.Sprintf("%s/v1/namespaces/%s/sessions/s1/checkpoints", baseURL, a.ns),
			strings.NewReader(`{"schemaVersion": 2, "runId": "run-1", "plan": ["a", "b"]}`))
		req.Header.Set("Authorization", "Bearer "+a.token)
		resp, err := apiHTTPClient.Do(req)
		Expect(err).NotTo(HaveOccurred())
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusBadRequest))
		Expect(string(body)).To(ContainSubstring(sessionapi.CodeSchemaTooNew))
		_, err = s.LoadCheckpoint(ctx, "")
		expectCode(err, http.StatusNotFound, sessionapi.CodeCheckpointNotFound)

		// A checkpoint a newer manager stored is not misread.
		_, err = s.SaveCheckpoint(ctx, sessionapi.Checkpoint{RunID: "run-1"})
		Expect(err).NotTo(HaveOccurred())
		cm := a.checkpointConfigMap("s1")
		cm.Data["checkpoint.json"] = strings.Replace(cm.Data["checkpoint.json"], `"schemaVersion":1`, `"schemaVersion":2`, 1)
		Expect(k8sClient.Update(ctx, cm)).To(Succeed())
		for _, run := range []string{"", "run-1"} {
			_, err = s.LoadCheckpoint(ctx, run)
			Expect(expectCode(err, http.StatusConflict, sessionapi.CodeSchemaTooNew)).To(ContainSubstring("schema version 2"), "run %q", run)
		}
	})

	It("keeps other tenants out of the session's checkpoints", func() {
		a.newSession("s1", nil)
		_, err := a.session("s1").SaveCheckpoint(ctx, sessionapi.Checkpoint{RunID: "run-1"})
		Expect(err).NotTo(HaveOccurred())
		b := newTenant()
		b.newQueue(internalLanes())
		b.newSession("s1", nil)

		intruder := clientWithToken(b.token).Session(a.ns, "s1")
		_, err = intruder.LoadCheckpoint(ctx, "")
		expectCode(err, http.StatusForbidden, sessionapi.CodeForbidden)
		_, err = intruder.LoadCheckpoint(ctx, "run-1")
		expectCode(err, http.StatusForbidden, sessionapi.CodeForbidden)
		_, err = intruder.SaveCheckpoint(ctx, sessionapi.Checkpoint{RunID: "run-1", State: json.RawMessage(`{"evil":true}`)})
		expectCode(err, http.StatusForbidden, sessionapi.CodeForbidden)

		// b's own session of the same name has none of a's checkpoints, and
		// a's is unchanged.
		_, err = b.session("s1").LoadCheckpoint(ctx, "run-1")
		expectCode(err, http.StatusNotFound, sessionapi.CodeCheckpointNotFound)
		cp, err := a.session("s1").LoadCheckpoint(ctx, "run-1")
		Expect(err).NotTo(HaveOccurred())
		Expect(cp.State).To(BeEmpty())
	})

	It("refuses a checkpoint too large for the store and keeps the last one", func() {
		a.newSession("s1", nil)
		s := a.session("s1")
		_, err := s.SaveCheckpoint(ctx, sessionapi.Checkpoint{RunID: "run-1", Round: 1})
		Expect(err).NotTo(HaveOccurred())
		huge := json.RawMessage(`"` + strings.Repeat("x", 1100<<10) + `"`)
		_, err = s.SaveCheckpoint(ctx, sessionapi.Checkpoint{RunID: "run-2", State: huge})
		Expect(expectCode(err, http.StatusRequestEntityTooLarge, sessionapi.CodeTooLarge)).To(
			ContainSubstring("the checkpoint's body is"), "a body past the bound and its envelope is refused before it is read")
		// Within the envelope, the store measures the checkpoint as encoded.
		over := json.RawMessage(`"` + strings.Repeat("x", sessionstore.DefaultMaxCheckpointBytes+1) + `"`)
		_, err = s.SaveCheckpoint(ctx, sessionapi.Checkpoint{RunID: "run-3", State: over})
		Expect(expectCode(err, http.StatusRequestEntityTooLarge, sessionapi.CodeTooLarge)).To(ContainSubstring("the checkpoint of run run-3 takes"))
		cp, err := s.LoadCheckpoint(ctx, "")
		Expect(err).NotTo(HaveOccurred())
		Expect(cp.RunID).To(Equal("run-1"))
	})

	It("answers NoStore when the manager runs without a session store, and the runtime says so", func() {
		a.newSession("s1", nil)
		// A second server on the suite's schedulers, as a manager started
		// with --session-store=none serves.
		bare := mustNew(Config{Client: suiteServer.Client, Reader: suiteServer.Reader, Schedulers: suiteServer.Schedulers,
			Budgets: suiteServer.Budgets, Auth: suiteServer.Auth})
		srv := httptest.NewServer(bare.Handler())
		DeferCleanup(srv.Close)
		c, err := sessionapi.NewClient(srv.URL, sessionapi.WithToken(a.token))
		Expect(err).NotTo(HaveOccurred())
		s := c.Session(a.ns, "s1")

		_, err = s.SaveCheckpoint(ctx, sessionapi.Checkpoint{RunID: "run-1"})
		Expect(expectCode(err, http.StatusServiceUnavailable, sessionapi.CodeNoStore)).To(ContainSubstring("no session store"))
		_, err = s.LoadCheckpoint(ctx, "")
		expectCode(err, http.StatusServiceUnavailable, sessionapi.CodeNoStore)
		// Authentication comes first: a stranger learns nothing.
		anonymous, err := sessionapi.NewClient(srv.URL)
		Expect(err).NotTo(HaveOccurred())
		_, err = anonymous.Session(a.ns, "s1").LoadCheckpoint(ctx, "")
		expectCode(err, http.StatusUnauthorized, sessionapi.CodeUnauthenticated)

		rt := &agentscript.Runtime{Session: s, Script: resumeScript(), Resume: true, Log: GinkgoLogr}
		rep := rt.RunScript(ctx)
		Expect(rep.ResumeError).To(ContainSubstring(sessionapi.CodeNoStore))
		Expect(rep.Turns).To(HaveLen(1))
		Expect(rep.Turns[0].Checkpoints).To(BeZero())
		Expect(rep.Turns[0].CheckpointError).To(ContainSubstring(sessionapi.CodeNoStore))
		Expect(stepsOf(rep.Turns[0])).To(Equal([]int{0, 1, 2, 3}), "the turn runs without checkpoints")
	})

	Describe("the scripted runtime", func() {
		It("RunScript resumes an interrupted turn from its next step under a new run, with its identity", func() {
			a.newSession("s1", nil)
			s := a.session("s1")
			first := &agentscript.Runtime{Session: s, Script: resumeScript(), Log: GinkgoLogr,
				Identity: sessionapi.Identity{AgentTemplateID: "tmpl-1"}}
			rctx, stop := context.WithCancel(ctx)
			done := make(chan agentscript.Report, 1)
			go func() {
				defer GinkgoRecover()
				done <- first.RunScript(rctx)
			}()
			// Stop the runtime while step 2 runs.
			old := awaitRound(s, 1, "")
			stop()
			var interrupted agentscript.Report
			Eventually(done).Should(Receive(&interrupted))
			Expect(interrupted.Turns).To(HaveLen(1))
			Expect(interrupted.Turns[0].Error).To(ContainSubstring("stopped"))
			Expect(interrupted.Turns[0].Checkpoints).To(Equal(1))
			// No checkpoint while step 2 was in flight.
			cp, err := s.LoadCheckpoint(ctx, "")
			Expect(err).NotTo(HaveOccurred())
			Expect(cp.RunID).To(Equal(old))
			Expect(cp.Round).To(Equal(1))

			second := &agentscript.Runtime{Session: s, Script: resumeScript(), Resume: true, Log: GinkgoLogr}
			rep := second.RunScript(ctx)
			Expect(rep.ResumeError).To(BeEmpty())
			Expect(rep.Turns).To(HaveLen(1))
			tr := rep.Turns[0]
			Expect(tr.RunID).NotTo(Equal(old))
			Expect(tr.ResumedFrom).To(Equal(&agentscript.Resumption{RunID: old, Step: 2}))
			Expect(stepsOf(tr)).To(Equal([]int{2, 3}), "no model call and no step 1 again")
			Expect(tr.Checkpoints).To(Equal(2))

			cp, err = s.LoadCheckpoint(ctx, "")
			Expect(err).NotTo(HaveOccurred())
			Expect(cp.RunID).To(Equal(tr.RunID))
			Expect(cp.Round).To(Equal(3))
			// The identity the first runtime gave is restored on resume.
			Expect(cp.Identity).To(Equal(sessionapi.Identity{TenantID: a.ns, Principal: "agent", AgentTemplateID: "tmpl-1"}))

			// Resuming once more finds the script done.
			again := (&agentscript.Runtime{Session: s, Script: resumeScript(), Resume: true}).RunScript(ctx)
			Expect(again.Turns).To(BeEmpty())
			Expect(again.ResumeError).To(BeEmpty())
		})

		It("Serve resumes the turn it was stopped in before taking new turns", func() {
			a.newSession("s1", modeOptions(agentlanev1alpha1.QueueModeFollowup, 0, 20, agentlanev1alpha1.DropOld))
			s := a.session("s1")
			_, err := s.Post(ctx, sessionapi.Message{Text: "fix the build"})
			Expect(err).NotTo(HaveOccurred())

			first := &agentscript.Runtime{Session: s, Script: resumeScript(), Log: GinkgoLogr}
			rctx, stop := context.WithCancel(ctx)
			type served struct {
				rep agentscript.Report
				err error
			}
			done := make(chan served, 1)
			go func() {
				defer GinkgoRecover()
				rep, err := first.Serve(rctx, 0)
				done <- served{rep, err}
			}()
			old := awaitRound(s, 1, "")
			stop()
			var interrupted served
			Eventually(done).Should(Receive(&interrupted))
			Expect(interrupted.err).NotTo(HaveOccurred())
			Expect(interrupted.rep.Turns).To(HaveLen(1))
			Expect(interrupted.rep.Turns[0].RunID).To(Equal(old))

			second := &agentscript.Runtime{Session: s, Script: resumeScript(), Log: GinkgoLogr}
			sctx, cancelServe := context.WithTimeout(ctx, 30*time.Second)
			defer cancelServe()
			rep, err := second.Serve(sctx, 1)
			Expect(err).NotTo(HaveOccurred())
			Expect(rep.Turns).To(HaveLen(1))
			tr := rep.Turns[0]
			Expect(tr.ResumedFrom).To(Equal(&agentscript.Resumption{RunID: old, Step: 2}))
			Expect(tr.RunID).NotTo(Equal(old))
			Expect(stepsOf(tr)).To(Equal([]int{2, 3}))

			// The old run is over: the session takes its next turn.
			st, err := s.Stats(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(st.Session.ActiveRun).To(BeEmpty())
		})
	})
})
