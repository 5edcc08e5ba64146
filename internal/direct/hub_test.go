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

package direct

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/workerproto"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

func TestRoundTrip(t *testing.T) {
	e := newEnv(t)
	w, _ := e.dial(hello("w1"))
	if diff := cmp.Diff(workerproto.DirectWelcome{Manager: "manager-0", RunID: "run-1"}, w.welcome); diff != "" {
		t.Errorf("welcome (-want,+got):\n%s", diff)
	}
	sent := counter(AttemptsSent)
	tk := task("c1")
	tk.RunID = "r7"
	deadline := e.clk.Now().Add(30 * time.Second)
	out := make(chan ran, 1)
	go func() {
		res, err := e.hub.Run(context.Background(), tk, lanequeue.Attempt{ID: "c1", Number: 2, Deadline: deadline})
		out <- ran{res, err}
	}()
	got := w.nextTask()
	want := &workerproto.DirectTask{ID: "c1", Attempt: 2, Namespace: "team-a", Queue: "q", Lane: "tools", Session: "s1",
		CommandType: "shell", RunID: "r7", Payload: json.RawMessage(`{"cmd":"true"}`), TimeoutMillis: 30000}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("task (-want,+got):\n%s", diff)
	}
	if !e.hub.Holds("team-a", "c1") || e.hub.Holds("team-b", "c1") {
		t.Errorf("Holds while running: want true for team-a only")
	}
	if ws := e.hub.Workers(); len(ws) != 1 || ws[0].Busy != 1 || ws[0].Name != "w1" || ws[0].Capacity != 1 {
		t.Errorf("Workers while running: %+v", ws)
	}
	_ = w.send(workerproto.WorkerFrame{Result: &workerproto.DirectResult{ID: "c1", Attempt: 2, Success: false,
		ExitCode: 3, Error: "exit 3", Output: json.RawMessage(`{"x":1}`)}})
	r := wait(t, out)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if diff := cmp.Diff(lanequeue.Result{Success: false, ExitCode: 3, Error: "exit 3", Output: []byte(`{"x":1}`)}, r.res); diff != "" {
		t.Errorf("result (-want,+got):\n%s", diff)
	}
	if e.hub.Holds("team-a", "c1") {
		t.Errorf("Holds after the result: want false")
	}
	if got := counter(AttemptsSent) - sent; got != 1 {
		t.Errorf("attempts sent: %v, want 1", got)
	}
	if ws := e.hub.Workers(); len(ws) != 1 || ws[0].Busy != 0 {
		t.Errorf("Workers after the result: %+v", ws)
	}
}

func TestResultOnWrongStreamDropped(t *testing.T) {
	e := newEnv(t)
	a, _ := e.dial(hello("a"))
	other := hello("b")
	other.Capacity = 1
	// b serves no command type of the task: it never gets it.
	other.CommandTypes = []string{"other"}
	b, _ := e.dial(other)
	foreign := hello("a")
	foreign.Namespace = "team-b"
	f, _ := e.dial(foreign)

	out := e.start(context.Background(), task("c1"), 1)
	a.nextTask()
	wrong, unknown := counter(dropWrongStream), counter(dropUnknown)
	b.result("c1", 1, true, `"forged"`)
	eventually(t, "the forged result is dropped", func() bool { return counter(dropWrongStream) == wrong+1 })
	// Another namespace's worker naming the same id and attempt: another
	// task for the hub.
	f.result("c1", 1, true, `"forged"`)
	eventually(t, "the foreign result is dropped", func() bool { return counter(dropUnknown) == unknown+1 })
	select {
	case r := <-out:
		t.Fatalf("Run returned on another stream's result: %+v", r)
	default:
	}
	a.result("c1", 1, true, `"real"`)
	if r := wait(t, out); r.err != nil || string(r.res.Output) != `"real"` {
		t.Fatalf("Run: %+v", r)
	}
}

func TestStaleAttemptDropped(t *testing.T) {
	e := newEnv(t)
	h := hello("w1")
	h.Capacity = 2
	w, _ := e.dial(h)

	ctx, cancel := context.WithCancel(context.Background())
	first := e.start(ctx, task("c1"), 1)
	w.nextTask()
	cancel()
	if r := wait(t, first); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("attempt 1: %v, want context.Canceled", r.err)
	}
	if f := w.next(); f.Cancel == nil || f.Cancel.ID != "c1" || f.Cancel.Attempt != 1 {
		t.Fatalf("want a Cancel of c1/1, got %+v", f)
	}
	second := e.start(context.Background(), task("c1"), 2)
	if got := w.nextTask(); got.Attempt != 2 {
		t.Fatalf("want attempt 2, got %d", got.Attempt)
	}
	late, unknown := counter(dropLate), counter(dropUnknown)
	w.result("c1", 1, true, `"stale"`)
	eventually(t, "the stale result is dropped as late", func() bool { return counter(dropLate) == late+1 })
	w.result("c1", 1, true, `"stale again"`)
	w.result("c1", 3, true, `"future"`)
	eventually(t, "the repeated and the unknown attempt are dropped", func() bool { return counter(dropUnknown) == unknown+2 })
	w.result("c1", 2, true, `"real"`)
	if r := wait(t, second); r.err != nil || string(r.res.Output) != `"real"` {
		t.Fatalf("attempt 2: %+v", r)
	}
	// Exactly one Result per attempt counts: a second one is dropped.
	w.result("c1", 2, false, ``)
	eventually(t, "the second result of attempt 2 is dropped", func() bool { return counter(dropUnknown) == unknown+3 })
}

func TestStreamKilledMidAttempt(t *testing.T) {
	e := newEnv(t)
	w, _ := e.dial(hello("w1"))
	out := e.start(context.Background(), task("c1"), 1)
	w.nextTask()
	w.close()
	if r := wait(t, out); !errors.Is(r.err, ErrWorkerLost) {
		t.Fatalf("Run: %v, want ErrWorkerLost", r.err)
	}
	if e.hub.Holds("team-a", "c1") {
		t.Error("the hub still holds the attempt")
	}
	eventually(t, "the worker is gone", func() bool { return len(e.hub.Workers()) == 0 })
	// The next attempt goes to another worker.
	w2, _ := e.dial(hello("w2"))
	w2.serve()
	if r := wait(t, e.start(context.Background(), task("c1"), 2)); r.err != nil || !r.res.Success {
		t.Fatalf("attempt 2: %+v", r)
	}
}

func TestTimeoutSendsCancelAndKeepsSlot(t *testing.T) {
	e := newEnv(t)
	w, _ := e.dial(hello("w1")) // capacity 1
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	first := e.start(ctx, task("c1"), 1)
	w.nextTask()
	if r := wait(t, first); !errors.Is(r.err, context.DeadlineExceeded) {
		t.Fatalf("Run: %v, want DeadlineExceeded", r.err)
	}
	f := w.next()
	if diff := cmp.Diff(&workerproto.DirectCancel{ID: "c1", Attempt: 1, Reason: "timed out"}, f.Cancel); diff != "" {
		t.Fatalf("cancel (-want,+got):\n%s", diff)
	}
	if !e.hub.Holds("team-a", "c1") {
		t.Error("the worker still runs the attempt: the hub must hold it until its Result")
	}
	// The slot stays busy until the cancelled attempt's Result.
	second := e.start(context.Background(), task("c2"), 1)
	e.waitState("team-a", "c2", 1, callWaiting)
	w.noFrame()
	w.result("c1", 1, false, "")
	if got := w.nextTask(); got.ID != "c2" {
		t.Fatalf("want c2 once the slot freed, got %s", got.ID)
	}
	w.result("c2", 1, true, "")
	if r := wait(t, second); r.err != nil {
		t.Fatal(r.err)
	}
}

func TestMaterializeRecords(t *testing.T) {
	e := newEnv(t)
	records := make(chan Record, 8)
	tk := task("c1")
	tk.MaterializeAfter = 2 * time.Second
	tk.OnRecord = func(r Record) { records <- r }
	start := e.clk.Now()
	out := e.start(context.Background(), tk, 1)
	e.waitState("team-a", "c1", 1, callWaiting)
	e.clk.Step(time.Second)
	e.clk.Step(time.Second)
	var got Record
	select {
	case got = <-records:
	case <-time.After(guard):
		t.Fatal("no Waiting record")
	}
	if diff := cmp.Diff(Record{Phase: RecordWaiting, Attempt: 1, Since: start}, got); diff != "" {
		t.Errorf("waiting record (-want,+got):\n%s", diff)
	}
	w, _ := e.dial(hello("w1"))
	w.nextTask()
	sentAt := e.clk.Now()
	e.clk.Step(time.Second)
	select {
	case r := <-records:
		t.Fatalf("a record before MaterializeAfter: %+v", r)
	default:
	}
	e.clk.Step(time.Second)
	select {
	case got = <-records:
	case <-time.After(guard):
		t.Fatal("no Running record")
	}
	want := Record{Phase: RecordRunning, Attempt: 1, Worker: "w1", Node: "node-1", Incarnation: "w1-1", Since: sentAt}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("running record (-want,+got):\n%s", diff)
	}
	e.clk.Step(5 * time.Second)
	w.result("c1", 1, true, "")
	if r := wait(t, out); r.err != nil {
		t.Fatal(r.err)
	}
	if len(records) != 0 {
		t.Errorf("more records than one per phase: %+v", <-records)
	}

	// A task that finds a worker and ends at once is never recorded.
	w.serve()
	quick := task("c2")
	quick.MaterializeAfter = 2 * time.Second
	quick.OnRecord = func(r Record) { records <- r }
	if r := wait(t, e.start(context.Background(), quick, 1)); r.err != nil {
		t.Fatal(r.err)
	}
	e.clk.Step(10 * time.Second)
	if len(records) != 0 {
		t.Errorf("a quick task was recorded: %+v", <-records)
	}
}

func TestCapacityRespected(t *testing.T) {
	e := newEnv(t)
	h := hello("w1")
	h.Capacity = 3
	w, _ := e.dial(h)
	const n = 21
	outs := make([]<-chan ran, n)
	for i := range n {
		outs[i] = e.start(context.Background(), task("c"+string(rune('a'+i))), 1)
	}
	// The worker answers only while it holds its whole capacity (or the
	// last tasks): a hub that sent more would show it.
	var held []*workerproto.DirectTask
	maxHeld := 0
	for done := 0; done < n; {
		if len(held) < h.Capacity && done+len(held) < n {
			held = append(held, w.nextTask())
			maxHeld = max(maxHeld, len(held))
			continue
		}
		select {
		case f := <-w.frames:
			t.Fatalf("a frame past the capacity: %+v", f)
		default:
		}
		w.result(held[0].ID, held[0].Attempt, true, "")
		held = held[1:]
		done++
	}
	if maxHeld != h.Capacity {
		t.Errorf("the worker held at most %d, want %d", maxHeld, h.Capacity)
	}
	for _, o := range outs {
		if r := wait(t, o); r.err != nil {
			t.Fatal(r.err)
		}
	}
}

func TestLeastLoadedFirst(t *testing.T) {
	e := newEnv(t)
	h1, h2 := hello("w1"), hello("w2")
	h1.Capacity, h2.Capacity = 4, 4
	w1, _ := e.dial(h1)
	w2, _ := e.dial(h2)
	for i, id := range []string{"c1", "c2", "c3", "c4"} {
		e.start(context.Background(), task(id), 1)
		e.waitState("team-a", id, 1, callRunning)
		_ = i
	}
	for _, ws := range e.hub.Workers() {
		if ws.Busy != 2 {
			t.Errorf("worker %s holds %d, want 2 (least loaded first)", ws.Name, ws.Busy)
		}
	}
	_, _ = w1, w2
}

func TestMatching(t *testing.T) {
	worker := hello("w1")
	worker.Queues = []string{"q"}
	worker.Lanes = []string{"tools"}
	worker.CommandTypes = []string{"shell", "read"}
	worker.Labels = map[string]string{"zone": "a"}
	cases := map[string]struct {
		edit   func(*Task)
		served bool
	}{
		"all match":         {edit: func(*Task) {}, served: true},
		"other listed type": {edit: func(t *Task) { t.CommandType = "read" }, served: true},
		"selector matches":  {edit: func(t *Task) { t.Selector = labels.SelectorFromSet(labels.Set{"zone": "a"}) }, served: true},
		"other queue":       {edit: func(t *Task) { t.Queue = "q2" }},
		"other lane":        {edit: func(t *Task) { t.Lane = "writes" }},
		"other type":        {edit: func(t *Task) { t.CommandType = "python" }},
		"selector differs":  {edit: func(t *Task) { t.Selector = labels.SelectorFromSet(labels.Set{"zone": "b"}) }},
		"other namespace":   {edit: func(t *Task) { t.Namespace = "team-b" }},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			w, _ := e.dial(worker)
			tk := task("c1")
			tc.edit(tk)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			out := e.start(ctx, tk, 1)
			if tc.served {
				w.nextTask()
				w.result("c1", 1, true, "")
				if r := wait(t, out); r.err != nil {
					t.Fatal(r.err)
				}
				return
			}
			e.waitState(tk.Namespace, "c1", 1, callWaiting)
			w.noFrame()
			cancel()
			if r := wait(t, out); !errors.Is(r.err, context.Canceled) {
				t.Fatalf("Run: %v, want context.Canceled", r.err)
			}
			if e.hub.Holds(tk.Namespace, "c1") {
				t.Error("a cancelled waiter is still held")
			}
		})
	}

	t.Run("empty queues and lanes serve all", func(t *testing.T) {
		e := newEnv(t)
		w, _ := e.dial(hello("w1"))
		w.serve()
		tk := task("c1")
		tk.Queue, tk.Lane = "any", "other"
		if r := wait(t, e.start(context.Background(), tk, 1)); r.err != nil {
			t.Fatal(r.err)
		}
	})

	t.Run("a waiter goes to the matching worker that connects", func(t *testing.T) {
		e := newEnv(t)
		tk := task("c1")
		tk.Selector = labels.SelectorFromSet(labels.Set{"zone": "a"})
		other := e.start(context.Background(), task("c0"), 1) // older, any worker
		out := e.start(context.Background(), tk, 1)
		e.waitState("team-a", "c1", 1, callWaiting)
		e.waitState("team-a", "c0", 1, callWaiting)
		nolabel, _ := e.dial(hello("w0"))
		if got := nolabel.nextTask(); got.ID != "c0" {
			t.Fatalf("the unlabelled worker got %s, want c0", got.ID)
		}
		nolabel.noFrame()
		labelled := hello("w1")
		labelled.Labels = map[string]string{"zone": "a"}
		w, _ := e.dial(labelled)
		if got := w.nextTask(); got.ID != "c1" {
			t.Fatalf("the labelled worker got %s, want c1", got.ID)
		}
		w.result("c1", 1, true, "")
		nolabel.result("c0", 1, true, "")
		for _, o := range []<-chan ran{out, other} {
			if r := wait(t, o); r.err != nil {
				t.Fatal(r.err)
			}
		}
	})

	t.Run("waiters are served in order", func(t *testing.T) {
		e := newEnv(t)
		var outs []<-chan ran
		for _, id := range []string{"c1", "c2", "c3"} {
			outs = append(outs, e.start(context.Background(), task(id), 1))
			e.waitState("team-a", id, 1, callWaiting)
		}
		w, _ := e.dial(hello("w1"))
		for _, id := range []string{"c1", "c2", "c3"} {
			got := w.nextTask()
			if got.ID != id {
				t.Fatalf("got %s, want %s", got.ID, id)
			}
			w.result(got.ID, 1, true, "")
		}
		for _, o := range outs {
			if r := wait(t, o); r.err != nil {
				t.Fatal(r.err)
			}
		}
	})
}

func TestDrain(t *testing.T) {
	e := newEnv(t)
	h := hello("w1")
	h.Capacity = 2
	w, _ := e.dial(h)
	running := e.start(context.Background(), task("c1"), 1)
	w.nextTask()
	_ = w.send(workerproto.WorkerFrame{Drain: true})
	eventually(t, "the worker drains", func() bool { ws := e.hub.Workers(); return len(ws) == 1 && ws[0].Draining })
	ctx, cancel := context.WithCancel(context.Background())
	waiting := e.start(ctx, task("c2"), 1)
	e.waitState("team-a", "c2", 1, callWaiting)
	w.noFrame()
	w.result("c1", 1, true, "")
	if r := wait(t, running); r.err != nil {
		t.Fatalf("the draining worker's attempt: %v", r.err)
	}
	if e.stateOf("team-a", "c2", 1) != callWaiting {
		t.Fatal("a draining worker's freed slot took a waiter")
	}
	cancel()
	wait(t, waiting)
	ended := counter(StreamsEnded.WithLabelValues(EndWorkerDone))
	w.body.Close()
	eventually(t, "the drained stream ends", func() bool { return len(e.hub.Workers()) == 0 })
	if got := counter(StreamsEnded.WithLabelValues(EndWorkerDone)) - ended; got != 1 {
		t.Errorf("streams ended drained: %v, want 1", got)
	}
}

func TestAdmission(t *testing.T) {
	var admitted []workerproto.DirectHello
	var mu sync.Mutex
	admit := func(_ context.Context, r *http.Request, h workerproto.DirectHello) error {
		mu.Lock()
		admitted = append(admitted, h)
		mu.Unlock()
		switch r.Header.Get("Authorization") {
		case "Bearer token-of-intruder":
			return &sessionapi.Error{Status: http.StatusForbidden, Code: sessionapi.CodeForbidden, Message: "may not serve team-a"}
		case "Bearer token-of-broken":
			return errors.New("access review failed")
		}
		return nil
	}
	e := newEnv(t, func(o *Options, _ *httptest.Server) { o.Admit = admit })
	cases := map[string]struct {
		hello      workerproto.DirectHello
		wantStatus int
		wantCode   string
	}{
		"refused by Admit": {hello: hello("intruder"), wantStatus: http.StatusForbidden, wantCode: sessionapi.CodeForbidden},
		"Admit fails":      {hello: hello("broken"), wantStatus: http.StatusInternalServerError, wantCode: sessionapi.CodeInternal},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			refused := counter(StreamsRefused.WithLabelValues(tc.wantCode))
			w, resp := e.dial(tc.hello)
			if w != nil {
				t.Fatal("the stream was admitted")
			}
			if resp.StatusCode != tc.wantStatus {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.wantStatus)
			}
			if got := apiError(t, resp); got.Code != tc.wantCode {
				t.Errorf("code %q, want %q", got.Code, tc.wantCode)
			}
			if len(e.hub.Workers()) != 0 {
				t.Errorf("a refused worker is listed: %+v", e.hub.Workers())
			}
			if got := counter(StreamsRefused.WithLabelValues(tc.wantCode)) - refused; got != 1 {
				t.Errorf("refusals counted: %v, want 1", got)
			}
		})
	}
	// A refused worker gets no task.
	ctx, cancel := context.WithCancel(context.Background())
	out := e.start(ctx, task("c1"), 1)
	e.waitState("team-a", "c1", 1, callWaiting)
	cancel()
	wait(t, out)
	if len(admitted) != 2 || admitted[0].Namespace != "team-a" {
		t.Errorf("Admit saw %+v", admitted)
	}
}

func TestInvalidHello(t *testing.T) {
	admitCalls := 0
	e := newEnv(t, func(o *Options, _ *httptest.Server) {
		o.Admit = func(context.Context, *http.Request, workerproto.DirectHello) error { admitCalls++; return nil }
	})
	many := make([]string, 65)
	for i := range many {
		many[i] = "x"
	}
	manyLabels := map[string]string{}
	for i := range 65 {
		manyLabels["k"+strings.Repeat("a", i)] = "v"
	}
	cases := map[string]struct {
		edit       func(*workerproto.DirectHello)
		wantStatus int
	}{
		"worker not a DNS subdomain": {edit: func(h *workerproto.DirectHello) { h.Worker = "W_1" }, wantStatus: 400},
		"namespace not a DNS label":  {edit: func(h *workerproto.DirectHello) { h.Namespace = "a.b" }, wantStatus: 400},
		"no namespace":               {edit: func(h *workerproto.DirectHello) { h.Namespace = "" }, wantStatus: 400},
		"capacity 0":                 {edit: func(h *workerproto.DirectHello) { h.Capacity = 0 }, wantStatus: 400},
		"huge capacity":              {edit: func(h *workerproto.DirectHello) { h.Capacity = 1 << 40 }, wantStatus: 400},
		"capacity one past the max":  {edit: func(h *workerproto.DirectHello) { h.Capacity = workerproto.MaxDirectCapacity + 1 }, wantStatus: 400},
		"65 queues":                  {edit: func(h *workerproto.DirectHello) { h.Queues = many }, wantStatus: 400},
		"65 lanes":                   {edit: func(h *workerproto.DirectHello) { h.Lanes = many }, wantStatus: 400},
		"65 command types":           {edit: func(h *workerproto.DirectHello) { h.CommandTypes = many }, wantStatus: 400},
		"no command type":            {edit: func(h *workerproto.DirectHello) { h.CommandTypes = nil }, wantStatus: 400},
		"65 labels":                  {edit: func(h *workerproto.DirectHello) { h.Labels = manyLabels }, wantStatus: 400},
		"bad label value":            {edit: func(h *workerproto.DirectHello) { h.Labels = map[string]string{"a": "b c"} }, wantStatus: 400},
		"long queue name":            {edit: func(h *workerproto.DirectHello) { h.Queues = []string{strings.Repeat("q", 300)} }, wantStatus: 400},
		"huge hello":                 {edit: func(h *workerproto.DirectHello) { h.Node = strings.Repeat("n", maxHelloBytes) }, wantStatus: 413},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := hello("w1")
			tc.edit(&h)
			w, resp := e.dial(h)
			if w != nil {
				t.Fatal("admitted")
			}
			if resp.StatusCode != tc.wantStatus {
				t.Errorf("status %d, want %d: %+v", resp.StatusCode, tc.wantStatus, apiError(t, resp))
			}
		})
	}
	rawCases := map[string]string{
		"not JSON":        "hello\n",
		"not a hello":     `{"ping":true}` + "\n",
		"body ends early": "",
	}
	for name, raw := range rawCases {
		t.Run(name, func(t *testing.T) {
			w, resp := e.dialRaw(func(_ *json.Encoder, wr io.Writer) error {
				_, err := wr.Write([]byte(raw))
				if c, ok := wr.(interface{ Close() error }); ok {
					c.Close()
				}
				return err
			}, "raw")
			if w != nil || resp.StatusCode != 400 {
				t.Fatalf("want 400, got %d", resp.StatusCode)
			}
		})
	}
	if admitCalls != 0 {
		t.Errorf("Admit was called %d times for invalid hellos", admitCalls)
	}
}

func TestCloseInterrupts(t *testing.T) {
	e := newEnv(t)
	w, _ := e.dial(hello("w1"))
	running := e.start(context.Background(), task("c1"), 1)
	w.nextTask()
	waiting := e.start(context.Background(), task("c2"), 1)
	e.waitState("team-a", "c2", 1, callWaiting)
	e.hub.Close()
	for _, o := range []<-chan ran{running, waiting} {
		if r := wait(t, o); !errors.Is(r.err, ErrInterrupted) {
			t.Errorf("Run: %v, want ErrInterrupted", r.err)
		}
	}
	w.waitEnded()
	if e.hub.Holds("team-a", "c1") || len(e.hub.Workers()) != 0 {
		t.Error("the hub holds something after Close")
	}
	if _, err := e.hub.Run(context.Background(), task("c3"), lanequeue.Attempt{Number: 1}); !errors.Is(err, ErrInterrupted) {
		t.Errorf("Run after Close: %v, want ErrInterrupted", err)
	}
	_, resp := e.dial(hello("w2"))
	if resp.StatusCode != http.StatusServiceUnavailable || apiError(t, resp).Code != sessionapi.CodeNotLeader {
		t.Errorf("a stream after Close: %d, want 503 NotLeader", resp.StatusCode)
	}
	if resp.Header.Get("Retry-After") == "" {
		t.Error("no Retry-After on NotLeader")
	}
	e.hub.Lead("run-2")
	w2, _ := e.dial(hello("w2"))
	if w2.welcome.RunID != "run-2" {
		t.Errorf("welcome run %q, want run-2", w2.welcome.RunID)
	}
	w2.serve()
	if r := wait(t, e.start(context.Background(), task("c4"), 1)); r.err != nil {
		t.Fatal(r.err)
	}
}

func TestReplacedStream(t *testing.T) {
	e := newEnv(t)
	old, _ := e.dial(hello("w1"))
	out := e.start(context.Background(), task("c1"), 1)
	old.nextTask()
	fresh, _ := e.dial(hello("w1"))
	if r := wait(t, out); !errors.Is(r.err, ErrWorkerLost) {
		t.Fatalf("the replaced stream's attempt: %v, want ErrWorkerLost", r.err)
	}
	old.waitEnded()
	// The old stream's late result cannot complete anything.
	if ws := e.hub.Workers(); len(ws) != 1 {
		t.Fatalf("workers: %+v", ws)
	}
	fresh.serve()
	if r := wait(t, e.start(context.Background(), task("c1"), 2)); r.err != nil {
		t.Fatal(r.err)
	}
}

func TestWorkerBounds(t *testing.T) {
	e := newEnv(t, func(o *Options, _ *httptest.Server) { o.MaxWorkers, o.MaxWorkersPerNamespace = 3, 2 })
	e.dial(hello("w1"))
	e.dial(hello("w2"))
	_, resp := e.dial(hello("w3"))
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a third worker of team-a: %d, want 429", resp.StatusCode)
	}
	if got := apiError(t, resp); got.Code != sessionapi.CodeQueueFull || !strings.Contains(got.Message, "team-a") {
		t.Errorf("refusal %+v", got)
	}
	// A worker that reconnects replaces its stream: it is not refused.
	if w, resp := e.dial(hello("w2")); w == nil {
		t.Fatalf("a reconnecting worker: %d", resp.StatusCode)
	}
	b := hello("w1")
	b.Namespace = "team-b"
	e.dial(b)
	b.Worker = "w2"
	if _, resp := e.dial(b); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a fourth worker: %d, want 429", resp.StatusCode)
	}
	if n := len(e.hub.Workers()); n != 3 {
		t.Errorf("%d workers, want 3", n)
	}
}

func TestPingAndDeadStream(t *testing.T) {
	e := newEnv(t, func(o *Options, _ *httptest.Server) { o.DeadAfter = 6 * time.Second })
	w, _ := e.dial(hello("w1"))
	out := e.start(context.Background(), task("c1"), 1)
	w.nextTask()
	// The hub pings a quiet stream.
	eventually(t, "a ping", func() bool {
		e.clk.Step(time.Second)
		select {
		case <-w.pings:
			return true
		default:
			return false
		}
	})
	// A worker that sends frames stays.
	_ = w.send(workerproto.WorkerFrame{Ping: true})
	select {
	case r := <-out:
		t.Fatalf("Run returned: %+v", r)
	default:
	}
	// A silent one is lost after DeadAfter.
	eventually(t, "the silent stream is lost", func() bool {
		e.clk.Step(time.Second)
		select {
		case r := <-out:
			if !errors.Is(r.err, ErrWorkerLost) {
				t.Fatalf("Run: %v, want ErrWorkerLost", r.err)
			}
			return true
		default:
			return false
		}
	})
	w.waitEnded()
}

func TestFloods(t *testing.T) {
	t.Run("many frames and results for unknown attempts", func(t *testing.T) {
		e := newEnv(t)
		w, _ := e.dial(hello("w1"))
		unknown := counter(dropUnknown)
		const n = 20000
		go func() {
			for i := range n {
				_ = w.send(workerproto.WorkerFrame{Ping: true},
					workerproto.WorkerFrame{Result: &workerproto.DirectResult{ID: "forged-" + string(rune(i)), Attempt: i, Success: true}})
			}
		}()
		eventually(t, "every forged result dropped", func() bool { return counter(dropUnknown) == unknown+n })
		e.hub.mu.Lock()
		held := len(e.hub.attempts) + len(e.hub.held)
		e.hub.mu.Unlock()
		if held != 0 {
			t.Errorf("the hub holds %d entries after the flood", held)
		}
		w.serve()
		if r := wait(t, e.start(context.Background(), task("c1"), 1)); r.err != nil {
			t.Fatal(r.err)
		}
	})

	t.Run("an oversized frame ends the stream", func(t *testing.T) {
		e := newEnv(t)
		w, _ := e.dial(hello("w1"))
		out := e.start(context.Background(), task("c1"), 1)
		w.nextTask()
		ended := counter(StreamsEnded.WithLabelValues(EndTooLarge))
		go func() {
			chunk := []byte(strings.Repeat("x", 64<<10))
			for i := 0; i*len(chunk) <= workerproto.MaxDirectFrameBytes+len(chunk); i++ {
				if w.write(chunk) != nil {
					return
				}
			}
		}()
		if r := wait(t, out); !errors.Is(r.err, ErrWorkerLost) {
			t.Fatalf("Run: %v, want ErrWorkerLost", r.err)
		}
		if got := counter(StreamsEnded.WithLabelValues(EndTooLarge)) - ended; got != 1 {
			t.Errorf("streams ended too_large: %v, want 1", got)
		}
	})

	t.Run("a frame at the bound is read", func(t *testing.T) {
		e := newEnv(t)
		w, _ := e.dial(hello("w1"))
		out := e.start(context.Background(), task("c1"), 1)
		w.nextTask()
		frame := []byte(`{"result":{"id":"c1","attempt":1,"success":true,"output":"`)
		tail := []byte(`"}}` + "\n")
		big := append(slices.Clip(frame), []byte(strings.Repeat("y", workerproto.MaxDirectFrameBytes-len(frame)-len(tail)))...)
		big = append(big, tail...)
		go func() { _ = w.write(big) }()
		r := wait(t, out)
		if r.err != nil || len(r.res.Output) < workerproto.MaxDirectFrameBytes-100 {
			t.Fatalf("Run: %v, output of %d bytes", r.err, len(r.res.Output))
		}
	})

	t.Run("a frame that is not JSON ends the stream", func(t *testing.T) {
		e := newEnv(t)
		w, _ := e.dial(hello("w1"))
		out := e.start(context.Background(), task("c1"), 1)
		w.nextTask()
		_ = w.write([]byte("{not json\n"))
		if r := wait(t, out); !errors.Is(r.err, ErrWorkerLost) {
			t.Fatalf("Run: %v, want ErrWorkerLost", r.err)
		}
	})

	t.Run("a second hello ends the stream", func(t *testing.T) {
		e := newEnv(t)
		w, _ := e.dial(hello("w1"))
		h := hello("w1")
		h.Capacity = workerproto.MaxDirectCapacity
		protocol := counter(StreamsEnded.WithLabelValues(EndProtocol))
		_ = w.send(workerproto.WorkerFrame{Hello: &h})
		w.waitEnded()
		if got := counter(StreamsEnded.WithLabelValues(EndProtocol)) - protocol; got != 1 {
			t.Errorf("streams ended for protocol: %v, want 1", got)
		}
		if ws := e.hub.Workers(); len(ws) != 0 {
			t.Errorf("workers: %+v", ws)
		}
	})
}

func TestDuplicateAttempt(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.start(ctx, task("c1"), 1)
	e.waitState("team-a", "c1", 1, callWaiting)
	if _, err := e.hub.Run(ctx, task("c1"), lanequeue.Attempt{Number: 1}); !errors.Is(err, errDuplicateAttempt) {
		t.Fatalf("Run of the same attempt twice: %v", err)
	}
}

func TestMethodNotAllowed(t *testing.T) {
	e := newEnv(t)
	resp, err := e.srv.Client().Get(e.srv.URL + workerproto.DirectPath)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d, want 405", resp.StatusCode)
	}
	resp.Body.Close()
}

func TestRegisterMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	if err := RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	if err := RegisterMetrics(reg); err == nil {
		t.Error("registering twice: want an error")
	}
	e := newEnv(t)
	h := hello("w1")
	h.Capacity = 3
	w, _ := e.dial(h)
	e.start(context.Background(), task("c1"), 1)
	w.nextTask()
	if got := counter(Slots.WithLabelValues("team-a", "busy")); got != 1 {
		t.Errorf("busy slots %v, want 1", got)
	}
	if got := counter(Slots.WithLabelValues("team-a", "free")); got != 2 {
		t.Errorf("free slots %v, want 2", got)
	}
	if got := counter(Workers.WithLabelValues("team-a")); got != 1 {
		t.Errorf("workers %v, want 1", got)
	}
}

func TestPayloads(t *testing.T) {
	e := newEnv(t)
	w, _ := e.dial(hello("w1"))
	w.serve()
	bad := task("c1")
	bad.Payload = json.RawMessage(`{"cmd":`)
	if r := wait(t, e.start(context.Background(), bad, 1)); !errors.Is(r.err, ErrInvalidPayload) || !lanequeue.IsPermanent(r.err) {
		t.Fatalf("a payload that is not JSON: %v, want ErrInvalidPayload, permanent", r.err)
	}
	huge := task("c2")
	huge.Payload = json.RawMessage(`"` + strings.Repeat("p", MaxPayloadBytes) + `"`)
	_, err := e.hub.Run(context.Background(), huge, lanequeue.Attempt{Number: 1})
	if !errors.Is(err, ErrPayloadTooLarge) || !lanequeue.IsPermanent(err) {
		t.Fatalf("a payload over the bound: %v, want ErrPayloadTooLarge, permanent", err)
	}
	// Neither cost the worker its stream nor its slot.
	if r := wait(t, e.start(context.Background(), task("c3"), 1)); r.err != nil {
		t.Fatal(r.err)
	}
	if e.hub.Holds("team-a", "c1") || e.hub.Holds("team-a", "c2") {
		t.Error("a refused attempt is still held")
	}
}

func TestLeadAnotherRun(t *testing.T) {
	e := newEnv(t)
	w, _ := e.dial(hello("w1"))
	out := e.start(context.Background(), task("c1"), 1)
	w.nextTask()
	e.hub.Lead("run-1") // the same run: nothing changes
	select {
	case r := <-out:
		t.Fatalf("Run returned on Lead of the same run: %+v", r)
	default:
	}
	e.hub.Lead("run-2")
	if r := wait(t, out); !errors.Is(r.err, ErrInterrupted) {
		t.Fatalf("Run: %v, want ErrInterrupted", r.err)
	}
	w.waitEnded()
	w2, _ := e.dial(hello("w1"))
	if w2.welcome.RunID != "run-2" {
		t.Errorf("welcome run %q, want run-2", w2.welcome.RunID)
	}
}

func TestNotLeadingYet(t *testing.T) {
	hub := NewHub(Options{Admit: func(context.Context, *http.Request, workerproto.DirectHello) error { return nil }})
	if _, err := hub.Run(context.Background(), task("c1"), lanequeue.Attempt{Number: 1}); !errors.Is(err, ErrInterrupted) {
		t.Errorf("Run before Lead: %v, want ErrInterrupted", err)
	}
	rec := httptest.NewRecorder()
	hub.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, workerproto.DirectPath, strings.NewReader("")))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("a stream before Lead: %d, want 503", rec.Code)
	}
}

// The Session API's server has read and write timeouts; a stream outlives
// them.
func TestStreamOutlivesServerTimeouts(t *testing.T) {
	const timeout = 100 * time.Millisecond
	e := newEnv(t, func(_ *Options, srv *httptest.Server) {
		srv.Config.ReadTimeout = timeout
		srv.Config.WriteTimeout = timeout
	})
	w, _ := e.dial(hello("w1"))
	w.serve()
	time.Sleep(3 * timeout)
	if r := wait(t, e.start(context.Background(), task("c1"), 1)); r.err != nil {
		t.Fatal(r.err)
	}
	select {
	case <-w.ended:
		t.Fatal("the stream ended")
	default:
	}
}

// TestChurn runs many tasks over workers that are killed and reconnect,
// retrying an attempt lost with its worker as the lane engine does: every
// task completes exactly once, with its own result, and no worker ever holds
// more than its capacity.
func TestChurn(t *testing.T) {
	e := newEnv(t)
	const capacity, tasks, workers = 4, 400, 3
	var over atomic.Int32
	connect := func(name string) *testWorker {
		h := hello(name)
		h.Capacity = capacity
		w, _ := e.dial(h)
		go func() {
			var inflight atomic.Int32
			for {
				select {
				case f := <-w.frames:
					if f.Task == nil {
						continue
					}
					if inflight.Add(1) > capacity {
						over.Add(1)
					}
					go func(tk *workerproto.DirectTask) {
						runtime.Gosched()
						inflight.Add(-1)
						_ = w.send(workerproto.WorkerFrame{Result: &workerproto.DirectResult{
							ID: tk.ID, Attempt: tk.Attempt, Success: true, Output: json.RawMessage(`"` + tk.ID + `"`)}})
					}(f.Task)
				case <-w.ended:
					return
				}
			}
		}()
		return w
	}
	ws := make([]*testWorker, workers)
	for i := range ws {
		ws[i] = connect("w" + strconv.Itoa(i))
	}
	var done atomic.Int32
	results := make([]ran, tasks)
	attempts := make([]int, tasks)
	var wg sync.WaitGroup
	for i := range tasks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := "c" + strconv.Itoa(i)
			for n := 1; ; n++ {
				res, err := e.hub.Run(context.Background(), task(id), lanequeue.Attempt{Number: n})
				if errors.Is(err, ErrWorkerLost) {
					continue
				}
				results[i], attempts[i] = ran{res, err}, n
				done.Add(1)
				return
			}
		}()
	}
	for k := range 12 {
		eventually(t, "progress", func() bool { return done.Load() >= int32(k*tasks/15) })
		i := k % workers
		ws[i].close()
		if k%2 == 0 {
			// Reconnect under the same name: the new stream replaces the
			// old one, which may not have ended yet.
			ws[i] = connect("w" + strconv.Itoa(i))
		} else {
			ws[i] = connect("w" + strconv.Itoa(i) + "-" + strconv.Itoa(k))
		}
	}
	wg.Wait()
	retried := 0
	for i, r := range results {
		if r.err != nil || string(r.res.Output) != `"c`+strconv.Itoa(i)+`"` {
			t.Fatalf("task c%d: %+v", i, r)
		}
		if attempts[i] > 1 {
			retried++
		}
	}
	if over.Load() != 0 {
		t.Errorf("a worker held more than its capacity %d times", over.Load())
	}
	e.hub.mu.Lock()
	left := len(e.hub.attempts) + len(e.hub.held)
	e.hub.mu.Unlock()
	if left != 0 {
		t.Errorf("the hub holds %d entries after every task ended", left)
	}
	t.Logf("%d of %d tasks were retried after losing their worker", retried, tasks)
}

// A batch of large payloads reaches the worker whole, frame by frame.
func TestLargePayloadBatch(t *testing.T) {
	e := newEnv(t)
	h := hello("w1")
	h.Capacity = 8
	w, _ := e.dial(h)
	w.serve()
	payload := json.RawMessage(`"` + strings.Repeat("z", 1<<20) + `"`)
	var outs []<-chan ran
	for i := range 8 {
		tk := task("c" + strconv.Itoa(i))
		tk.Payload = payload
		outs = append(outs, e.start(context.Background(), tk, 1))
	}
	for i, o := range outs {
		if r := wait(t, o); r.err != nil || string(r.res.Output) != `"c`+strconv.Itoa(i)+`"` {
			t.Fatalf("task %d: %+v", i, r)
		}
	}
}
