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
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// Defaults of the bounds on pending commands: submitted through the API and
// not yet ended.
const (
	// DefaultMaxPendingPerSession bounds one session's pending commands.
	DefaultMaxPendingPerSession = 1000
	// DefaultMaxPendingBytesPerSession bounds their payloads' bytes.
	DefaultMaxPendingBytesPerSession = 16 << 20
	// DefaultMaxPendingBytes bounds the payload bytes of every session's
	// pending commands together.
	DefaultMaxPendingBytes = 128 << 20
	// queueFullRetry is the Retry-After of a QueueFull refusal: room comes
	// back as commands end, which the server cannot foresee.
	queueFullRetry = time.Second
)

// pendingLimits are the bounds of a pendingLedger.
type pendingLimits struct {
	perSession, perSessionBytes, totalBytes int64
}

// namespaceBytes is the most bytes one namespace's pending commands may
// hold: share of totalBytes (all of it when share is 0), so that while one
// namespace floods, the rest stays for the others.
func (l pendingLimits) namespaceBytes(share float64) int64 {
	if share <= 0 || share >= 1 {
		return l.totalBytes
	}
	return int64(float64(l.totalBytes) * share)
}

// pendingLedger accounts the commands the API accepted and that have not
// ended, and their payload bytes, per session and in all. A command is
// reserved before it is submitted and released exactly once: when its
// terminal event arrives (succeeded, failed, dead-lettered, cancelled),
// when its submission fails, or when its session is released.
type pendingLedger struct {
	mu     sync.Mutex
	limits pendingLimits
	// sessions holds the count and bytes of every session with a pending
	// command; a session with none has no entry.
	sessions map[types.NamespacedName]*pendingUsage
	// total is the sum of every session's bytes; namespaces holds the sum
	// of the bytes of each namespace's sessions, for the namespaces with a
	// pending command.
	total      int64
	namespaces map[string]int64
	// share is the fraction of totalBytes one namespace may hold.
	share float64
	// byCommand holds the pending entries by namespace and command id, in
	// the order they were reserved: an id can be reused once its command
	// ended, before its terminal event is seen.
	byCommand map[types.NamespacedName][]*pendingEntry
}

type pendingUsage struct {
	count, bytes int64
}

// pendingEntry is one reserved command.
type pendingEntry struct {
	session types.NamespacedName
	id      string
	bytes   int64
}

func newPendingLedger(l pendingLimits) *pendingLedger {
	return &pendingLedger{limits: l, sessions: map[types.NamespacedName]*pendingUsage{},
		byCommand: map[types.NamespacedName][]*pendingEntry{}, namespaces: map[string]int64{}}
}

// setLimits replaces the bounds and returns the previous ones; what is
// pending stays accounted.
func (p *pendingLedger) setLimits(l pendingLimits) pendingLimits {
	p.mu.Lock()
	defer p.mu.Unlock()
	prev := p.limits
	p.limits = l
	return prev
}

// setShare sets the fraction of the server-wide bytes one namespace may
// hold.
func (p *pendingLedger) setShare(share float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.share = share
}

// reserve accounts the session's command id of the given payload size, or
// returns a 429 QueueFull error naming the bound it would cross. The
// session's LaneQueue may lower the per-session bounds (qb).
func (p *pendingLedger) reserve(session types.NamespacedName, id string, bytes int64, qb queueBounds) (*pendingEntry, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	u := p.sessions[session]
	if u == nil {
		u = &pendingUsage{}
	}
	count, size := qb.pendingCommands(p.limits.perSession), qb.pendingBytes(p.limits.perSessionBytes)
	switch {
	case u.count+1 > count.limit:
		return nil, queueFull("session %q has %d pending commands, the most a session may have (%s)",
			session.Name, u.count, count.source)
	case u.bytes+bytes > size.limit:
		return nil, queueFull("session %q has %d bytes of pending payloads; %d more would pass the per-session bound of %d bytes (%s)",
			session.Name, u.bytes, bytes, size.limit, size.source)
	case p.namespaces[session.Namespace]+bytes > p.limits.namespaceBytes(p.share):
		return nil, queueFull("namespace %q holds %d bytes of pending payloads; %d more would pass its share of the server, %d bytes (--session-api-pending-namespace-share of --session-api-max-pending-bytes)",
			session.Namespace, p.namespaces[session.Namespace], bytes, p.limits.namespaceBytes(p.share))
	case p.total+bytes > p.limits.totalBytes:
		return nil, queueFull("the server holds %d bytes of pending payloads; %d more would pass its bound of %d bytes (--session-api-max-pending-bytes)",
			p.total, bytes, p.limits.totalBytes)
	}
	p.sessions[session] = u
	u.count++
	u.bytes += bytes
	p.total += bytes
	p.namespaces[session.Namespace] += bytes
	e := &pendingEntry{session: session, id: id, bytes: bytes}
	k := types.NamespacedName{Namespace: session.Namespace, Name: id}
	p.byCommand[k] = append(p.byCommand[k], e)
	return e, nil
}

func queueFull(format string, args ...any) error {
	e := apiErrorf(http.StatusTooManyRequests, sessionapi.CodeQueueFull, format+"; retry once commands end", args...)
	e.RetryAfter = queueFullRetry
	return e
}

// release gives back e's reservation, if it still holds one.
func (p *pendingLedger) release(e *pendingEntry) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := types.NamespacedName{Namespace: e.session.Namespace, Name: e.id}
	if i := slices.Index(p.byCommand[k], e); i >= 0 {
		p.removeLocked(k, i)
	}
}

// ended gives back the oldest reservation of the command id of the
// session, if any: the command's terminal event.
func (p *pendingLedger) ended(session types.NamespacedName, id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := types.NamespacedName{Namespace: session.Namespace, Name: id}
	if i := slices.IndexFunc(p.byCommand[k], func(e *pendingEntry) bool { return e.session == session }); i >= 0 {
		p.removeLocked(k, i)
	}
}

// sessionReleased gives back every reservation of the deleted session.
func (p *pendingLedger) sessionReleased(session types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sessions[session] == nil {
		return
	}
	for k, es := range p.byCommand {
		for i := len(es) - 1; i >= 0; i-- {
			if es[i].session == session {
				p.removeLocked(k, i)
				es = p.byCommand[k]
			}
		}
	}
}

func (p *pendingLedger) removeLocked(k types.NamespacedName, i int) {
	e := p.byCommand[k][i]
	if rest := slices.Delete(p.byCommand[k], i, i+1); len(rest) > 0 {
		p.byCommand[k] = rest
	} else {
		delete(p.byCommand, k)
	}
	u := p.sessions[e.session]
	u.count--
	u.bytes -= e.bytes
	p.total -= e.bytes
	if u.count == 0 {
		delete(p.sessions, e.session)
	}
	p.namespaces[e.session.Namespace] -= e.bytes
	if p.namespaces[e.session.Namespace] == 0 {
		delete(p.namespaces, e.session.Namespace)
	}
}

// usage returns the session's pending commands and bytes, and the bytes of
// all sessions.
func (p *pendingLedger) usage(session types.NamespacedName) (count, bytes, total int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if u := p.sessions[session]; u != nil {
		count, bytes = u.count, u.bytes
	}
	return count, bytes, p.total
}
