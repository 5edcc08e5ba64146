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
	"net/http"
	"sync"
	"time"

	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// DefaultRefusalHold is how long the manager holds a 429 answer before it
// sends it (cmd/manager's --session-api-refusal-hold).
const DefaultRefusalHold = time.Second

// refusalHolds counts the 429 answers being held, per client address and in
// all, so that holding them never takes more than half of the connections
// the server keeps, or half of one address's.
type refusalHolds struct {
	mu     sync.Mutex
	total  int
	byAddr map[string]int
}

// take counts in one held answer of addr, unless max answers in all or
// perAddr of addr's are held already.
func (h *refusalHolds) take(addr string, max, perAddr int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.total >= max || h.byAddr[addr] >= perAddr {
		return false
	}
	if h.byAddr == nil {
		h.byAddr = map[string]int{}
	}
	h.total++
	h.byAddr[addr]++
	return true
}

func (h *refusalHolds) give(addr string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.total--
	if h.byAddr[addr]--; h.byAddr[addr] <= 0 {
		delete(h.byAddr, addr)
	}
}

// held is how many answers are held, in all and for addr.
func (h *refusalHolds) held(addr string) (total, ofAddr int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.total, h.byAddr[addr]
}

// holdLimits are the most answers held at once, in all and per address:
// half the connection bounds, or 1024 and 128 where those are off.
func (s *Server) holdLimits() (total, perAddr int) {
	total, perAddr = 1024, 128
	if s.MaxConnections > 0 {
		total = max(1, s.MaxConnections/2)
	}
	if s.MaxConnectionsPerAddress > 0 {
		perAddr = max(1, s.MaxConnectionsPerAddress/2)
	}
	return total, perAddr
}

// holdRefusal holds a 429 answer for RefusalHold, or the Retry-After it
// sends (whole seconds, at least one) when that is sooner, before it is
// sent. A client that honours Retry-After
// loses nothing: it would not call again before then. A client that does
// not, and calls again as soon as it is answered, makes at most one call
// per hold on each of its connections instead of one per round trip, so a
// flood of refused calls costs the manager, and the API server behind it,
// little. While half the server's connections, or half of the address's,
// hold an answer, further refusals are sent at once.
func (s *Server) holdRefusal(w http.ResponseWriter, r *http.Request, e *sessionapi.Error) {
	if e.Status != http.StatusTooManyRequests || s.RefusalHold <= 0 {
		return
	}
	// The answer's Retry-After header is in whole seconds, at least one:
	// holding up to it keeps the header true.
	d := min(s.RefusalHold, time.Duration(retryAfterSeconds(e.RetryAfter))*time.Second)
	addr := clientAddr(r)
	total, perAddr := s.holdLimits()
	if !s.refusals.take(addr, total, perAddr) {
		return
	}
	defer s.refusals.give(addr)
	s.holdFor(w, d)
	t := s.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
	case <-r.Context().Done():
	}
}
