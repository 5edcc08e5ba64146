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

package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/agentscript"
	"github.com/agentlane/agentlane/internal/budget"
	"github.com/agentlane/agentlane/internal/controller"
	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/scheduling"
	"github.com/agentlane/agentlane/internal/sessionserver"
	"github.com/agentlane/agentlane/internal/sessionstore"
	"github.com/agentlane/agentlane/internal/testenv"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// start is the fake clock's instant when each run begins. The clock never
// moves: a message posted to the idle served session (collect) starts its
// turn at once, without waiting for the debounce.
var start = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

const (
	namespace = "replay"
	queueName = "lanes"
	// scripted is the session RunScript drives; served is the one Serve
	// drives, for a message posted to it.
	scripted = "scripted"
	served   = "served"
)

// sessionRun is what one session shows after a run.
type sessionRun struct {
	Report agentscript.Report
	// Events are the session's events as its stream delivered them.
	Events []sessionapi.Event
	// Checkpoint is the session's latest checkpoint.
	Checkpoint *sessionapi.Checkpoint
}

// runRecord is what one run shows.
type runRecord struct {
	Scripted, Served sessionRun
}

var _ = Describe("A scripted run with a fake clock and sequential IDs", func() {
	It("replays to the same IDs, times, reports and events", func(ctx SpecContext) {
		dir := GinkgoT().TempDir() // the same paths, in the payloads, for both runs
		for name, content := range map[string]string{"a.txt": "alpha\n", "b.txt": "beta\n", "c.txt": "gamma\n"} {
			Expect(os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644)).To(Succeed())
		}
		script := replayScript(dir)

		first := runOnce(ctx, script)
		second := runOnce(ctx, script)
		Expect(cmp.Diff(first, second)).To(BeEmpty(), "the replay differs (-first,+second)")

		By("naming runs, commands and messages with the sequential generators")
		sTurn := first.Scripted.Report.Turns[0]
		Expect(sTurn.RunID).To(Equal("scripted-0000000001"))
		Expect(commandLines(sTurn.Commands)).To(Equal([]string{
			"scripted-0000000002 llm generate Succeeded attempt 1 step 0",
			"scripted-0000000003 read query Succeeded attempt 1 step 1 parallel",
			"scripted-0000000004 read query Succeeded attempt 1 step 1 parallel",
			"scripted-0000000005 read query Succeeded attempt 1 step 1 parallel",
			"scripted-0000000006 bash execute Succeeded attempt 1 step 2",
		}))
		// The group's commands kept the script's order: each read the
		// file its payload names.
		for k, content := range []string{"alpha\n", "beta\n", "gamma\n"} {
			var out struct{ Content string }
			Expect(json.Unmarshal(sTurn.Commands[1+k].Output, &out)).To(Succeed())
			Expect(out.Content).To(Equal(content))
		}
		vTurn := first.Served.Report.Turns[0]
		// The served turn's run is named by the inbox (the schedulers'
		// generator), its message by the Session API's.
		Expect(vTurn.RunID).To(Equal("cmd-0000000001"))
		Expect(vTurn.Commands).NotTo(BeEmpty())
		Expect(vTurn.Commands[0].ID).To(Equal("served-0000000001"))
		queuedEvent, turnEvent := first.Served.Events[0], first.Served.Events[1]
		Expect(queuedEvent.Type).To(Equal(sessionapi.EventMessageQueued))
		Expect(queuedEvent.Messages).To(HaveLen(1))
		Expect(queuedEvent.Messages[0].ID).To(Equal("api-0000000001"))
		Expect(turnEvent.Type).To(Equal(sessionapi.EventTurn))
		Expect(turnEvent.RunID).To(Equal(vTurn.RunID))
		Expect(turnEvent.Messages).To(HaveLen(1))
		Expect(turnEvent.Messages[0].ID).To(Equal("api-0000000001"))

		By("timing everything with the fake clock")
		Expect(timesOf(first.Scripted)).To(HaveEach(BeTemporally("==", start)))
		Expect(timesOf(first.Served)).To(HaveEach(BeTemporally("==", start)))
		Expect(turnEvent.Messages[0].ReceivedAt).To(BeTemporally("==", start))
		Expect(turnEvent.Waited.Duration).To(BeZero())

		By("keeping the lanes' order: the three reads take the query lane's one slot in turn")
		Expect(eventLines(first.Scripted.Events)).To(Equal([]string{
			"1 submitted scripted-0000000002",
			"2 started scripted-0000000002",
			"3 completed scripted-0000000002",
			"4 submitted scripted-0000000003",
			"5 started scripted-0000000003",
			"6 submitted scripted-0000000004",
			"7 submitted scripted-0000000005",
			"8 completed scripted-0000000003",
			"9 started scripted-0000000004",
			"10 completed scripted-0000000004",
			"11 started scripted-0000000005",
			"12 completed scripted-0000000005",
			"13 submitted scripted-0000000006",
			"14 started scripted-0000000006",
			"15 completed scripted-0000000006",
		}))
		for _, ev := range first.Scripted.Events {
			Expect(ev.RunID).To(Equal(sTurn.RunID))
		}
		Expect(first.Scripted.Checkpoint.RunID).To(Equal(sTurn.RunID))
		Expect(first.Served.Checkpoint.RunID).To(Equal(vTurn.RunID))
	}, SpecTimeout(90*time.Second))
})

// replayScript is one turn: a model call, three reads of the files in dir
// in parallel (more than the query lane runs at once for a session), then
// a shell command.
func replayScript(dir string) agentscript.Script {
	read := func(name string) agentscript.Step {
		payload, _ := json.Marshal(map[string]string{"path": filepath.Join(dir, name)})
		return agentscript.Step{Type: "read", Payload: payload}
	}
	return agentscript.Script{Turns: []agentscript.Turn{{
		Prompt: "read the files, then say so",
		LLM:    &agentscript.LLMCall{InputTokens: 120, OutputTokens: 30},
		Steps: []agentscript.Step{
			{Parallel: []agentscript.Step{read("a.txt"), read("b.txt"), read("c.txt")}},
			{Type: "bash", Payload: json.RawMessage(`{"command":"printf read"}`)},
		},
	}}}
}

// runOnce starts a fresh control plane and a manager with a fake clock at
// start and sequential IDs, runs the script on one session with RunScript
// and on another with Serve for a posted message, and returns what both
// sessions show. Everything is stopped before it returns.
func runOnce(ctx context.Context, script agentscript.Script) runRecord {
	GinkgoHelper()
	clk := clocktesting.NewFakeClock(start)

	scheme := testenv.Scheme()
	env, cfg, k8sClient, err := testenv.Start(scheme)
	Expect(err).NotTo(HaveOccurred())
	defer func() { Expect(env.Stop()).To(Succeed()) }()

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Cache:                  controller.CacheOptions(),
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Every run sets up the same controllers in this process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	Expect(err).NotTo(HaveOccurred())
	mgrCtx, stopManager := context.WithCancel(ctx)
	schedulers := &scheduling.Schedulers{StatusInterval: 100 * time.Millisecond,
		Options: lanequeue.Options{Clock: clk, IDs: &lanequeue.SequentialIDs{}}}
	shared := controller.Shared{Schedulers: schedulers, Passivations: &controller.PassivationClock{},
		Budgets: &budget.Ledger{Publish: schedulers.Publish, Clock: clk, Recorder: mgr.GetEventRecorder("agentlane-budget")}}
	// Wired as cmd/manager wires it.
	server, err := sessionserver.New(sessionserver.Config{Addr: "127.0.0.1:0", Schedulers: schedulers, Budgets: shared.Budgets,
		Checkpoints: shared.Passivations, Clock: clk,
		Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Auth: &sessionserver.KubeAuthorizer{Client: mgr.GetClient()},
		Recorder: mgr.GetEventRecorder("agentlane-session-api"), Leading: mgr.Elected(),
		IDs:   &lanequeue.SequentialIDs{Prefix: "api"},
		Store: &sessionstore.ConfigMaps{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Clock: clk}})
	Expect(err).NotTo(HaveOccurred())
	Expect(mgr.Add(server)).To(Succeed())
	controllers, err := controller.Setup(mgrCtx, mgr, shared)
	Expect(err).NotTo(HaveOccurred())
	Expect(schedulers.Bind(scheduling.Hooks{
		Observer:          server.Observer(),
		OnSessionActivity: controllers.Sessions.SessionActivity,
		Rebuild:           controllers.Tasks.Rebuild,
	})).To(Succeed())
	stopped := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(stopped)
		Expect(mgr.Start(mgrCtx)).To(Succeed())
	}()
	defer func() {
		stopManager()
		<-stopped
	}()
	addr, err := server.BoundAddr(ctx)
	Expect(err).NotTo(HaveOccurred())

	token := newTenant(ctx, k8sClient)
	api, err := sessionapi.NewClient("https://"+addr, sessionapi.WithToken(token), sessionapi.WithCA(server.CABundle()))
	Expect(err).NotTo(HaveOccurred())
	Expect(k8sClient.Create(ctx, &agentlanev1alpha1.LaneQueue{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: queueName},
		Spec: agentlanev1alpha1.LaneQueueSpec{Lanes: []agentlanev1alpha1.Lane{
			{Name: "query", Priority: 1, MaxConcurrencyPerSession: 1},
			{Name: "execute", Priority: 2, MaxConcurrencyPerSession: 1},
			{Name: "generate", Priority: 3, MaxConcurrencyPerSession: 1},
		}},
	})).To(Succeed())
	var out runRecord
	for _, name := range []string{scripted, served} {
		newSession(ctx, k8sClient, name)
	}
	scriptedEvents := record(ctx, api.Session(namespace, scripted))
	defer scriptedEvents.stop()
	servedEvents := record(ctx, api.Session(namespace, served))
	defer servedEvents.stop()

	By("running the script with RunScript")
	rt := &agentscript.Runtime{Session: api.Session(namespace, scripted), Script: script, Clock: clk,
		IDs: &lanequeue.SequentialIDs{Prefix: scripted}, Log: logf.Log.WithName(scripted)}
	out.Scripted.Report = rt.RunScript(ctx)
	Expect(out.Scripted.Report.Turns).To(HaveLen(1))
	Expect(out.Scripted.Report.Unfinished()).To(BeEmpty())

	By("serving a turn for a posted message")
	rt = &agentscript.Runtime{Session: api.Session(namespace, served), Script: script, Clock: clk,
		IDs: &lanequeue.SequentialIDs{Prefix: served}, Log: logf.Log.WithName(served)}
	type serveResult struct {
		rep agentscript.Report
		err error
	}
	serving := make(chan serveResult, 1)
	go func() {
		rep, err := rt.Serve(ctx, 1)
		serving <- serveResult{rep, err}
	}()
	_, err = api.Session(namespace, served).Post(ctx, sessionapi.Message{Text: "replay me"})
	Expect(err).NotTo(HaveOccurred())
	// The session is idle: in collect mode the message starts its turn at
	// once, with no step of the fake clock.
	var res serveResult
	Eventually(serving).Should(Receive(&res))
	Expect(res.err).NotTo(HaveOccurred())
	out.Served.Report = res.rep
	Expect(out.Served.Report.Turns).To(HaveLen(1))
	Expect(out.Served.Report.Unfinished()).To(BeEmpty())

	out.Scripted.Events = scriptedEvents.untilEnded(out.Scripted.Report)
	out.Served.Events = servedEvents.untilEnded(out.Served.Report)
	for _, name := range []string{scripted, served} {
		cp, err := api.Session(namespace, name).LoadCheckpoint(ctx, "")
		Expect(err).NotTo(HaveOccurred())
		if name == scripted {
			out.Scripted.Checkpoint = cp
		} else {
			out.Served.Checkpoint = cp
		}
	}
	return out
}

// newTenant creates the namespace with a service account allowed to use the
// Session API of its sessions, and returns the account's token.
func newTenant(ctx context.Context, c client.Client) string {
	GinkgoHelper()
	Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})).To(Succeed())
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "session-user"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{agentlanev1alpha1.GroupVersion.Group},
			Resources: []string{sessionserver.APIResource + "/" + sessionserver.APISubresource},
			Verbs:     []string{sessionserver.VerbRead, sessionserver.VerbWrite},
		}},
	}
	Expect(c.Create(ctx, role)).To(Succeed())
	token, err := testenv.ServiceAccountToken(ctx, c, namespace, "agent", rbacv1.RoleRef{Kind: "Role", Name: role.Name})
	Expect(err).NotTo(HaveOccurred())
	return token
}

// newSession creates the AgentSession name on the queue and waits until it
// is Active.
func newSession(ctx context.Context, c client.Client, name string) {
	GinkgoHelper()
	s := &agentlanev1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: agentlanev1alpha1.AgentSessionSpec{
			QueueRef: agentlanev1alpha1.LaneQueueReference{Name: queueName},
			Identity: &agentlanev1alpha1.Identity{TenantID: "tenant-a", Principal: "agent"},
		},
	}
	Expect(c.Create(ctx, s)).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
		g.Expect(s.Status.Phase).To(Equal(agentlanev1alpha1.SessionActive))
	}).Should(Succeed())
}

// recorder keeps a session's events as its stream delivers them.
type recorder struct {
	stream *sessionapi.EventStream
	done   chan struct{}

	mu     sync.Mutex
	events []sessionapi.Event
}

func record(ctx context.Context, s *sessionapi.SessionClient) *recorder {
	GinkgoHelper()
	stream, err := s.Events(ctx, sessionapi.EventsOptions{})
	Expect(err).NotTo(HaveOccurred())
	r := &recorder{stream: stream, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for {
			ev, err := stream.Next()
			if err != nil {
				return
			}
			r.mu.Lock()
			r.events = append(r.events, ev)
			r.mu.Unlock()
		}
	}()
	return r
}

func (r *recorder) stop() {
	_ = r.stream.Close()
	<-r.done
}

// untilEnded waits until the stream delivered the terminal event of every
// command of rep, and returns the events delivered.
func (r *recorder) untilEnded(rep agentscript.Report) []sessionapi.Event {
	GinkgoHelper()
	var want []string
	for _, t := range rep.Turns {
		for _, c := range t.Commands {
			want = append(want, c.ID)
		}
	}
	var events []sessionapi.Event
	Eventually(func(g Gomega) {
		r.mu.Lock()
		events = append([]sessionapi.Event(nil), r.events...)
		r.mu.Unlock()
		var ended []string
		for _, ev := range events {
			if ev.Terminal {
				ended = append(ended, ev.CommandID)
			}
		}
		g.Expect(ended).To(ConsistOf(want))
	}).Should(Succeed())
	return events
}

// timesOf lists every time a session's run shows: the reports', the
// events' and the checkpoint's.
func timesOf(r sessionRun) []time.Time {
	var ts []time.Time
	for _, t := range r.Report.Turns {
		ts = append(ts, t.Started, t.Finished)
		for _, c := range t.Commands {
			ts = append(ts, c.Submitted, c.Finished)
		}
	}
	for _, ev := range r.Events {
		ts = append(ts, ev.Time)
	}
	return append(ts, r.Checkpoint.Time)
}

func commandLines(crs []agentscript.CommandReport) []string {
	var out []string
	for _, c := range crs {
		line := fmt.Sprintf("%s %s %s %s attempt %d step %d", c.ID, c.Type, c.Lane, c.State, c.Attempts, c.Step)
		if c.Parallel {
			line += " parallel"
		}
		out = append(out, line)
	}
	return out
}

// eventLines shows events as "<id> <type> <command>", the ids counted from
// the manager run's base: its start on the fake clock in Unix milliseconds
// times 1000, the id before each session's first event.
func eventLines(events []sessionapi.Event) []string {
	base := uint64(start.UnixMilli()) * 1000
	var out []string
	for _, ev := range events {
		out = append(out, fmt.Sprintf("%d %s %s", ev.ID-base, ev.Type, ev.CommandID))
	}
	return out
}
