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
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/testenv"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// parallel runs fn(i) for i in [0, n) on clients goroutines.
func parallel(clients, n int, fn func(i int)) {
	parallelBy(clients, n, func(_, i int) { fn(i) })
}

// parallelBy runs fn(w, i) for i in [0, n) on k goroutines, w being the
// goroutine's number in [0, k): each goroutine is one client.
func parallelBy(k, n int, fn func(w, i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range k {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				fn(w, i)
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
	c := e.unlimitedClient()
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

// unlimitedClient is an administrator's client without a client-side rate
// limit: the API server is what is measured.
func (e *env) unlimitedClient() client.Client {
	e.t.Helper()
	cfg := rest.CopyConfig(e.cfg)
	cfg.QPS, cfg.Burst = -1, 0
	c, err := client.New(cfg, client.Options{Scheme: e.c.Scheme()})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// The yardstick's custom resource: a namespaced kind of the benchmark's own
// group whose schema is one string field, so that its creates measure the
// API server's write path and not the decoding and validation of a large
// schema (a LaneQueue's is hundreds of kilobytes).
var yardstick = schema.GroupVersionResource{Group: "bench.agentlane.io", Version: "v1", Resource: "items"}

// smallCreateRate is how many objects of a custom resource with a tiny
// schema per second the API server creates for flagClients clients. It is
// the yardstick the task rates are divided by: what the API server does for
// the simplest custom resource write. Nothing watches these objects.
func (e *env) smallCreateRate(n int) float64 {
	e.t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: yardstick.Resource + "." + yardstick.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: yardstick.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: yardstick.Resource, Singular: "item", Kind: "Item", ListKind: "ItemList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: yardstick.Version, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"value": {Type: "string"}}},
					},
				}},
			}},
		},
	}
	if err := e.c.Create(e.ctx, crd); err != nil {
		e.t.Fatal(err)
	}
	cfg := rest.CopyConfig(e.cfg)
	cfg.QPS, cfg.Burst = -1, 0
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	ns := e.namespace("bench-yardstick")
	items := dc.Resource(yardstick).Namespace(ns)
	item := func(name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": yardstick.Group + "/" + yardstick.Version, "kind": "Item",
			"metadata": map[string]any{"name": name}, "spec": map[string]any{"value": "x"},
		}}
	}
	// Served: the CRD is established and its REST handler answers.
	e.waitFor("the yardstick's resource served", time.Minute, func() bool {
		_, err := items.Create(e.ctx, item("probe"), metav1.CreateOptions{})
		return err == nil
	})
	var failed atomic.Int64
	start := time.Now()
	parallel(*flagClients, n, func(i int) {
		if _, err := items.Create(e.ctx, item(fmt.Sprintf("raw-%05d", i)), metav1.CreateOptions{}); err != nil {
			failed.Add(1)
		}
	})
	rate := float64(n) / time.Since(start).Seconds()
	if f := failed.Load(); f > 0 {
		e.t.Fatalf("%d creates of the yardstick's resource failed", f)
	}
	_ = items.DeleteCollection(e.ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	return rate
}

// Lanes of the benchmark's queues: "execute" runs on the worker pool
// through ExternalTasks (the Workers target), "direct" on the workers'
// Direct streams.
const (
	laneWorkers = "execute"
	laneDirect  = "direct"
)

// queueWithSessions creates LaneQueue "q" in ns with one External lane
// (maxConcurrency 0 is unlimited), and with direct a Direct lane besides
// it, and n sessions on it, waits until every session is Active and returns
// the token of a runtime of ns.
func (e *env) queueWithSessions(ns string, sessions int, maxConcurrency int32, direct bool) string {
	e.t.Helper()
	lanes := []agentlanev1alpha1.Lane{{
		Name: laneWorkers, HandlerMode: agentlanev1alpha1.HandlerModeExternal, MaxConcurrency: maxConcurrency,
	}}
	if direct {
		lanes = append(lanes, agentlanev1alpha1.Lane{
			Name: laneDirect, HandlerMode: agentlanev1alpha1.HandlerModeExternal,
			ExternalTarget: &agentlanev1alpha1.ExternalTarget{Type: agentlanev1alpha1.ExternalTargetDirect},
		})
	}
	lq := &agentlanev1alpha1.LaneQueue{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "q"},
		Spec:       agentlanev1alpha1.LaneQueueSpec{Lanes: lanes},
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
	return token
}

// sessionClients returns k Session API clients of token, each with a
// connection of its own, as k runtimes would have.
func (e *env) sessionClients(token string, k int) []*sessionapi.Client {
	e.t.Helper()
	var cs []*sessionapi.Client
	for range k {
		opts := []sessionapi.ClientOption{sessionapi.WithToken(token)}
		if e.caPEM != nil {
			opts = append(opts, sessionapi.WithCA(e.caPEM)) // a transport of its own
		} else {
			opts = append(opts, sessionapi.WithHTTPClient(&http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}))
		}
		c, err := sessionapi.NewClient(e.sessionAPI, opts...)
		if err != nil {
			e.t.Fatal(err)
		}
		cs = append(cs, c)
	}
	return cs
}

// tenant is a namespace of the throughput runs: its queue and sessions,
// flagClients clients of its runtimes and its workers.
type tenant struct {
	ns       string
	sessions int
	clients  []*sessionapi.Client
	workers  []*process
	// directToken is the file of the workers' token for the Direct stream;
	// empty when the tenant has no Direct lane.
	directToken string
}

// tenant creates ns with a queue, sessions sessions and -workers workers
// that serve its Workers lane and, with direct, its Direct lane too, and
// waits until they settled.
func (e *env) tenant(ns string, sessions int, direct bool) *tenant {
	e.t.Helper()
	tn := &tenant{ns: e.namespace(ns), sessions: sessions}
	tn.clients = e.sessionClients(e.queueWithSessions(ns, sessions, 0, direct), *flagClients)
	if direct {
		tn.directToken = e.directWorkerToken(ns)
	}
	tn.workers = e.startWorkers(ns, *flagWorkers, tn.directToken)
	e.workers = tn.workers
	if direct {
		e.waitFor(fmt.Sprintf("%d Direct workers of %s", *flagWorkers, ns), time.Minute, func() bool {
			m, err := e.managerMetrics()
			return err == nil && m.sum("agentlane_direct_workers", map[string]string{"worker_namespace": ns}) >= float64(*flagWorkers)
		})
	}
	// Let the sessions and workers settle so the runs count the tasks only.
	time.Sleep(3 * time.Second)
	return tn
}

// stop stops the tenant's workers.
func (e *env) stopTenant(tn *tenant) {
	stopAll(tn.workers)
	tn.workers, e.workers = nil, nil
}

func sessionName(i int) string { return fmt.Sprintf("s%04d", i) }

// submit submits task id, a bash command that prints when it started (in
// Unix nanoseconds), to session, without waiting for its result.
func (e *env) submit(c *sessionapi.Client, ns, session, id string) error {
	_, err := c.Session(ns, session).Submit(e.ctx, sessionapi.SubmitRequest{
		ID: id, Type: "bash", Lane: laneWorkers,
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
