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
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentlane/agentlane/internal/workerproto"
)

// The submitters of the api modes run in a process of their own (this
// binary with -role=client), so that the shards' process CPU is the
// manager's side alone (and the in-process workers'). The client prints
// "start" when its throughput window begins, "stop" when it ends, and then
// one JSON line, a clientReport.

// callTimeout bounds one submit call of the client process.
const callTimeout = 30 * time.Second

// clientReport is what the client process measured.
type clientReport struct {
	Finished    int64   `json:"finished"`
	TasksPerSec float64 `json:"tasksPerSec"`
	// Latencies at half load, microseconds: grant and start as the owning
	// shard measured them from the request's arrival; rtt as the client
	// saw the whole call.
	GrantP50, GrantP99, StartP50, StartP99, RTTP50, RTTP99 int64
	// Reconnects counts the workers' streams the hubs ended and the
	// workers opened again.
	Reconnects int64  `json:"reconnects"`
	Error      string `json:"error,omitempty"`
}

// clientArgs are the client process's arguments.
type clientArgs struct {
	urls             []string
	ca               string
	proxy            bool
	queues, sessions int
	clients          int
	// workers stream to every shard, with capacity slots per stream.
	workers, capacity int
	warmup, duration  time.Duration
}

// runClient is the client process: closed-loop submitters, then half load.
func runClient(a clientArgs, out io.Writer) error {
	caPEM, err := os.ReadFile(a.ca)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return errors.New("no certificate in -ca")
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool},
		ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 64}}
	// A call bounded, so that a run whose workers were lost fails
	// instead of waiting forever (the simulated workers do not reconnect).
	calls := &http.Client{Transport: hc.Transport, Timeout: callTimeout}
	n := len(a.urls)
	sessions := sessionsOf(a.queues, a.sessions, n)
	stopWorkers, reconnects, err := startWorkers(hc, a.urls, a.workers, a.capacity)
	if err != nil {
		return err
	}
	defer stopWorkers()
	body, _ := json.Marshal(submitRequest{Type: "read", Payload: json.RawMessage(`{"path":"README.md"}`)})
	// call submits a command of s from client i: to the session's shard
	// (a client that knows the routing), or to the replica the client's
	// connection landed on (proxy).
	call := func(i int, s session) (submitAnswer, time.Duration, error) {
		base := a.urls[s.shard]
		if a.proxy {
			base = a.urls[i%n]
		}
		u := base + "/submit?queue=" + url.QueryEscape(s.queue) + "&session=" + url.QueryEscape(s.name)
		t0 := time.Now()
		resp, err := calls.Post(u, "application/json", bytes.NewReader(body))
		if err != nil {
			return submitAnswer{}, 0, err
		}
		defer resp.Body.Close()
		var ans submitAnswer
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			return ans, 0, fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(b)))
		}
		if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil {
			return ans, 0, err
		}
		if ans.State != "Succeeded" {
			return ans, 0, fmt.Errorf("command %s ended %s", ans.ID, ans.State)
		}
		return ans, time.Since(t0), nil
	}

	// One call to each shard first, so that the submitters share one
	// HTTP/2 connection per shard instead of racing to dial their own.
	for i := range n {
		for _, s := range sessions {
			if a.proxy || s.shard == i {
				if _, _, err := call(i, s); err != nil {
					return err
				}
				break
			}
		}
	}

	// Throughput.
	var done atomic.Int64
	var measuring atomic.Bool
	var failed atomic.Pointer[error]
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range a.clients {
		wg.Go(func() {
			for k := i; ; k += a.clients {
				select {
				case <-stop:
					return
				default:
				}
				if _, _, err := call(i, sessions[k%len(sessions)]); err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
				if measuring.Load() {
					done.Add(1)
				}
			}
		})
	}
	time.Sleep(a.warmup)
	fmt.Fprintln(out, "start")
	measuring.Store(true)
	t0 := time.Now()
	time.Sleep(a.duration)
	finished, elapsed := done.Load(), time.Since(t0)
	fmt.Fprintln(out, "stop")
	close(stop)
	wg.Wait()
	rep := clientReport{Finished: finished, TasksPerSec: float64(finished) / elapsed.Seconds()}
	if err := failed.Load(); err != nil {
		return *err
	}
	if finished == 0 {
		return errors.New("no command finished")
	}

	// Half load: open loop at half the rate, each call in its own
	// goroutine; client i of the round robin is i modulo -clients.
	rate := rep.TasksPerSec / 2
	var mu sync.Mutex
	var grants, starts, rtts []time.Duration
	t0 = time.Now()
	for sent := 0; ; {
		elapsed := time.Since(t0)
		if elapsed >= a.duration {
			break
		}
		for due := int(elapsed.Seconds() * rate); sent < due; sent++ {
			k := sent
			wg.Go(func() {
				ans, rtt, err := call(k%a.clients, sessions[k%len(sessions)])
				if err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
				mu.Lock()
				grants = append(grants, time.Duration(ans.GrantUS)*time.Microsecond)
				starts = append(starts, time.Duration(ans.StartUS)*time.Microsecond)
				rtts = append(rtts, rtt)
				mu.Unlock()
			})
		}
		time.Sleep(200 * time.Microsecond)
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		return *err
	}
	for _, l := range [][]time.Duration{grants, starts, rtts} {
		slices.Sort(l)
	}
	rep.Reconnects = reconnects.Load()
	us := func(d time.Duration) int64 { return d.Microseconds() }
	rep.GrantP50, rep.GrantP99 = us(percentile(grants, 50)), us(percentile(grants, 99))
	rep.StartP50, rep.StartP99 = us(percentile(starts, 50)), us(percentile(starts, 99))
	rep.RTTP50, rep.RTTP99 = us(percentile(rtts, 50)), us(percentile(rtts, 99))
	return json.NewEncoder(out).Encode(rep)
}

// spawnClient runs the client process against c's servers and returns its
// report and the CPU this process spent between its start and stop lines.
func spawnClient(o options, c *cluster, proxy bool) (clientReport, time.Duration, error) {
	var rep clientReport
	ca, err := os.CreateTemp("", "shardsim-ca-*.pem")
	if err != nil {
		return rep, 0, err
	}
	defer os.Remove(ca.Name())
	if _, err := ca.Write(pemOf(c.servers[0].Certificate().Raw)); err != nil {
		return rep, 0, err
	}
	ca.Close()
	self, err := os.Executable()
	if err != nil {
		return rep, 0, err
	}
	var urls []string
	for _, s := range c.servers {
		urls = append(urls, s.URL)
	}
	cmd := exec.Command(self, "-role=client", "-urls="+strings.Join(urls, ","), "-ca="+ca.Name(),
		fmt.Sprintf("-proxy=%t", proxy), fmt.Sprintf("-queues=%d", o.queues), fmt.Sprintf("-sessions=%d", o.sessions),
		fmt.Sprintf("-clients=%d", o.clients), fmt.Sprintf("-workers=%d", o.workers), fmt.Sprintf("-capacity=%d", max(1, o.capacity/len(c.servers))),
		"-warmup="+o.warmup.String(), "-duration="+o.duration.String())
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return rep, 0, err
	}
	if err := cmd.Start(); err != nil {
		return rep, 0, err
	}
	var cpu0, cpu time.Duration
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		switch line := sc.Text(); line {
		case "start":
			cpu0 = cpuTime()
		case "stop":
			cpu = cpuTime() - cpu0
		default:
			if err := json.Unmarshal([]byte(line), &rep); err != nil {
				return rep, 0, fmt.Errorf("client: %q: %w", line, err)
			}
		}
	}
	if err := cmd.Wait(); err != nil {
		return rep, 0, fmt.Errorf("client: %w", err)
	}
	if rep.Finished == 0 {
		return rep, 0, errors.New("client: no report")
	}
	return rep, cpu, nil
}

// pemOf is the PEM encoding of a DER certificate.
func pemOf(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// startWorkers connects workers simulated workers to every shard's Direct
// hub at urls, one stream each with capacity slots, as Direct workers
// stream to every shard leader. Each answers every task at once with
// workerOutput, pings when it has sent nothing for a ping interval, and
// connects again when its stream ends (as a worker does; on a machine
// loaded enough, the hub takes a stream as dead), counting it in
// reconnects. It returns once every stream got its first Welcome; stop
// ends them.
func startWorkers(hc *http.Client, urls []string, workers, capacity int) (stop func(), reconnects *atomic.Int64, err error) {
	ctx, cancel := context.WithCancel(context.Background())
	reconnects = new(atomic.Int64)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var streams []*workerStream
	stop = func() {
		cancel()
		mu.Lock()
		for _, st := range streams {
			st.close()
		}
		mu.Unlock()
		wg.Wait()
	}
	for w := range workers {
		for _, base := range urls {
			hello := workerproto.DirectHello{Worker: fmt.Sprintf("worker-%d", w), Node: "node-0", Namespace: "default",
				Incarnation: fmt.Sprintf("worker-%d-1", w), Capacity: capacity, CommandTypes: []string{"read"}}
			st, err := dialWorker(ctx, hc, base, hello, &wg)
			if err != nil {
				stop()
				return nil, nil, err
			}
			mu.Lock()
			streams = append(streams, st)
			mu.Unlock()
			wg.Go(func() {
				for {
					select {
					case <-st.done:
					case <-ctx.Done():
						return
					}
					for {
						if ctx.Err() != nil {
							return
						}
						next, err := dialWorker(ctx, hc, base, hello, &wg)
						if err == nil {
							reconnects.Add(1)
							mu.Lock()
							streams = append(streams, next)
							mu.Unlock()
							st = next
							break
						}
						time.Sleep(100 * time.Millisecond)
					}
				}
			})
		}
	}
	return stop, reconnects, nil
}

// workerStream is one simulated worker's stream; done is closed when it
// ended.
type workerStream struct {
	done  chan struct{}
	close func()
}

// dialWorker opens a stream to the hub at base with hello and serves it
// in goroutines of wg.
func dialWorker(ctx context.Context, hc *http.Client, base string, hello workerproto.DirectHello, wg *sync.WaitGroup) (*workerStream, error) {
	pr, pw := io.Pipe()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+workerproto.DirectPath, pr)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", workerproto.DirectContentType)
	var mu sync.Mutex
	enc := json.NewEncoder(pw)
	send := func(f workerproto.WorkerFrame) error {
		mu.Lock()
		defer mu.Unlock()
		return enc.Encode(f)
	}
	go func() { _ = send(workerproto.WorkerFrame{Hello: &hello}) }()
	resp, err := hc.Do(req) //nolint:bodyclose // closed on refusal below, else by st.close, which every caller runs
	if err != nil {
		pw.Close()
		return nil, fmt.Errorf("worker %s: %w", hello.Worker, err)
	}
	dec := json.NewDecoder(bufio.NewReader(resp.Body))
	var welcome workerproto.ManagerFrame
	if resp.StatusCode != http.StatusOK || dec.Decode(&welcome) != nil || welcome.Welcome == nil {
		resp.Body.Close()
		pw.Close()
		return nil, fmt.Errorf("worker %s: refused (%s)", hello.Worker, resp.Status)
	}
	st := &workerStream{done: make(chan struct{})}
	var once sync.Once
	st.close = func() {
		once.Do(func() {
			_ = pw.Close()
			_ = resp.Body.Close()
		})
	}
	// The reader never waits for the writer, so that the hub's writes are
	// read however slowly the results go out.
	results := make(chan *workerproto.DirectResult, hello.Capacity+1)
	wg.Go(func() {
		defer close(st.done)
		defer st.close()
		defer close(results)
		for {
			var f workerproto.ManagerFrame
			if dec.Decode(&f) != nil {
				return
			}
			if f.Task != nil {
				results <- &workerproto.DirectResult{ID: f.Task.ID, Attempt: f.Task.Attempt,
					Success: true, Output: workerOutput(time.Now())}
			}
		}
	})
	wg.Go(func() {
		for r := range results {
			if send(workerproto.WorkerFrame{Result: r}) != nil {
				return
			}
		}
	})
	wg.Go(func() {
		t := time.NewTicker(workerproto.DirectPingInterval)
		defer t.Stop()
		for {
			select {
			case <-st.done:
				return
			case <-t.C:
				_ = send(workerproto.WorkerFrame{Ping: true})
			}
		}
	})
	return st, nil
}
