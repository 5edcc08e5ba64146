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

package worker

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"

	"github.com/agentlane/agentlane/internal/direct"
	"github.com/agentlane/agentlane/internal/executor"
	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/workerproto"
)

// TestDirectClientWithTheManagersHub runs the worker's client against the
// manager's side of the stream (direct.Hub) over HTTP/2 and TLS.
func TestDirectClientWithTheManagersHub(t *testing.T) {
	g := NewWithT(t)
	hub := direct.NewHub(direct.Options{
		Admit: func(_ context.Context, r *http.Request, hello workerproto.DirectHello) error {
			if r.Header.Get("Authorization") != "Bearer good-token" || hello.Namespace != "agents" {
				return fmt.Errorf("refused by the test")
			}
			return nil
		},
		Manager: "manager-0",
	})
	hub.Lead("run-1")
	t.Cleanup(hub.Close)
	mux := http.NewServeMux()
	mux.Handle(workerproto.DirectPath, hub)
	m := &fakeManager{}
	serveTLS(t, m, mux)
	d := startDirect(t, m, func(c *DirectClient) { c.opts.Capacity = 8 })
	g.Eventually(hub.Workers, 10*time.Second).Should(HaveLen(1))
	g.Expect(hub.Workers()[0].Capacity).To(Equal(8))

	run := func(ctx context.Context, id, commandType string, payload any) (lanequeue.Result, error) {
		tk := task(id, commandType, payload)
		return hub.Run(ctx, &direct.Task{Namespace: tk.Namespace, Queue: tk.Queue, Lane: tk.Lane, Session: tk.Session,
			ID: tk.ID, CommandType: tk.CommandType, Payload: tk.Payload},
			lanequeue.Attempt{ID: id, Number: 1, Deadline: time.Now().Add(time.Minute)})
	}
	res, err := run(t.Context(), "bash-1", "bash", executor.ProcessPayload{Command: "echo from the hub"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Success).To(BeTrue(), "error %q", res.Error)
	g.Expect(string(res.Output)).To(MatchJSON(`{"exitCode":0,"stdout":"from the hub\n"}`))

	// Many more noop tasks than slots: each runs once and succeeds.
	var wg sync.WaitGroup
	errs := make(chan error, 500)
	for i := range 500 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := run(t.Context(), fmt.Sprintf("noop-%d", i), "noop", nil)
			if err == nil && (!res.Success || string(res.Output) != "{}") {
				err = fmt.Errorf("noop-%d: %+v", i, res)
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	// A Run whose context ends cancels the worker's run, and the slot
	// comes back.
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	_, err = run(ctx, "sleep-1", "bash", executor.ProcessPayload{Command: "exec sleep 30"})
	g.Expect(err).To(MatchError(context.DeadlineExceeded))
	g.Eventually(func() int { return hub.Workers()[0].Busy }, 10*time.Second).Should(Equal(0))

	// Failover: the hub stops leading (its streams end, new ones are
	// refused 503 NotLeader) and leads again as another run; the worker
	// comes back by itself.
	first := hub.Workers()[0].Since
	hub.Close()
	g.Eventually(hub.Workers, 10*time.Second).Should(BeEmpty())
	hub.Lead("run-2")
	g.Eventually(hub.Workers, 10*time.Second).Should(HaveLen(1))
	g.Expect(hub.Workers()[0].Since).NotTo(Equal(first))
	res, err = run(t.Context(), "noop-after", "noop", nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Success).To(BeTrue())

	// Stopping the worker drains and closes its stream.
	d.stop(t)
	g.Eventually(hub.Workers, 10*time.Second).Should(BeEmpty())
}

// BenchmarkDirectNoopThroughHub measures the Direct path of a noop task
// from the manager's Run to the worker's Result and back, 64 at a time on
// one worker of capacity 64.
func BenchmarkDirectNoopThroughHub(b *testing.B) {
	hub := direct.NewHub(direct.Options{
		Admit:   func(context.Context, *http.Request, workerproto.DirectHello) error { return nil },
		Manager: "manager-0",
	})
	hub.Lead("run-1")
	b.Cleanup(hub.Close)
	mux := http.NewServeMux()
	mux.Handle(workerproto.DirectPath, hub)
	m := &fakeManager{}
	serveTLS(b, m, mux)
	registry := executor.NewSandboxedRegistry(0, executor.Sandbox{Root: b.TempDir()})
	registry.Register(executor.NoopCommandType, executor.NoopExecutor{})
	c, err := NewDirectClient(DirectOptions{Server: m.srv.URL, CAFile: m.caFile, TokenFile: m.tokenFile,
		Name: "w1", Namespace: "agents", Capacity: 64, Registry: registry, Log: logr.Discard()})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.Run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	for len(hub.Workers()) == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	var next atomic.Int64
	b.SetParallelism(64 / runtime.GOMAXPROCS(0))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := fmt.Sprintf("noop-%d", next.Add(1))
			res, err := hub.Run(context.Background(), &direct.Task{Namespace: "agents", Queue: "q", Lane: "tools", Session: "s",
				ID: id, CommandType: "noop"}, lanequeue.Attempt{ID: id, Number: 1, Deadline: time.Now().Add(time.Minute)})
			if err != nil || !res.Success {
				b.Errorf("%s: %v %+v", id, err, res)
			}
		}
	})
}
