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
	"context"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// queueBounds is what a session's LaneQueue (spec.sessionBounds) lowers of
// the manager's per-session bounds. A queue can only lower a bound: each
// method returns the manager's bound when the queue sets none or a larger
// one, and says which of the two is in force, for the refusal's message.
type queueBounds struct {
	queue string
	b     *agentlanev1alpha1.SessionBounds
}

// sessionBounds reads the bounds of sc's LaneQueue from the manager's
// cache, once per call. A queue that cannot be read lowers nothing: the
// manager's bounds hold (the call found the queue's scheduler running a
// moment ago).
func (s *Server) sessionBounds(ctx context.Context, sc *sessionCall) queueBounds {
	if sc.bounds != nil {
		return *sc.bounds
	}
	qb := queueBounds{queue: sc.queueKey.Name}
	if lq, err := s.laneQueue(ctx, sc); err == nil {
		qb.b = lq.Spec.SessionBounds
	} else if !apierrors.IsNotFound(err) {
		s.log.V(1).Info("LaneQueue unreadable, the manager's session bounds hold", "queue", sc.queueKey, "error", err.Error())
	}
	sc.bounds = &qb
	return qb
}

// laneQueue reads sc's LaneQueue from the manager's cache, once per call.
func (s *Server) laneQueue(ctx context.Context, sc *sessionCall) (*agentlanev1alpha1.LaneQueue, error) {
	if sc.lq == nil {
		lq := &agentlanev1alpha1.LaneQueue{}
		if err := s.Client.Get(ctx, sc.queueKey, lq); err != nil {
			return nil, err
		}
		sc.lq = lq
	}
	return sc.lq, nil
}

// bound is a bound in force and where it comes from.
type bound struct {
	limit int64
	// source names the setting, for messages: a manager flag, or the
	// LaneQueue's field.
	source string
	// queue tells that the LaneQueue's field is the bound in force.
	queue bool
}

// lower returns the smaller of the manager's bound (named by flag; a
// negative or zero value means none) and the queue's field, when set.
func (q queueBounds) lower(manager int64, flag string, field string, queue func(*agentlanev1alpha1.SessionBounds) *int64) bound {
	b := bound{limit: manager, source: "--" + flag}
	if q.b == nil {
		return b
	}
	if v := queue(q.b); v != nil && (manager <= 0 || *v < manager) {
		return bound{limit: *v, source: fmt.Sprintf("spec.sessionBounds.%s of LaneQueue %q", field, q.queue), queue: true}
	}
	return b
}

func i32(p *int32) *int64 {
	if p == nil {
		return nil
	}
	v := int64(*p)
	return &v
}

func (q queueBounds) pendingCommands(manager int64) bound {
	return q.lower(manager, "session-api-max-pending-per-session", "maxPendingCommands",
		func(b *agentlanev1alpha1.SessionBounds) *int64 { return i32(b.MaxPendingCommands) })
}

func (q queueBounds) pendingBytes(manager int64) bound {
	return q.lower(manager, "session-api-max-pending-bytes-per-session", "maxPendingBytes",
		func(b *agentlanev1alpha1.SessionBounds) *int64 { return b.MaxPendingBytes })
}

func (q queueBounds) messageBytes(manager int) bound {
	return q.lower(int64(manager), "session-api-max-message-bytes", "maxMessageBytes",
		func(b *agentlanev1alpha1.SessionBounds) *int64 { return i32(b.MaxMessageBytes) })
}

// checkpointBytes lowers the store's bound on one checkpoint (0 when the
// store has none).
func (q queueBounds) checkpointBytes(store int) bound {
	return q.lower(int64(store), "session-store-max-checkpoint-bytes", "maxCheckpointBytes",
		func(b *agentlanev1alpha1.SessionBounds) *int64 { return i32(b.MaxCheckpointBytes) })
}

func (q queueBounds) pendingDelegations(manager int) bound {
	return q.lower(int64(manager), "session-api-max-delegations-pending-per-session", "maxPendingDelegations",
		func(b *agentlanev1alpha1.SessionBounds) *int64 { return i32(b.MaxPendingDelegations) })
}

func (q queueBounds) delegations(manager int) bound {
	return q.lower(int64(manager), "session-api-max-delegations-per-session", "maxDelegations",
		func(b *agentlanev1alpha1.SessionBounds) *int64 { return i32(b.MaxDelegations) })
}

// limitBody refuses a request whose body says it is larger than most with
// 413 TooLarge, its message naming what the body carries (what), what the
// bound is on (within) and the bound in force, before the body is read; the connection closes after the answer rather than reading what
// is left of the body first. A body that says nothing of its length is cut
// at most. A flood of oversized bodies then costs no reading or decoding.
func limitBody(w http.ResponseWriter, r *http.Request, most int64, what, within string, limit bound) error {
	if r.ContentLength > most {
		w.Header().Set("Connection", "close")
		return apiErrorf(http.StatusRequestEntityTooLarge, sessionapi.CodeTooLarge,
			"the %s's body is %d bytes, more than %s within the bound of %d bytes (%s) can take",
			what, r.ContentLength, within, limit.limit, limit.source)
	}
	r.Body = http.MaxBytesReader(w, r.Body, most)
	return nil
}

// longCalls lowers the per-session bound of kind's calls in lim.
func (q queueBounds) longCalls(kind longKind, lim longLimits) longLimits {
	var b bound
	if kind == eventStream {
		b = q.lower(int64(lim.perSession), "session-api-max-streams-per-session", "maxEventStreams",
			func(b *agentlanev1alpha1.SessionBounds) *int64 { return i32(b.MaxEventStreams) })
	} else {
		b = q.lower(int64(lim.perSession), "session-api-max-waits-per-session", "maxWaitingCalls",
			func(b *agentlanev1alpha1.SessionBounds) *int64 { return i32(b.MaxWaitingCalls) })
	}
	lim.perSession, lim.sessionSource = int(b.limit), b.source
	return lim
}
