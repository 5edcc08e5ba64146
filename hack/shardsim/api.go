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
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"time"

	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/workerproto"
)

// The Session API's part, in the api modes: each shard listens on its own
// HTTPS port (HTTP/2, TLS) and answers POST /submit?queue=&session= with a
// JSON body, as the Session API answers POST .../commands for a Direct
// command: it decodes the request, submits the command to the queue's
// engine, waits for its end and writes a JSON answer. The same port serves
// the shard's Direct hub. Not run: the token and access reviews (cached in
// the real server, so a busy caller pays a map lookup), the pending ledger
// and the event hub. In proxy routing, a shard that does not own the queue
// forwards the request to the shard that does over HTTP/2
// (httputil.ReverseProxy), as a replica proxies a session's call to its
// shard's leader.

// submitRequest is the body of POST /submit.
type submitRequest struct {
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload"`
}

// submitAnswer is its answer: the command's state, and the microseconds
// from the request's arrival at the owning shard to its grant and to the
// worker's start.
type submitAnswer struct {
	ID      string `json:"id"`
	State   string `json:"state"`
	GrantUS int64  `json:"grantUs"`
	StartUS int64  `json:"startUs"`
}

// listen starts the HTTPS server of each shard of c; with proxy, a shard
// forwards calls of queues it does not own to their owner.
func (c *cluster) listen(proxy bool) error {
	c.servers = make([]*httptest.Server, len(c.shards))
	muxes := make([]*http.ServeMux, len(c.shards))
	for i := range c.shards {
		muxes[i] = http.NewServeMux()
		c.servers[i] = httptest.NewUnstartedServer(muxes[i])
		c.servers[i].EnableHTTP2 = true
		// The handshakes a closing run cuts short are not news.
		c.servers[i].Config.ErrorLog = log.New(io.Discard, "", 0)
		c.servers[i].StartTLS()
	}
	for i, s := range c.shards {
		proxies := make([]*httputil.ReverseProxy, len(c.shards))
		if proxy {
			for j, to := range c.servers {
				if j == i {
					continue
				}
				target, err := url.Parse(to.URL)
				if err != nil {
					return err
				}
				tr := to.Client().Transport.(*http.Transport).Clone()
				tr.ForceAttemptHTTP2 = true
				proxies[j] = &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) }, Transport: tr}
			}
		}
		if s.hub != nil {
			muxes[i].Handle(workerproto.DirectPath, s.hub)
		}
		muxes[i].HandleFunc("/submit", func(w http.ResponseWriter, r *http.Request) {
			queue, session := r.URL.Query().Get("queue"), r.URL.Query().Get("session")
			if owner := shardOf("default", queue, len(c.shards)); owner != i {
				if p := proxies[owner]; p != nil {
					p.ServeHTTP(w, r)
					return
				}
				http.Error(w, fmt.Sprintf("queue %q is led by shard %d", queue, owner), http.StatusMisdirectedRequest)
				return
			}
			s.serveSubmit(w, r, queue, session)
		})
	}
	return nil
}

// serveSubmit answers a submission of a command of session in queue.
func (s *shard) serveSubmit(w http.ResponseWriter, r *http.Request, queue, session string) {
	arrived := time.Now()
	var req submitRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var grant, start time.Duration
	tk, err := s.submitCommand(queue, session, req.Type, req.Payload, arrived, func(g, st time.Duration) { grant, start = g, st })
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	select {
	case <-tk.Done():
	case <-r.Context().Done():
		return
	}
	o, _ := tk.Outcome()
	w.Header().Set("Content-Type", "application/json")
	// grant and start were set by the command's only attempt, before Done.
	_ = json.NewEncoder(w).Encode(submitAnswer{ID: tk.ID(), State: string(o.State),
		GrantUS: grant.Microseconds(), StartUS: start.Microseconds()})
	if o.State != lanequeue.StateSucceeded {
		s.failures.Add(1)
	}
}
