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
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentlane/agentlane/internal/direct"
	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/workerproto"
)

// A shard stands for one manager replica leading one shard: the real lane
// engine of each LaneQueue the shard owns, and what runs each granted
// attempt (dispatchMode): nothing (the engine alone), a model of the
// Direct hub over in-memory pipes carrying the workerproto frames, or the
// manager's Direct hub itself (internal/direct), whose workers stream to
// it over HTTP/2 and TLS from the client process.
type shard struct {
	index  int
	queues map[string]*lanequeue.Queue // by LaneQueue name
	mode   dispatchMode
	// hub is the Direct hub in dispatchHub mode.
	hub *direct.Hub

	mu      sync.Mutex
	streams []*stream
	// free is signalled when a slot frees up while someone waits.
	free *sync.Cond
	// attempts are the attempts handed over and not answered, by id and
	// attempt number.
	attempts map[attemptKey]chan workerproto.DirectResult
	// failures counts the commands the api modes saw end otherwise than
	// Succeeded.
	failures atomic.Int64

	wg sync.WaitGroup
}

type attemptKey struct {
	id      string
	attempt int
}

// stream is the manager's end of one worker's stream.
type stream struct {
	capacity, busy int
	out            chan workerproto.ManagerFrame
}

// queueConfig is every simulated LaneQueue's configuration: one External
// lane, four commands of a session at once (the Query lane's default).
func queueConfig() lanequeue.Config {
	return lanequeue.Config{DefaultLane: "query", Lanes: []lanequeue.LaneConfig{{
		Name: "query", Mode: lanequeue.External, MaxConcurrencyPerSession: 4, Timeout: 30 * time.Second,
	}}}
}

// dispatchMode is how a shard runs a granted attempt.
type dispatchMode int

const (
	// dispatchNone answers every attempt at once: the engine alone.
	dispatchNone dispatchMode = iota
	// dispatchPipes hands it to an in-process worker over in-memory pipes
	// carrying workerproto frames, through a model of the hub.
	dispatchPipes
	// dispatchHub hands it to the manager's Direct hub, whose workers
	// connect over HTTP/2 (cluster.listen).
	dispatchHub
)

// newShard builds shard index with a lane engine for each of queues and
// what mode needs: with dispatchPipes, workers in-process workers streaming
// to it with capacity slots each; with dispatchHub, a leading hub.
func newShard(index int, queues []string, workers, capacity int, mode dispatchMode) (*shard, error) {
	s := &shard{index: index, queues: map[string]*lanequeue.Queue{}, mode: mode,
		attempts: map[attemptKey]chan workerproto.DirectResult{}}
	s.free = sync.NewCond(&s.mu)
	for _, name := range queues {
		q, err := lanequeue.New(queueConfig(), lanequeue.Options{})
		if err != nil {
			s.close()
			return nil, err
		}
		s.queues[name] = q
	}
	switch mode {
	case dispatchPipes:
		for w := range workers {
			s.connect(fmt.Sprintf("worker-%d", w), capacity)
		}
	case dispatchHub:
		s.hub = direct.NewHub(direct.Options{
			// The token and access reviews are cached by the real Session API; not run here.
			Admit:   func(context.Context, *http.Request, workerproto.DirectHello) error { return nil },
			Manager: fmt.Sprintf("shard-%d", index),
		})
		s.hub.Lead(fmt.Sprintf("run-%d", index))
	}
	return s, nil
}

// connect starts one worker and its stream to the shard.
func (s *shard) connect(name string, capacity int) {
	st := &stream{capacity: capacity, out: make(chan workerproto.ManagerFrame, 2*capacity+1)}
	toWorker, fromManager := io.Pipe()
	toManager, fromWorker := io.Pipe()
	s.mu.Lock()
	s.streams = append(s.streams, st)
	s.mu.Unlock()
	s.wg.Add(3)
	// The manager's writer: drains the stream's frames, one flush per
	// batch, as the hub's writer does.
	go func() {
		defer s.wg.Done()
		defer fromManager.Close()
		bw := bufio.NewWriter(fromManager)
		enc := json.NewEncoder(bw)
		for f := range st.out {
			if enc.Encode(f) != nil {
				return
			}
			if len(st.out) == 0 && bw.Flush() != nil {
				return
			}
		}
	}()
	// The manager's reader: each Result goes to the attempt it answers,
	// if this stream holds it.
	go func() {
		defer s.wg.Done()
		dec := json.NewDecoder(bufio.NewReader(toManager))
		for {
			var f workerproto.WorkerFrame
			if dec.Decode(&f) != nil {
				return
			}
			if f.Result == nil {
				continue
			}
			k := attemptKey{f.Result.ID, f.Result.Attempt}
			s.mu.Lock()
			ch, ok := s.attempts[k]
			if ok {
				delete(s.attempts, k)
				st.busy--
				s.free.Signal()
			}
			s.mu.Unlock()
			if ok {
				ch <- *f.Result
			}
		}
	}()
	// The worker: decodes each task, runs it (a no-op that reports when it
	// started) and answers on the same stream.
	go func() {
		defer s.wg.Done()
		defer fromWorker.Close()
		dec := json.NewDecoder(bufio.NewReader(toWorker))
		bw := bufio.NewWriter(fromWorker)
		enc := json.NewEncoder(bw)
		for {
			var f workerproto.ManagerFrame
			if dec.Decode(&f) != nil {
				return
			}
			if f.Task == nil {
				continue
			}
			r := workerproto.WorkerFrame{Result: &workerproto.DirectResult{ID: f.Task.ID, Attempt: f.Task.Attempt,
				Success: true, Output: workerOutput(time.Now())}}
			if enc.Encode(r) != nil || bw.Flush() != nil {
				return
			}
		}
	}()
}

// run hands attempt a of the command of queue to the least loaded stream
// with a free slot, waiting for one if all are full, and returns its
// result and when the worker started it.
func (s *shard) run(ctx context.Context, queue string, a lanequeue.Attempt) (lanequeue.Result, time.Time, error) {
	switch s.mode {
	case dispatchNone:
		return lanequeue.Result{Success: true}, time.Now(), nil
	case dispatchHub:
		r, err := s.hub.Run(ctx, &direct.Task{Namespace: "default", Queue: queue, Lane: a.Lane, Session: a.SessionKey,
			ID: a.ID, CommandType: a.CommandType, Payload: a.Payload}, a)
		if err != nil {
			return r, time.Time{}, err
		}
		started, err := startedAt(r.Output)
		return r, started, err
	}
	k := attemptKey{a.ID, a.Number}
	ch := make(chan workerproto.DirectResult, 1)
	s.mu.Lock()
	var pick *stream
	for pick == nil {
		for _, st := range s.streams {
			if st.busy < st.capacity && (pick == nil || st.busy < pick.busy) {
				pick = st
			}
		}
		if pick == nil {
			s.free.Wait()
		}
	}
	pick.busy++
	s.attempts[k] = ch
	s.mu.Unlock()
	pick.out <- workerproto.ManagerFrame{Task: &workerproto.DirectTask{ID: a.ID, Attempt: a.Number,
		Namespace: "default", Queue: queue, Lane: a.Lane, Session: a.SessionKey, CommandType: a.CommandType,
		Payload: a.Payload}}
	select {
	case r := <-ch:
		started, err := startedAt(r.Output)
		return lanequeue.Result{Success: r.Success, Output: r.Output}, started, err
	case <-ctx.Done():
		return lanequeue.Result{}, time.Time{}, ctx.Err()
	}
}

// workerOutput is the output of the simulated workers' no-op: when it
// started, in Unix nanoseconds.
func workerOutput(started time.Time) json.RawMessage {
	return append(strconv.AppendInt([]byte(`{"startedAt":`), started.UnixNano(), 10), '}')
}

// startedAt reads workerOutput.
func startedAt(output []byte) (time.Time, error) {
	var out struct {
		StartedAt int64 `json:"startedAt"`
	}
	if err := json.Unmarshal(output, &out); err != nil || out.StartedAt == 0 {
		return time.Time{}, fmt.Errorf("a worker's output %q has no start time", output)
	}
	return time.Unix(0, out.StartedAt), nil
}

// errUnknownQueue is a submission to a queue the shard does not own.
var errUnknownQueue = errors.New("the shard does not own this LaneQueue")

// submit submits one command of session in queue, with a handler that
// reports through observe when its attempt was granted and started.
func (s *shard) submit(queue, session string, observe func(grant, start time.Duration)) (*lanequeue.Ticket, error) {
	return s.submitCommand(queue, session, "read", []byte(`{"path":"README.md"}`), time.Now(), observe)
}

// submitCommand submits a command of type typ with payload, whose
// latencies observe measures from t0.
func (s *shard) submitCommand(queue, session, typ string, payload []byte, t0 time.Time, observe func(grant, start time.Duration)) (*lanequeue.Ticket, error) {
	q, ok := s.queues[queue]
	if !ok {
		return nil, errUnknownQueue
	}
	h := lanequeue.HandlerFunc(func(ctx context.Context, a lanequeue.Attempt) (lanequeue.Result, error) {
		granted := time.Since(t0)
		r, started, err := s.run(ctx, queue, a)
		if err == nil && observe != nil {
			observe(granted, started.Sub(t0))
		}
		return r, err
	})
	return q.Submit(lanequeue.Command{SessionKey: session, Type: typ, Lane: "query",
		Payload: payload, Handler: h, InHandler: true})
}

// close stops the shard's engines and streams.
func (s *shard) close() {
	if s.hub != nil {
		s.hub.Close()
	}
	for _, q := range s.queues {
		q.Close()
	}
	s.mu.Lock()
	for _, st := range s.streams {
		close(st.out)
	}
	s.streams = nil
	s.mu.Unlock()
	s.wg.Wait()
}
