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

package bench

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/testenv"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// parallel runs fn(i) for i in [0, n) on clients goroutines.
func parallel(clients, n int, fn func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				fn(i)
			}
		})
	}
	wg.Wait()
}

// namespace creates a namespace for one run.
func (e *env) namespace(name string) string {
	e.t.Helper()
	if err := e.c.Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		e.t.Fatal(err)
	}
	return name
}

// rawCreateRate is how many small LaneQueues per second the API server
// creates for flagClients clients, with the manager watching them.
func (e *env) rawCreateRate(n int) float64 {
	ns := e.namespace("bench-raw")
	// No client-side rate limit: the API server is what is measured.
	cfg := rest.CopyConfig(e.cfg)
	cfg.QPS, cfg.Burst = -1, 0
	c, err := client.New(cfg, client.Options{Scheme: e.c.Scheme()})
	if err != nil {
		e.t.Fatal(err)
	}
	var failed atomic.Int64
	start := time.Now()
	parallel(*flagClients, n, func(i int) {
		lq := &agentlanev1alpha1.LaneQueue{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("raw-%05d", i)},
			Spec:       agentlanev1alpha1.LaneQueueSpec{Lanes: []agentlanev1alpha1.Lane{{Name: "execute", HandlerMode: agentlanev1alpha1.HandlerModeInternal}}},
		}
		if err := c.Create(e.ctx, lq); err != nil {
			failed.Add(1)
		}
	})
	rate := float64(n) / time.Since(start).Seconds()
	if f := failed.Load(); f > 0 {
		e.t.Fatalf("%d raw creates failed", f)
	}
	_ = e.c.DeleteAllOf(e.ctx, &agentlanev1alpha1.LaneQueue{}, client.InNamespace(ns))
	return rate
}

// queueWithSessions creates LaneQueue "q" in ns with one External lane
// (maxConcurrency 0 is unlimited) and n sessions on it, waits until every
// session is Active and returns a Session API client of a runtime of ns.
func (e *env) queueWithSessions(ns string, sessions int, maxConcurrency int32) *sessionapi.Client {
	e.t.Helper()
	lq := &agentlanev1alpha1.LaneQueue{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "q"},
		Spec: agentlanev1alpha1.LaneQueueSpec{Lanes: []agentlanev1alpha1.Lane{{
			Name: "execute", HandlerMode: agentlanev1alpha1.HandlerModeExternal, MaxConcurrency: maxConcurrency,
		}}},
	}
	if err := e.c.Create(e.ctx, lq); err != nil {
		e.t.Fatal(err)
	}
	parallel(*flagClients, sessions, func(i int) {
		s := &agentlanev1alpha1.AgentSession{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sessionName(i)},
			Spec:       agentlanev1alpha1.AgentSessionSpec{QueueRef: agentlanev1alpha1.LaneQueueReference{Name: "q"}},
		}
		if err := e.c.Create(e.ctx, s); err != nil {
			e.t.Error(err)
		}
	})
	e.waitFor(fmt.Sprintf("%d sessions Active", sessions), 5*time.Minute, func() bool {
		list := &agentlanev1alpha1.AgentSessionList{}
		if err := e.c.List(e.ctx, list, client.InNamespace(ns)); err != nil {
			return false
		}
		active := 0
		for _, s := range list.Items {
			if s.Status.Phase == agentlanev1alpha1.SessionActive {
				active++
			}
		}
		return active == sessions
	})
	token, err := testenv.ServiceAccountToken(e.ctx, e.c, ns, "agent", rbacv1.RoleRef{Kind: "ClusterRole", Name: "session-user"})
	if err != nil {
		e.t.Fatal(err)
	}
	c, err := sessionapi.NewClient(e.sessionAPI, sessionapi.WithToken(token))
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

func sessionName(i int) string { return fmt.Sprintf("s%04d", i) }

// submit submits task id, a bash command that prints when it started (in
// Unix nanoseconds), to session, without waiting for its result.
func (e *env) submit(c *sessionapi.Client, ns, session, id string) error {
	_, err := c.Session(ns, session).Submit(e.ctx, sessionapi.SubmitRequest{
		ID: id, Type: "bash", Lane: "execute",
		Payload: json.RawMessage(`{"command":"date +%s%N"}`),
		Wait:    &metav1.Duration{Duration: time.Millisecond},
	})
	return err
}

// finished watches the ExternalTasks of ns and records when each reached a
// final phase and when its command started (from its output).
type finished struct {
	mu      sync.Mutex
	at      map[string]time.Time
	started map[string]time.Time
	// dispatched is when the watch first showed each task dispatched.
	dispatched map[string]time.Time
	failed     int
	stop       func()
}

func (e *env) watchFinished(ns string) *finished {
	e.t.Helper()
	wc, err := client.NewWithWatch(e.cfg, client.Options{Scheme: e.c.Scheme()})
	if err != nil {
		e.t.Fatal(err)
	}
	f := &finished{at: map[string]time.Time{}, started: map[string]time.Time{}, dispatched: map[string]time.Time{}}
	done := make(chan struct{})
	f.stop = sync.OnceFunc(func() { close(done) })
	go func() {
		for {
			w, err := wc.Watch(e.ctx, &agentlanev1alpha1.ExternalTaskList{}, client.InNamespace(ns))
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for open := true; open; {
				select {
				case <-done:
					w.Stop()
					return
				case ev, ok := <-w.ResultChan():
					open = ok
					if ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
						f.observe(ev.Object.(*agentlanev1alpha1.ExternalTask))
					}
				}
			}
		}
	}()
	return f
}

func (f *finished) observe(t *agentlanev1alpha1.ExternalTask) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, seen := f.dispatched[t.Name]; !seen && t.Status.Worker != "" {
		f.dispatched[t.Name] = time.Now()
	}
	if !t.Status.Phase.IsTerminal() {
		return
	}
	if _, seen := f.at[t.Name]; seen {
		return
	}
	f.at[t.Name] = time.Now()
	if t.Status.Phase != agentlanev1alpha1.ExternalTaskSucceeded || t.Status.Result == nil || t.Status.Result.Result == nil {
		f.failed++
		return
	}
	var out struct{ Stdout string }
	if json.Unmarshal(t.Status.Result.Result.Raw, &out) == nil {
		if ns, err := strconv.ParseInt(strings.TrimSpace(out.Stdout), 10, 64); err == nil {
			f.started[t.Name] = time.Unix(0, ns)
		}
	}
}

func (f *finished) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.at)
}

// last is when the last of the tasks finished.
func (f *finished) last() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	var last time.Time
	for _, t := range f.at {
		if t.After(last) {
			last = t
		}
	}
	return last
}
