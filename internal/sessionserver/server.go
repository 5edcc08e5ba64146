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
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/budget"
	"github.com/agentlane/agentlane/internal/direct"
	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/scheduling"
	"github.com/agentlane/agentlane/internal/sessionstore"
	"github.com/agentlane/agentlane/internal/workerproto"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// Defaults of Server.
const (
	// DefaultMaxWait caps how long one call waits for a grant or a result.
	DefaultMaxWait = 5 * time.Minute
	// DefaultKeepEnded is how long an ended command stays visible to GET
	// after it ended (External commands stay visible through their
	// ExternalTask as long as it is kept).
	DefaultKeepEnded = 10 * time.Minute
	// keepAliveInterval is how often an idle event stream sends a comment.
	keepAliveInterval = 15 * time.Second
	// maxBody bounds request bodies.
	maxBody = 4 << 20
	// DefaultMaxPayloadBytes bounds one command's payload: below maxBody,
	// so that a handful of callers cannot hold the manager's memory with
	// commands that wait in their lanes.
	DefaultMaxPayloadBytes = 256 << 10
)

// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Config is what the Session API is built from (New). Schedulers, Budgets,
// Client, Reader and Auth are required; every other field is optional, and
// New fills the zero ones with their defaults.
type Config struct {
	// Addr is the address to listen on, such as ":8443".
	Addr string
	// TLS is how the API serves TLS; by default with a certificate it
	// generates.
	TLS TLS
	// Client reads AgentSessions and ExternalTasks (from the manager's
	// cache) and creates ExternalTasks.
	Client client.Client
	// Reader reads around the cache: the Secret of a generated
	// certificate (TLS.Secret) and the sessions the delegation controller
	// just created; the manager's API reader.
	Reader client.Reader
	// Schedulers are the manager's lane schedulers.
	Schedulers *scheduling.Schedulers
	// Budgets is the manager's budget ledger, shared with the AgentSession
	// controller: the API checks and records consumption through it.
	Budgets *budget.Ledger
	// Checkpoints, when set, is told of every checkpoint the API saves
	// (the AgentSession controller's passivation clock).
	Checkpoints CheckpointObserver
	// Leading, when set, is closed once this manager replica leads
	// (manager.Manager.Elected). Until then the API listens but answers
	// every session call 503 NotLeader: a standby runs no schedulers.
	Leading <-chan struct{}
	// Auth authenticates and authorizes every session call.
	Auth Authorizer
	// Recorder, when set, records cluster events (peer invocations) as
	// Kubernetes Events on the AgentSession.
	Recorder events.EventRecorder
	// Clock is the server's clock; the real clock when nil.
	Clock clock.WithTicker
	// IDs names the commands and messages submitted without an id;
	// lowercase ULIDs when nil. Sequential ids with a fake clock make a run
	// replay to the same ids.
	IDs lanequeue.IDGenerator
	// StartedAt is when this manager run began; Clock.Now() in New when
	// zero. Event ids continue above it, and command ids issued
	// before it are answered Interrupted (see restart.go).
	StartedAt time.Time
	// MaxWait caps how long a call waits; DefaultMaxWait when zero.
	MaxWait time.Duration
	// RetainedEvents caps the events each session's log keeps for
	// reconnecting streams, whatever the session's
	// spec.retention.maxTraceEvents asks for; DefaultRetainedEvents when
	// zero.
	RetainedEvents int
	// Store keeps the sessions' checkpoints; nil means the manager runs
	// without a session store and the checkpoint routes answer NoStore.
	Store sessionstore.Store
	// MaxPayloadBytes bounds the payload of one submitted command;
	// DefaultMaxPayloadBytes when zero. Larger submissions get 413 TooLarge.
	MaxPayloadBytes int
	// Rate is the requests per second one caller (a TokenReview username)
	// may sustain; DefaultRate when zero, no limit when negative. Burst is
	// how many it may make at once; DefaultBurst when zero. Over them a call
	// gets 429 RateLimited with Retry-After.
	Rate  float64
	Burst int
	// FailedAuthRate is the requests per second that fail authentication
	// one client address may sustain, FailedAuthBurst how many it may send
	// at once; DefaultFailedAuthRate and DefaultFailedAuthBurst when zero,
	// no limit when FailedAuthRate is negative. Past them every request of
	// the address gets 429 RateLimited before its token is reviewed.
	FailedAuthRate  float64
	FailedAuthBurst int
	// MaxPendingPerSession and MaxPendingBytesPerSession bound one
	// session's pending commands (submitted through the API, not yet ended)
	// and their payload bytes; MaxPendingBytes bounds the payload bytes of
	// every session's together. Zero means the Default of each. A
	// submission over any gets 429 QueueFull.
	MaxPendingPerSession      int
	MaxPendingBytesPerSession int64
	MaxPendingBytes           int64
	// StoreBounds bound what messages and checkpoints make the manager
	// hold and write (storebounds.go).
	StoreBounds StoreBounds
	// Delegations bound the delegations of each session and namespace
	// (delegation.go).
	Delegations DelegationBounds
	// MaxStreamsPerCaller and MaxStreamsPerSession bound the event streams
	// open at once of one caller (a TokenReview username) and on one
	// session; MaxWaitsPerCaller and MaxWaitsPerSession the calls waiting
	// for a command (POST /commands, GET /commands/{id} with wait). Zero
	// means the Default of each, negative no bound. Past them a call gets
	// 429 RateLimited; its place is given back when it ends.
	MaxStreamsPerCaller  int
	MaxStreamsPerSession int
	MaxWaitsPerCaller    int
	MaxWaitsPerSession   int
	// ReauthorizeInterval is how often a long-lived call (an event stream,
	// a waiting call) reviews its caller's token and access again, and ends
	// once refused; half the Authorizer's review TTL when zero.
	ReauthorizeInterval time.Duration
	// MaxConnections bounds the connections open at once,
	// MaxConnectionsPerAddress those of one client address; a connection
	// past them is closed at once. Zero means the Default of each, negative
	// no bound.
	MaxConnections           int
	MaxConnectionsPerAddress int
	// MaxReviewsInFlight and MaxReviewsInFlightPerAddress are handed to a
	// KubeAuthorizer Auth that sets none of its own, in New
	// (KubeAuthorizer.MaxReviewsInFlight).
	MaxReviewsInFlight           int
	MaxReviewsInFlightPerAddress int
	// ReadTimeout bounds the reading of a request, WriteTimeout the writing
	// of a response (a waiting call has it from the end of its wait, an
	// event stream from each write), IdleTimeout how long a keep-alive
	// connection waits for its next request; MaxHeaderBytes bounds a
	// request's header, HTTP2MaxConcurrentStreams the requests in flight
	// on one HTTP/2 connection. Zero means the Default of each.
	ReadTimeout               time.Duration
	WriteTimeout              time.Duration
	IdleTimeout               time.Duration
	MaxHeaderBytes            int
	HTTP2MaxConcurrentStreams int
	// RefusalHold is how long a 429 answer is held before it is sent, at
	// most its Retry-After (holdRefusal); zero sends it at once. The
	// manager holds for DefaultRefusalHold.
	RefusalHold time.Duration
	// Replica names this manager replica (its pod) to the Direct workers.
	Replica string
	// MaxDirectWorkers and MaxDirectWorkersPerNamespace bound the Direct
	// workers' streams (direct.Options); zero means the dispatcher's
	// defaults.
	MaxDirectWorkers             int
	MaxDirectWorkersPerNamespace int
	// RuntimePods is the cache of runtime pods, warm and adopted, that the
	// assignment route reads (assignment.go), the manager's; without it the
	// route answers 503. Assignments bound its waiting calls.
	RuntimePods PodCache
	Assignments AssignmentBounds
}

// Server is the Session API: agent runtimes submit commands into their
// session's lanes, post inbound messages, follow the session's events and
// read its queue, over HTTP/JSON. It runs in the manager beside the
// controllers and reaches the same schedulers. Build it with New; its
// routes (routes()) are answered in one file per resource:
// routes_commands.go, routes_messages.go, routes_events.go,
// routes_queue.go, external.go, budget.go, checkpoints.go, delegation.go.
type Server struct {
	// Config is what New was given, with the defaults filled in. Set
	// before the server starts; read only afterwards, except for what a
	// test changes between calls.
	Config

	// callers holds a token bucket per caller.
	callers atomic.Pointer[keyedLimiter]
	// failedAuth holds a token bucket per client address, taken from by
	// each request that fails authentication.
	failedAuth atomic.Pointer[keyedLimiter]
	// pending accounts the commands submitted and not yet ended.
	pending *pendingLedger
	// storeLimits bound checkpoint saves per session and namespace.
	storeLimits storeLimits
	// long counts the long-lived calls open.
	long longLedger
	// refusals counts the 429 answers being held.
	refusals refusalHolds
	// delegations admits delegations against Delegations.
	delegations delegationAdmission

	hub   *eventHub
	calls calls
	ids   lanequeue.IDGenerator
	log   logr.Logger
	// serving is closed once this replica leads (Leading) and its run's
	// StartedAt is final; session calls wait for it.
	serving chan struct{}
	// startedAtSet tells that the caller chose StartedAt.
	startedAtSet bool
	// ready is closed once the listener is bound; boundAddr is its address.
	ready     chan struct{}
	boundAddr string
	// tls is the certificate served, unless TLS.InsecureHTTP.
	tls *serving

	// inboxes keep the sessions' queued messages in the session store.
	inboxes *inboxKeeper

	// direct hands the attempts of Direct lanes to the workers streaming
	// from this replica while it leads (direct.go).
	direct *direct.Hub
	// workerNames are the names the Direct workers' streams hold.
	workerNames workerNames
	// stopping is closed when the server stops: calls waiting for a
	// Direct command answer Interrupted.
	stopping chan struct{}
	// assignments are the calls of warm pods waiting for an assignment.
	assignments assignmentWaits
}

// CheckpointObserver is told when a session saved a checkpoint through the
// API, before status.lastCheckpoint shows it.
type CheckpointObserver interface {
	CheckpointSaved(session types.NamespacedName, at time.Time)
}

// Observer is what the schedulers report session events to: the Observer
// hook the caller binds (scheduling.Hooks).
func (s *Server) Observer() scheduling.SessionObserver { return s.hub }

// New builds the Session API from cfg: it checks the dependencies and
// fills every default, in this one place. The server serves once added to
// the manager (it is a manager.Runnable); its Observer is the schedulers'
// Observer hook (scheduling.Hooks), bound by the caller.
func New(cfg Config) (*Server, error) {
	var missing []string
	for name, set := range map[string]bool{"Schedulers": cfg.Schedulers != nil, "Budgets": cfg.Budgets != nil,
		"Client": cfg.Client != nil, "Reader": cfg.Reader != nil, "Auth": cfg.Auth != nil} {
		if !set {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return nil, fmt.Errorf("session API: New needs %s", strings.Join(missing, ", "))
	}
	s := &Server{Config: cfg}
	if s.Clock == nil {
		s.Clock = clock.RealClock{}
	}
	if s.MaxPendingPerSession <= 0 {
		s.MaxPendingPerSession = DefaultMaxPendingPerSession
	}
	if s.MaxPendingBytesPerSession <= 0 {
		s.MaxPendingBytesPerSession = DefaultMaxPendingBytesPerSession
	}
	if s.MaxPendingBytes <= 0 {
		s.MaxPendingBytes = DefaultMaxPendingBytes
	}
	s.pending = newPendingLedger(pendingLimits{perSession: int64(s.MaxPendingPerSession),
		perSessionBytes: s.MaxPendingBytesPerSession, totalBytes: s.MaxPendingBytes})
	s.startedAtSet = !s.StartedAt.IsZero()
	if s.StartedAt.IsZero() {
		s.StartedAt = s.Clock.Now()
	}
	s.hub = newEventHub(s.RetainedEvents, eventIDBase(s.StartedAt), s.Clock, &s.calls, s.pending)
	if s.MaxWait <= 0 {
		s.MaxWait = DefaultMaxWait
	}
	if s.MaxPayloadBytes <= 0 {
		s.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	if s.Rate == 0 {
		s.Rate = DefaultRate
	}
	if s.Burst <= 0 {
		s.Burst = DefaultBurst
	}
	s.callers.Store(newKeyedLimiter(s.Rate, s.Burst, DefaultMaxCallers, s.Clock))
	if s.FailedAuthRate == 0 {
		s.FailedAuthRate = DefaultFailedAuthRate
	}
	if s.FailedAuthBurst <= 0 {
		s.FailedAuthBurst = DefaultFailedAuthBurst
	}
	s.failedAuth.Store(newKeyedLimiter(s.FailedAuthRate, s.FailedAuthBurst, DefaultMaxCallers, s.Clock))
	s.MaxStreamsPerCaller = orDefault(s.MaxStreamsPerCaller, DefaultMaxStreamsPerCaller)
	s.MaxStreamsPerSession = orDefault(s.MaxStreamsPerSession, DefaultMaxStreamsPerSession)
	s.MaxWaitsPerCaller = orDefault(s.MaxWaitsPerCaller, DefaultMaxWaitsPerCaller)
	s.MaxWaitsPerSession = orDefault(s.MaxWaitsPerSession, DefaultMaxWaitsPerSession)
	s.MaxConnections = orDefault(s.MaxConnections, DefaultMaxConnections)
	s.MaxConnectionsPerAddress = orDefault(s.MaxConnectionsPerAddress, DefaultMaxConnectionsPerAddress)
	s.ReadTimeout = orDefault(s.ReadTimeout, DefaultReadTimeout)
	s.WriteTimeout = orDefault(s.WriteTimeout, DefaultWriteTimeout)
	s.IdleTimeout = orDefault(s.IdleTimeout, DefaultIdleTimeout)
	s.MaxHeaderBytes = orDefault(s.MaxHeaderBytes, DefaultMaxHeaderBytes)
	s.HTTP2MaxConcurrentStreams = orDefault(s.HTTP2MaxConcurrentStreams, DefaultHTTP2MaxConcurrentStreams)
	s.ids = s.IDs
	if s.ids == nil {
		s.ids = lanequeue.NewULIDGenerator(s.Clock, nil)
	}
	s.ready = make(chan struct{})
	s.serving = make(chan struct{})
	s.tls = &serving{}
	s.log = logf.Log.WithName("session-api")
	s.inboxes = newInboxKeeper(s.Store, s.Schedulers, s.log, s.hub.ClusterEvent)
	s.hub.inboxes = s.inboxes
	s.initStoreBounds()
	s.stopping = make(chan struct{})
	s.direct = direct.NewHub(direct.Options{Admit: s.admitWorker, Refresh: s.refreshWorkerToken, Manager: s.Replica, Clock: s.Clock,
		Log: s.log.WithName("direct"), MaxWorkers: s.MaxDirectWorkers, MaxWorkersPerNamespace: s.MaxDirectWorkersPerNamespace})
	if ka, ok := s.Auth.(*KubeAuthorizer); ok {
		ka.MaxReviewsInFlight = cmp.Or(ka.MaxReviewsInFlight, s.MaxReviewsInFlight)
		ka.MaxReviewsInFlightPerAddress = cmp.Or(ka.MaxReviewsInFlightPerAddress, s.MaxReviewsInFlightPerAddress)
	}
	return s, nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: the API
// listens on every replica, so that a call that reaches a standby gets a
// clear 503 NotLeader instead of a refused connection; only the leader,
// which runs the schedulers, serves session calls (see Leading).
func (s *Server) NeedLeaderElection() bool { return false }

// Start serves until ctx ends. It implements manager.Runnable.
func (s *Server) Start(ctx context.Context) error {
	useTLS := !s.TLS.InsecureHTTP
	if useTLS {
		if err := s.LoadTLS(ctx, s.Client, s.Reader); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("session API: listen on %s: %w", s.Addr, err)
	}
	s.boundAddr = ln.Addr().String()
	ln = newConnLimiter(ln, s.MaxConnections, s.MaxConnectionsPerAddress)
	srv := s.httpServer()
	// Calls end with ctx, but only once stop has told the calls waiting
	// for a Direct command that they are interrupted.
	base, endCalls := context.WithCancel(context.WithoutCancel(ctx))
	defer endCalls()
	srv.BaseContext = func(net.Listener) context.Context { return base }
	if useTLS {
		srv.TLSConfig = s.tlsConfig(ctx)
	}
	s.lead(ctx)
	close(s.ready)
	go s.sweep(ctx)
	errc := make(chan error, 1)
	go func() {
		if useTLS {
			errc <- srv.ServeTLS(ln, "", "")
		} else {
			errc <- srv.Serve(ln)
		}
	}()
	s.log.Info("Serving the Session API", "address", s.boundAddr, "tls", useTLS)
	select {
	case err := <-errc:
		s.stop()
		return fmt.Errorf("session API: %w", err)
	case <-ctx.Done():
	}
	s.stop()
	endCalls()
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(shutdown)
}

// stop ends this run's Direct streams and answers the calls that wait for
// a Direct command Interrupted.
func (s *Server) stop() {
	select {
	case <-s.stopping:
		return
	default:
	}
	close(s.stopping)
	s.direct.Close()
}

// stopped tells whether the server stops.
func (s *Server) stopped() bool { return isClosed(s.stopping) }

// DirectHub is the dispatcher of this replica's Direct lanes.
func (s *Server) DirectHub() *direct.Hub { return s.direct }

// BoundAddr waits until the server listens and returns its address.
func (s *Server) BoundAddr(ctx context.Context) (string, error) {
	select {
	case <-s.ready:
		return s.boundAddr, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func (s *Server) sweep(ctx context.Context) {
	t := s.Clock.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			s.calls.sweep(s.Clock.Now(), DefaultKeepEnded)
		}
	}
}

// route is one session route: the method it takes, the access it needs and
// its handler.
type route struct {
	method, path, verb string
	handle             func(http.ResponseWriter, *http.Request, *sessionCall) error
	// long tells whether, and how, the call lasts.
	long longKind
}

// verbs are the access r needs: the route's verb and, for an event stream
// attached as the session's runtime (runtime=true, which takes the
// session's steer messages), VerbRuntime too.
func (rt route) verbs(r *http.Request) []string {
	if rt.long == eventStream && r.URL.Query().Get("runtime") == "true" {
		return []string{rt.verb, VerbRuntime}
	}
	return []string{rt.verb}
}

// sessionCall is one authorized request on one session.
type sessionCall struct {
	key      types.NamespacedName
	session  *agentlanev1alpha1.AgentSession
	queueKey types.NamespacedName
	queue    *lanequeue.Queue
	inbox    *lanequeue.Inbox
	caller   Caller
	// bounds are the session's LaneQueue's bounds, read once per call
	// (sessionBounds).
	bounds *queueBounds
	// lq is the session's LaneQueue, read once per call (laneQueue).
	lq *agentlanev1alpha1.LaneQueue
}

// routes lists the session routes, under
// /v1/namespaces/{namespace}/sessions/{session}.
func (s *Server) routes() []route {
	return []route{
		{http.MethodPost, "/commands", VerbWrite, s.submit, waitingCall},
		{http.MethodGet, "/commands/{id}", VerbRead, s.getCommand, waitingIfAsked},
		{http.MethodPost, "/commands/{id}/result", VerbWrite, s.reportResult, shortCall},
		{http.MethodPost, "/commands/{id}/extend", VerbWrite, s.extendCommand, shortCall},
		{http.MethodPost, "/messages", VerbWrite, s.postMessage, shortCall},
		{http.MethodPost, "/runs/{run}/finish", VerbWrite, s.finishRun, shortCall},
		{http.MethodPost, "/cancel", VerbWrite, s.cancel, shortCall},
		{http.MethodPost, "/lanes/{lane}/clear", VerbWrite, s.clearLane, shortCall},
		{http.MethodGet, "/events", VerbRead, s.events, eventStream},
		{http.MethodGet, "/stats", VerbRead, s.stats, shortCall},
		{http.MethodGet, "/external", VerbRead, s.pendingExternal, shortCall},
		{http.MethodPost, "/external/{id}/complete", verbOfCompletion, s.completeExternal, shortCall},
		{http.MethodPost, "/external/{id}/heartbeat", verbOfCompletion, s.heartbeatExternal, shortCall},
		{http.MethodPut, "/lanes/{lane}/handler", VerbWrite, s.setLaneHandler, shortCall},
		{http.MethodGet, "/deadletters", VerbRead, s.deadLetters, shortCall},
		{http.MethodGet, "/budget", VerbRead, s.getBudget, shortCall},
		{http.MethodPost, "/budget/check", VerbWrite, s.checkBudget, shortCall},
		{http.MethodPost, "/budget/record", VerbWrite, s.recordUsage, shortCall},
		{http.MethodPut, "/checkpoints", VerbWrite, s.saveCheckpoint, shortCall},
		{http.MethodGet, "/checkpoints/latest", VerbRead, s.loadCheckpoint, shortCall},
		{http.MethodGet, "/checkpoints/{run}", VerbRead, s.loadCheckpoint, shortCall},
		{http.MethodPost, "/delegations", VerbWrite, s.delegate, shortCall},
		{http.MethodGet, "/delegations", VerbRead, s.listDelegations, shortCall},
		{http.MethodGet, "/delegations/{id}", VerbRead, s.getDelegation, shortCall},
	}
}

// Handler returns the API's HTTP handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	prefix := "/" + sessionapi.Version + "/namespaces/{namespace}/sessions/{session}"
	// Routes that share a path (GET and POST /delegations) share a handler.
	byPath := map[string][]route{}
	for _, rt := range s.routes() {
		byPath[rt.path] = append(byPath[rt.path], rt)
	}
	for path, rts := range byPath {
		mux.Handle(prefix+path, s.instrument(path, s.sessionHandler(rts...)))
	}
	mux.Handle(workerproto.DirectPath, s.instrument(routeDirectStream, http.HandlerFunc(s.directStream)))
	mux.Handle(assignmentPath, s.instrument(routeAssignment, http.HandlerFunc(s.assignment)))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("ok"))
	})
	mux.HandleFunc("/openapi.yaml", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(sessionapi.OpenAPI)
	})
	mux.Handle("/", s.instrument(routeUnknown, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, routeUnknown, apiErrorf(http.StatusNotFound, sessionapi.CodeNotFound, "no route %s %s", r.Method, r.URL.Path))
	})))
	return mux
}

// sessionHandler authenticates, authorizes and resolves the session before
// rt's handler runs; a refused call changes nothing.
func (s *Server) sessionHandler(rts ...route) http.Handler {
	name := rts[0].path
	methods := make([]string, len(rts))
	for i, rt := range rts {
		methods[i] = rt.method
	}
	allow := strings.Join(methods, ", ")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := slices.Index(methods, r.Method)
		if i < 0 {
			w.Header().Set("Allow", allow)
			s.writeError(w, r, name, apiErrorf(http.StatusMethodNotAllowed, sessionapi.CodeMethodNotAllowed,
				"%s takes %s, not %s", r.URL.Path, strings.Join(methods, " or "), r.Method))
			return
		}
		if !s.leading() {
			// Checked before authentication: a standby reviews no tokens.
			s.writeError(w, r, name, errNotLeader)
			return
		}
		rt := rts[i]
		verbs := rt.verbs(r)
		if rt.verb == verbOfCompletion {
			verbs = []string{s.completionVerb(r)}
		}
		sc, err := s.open(r, verbs...)
		if err == nil {
			r.Body = http.MaxBytesReader(w, r.Body, maxBody)
			err = s.serveCall(w, r, rt, sc, verbs)
		}
		if err != nil {
			s.writeError(w, r, name, err)
		}
	})
}

// serveCall runs rt's handler for the authorized call sc. A call that
// lasts holds a place of its caller's and its session's bounds while it
// runs, gets deadlines that let it last, and is authorized again while it
// lasts (reauthorize).
func (s *Server) serveCall(w http.ResponseWriter, r *http.Request, rt route, sc *sessionCall, verbs []string) error {
	kind := rt.long.of(r)
	if kind == shortCall {
		return rt.handle(w, r, sc)
	}
	lim := longLimits{perCaller: s.MaxWaitsPerCaller, perSession: s.MaxWaitsPerSession}
	if kind == eventStream {
		lim = longLimits{perCaller: s.MaxStreamsPerCaller, perSession: s.MaxStreamsPerSession}
	}
	lim = s.sessionBounds(r.Context(), sc).longCalls(kind, lim)
	release, err := s.long.acquire(kind, lim, sc.caller.Username, sc.key)
	if err != nil {
		return err
	}
	defer release()
	rc := http.NewResponseController(w)
	if kind == eventStream {
		// A stream reads nothing more; it writes with a deadline per write.
		_ = rc.SetReadDeadline(time.Time{})
	} else {
		_ = rc.SetReadDeadline(time.Now().Add(s.MaxWait + s.ReadTimeout))
		s.holdFor(w, s.MaxWait)
	}
	ctx, stop := s.reauthorize(r, sc, verbs)
	defer stop()
	return rt.handle(w, r.WithContext(ctx), sc)
}

// orDefault is v, or def when v is zero; a negative v stays (no bound).
func orDefault[T int | int64 | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// open checks who calls and whether they may, then finds the session and
// its queue's scheduler.
//
// A request whose token must be reviewed pays for the review before it is
// made (reviewAdmission): a flood of bad tokens from one address, however
// concurrent, is reviewed at most its failed-authentication burst times.
// A bad token whose refusal is cached costs no review and is charged after.
func (s *Server) open(r *http.Request, verbs ...string) (*sessionCall, error) {
	key := types.NamespacedName{Namespace: r.PathValue("namespace"), Name: r.PathValue("session")}
	ctx, caller, err := s.authenticate(r.Context(), r)
	if err != nil {
		return nil, err
	}
	for _, verb := range verbs {
		if err := s.Auth.Authorize(ctx, caller, key.Namespace, key.Name, verb); err != nil {
			return nil, err
		}
	}
	sess := &agentlanev1alpha1.AgentSession{}
	if err := s.Client.Get(ctx, key, sess); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, apiErrorf(http.StatusNotFound, sessionapi.CodeSessionNotFound, "AgentSession %q does not exist in namespace %q", key.Name, key.Namespace)
		}
		return nil, err
	}
	if !sess.DeletionTimestamp.IsZero() {
		return nil, apiErrorf(http.StatusNotFound, sessionapi.CodeSessionNotFound, "AgentSession %q is being deleted", key.Name)
	}
	sc := &sessionCall{key: key, session: sess, caller: caller,
		queueKey: types.NamespacedName{Namespace: key.Namespace, Name: sess.Spec.QueueRef.Name}}
	var ok bool
	if sc.queue, sc.inbox, ok = s.Schedulers.Session(sc.queueKey); !ok {
		return nil, apiErrorf(http.StatusServiceUnavailable, sessionapi.CodeSessionNotReady,
			"LaneQueue %q of the session has no running scheduler (does it exist and is it valid?)", sc.queueKey.Name)
	}
	return sc, nil
}

// authenticate tells who sends r and charges them: the review of a token
// that did not prove valid is paid by the address's failed-authentication
// bucket (so a runtime whose token was reviewed keeps working while
// another client of its address, a node or a NAT, floods bad tokens), and
// the caller's request by its rate. The context returned carries the
// review admission for the access reviews that follow.
func (s *Server) authenticate(ctx context.Context, r *http.Request) (context.Context, Caller, error) {
	addr := clientAddr(r)
	failedAuth := s.failedAuth.Load()
	adm := &reviewAdmission{addr: addr, failedAuth: failedAuth}
	ctx = withAdmission(ctx, adm)
	caller, err := s.Auth.Authenticate(ctx, r)
	if err != nil {
		if sessionapi.IsCode(err, sessionapi.CodeUnauthenticated) && !adm.wasCharged() {
			if over, after := failedAuth.exhausted(addr); over {
				return ctx, Caller{}, failedAuthError(addr, after)
			}
			failedAuth.allow(addr)
		}
		return ctx, Caller{}, err
	}
	if ok, after := s.callers.Load().allow(caller.Username); !ok {
		return ctx, Caller{}, &sessionapi.Error{Status: http.StatusTooManyRequests, Code: sessionapi.CodeRateLimited, RetryAfter: after,
			Message: fmt.Sprintf("user %q is over its rate of %g requests per second (bursts of %d); retry after %ds",
				caller.Username, s.Rate, s.Burst, retryAfterSeconds(after))}
	}
	return ctx, caller, nil
}

// clientAddr is the host of the request's peer. Forwarding headers are not
// trusted: whoever sends a request could set them.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// apiErrorf returns an API error with a formatted message.
func apiErrorf(status int, code, format string, args ...any) *sessionapi.Error {
	return &sessionapi.Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

func apiError(status int, code, msg string) *sessionapi.Error {
	return &sessionapi.Error{Status: status, Code: code, Message: msg}
}

// schedulerError translates an error of the scheduler.
func schedulerError(err error) error {
	switch {
	case errors.Is(err, lanequeue.ErrUnknownLane):
		return apiError(http.StatusBadRequest, sessionapi.CodeUnknownLane, err.Error())
	case errors.Is(err, lanequeue.ErrCommandTypeRefused):
		return apiError(http.StatusBadRequest, sessionapi.CodeCommandTypeRefused, err.Error())
	case errors.Is(err, lanequeue.ErrDuplicateID):
		return apiError(http.StatusConflict, sessionapi.CodeDuplicateCommand, err.Error())
	case errors.Is(err, lanequeue.ErrInvalidCommand):
		return apiError(http.StatusBadRequest, sessionapi.CodeInvalidRequest, err.Error())
	case errors.Is(err, lanequeue.ErrInvalidDirective):
		return apiError(http.StatusBadRequest, sessionapi.CodeInvalidDirective, err.Error())
	case errors.Is(err, lanequeue.ErrNotFound):
		return apiError(http.StatusNotFound, sessionapi.CodeCommandNotFound, err.Error())
	case errors.Is(err, lanequeue.ErrStaleAttempt):
		return apiError(http.StatusConflict, sessionapi.CodeStaleAttempt, err.Error())
	case errors.Is(err, lanequeue.ErrInboxFull):
		return inboxFull(err)
	case errors.Is(err, lanequeue.ErrDraining):
		return draining(err)
	case errors.Is(err, lanequeue.ErrClosed):
		return apiError(http.StatusServiceUnavailable, sessionapi.CodeSessionNotReady, err.Error())
	}
	return err
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, route string, err error) {
	var e *sessionapi.Error
	if !errors.As(err, &e) {
		s.log.Error(err, "Session API call failed", "method", r.Method, "path", r.URL.Path)
		e = apiError(http.StatusInternalServerError, sessionapi.CodeInternal, err.Error())
	}
	countError(route, r, e.Code)
	s.holdRefusal(w, r, e)
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(e.RetryAfter)))
	}
	writeJSON(w, e.Status, e)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// readJSON decodes the request body into v, refusing unknown fields.
func readJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return apiErrorf(http.StatusRequestEntityTooLarge, sessionapi.CodeTooLarge, "the body is larger than %d bytes", tooLarge.Limit)
		}
		return apiErrorf(http.StatusBadRequest, sessionapi.CodeInvalidRequest, "the body is not valid JSON for this call: %v", err)
	}
	return nil
}

// waitParam reads a duration query parameter, capped at max.
func waitParam(r *http.Request, name string, max time.Duration) (time.Duration, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, apiErrorf(http.StatusBadRequest, sessionapi.CodeInvalidRequest, "%s=%q is not a duration such as 30s", name, v)
	}
	return min(d, max), nil
}

func uintParam(v string) (uint64, bool) {
	if v == "" {
		return 0, true
	}
	n, err := strconv.ParseUint(v, 10, 64)
	return n, err == nil
}
