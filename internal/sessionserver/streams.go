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
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// Defaults of the bounds on long-lived calls.
const (
	// DefaultMaxStreamsPerCaller bounds the event streams one caller (a
	// TokenReview username) holds open at once; DefaultMaxStreamsPerSession
	// those of one session, whoever opened them.
	DefaultMaxStreamsPerCaller  = 32
	DefaultMaxStreamsPerSession = 16
	// DefaultMaxWaitsPerCaller bounds the calls one caller has waiting at
	// once (submissions waiting for their grant or result, GET with wait);
	// DefaultMaxWaitsPerSession those on one session.
	DefaultMaxWaitsPerCaller  = 512
	DefaultMaxWaitsPerSession = 256
)

// eventStreamError is the type of the last event of a stream whose caller
// was refused on a later authorization; its error is "<code>: <message>",
// such as "Forbidden: user ... may not get ...".
const eventStreamError = "error"

// longKind is what a long-lived call holds while it lasts.
type longKind int

const (
	// shortCall is a call that answers at once.
	shortCall longKind = iota
	// eventStream is an event stream: it lasts until the caller leaves.
	eventStream
	// waitingCall waits up to MaxWait for a command (POST /commands).
	waitingCall
	// waitingIfAsked waits when its wait parameter asks it to (GET with
	// wait).
	waitingIfAsked
)

// of is the kind of the call r: waitingIfAsked resolves to waitingCall or
// shortCall.
func (k longKind) of(r *http.Request) longKind {
	if k != waitingIfAsked {
		return k
	}
	if d, err := time.ParseDuration(r.URL.Query().Get("wait")); err == nil && d > 0 {
		return waitingCall
	}
	return shortCall
}

func (k longKind) String() string {
	if k == eventStream {
		return "event streams"
	}
	return "waiting calls"
}

// longLimits bound the long-lived calls of one kind. sessionSource names
// the setting of perSession for a refusal's message; the manager's flag
// when empty.
type longLimits struct {
	perCaller, perSession int
	sessionSource         string
}

// longLedger counts the long-lived calls open, per caller and per session.
type longLedger struct {
	mu        sync.Mutex
	byCaller  map[callerKey]int
	bySession map[sessionKey]int
}

type callerKey struct {
	kind   longKind
	caller string
}

type sessionKey struct {
	kind    longKind
	session types.NamespacedName
}

// acquire counts in one call of kind by caller on session, or refuses it
// 429 RateLimited past a bound; release counts it out.
func (l *longLedger) acquire(kind longKind, lim longLimits, caller string, session types.NamespacedName) (release func(), err error) {
	ck, sk := callerKey{kind, caller}, sessionKey{kind, session}
	l.mu.Lock()
	defer l.mu.Unlock()
	flag := "streams"
	if kind != eventStream {
		flag = "waits"
	}
	switch {
	case lim.perCaller > 0 && l.byCaller[ck] >= lim.perCaller:
		return nil, &sessionapi.Error{Status: http.StatusTooManyRequests, Code: sessionapi.CodeRateLimited, RetryAfter: time.Second,
			Message: fmt.Sprintf("user %q has %d %s open, the most one caller may (--session-api-max-%s-per-caller); close one first",
				caller, lim.perCaller, kind, flag)}
	case lim.perSession > 0 && l.bySession[sk] >= lim.perSession:
		source := cmp.Or(lim.sessionSource, "--session-api-max-"+flag+"-per-session")
		return nil, &sessionapi.Error{Status: http.StatusTooManyRequests, Code: sessionapi.CodeRateLimited, RetryAfter: time.Second,
			Message: fmt.Sprintf("session %q has %d %s open, the most one session may (%s); close one first",
				session.Name, lim.perSession, kind, source)}
	}
	if l.byCaller == nil {
		l.byCaller, l.bySession = map[callerKey]int{}, map[sessionKey]int{}
	}
	l.byCaller[ck]++
	l.bySession[sk]++
	longCalls.WithLabelValues(kind.label()).Inc()
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.byCaller[ck]--; l.byCaller[ck] <= 0 {
				delete(l.byCaller, ck)
			}
			if l.bySession[sk]--; l.bySession[sk] <= 0 {
				delete(l.bySession, sk)
			}
			longCalls.WithLabelValues(kind.label()).Dec()
		})
	}, nil
}

// open returns how many calls of kind caller and session hold.
func (l *longLedger) open(kind longKind, caller string, session types.NamespacedName) (int, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.byCaller[callerKey{kind, caller}], l.bySession[sessionKey{kind, session}]
}

func (k longKind) label() string {
	if k == eventStream {
		return "stream"
	}
	return "wait"
}

// reviewTTLer is an Authorizer whose answers are reused for a while
// (KubeAuthorizer).
type reviewTTLer interface{ ReviewTTL() time.Duration }

// reauthorizeInterval is how often a long-lived call is authorized again:
// ReauthorizeInterval, else half the Authorizer's review TTL, so that a
// call outlives a revoked permission by at most one and a half TTLs.
func (s *Server) reauthorizeInterval() time.Duration {
	if s.ReauthorizeInterval > 0 {
		return s.ReauthorizeInterval
	}
	ttl := DefaultReviewTTL
	if t, ok := s.Auth.(reviewTTLer); ok && t.ReviewTTL() > 0 {
		ttl = t.ReviewTTL()
	}
	return ttl / 2
}

// errRevoked tells a long-lived call that its caller may no longer make it.
type errRevoked struct{ err *sessionapi.Error }

func (e errRevoked) Error() string { return e.err.Error() }

// reauthorize returns the context of the long-lived call r of sc, which
// ends once the caller may no longer make it: every reauthorizeInterval its
// token is reviewed again and its access to each of verbs, and a refusal
// (Unauthenticated or Forbidden) ends the context with the refusal as its
// cause (revoked). An answer that is not a refusal (the API server
// unreachable) leaves the call open until the next time. stop ends the
// checks.
func (s *Server) reauthorize(r *http.Request, sc *sessionCall, verbs []string) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(r.Context())
	every := s.reauthorizeInterval()
	t := s.Clock.NewTicker(every)
	done := make(chan struct{})
	go func() {
		defer t.Stop()
		check := withAdmission(ctx, &reviewAdmission{addr: clientAddr(r)})
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C():
			}
			if err := s.stillAllowed(check, r, sc, verbs); err != nil {
				cancel(errRevoked{err})
				return
			}
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			close(done)
			cancel(nil)
		})
	}
}

// refusalOf is err when it refuses the caller (Unauthenticated or
// Forbidden), nil for any other error (the API server unreachable), which
// leaves a long-lived call open until the next check.
func refusalOf(err error) *sessionapi.Error {
	var e *sessionapi.Error
	if errors.As(err, &e) && (e.Code == sessionapi.CodeUnauthenticated || e.Code == sessionapi.CodeForbidden) {
		return e
	}
	return nil
}

// stillAllowed returns the refusal of sc's caller, if its token or its
// access to one of verbs no longer holds.
func (s *Server) stillAllowed(ctx context.Context, r *http.Request, sc *sessionCall, verbs []string) *sessionapi.Error {
	caller, err := s.Auth.Authenticate(ctx, r)
	if err != nil {
		return refusalOf(err)
	}
	if caller.Username != sc.caller.Username {
		return apiErrorf(http.StatusForbidden, sessionapi.CodeForbidden, "the token now names user %q, not %q", caller.Username, sc.caller.Username)
	}
	for _, verb := range verbs {
		if err := s.Auth.Authorize(ctx, caller, sc.key.Namespace, sc.key.Name, verb); err != nil {
			if e := refusalOf(err); e != nil {
				return e
			}
		}
	}
	return nil
}

// revoked returns the refusal that ended the long-lived call's context, or
// nil when it did not end that way.
func revoked(ctx context.Context) *sessionapi.Error {
	var e errRevoked
	if errors.As(context.Cause(ctx), &e) {
		return e.err
	}
	return nil
}
