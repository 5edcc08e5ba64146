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
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
	"k8s.io/utils/lru"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// The access a Session API call needs, on the subresource agentsessions/api
// of the session: reads and the event stream need get, everything that
// changes the session (commands, reports, messages, cancellation) create.
// An event stream attached as the session's runtime (runtime=true), which
// takes the session's steer messages from its inbox, needs VerbRuntime
// besides get.
const (
	APIResource    = "agentsessions"
	APISubresource = "api"
	VerbRead       = "get"
	VerbWrite      = "create"
	VerbRuntime    = VerbWrite
)

// Caller is who made a request, as the token review established.
type Caller struct {
	Username string
	UID      string
	Groups   []string
	Extra    map[string]authorizationv1.ExtraValue
}

// Authorizer decides who a request comes from and whether they may use a
// session.
type Authorizer interface {
	// Authenticate returns the caller of r, or an Unauthenticated error.
	Authenticate(ctx context.Context, r *http.Request) (Caller, error)
	// Authorize returns nil when the caller may do verb on the session, or a
	// Forbidden error.
	Authorize(ctx context.Context, c Caller, namespace, session, verb string) error
}

// KubeAuthorizer authenticates bearer tokens with the TokenReview API and
// authorizes each call with a SubjectAccessReview on the session's
// agentsessions/api subresource. Answers are cached for TTL, so a busy
// runtime costs the API server about one review per TTL, and a request
// costs at most one TokenReview.
type KubeAuthorizer struct {
	// Client creates the reviews.
	Client client.Client
	// Audiences are the audiences of tokens minted for the Session API;
	// [DefaultAudience] when empty.
	Audiences []string
	// RefuseAPIServerTokens refuses tokens for the API server's own
	// audiences (a service account's default token, a user's kubeconfig
	// token), which can act in the cluster; only tokens for Audiences
	// pass. Accepted by default, for runtimes that send them.
	RefuseAPIServerTokens bool
	// TTL is how long an answer is reused; 10s when zero.
	TTL time.Duration
	// StaleGrace is how long past its TTL an answer is still reused while
	// the API server cannot be asked again (it does not answer, or answers
	// that it is unavailable or overloaded), so that calls keep working
	// through a short outage of the API server; DefaultReviewStaleGrace when
	// zero, never when negative. A revoked token or right may then be
	// honoured up to TTL+StaleGrace after it was revoked, during an outage
	// only.
	StaleGrace time.Duration
	// Clock times the cache; the real clock when nil.
	Clock clock.PassiveClock
	// MaxReviewsInFlight bounds the TokenReviews and SubjectAccessReviews
	// in flight at once, MaxReviewsInFlightPerAddress those caused by one
	// client address (by one caller when the address is not known), so
	// that one address cannot take every slot; DefaultMaxReviewsInFlight
	// and DefaultMaxReviewsInFlightPerAddress when zero. A request that
	// needs a review past them gets 429 RateLimited with Retry-After.
	// Concurrent requests that need the same review share it.
	MaxReviewsInFlight           int
	MaxReviewsInFlightPerAddress int

	initOnce sync.Once
	// callers and grants are the answers, least recently used evicted
	// first once maxCached are kept.
	callers *lru.Cache // [32]byte -> cachedCaller
	grants  *lru.Cache // grantKey -> cachedGrant
	// tokenFlights and grantFlights are the reviews in flight, which
	// concurrent requests for the same answer wait for.
	tokenFlights flights[[32]byte, cachedCaller]
	grantFlights flights[grantKey, cachedGrant]
	// inFlight counts the reviews in flight.
	inFlight reviewGate

	mu sync.Mutex
	// refreshing holds the answers being asked again in the background;
	// refreshes counts those reviews.
	refreshing map[grantKey]bool
	refreshes  sync.WaitGroup
}

// Defaults of KubeAuthorizer.
const (
	// DefaultReviewTTL is how long a review's answer is reused.
	DefaultReviewTTL = 10 * time.Second
	// DefaultReviewStaleGrace is how long past its TTL an answer is reused
	// while the API server cannot be asked (KubeAuthorizer.StaleGrace).
	DefaultReviewStaleGrace = 30 * time.Second
	// DefaultMaxReviewsInFlight bounds the reviews in flight at once.
	DefaultMaxReviewsInFlight = 64
	// DefaultMaxReviewsInFlightPerAddress bounds those of one client
	// address.
	DefaultMaxReviewsInFlightPerAddress = 16
)

type cachedCaller struct {
	caller  Caller
	ok      bool
	reason  string
	expires time.Time
}

type grantKey struct {
	user, namespace, session, verb string
}

type cachedGrant struct {
	allowed bool
	reason  string
	expires time.Time
}

// maxCached bounds each cache; past it the least recently used answer goes.
const maxCached = 10000

func (a *KubeAuthorizer) init() {
	a.initOnce.Do(func() {
		a.callers = lru.New(maxCached)
		a.grants = lru.New(maxCached)
	})
}

func (a *KubeAuthorizer) now() time.Time {
	if a.Clock == nil {
		return clock.RealClock{}.Now()
	}
	return a.Clock.Now()
}

func (a *KubeAuthorizer) ttl() time.Duration {
	if a.TTL <= 0 {
		return DefaultReviewTTL
	}
	return a.TTL
}

// ReviewTTL is how long an answer is reused: a long-lived call is
// authorized again at least this often (reviewTTLer).
func (a *KubeAuthorizer) ReviewTTL() time.Duration { return a.ttl() }

// bearerToken returns the request's bearer token, if any.
func bearerToken(r *http.Request) string {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// Authenticate implements Authorizer.
func (a *KubeAuthorizer) Authenticate(ctx context.Context, r *http.Request) (Caller, error) {
	token := bearerToken(r)
	if token == "" {
		return Caller{}, apiError(http.StatusUnauthorized, sessionapi.CodeUnauthenticated,
			"the request carries no bearer token; send Authorization: Bearer <Kubernetes token>")
	}
	a.init()
	key := sha256.Sum256([]byte(token))
	var c cachedCaller
	v, hit := a.callers.Get(key)
	if hit {
		c = v.(cachedCaller)
	}
	if !hit || a.now().After(c.expires) {
		// A token whose last review found it valid is asked about again
		// without a charge to its address's failed authentications.
		known := hit && c.ok
		var err error
		prev := c
		if c, err = a.tokenFlights.do(ctx, key, func() (cachedCaller, error) { return a.reviewToken(ctx, r, token, key, known) }); err != nil {
			if !hit || !a.staleUsable(prev.expires, err) {
				return Caller{}, err
			}
			c = prev
		}
	}
	if !c.ok {
		msg := "the bearer token is not valid"
		if c.reason != "" {
			msg += ": " + c.reason
		}
		if a.RefuseAPIServerTokens {
			msg += fmt.Sprintf(" (only tokens for the audiences %q are accepted)", a.audiences())
		}
		return Caller{}, apiError(http.StatusUnauthorized, sessionapi.CodeUnauthenticated, msg)
	}
	return c.caller, nil
}

// reviewToken asks the API server who token is and caches the answer for
// TTL. The request's address pays first: one token of its
// failed-authentication bucket, set aside and put back if the token is
// valid (not for a known token, one that proved valid before), and one of
// its slots for reviews in flight.
func (a *KubeAuthorizer) reviewToken(ctx context.Context, r *http.Request, token string, key [32]byte, known bool) (cachedCaller, error) {
	adm := admissionFrom(ctx)
	settle := func(bool) {}
	if !known {
		var err error
		if settle, err = adm.charge(); err != nil {
			return cachedCaller{}, err
		}
	}
	charged := true // unless the token proves valid or no review is made
	defer func() { settle(charged) }()
	release, err := a.admitReview(adm.key(clientAddr(r)))
	if err != nil {
		charged = false
		return cachedCaller{}, err
	}
	defer release()
	now := a.now()
	asked := a.reviewAudiences(token)
	review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: asked}}
	if err := a.Client.Create(ctx, review); err != nil {
		return cachedCaller{}, reviewError("token review", err)
	}
	st := review.Status
	c := cachedCaller{ok: st.Authenticated, reason: st.Error, expires: now.Add(a.ttl())}
	if c.ok && !audienceMatches(asked, st.Audiences) {
		c.ok, c.reason = false, fmt.Sprintf("the token is not for the audiences %q", asked)
	}
	if st.Authenticated {
		c.caller = Caller{Username: st.User.Username, UID: st.User.UID, Groups: st.User.Groups}
		if len(st.User.Extra) > 0 {
			c.caller.Extra = make(map[string]authorizationv1.ExtraValue, len(st.User.Extra))
			for k, v := range st.User.Extra {
				c.caller.Extra[k] = authorizationv1.ExtraValue(v)
			}
		}
	}
	charged = !c.ok
	a.callers.Add(key, c)
	return c, nil
}

// Authorize implements Authorizer. A request that finds its answer in the
// last quarter of its TTL uses it and asks again in the background, so that
// a busy caller's requests do not wait for a review every TTL; no answer is
// used longer than TTL.
func (a *KubeAuthorizer) Authorize(ctx context.Context, c Caller, namespace, session, verb string) error {
	g, err := a.grant(ctx, c, grantKey{user: c.Username, namespace: namespace, session: session, verb: verb})
	if err != nil {
		return err
	}
	if !g.allowed {
		return apiError(http.StatusForbidden, sessionapi.CodeForbidden,
			forbiddenMessage(c.Username, verb, namespace, session))
	}
	return nil
}

// AuthorizeWorker tells whether c may serve the tasks of namespace as a
// Direct worker: whether it has the access a worker of the ExternalTask
// path needs there (patch externaltasks/status). Answers are cached as
// Authorize's are.
func (a *KubeAuthorizer) AuthorizeWorker(ctx context.Context, c Caller, namespace string) error {
	g, err := a.grant(ctx, c, grantKey{user: c.Username, namespace: namespace, verb: workerGrantVerb})
	if err != nil {
		return err
	}
	if !g.allowed {
		return apiErrorf(http.StatusForbidden, sessionapi.CodeForbidden,
			"user %q may not serve the tasks of namespace %q: a Direct worker needs patch on externaltasks/status there, as the workers' role grants", c.Username, namespace)
	}
	return nil
}

// grant returns the cached or reviewed answer for key.
func (a *KubeAuthorizer) grant(ctx context.Context, c Caller, key grantKey) (cachedGrant, error) {
	a.init()
	now := a.now()
	var g cachedGrant
	v, hit := a.grants.Get(key)
	if hit {
		g = v.(cachedGrant)
	}
	a.mu.Lock()
	refresh := hit && !now.After(g.expires) && g.expires.Sub(now) <= a.ttl()/4 && !a.refreshing[key]
	if refresh {
		if a.refreshing == nil {
			a.refreshing = make(map[grantKey]bool)
		}
		a.refreshing[key] = true
	}
	a.mu.Unlock()
	if refresh {
		a.refreshes.Add(1)
		go a.refreshGrant(context.WithoutCancel(ctx), c, key)
	}
	if !hit || now.After(g.expires) {
		fresh, err := a.grantFlights.do(ctx, key, func() (cachedGrant, error) { return a.review(ctx, c, key) })
		if err != nil && hit && a.staleUsable(g.expires, err) {
			return g, nil
		}
		return fresh, err
	}
	return g, nil
}

// staleUsable tells whether an answer that expired at expires may be used
// because asking again failed with err for want of the API server
// (StaleGrace).
func (a *KubeAuthorizer) staleUsable(expires time.Time, err error) bool {
	grace := a.StaleGrace
	if grace == 0 {
		grace = DefaultReviewStaleGrace
	}
	var u unavailableReview
	return grace > 0 && errors.As(err, &u) && !a.now().After(expires.Add(grace))
}

// unavailableReview is a review the API server did not answer, or answered
// that it is unavailable, overloaded or timed out.
type unavailableReview struct{ err *sessionapi.Error }

func (u unavailableReview) Error() string { return u.err.Error() }
func (u unavailableReview) Unwrap() error { return u.err }

// reviewError is the error of a review whose creation failed with err.
func reviewError(what string, err error) error {
	e := apiError(http.StatusInternalServerError, sessionapi.CodeInternal, what+" failed: "+err.Error())
	if apiServerUnavailable(err) {
		return unavailableReview{e}
	}
	return e
}

// apiServerUnavailable tells whether a request that failed with err may
// succeed later: the API server did not answer, or answered that it is
// unavailable, overloaded or timed out.
func apiServerUnavailable(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return true
	}
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsUnexpectedServerError(err)
}

// refreshGrant asks again for an answer that is about to expire.
func (a *KubeAuthorizer) refreshGrant(ctx context.Context, c Caller, key grantKey) {
	defer a.refreshes.Done()
	defer func() {
		a.mu.Lock()
		delete(a.refreshing, key)
		a.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(ctx, refreshTimeout)
	defer cancel()
	_, _ = a.review(ctx, c, key) // on failure the answer expires as usual
}

// refreshTimeout bounds a background review.
const refreshTimeout = 10 * time.Second

// review asks the API server whether c may do key's verb on the session and
// caches the answer for TTL.
func (a *KubeAuthorizer) review(ctx context.Context, c Caller, key grantKey) (cachedGrant, error) {
	release, err := a.admitReview(admissionFrom(ctx).key(c.Username))
	if err != nil {
		return cachedGrant{}, err
	}
	defer release()
	now := a.now()
	attrs := &authorizationv1.ResourceAttributes{
		Namespace:   key.namespace,
		Verb:        key.verb,
		Group:       agentlanev1alpha1.GroupVersion.Group,
		Resource:    APIResource,
		Subresource: APISubresource,
		Name:        key.session,
	}
	if key.verb == workerGrantVerb {
		attrs = &authorizationv1.ResourceAttributes{Namespace: key.namespace, Verb: "patch",
			Group: agentlanev1alpha1.GroupVersion.Group, Resource: "externaltasks", Subresource: "status"}
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: c.Username, UID: c.UID, Groups: c.Groups, Extra: c.Extra, ResourceAttributes: attrs,
	}}
	if err := a.Client.Create(ctx, sar); err != nil {
		return cachedGrant{}, reviewError("access review", err)
	}
	g := cachedGrant{allowed: sar.Status.Allowed && !sar.Status.Denied, reason: sar.Status.Reason, expires: now.Add(a.ttl())}
	a.grants.Add(key, g)
	return g, nil
}

func forbiddenMessage(user, verb, namespace, session string) string {
	return fmt.Sprintf("user %q may not %s %s/%s of AgentSession %q in namespace %q",
		user, verb, APIResource, APISubresource, session, namespace)
}
