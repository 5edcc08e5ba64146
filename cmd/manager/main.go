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

// Command manager runs the agentlane operator: the controllers for LaneQueue,
// AgentSession and ExternalTask, the in-process lane schedulers, the Session
// API and the metrics endpoint.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/budget"
	"github.com/agentlane/agentlane/internal/controller"
	"github.com/agentlane/agentlane/internal/delegation"
	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/scheduling"
	"github.com/agentlane/agentlane/internal/servingcert"
	"github.com/agentlane/agentlane/internal/sessionserver"
	"github.com/agentlane/agentlane/internal/tracing"
)

// newScheme holds the Kubernetes types and agentlane's.
func newScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(agentlanev1alpha1.AddToScheme(scheme))
	return scheme
}

// options are the manager's command-line settings.
type options struct {
	metricsAddr      string
	metricsSecure    bool
	probeAddr        string
	pprofAddr        string
	leaderElect      bool
	leaderElectionNS string
	leaderElection   leaderElection
	api              *sessionserver.Config
	sessionAPIURL    string
	tlsSecret        string
	tlsHosts         string
	audiences        string
	apiServerTokens  bool
	sessionStore     string
	store            storeOptions
	idGenerator      string
	delegation       delegation.Bounds
	workerPools      controller.WorkerPoolOptions
	runtimePools     controller.RuntimePoolOptions
	zap              zap.Options
}

// parseFlags reads the command line; the Session API's settings go
// straight into the Config it is built from.
func parseFlags() *options {
	o := &options{api: &sessionserver.Config{}}
	flag.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "Address the Prometheus metrics endpoint binds to; \"0\" disables it.")
	flag.BoolVar(&o.metricsSecure, "metrics-secure", true, "Serve the metrics over HTTPS to callers whose bearer token (TokenReview) may get the non-resource URL /metrics (SubjectAccessReview), such as through the metrics-reader ClusterRole; false serves them over plain HTTP to anyone.")
	flag.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address the liveness and readiness probes bind to; \"0\" disables them.")
	flag.StringVar(&o.pprofAddr, "pprof-bind-address", "0", "Address a net/http/pprof endpoint (/debug/pprof/) binds to, for heap and CPU profiles of the manager; \"0\" (the default) disables it. It has no authentication: bind it to loopback (reach it with kubectl port-forward) or leave it off.")
	flag.BoolVar(&o.leaderElect, "leader-elect", false, "Elect a leader so that only one manager replica schedules lanes at a time.")
	flag.StringVar(&o.leaderElectionNS, "leader-election-namespace", "", "Namespace of the leader election Lease (defaults to the manager's namespace).")
	o.leaderElection.bindFlags(flag.CommandLine)
	flag.StringVar(&o.api.Addr, "session-api-bind-address", ":8443", "Address the Session API binds to; \"0\" disables it.")
	flag.StringVar(&o.api.TLS.CertFile, "session-api-cert-file", "", "TLS certificate of the Session API, read again when it changes; without it the manager generates a CA and a certificate and keeps them in --session-api-tls-secret.")
	flag.StringVar(&o.api.TLS.KeyFile, "session-api-key-file", "", "TLS private key of the Session API, with --session-api-cert-file.")
	flag.StringVar(&o.api.TLS.CAFile, "session-api-ca-file", "", "CA bundle that signed --session-api-cert-file; the manager hands it to the runtime pods it creates. Leave it empty when the certificate chains to roots the runtimes already trust.")
	flag.BoolVar(&o.api.TLS.InsecureHTTP, "session-api-insecure-http", false, "Serve the Session API over plain HTTP: bearer tokens cross the network in clear text. Only for loopback addresses or networks encrypted otherwise.")
	flag.StringVar(&o.tlsSecret, "session-api-tls-secret", "agentlane-session-api-tls", "Secret, in the manager's namespace ($POD_NAMESPACE), that keeps the generated CA and certificate of the Session API; created when missing, never overwritten while it serves. Out of a cluster without $POD_NAMESPACE the certificate is kept in memory.")
	flag.StringVar(&o.tlsHosts, "session-api-tls-hosts", "", "Comma-separated DNS names and IP addresses the generated certificate names, besides the host of --session-api-url; localhost and 127.0.0.1 when both are empty.")
	flag.StringVar(&o.audiences, "session-api-audiences", sessionserver.DefaultAudience, "Comma-separated token audiences the Session API accepts; runtime pods get a projected service-account token for the first.")
	flag.BoolVar(&o.apiServerTokens, "session-api-accept-api-server-tokens", true, "Also accept tokens for the API server's own audiences (service accounts' default tokens, kubeconfig tokens), which can act in the cluster; false accepts only --session-api-audiences.")
	flag.IntVar(&o.api.RetainedEvents, "session-api-retained-events", sessionserver.DefaultRetainedEvents, "The most events any session keeps for event streams that reconnect; a session's spec.retention.maxTraceEvents above it is lowered to it.")
	flag.IntVar(&o.api.MaxPayloadBytes, "session-api-max-payload-bytes", sessionserver.DefaultMaxPayloadBytes, "The largest command payload the Session API accepts, in bytes; larger submissions get 413 TooLarge.")
	flag.Float64Var(&o.api.Rate, "session-api-rate", sessionserver.DefaultRate, "Requests per second one Session API caller (a token's user) may sustain; over it 429 RateLimited with Retry-After. Negative disables the limit.")
	flag.IntVar(&o.api.Burst, "session-api-burst", sessionserver.DefaultBurst, "Requests one Session API caller may make at once above --session-api-rate.")
	flag.Float64Var(&o.api.FailedAuthRate, "session-api-failed-auth-rate", sessionserver.DefaultFailedAuthRate, "Requests per second failing authentication one client address may sustain; past it (and --session-api-failed-auth-burst) the address gets 429 RateLimited before its token is reviewed. Negative disables the limit.")
	flag.IntVar(&o.api.FailedAuthBurst, "session-api-failed-auth-burst", sessionserver.DefaultFailedAuthBurst, "Requests failing authentication one client address may send at once.")
	bindSessionAPIBounds(flag.CommandLine, o.api)
	flag.IntVar(&o.api.MaxPendingPerSession, "session-api-max-pending-per-session", sessionserver.DefaultMaxPendingPerSession, "The most commands one session may have submitted through the Session API and not yet ended; over it 429 QueueFull.")
	flag.Int64Var(&o.api.MaxPendingBytesPerSession, "session-api-max-pending-bytes-per-session", sessionserver.DefaultMaxPendingBytesPerSession, "The most payload bytes one session's pending commands may hold; over it 429 QueueFull.")
	o.addStoreFlags()
	flag.Int64Var(&o.api.MaxPendingBytes, "session-api-max-pending-bytes", sessionserver.DefaultMaxPendingBytes, "The most payload bytes the pending commands of every session together may hold; over it 429 QueueFull.")
	flag.IntVar(&o.api.Delegations.PendingPerSession, "session-api-max-delegations-pending-per-session", sessionserver.DefaultDelegationsPendingPerSession, "The most delegations one session may have that have not finished; over it POST /delegations gets 429 QueueFull.")
	flag.IntVar(&o.api.Delegations.PerSession, "session-api-max-delegations-per-session", sessionserver.DefaultDelegationsPerSession, "The most delegations the cluster may keep for one session, finished ones included until retention removes them; over it 429 QueueFull.")
	flag.IntVar(&o.api.Delegations.PendingPerNamespace, "session-api-max-delegations-pending-per-namespace", sessionserver.DefaultDelegationsPendingPerNamespace, "The most delegations the sessions of one namespace may have that have not finished; over it 429 QueueFull.")
	flag.IntVar(&o.api.Delegations.PerNamespace, "session-api-max-delegations-per-namespace", sessionserver.DefaultDelegationsPerNamespace, "The most delegations the cluster may keep for one namespace; over it 429 QueueFull.")
	flag.IntVar(&o.delegation.MaxDepth, "delegation-max-depth", delegation.DefaultMaxDepth, "How deep chains of delegation may go: a worker session this many delegations deep cannot delegate.")
	flag.IntVar(&o.delegation.MaxChildren, "delegation-max-children", delegation.DefaultMaxChildren, "The most worker sessions one producer session may have running at once, across all Delegate lanes; its further delegations wait.")
	flag.DurationVar(&o.delegation.Timeout, "delegation-timeout", delegation.DefaultTimeout, "How long a worker session may take when neither its task, its lane nor its queue sets a timeout; past it the delegation ends TimedOut.")
	flag.StringVar(&o.workerPools.Image, "workerpool-image", controller.DefaultWorkerPoolImage, "Image of a WorkerPool's workers when its spec.image is empty.")
	flag.StringVar(&o.workerPools.WorkerRole, "workerpool-worker-role", controller.DefaultWorkerRole, "ClusterRole bound to the WorkerPool workers' service account in each namespace with a pool.")
	flag.Func("workerpool-max-replicas", fmt.Sprintf("The most workers any WorkerPool runs, whatever its maxReplicas (default %d).", controller.DefaultWorkerPoolMaxReplicas), func(v string) error {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 1 {
			return fmt.Errorf("want a positive number, not %q", v)
		}
		o.workerPools.MaxReplicas = int32(n)
		return nil
	})
	flag.IntVar(&o.workerPools.PerNamespace, "workerpool-max-per-namespace", controller.DefaultWorkerPoolsPerNamespace, "The most WorkerPools a namespace runs; the newer ones are held at zero workers.")
	bindRuntimePoolFlags(flag.CommandLine, &o.runtimePools)
	flag.StringVar(&o.sessionAPIURL, "session-api-url", "", "Session API address as session runtime pods reach it, such as https://agentlane-session-api.agentlane-system.svc:8443; set in their environment as "+controller.EnvSessionAPIURL+".")
	flag.StringVar(&o.sessionStore, "session-store", "configmap", "Where runtimes' checkpoints are kept: configmap (one ConfigMap per session, deleted with it) or none (checkpoint calls answer NoStore).")
	flag.StringVar(&o.idGenerator, "id-generator", "ulid", "How the schedulers and the Session API name commands, runs and messages: ulid, or sequential (cmd-0000000001, ...) to make replays of the same inputs name things identically.")
	o.zap.BindFlags(flag.CommandLine)
	flag.Parse()
	o.api.Delegations.MaxDepth = o.delegation.MaxDepth
	return o
}

func main() {
	o := parseFlags()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.zap)))
	log := ctrl.Log.WithName("setup")

	var schedulerIDs lanequeue.IDGenerator
	switch o.idGenerator {
	case "ulid":
	case "sequential":
		schedulerIDs = &lanequeue.SequentialIDs{}
		o.api.IDs = &lanequeue.SequentialIDs{Prefix: "api"}
	default:
		log.Error(nil, "--id-generator must be ulid or sequential", "value", o.idGenerator)
		os.Exit(2)
	}
	if o.sessionStore != "configmap" && o.sessionStore != "none" {
		log.Error(nil, "--session-store must be configmap or none", "sessionStore", o.sessionStore)
		os.Exit(1)
	}

	cfg, err := ctrl.GetConfig()
	if err != nil {
		log.Error(err, "unable to load a kubeconfig")
		os.Exit(1)
	}
	if err := o.leaderElection.validate(); err != nil {
		log.Error(err, "invalid leader election timing")
		os.Exit(2)
	}
	mgrOptions, takeover, err := o.leaderElection.withTakeover(cfg, o.leaderElection.apply(ctrl.Options{
		Cache:                   controller.CacheOptions(),
		Scheme:                  newScheme(),
		Metrics:                 o.metricsOptions(),
		HealthProbeBindAddress:  o.probeAddr,
		PprofBindAddress:        o.pprofAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "manager.agentlane.io",
		LeaderElectionNamespace: o.leaderElectionNS,
	}))
	if err != nil {
		log.Error(err, "unable to set up the leader election")
		os.Exit(1)
	}
	mgr, err := ctrl.NewManager(cfg, mgrOptions)
	if err != nil {
		log.Error(err, "unable to create the manager")
		os.Exit(1)
	}
	if takeover != nil {
		if err := takeover.addTo(mgr); err != nil {
			log.Error(err, "unable to set up the leader takeover")
			os.Exit(1)
		}
	}
	ctx := ctrl.SetupSignalHandler()
	// Traces are exported only when the OTEL_* variables ask for it
	// (docs/observability.md).
	stopTracing, err := tracing.Setup(ctx, tracing.Options{Service: "agentlane-manager", Getenv: os.Getenv, Log: ctrl.Log.WithName("tracing")})
	if err != nil {
		log.Error(err, "invalid OTEL_* settings")
		os.Exit(2)
	}
	// The state the controllers and the Session API share, each part built
	// once here (docs/architecture.md).
	schedulers := &scheduling.Schedulers{}
	schedulers.Options.IDs = schedulerIDs
	shared := controller.Shared{
		Schedulers:   schedulers,
		Budgets:      &budget.Ledger{Publish: schedulers.Publish, Recorder: mgr.GetEventRecorder("agentlane-budget")},
		Passivations: &controller.PassivationClock{},
	}
	api, access, err := o.sessionAPI(ctx, mgr, shared)
	if err != nil {
		log.Error(err, "unable to set up the Session API")
		os.Exit(1)
	}
	if api != nil {
		// Delegate lanes post to inboxes through the Session API.
		shared.Inboxes = api
		if err := mgr.Add(api); err != nil {
			log.Error(err, "unable to add the Session API")
			os.Exit(1)
		}
	}
	// A WorkerPool's workers send their traces where the manager's go.
	o.workerPools.Env = controller.TraceExportEnv(os.Environ())
	access = append(access, controller.WithDelegationBounds(o.delegation), controller.WithWorkerPools(o.workerPools),
		controller.WithRuntimePools(o.runtimePools))
	controllers, err := controller.Setup(ctx, mgr, shared, access...)
	if err != nil {
		log.Error(err, "unable to set up the controllers")
		os.Exit(1)
	}
	// The schedulers call back into the components built above through
	// these hooks, bound once here; the schedulers refuse to start without
	// them.
	hooks := scheduling.Hooks{
		Observer:          scheduling.NoObserver,
		OnSessionActivity: controllers.Sessions.SessionActivity,
		Rebuild:           controllers.Tasks.Rebuild,
	}
	if api != nil {
		hooks.Observer = api.Observer()
	}
	if err := schedulers.Bind(hooks); err != nil {
		log.Error(err, "unable to bind the schedulers' hooks")
		os.Exit(1)
	}
	if err := registerMetrics(metrics.Registry, controllers); err != nil {
		log.Error(err, "unable to register the metrics")
		os.Exit(1)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		log.Error(err, "unable to set up the health check")
		os.Exit(1)
	}
	if err := addReadyChecks(mgr, api, schedulers); err != nil {
		log.Error(err, "unable to set up the ready checks")
		os.Exit(1)
	}

	log.Info("starting manager")
	err = mgr.Start(ctx)
	tracing.Flush(stopTracing, ctrl.Log.WithName("tracing"))
	if err != nil {
		log.Error(err, "manager stopped with an error")
		os.Exit(1)
	}
	log.Info("manager stopped")
}

// metricsOptions serves the metrics over HTTPS to authorized callers only,
// unless --metrics-secure=false.
func (o *options) metricsOptions() metricsserver.Options {
	if !o.metricsSecure {
		return metricsserver.Options{BindAddress: o.metricsAddr}
	}
	return metricsserver.Options{BindAddress: o.metricsAddr, SecureServing: true,
		FilterProvider: filters.WithAuthenticationAndAuthorization}
}

// sessionAPI builds the Session API on the shared state, with its
// authentication and TLS, and returns how runtime pods reach it: its URL, a
// token for its audience and the CA bundle to trust. A generated
// certificate is read from (or made into) its Secret now, before the
// controllers start, so that the first runtime pod already gets the CA.
// With --session-api-bind-address=0 there is no Session API and the server
// is nil.
func (o *options) sessionAPI(ctx context.Context, mgr ctrl.Manager, shared controller.Shared) (*sessionserver.Server, []controller.SetupOption, error) {
	setup := []controller.SetupOption{controller.WithSessionAPIURL(o.sessionAPIURL)}
	if o.api.Addr == "0" {
		return nil, setup, nil
	}
	audiences := servingcert.Hosts(strings.Split(o.audiences, ",")...)
	if len(audiences) == 0 {
		return nil, nil, fmt.Errorf("--session-api-audiences names no audience")
	}
	cfg := *o.api
	cfg.Schedulers, cfg.Budgets, cfg.Checkpoints = shared.Schedulers, shared.Budgets, shared.Passivations
	cfg.Client, cfg.Reader = mgr.GetClient(), mgr.GetAPIReader()
	cfg.Auth = &sessionserver.KubeAuthorizer{Client: mgr.GetClient(), Audiences: audiences,
		RefuseAPIServerTokens: !o.apiServerTokens}
	cfg.Recorder = mgr.GetEventRecorder("agentlane-session-api")
	cfg.Leading = mgr.Elected()
	cfg.Replica, _ = os.Hostname() // the pod's name in a cluster
	if o.sessionStore == "configmap" {
		cfg.Store = o.newStore(mgr)
	}
	// Warm runtime pods learn their assignment from the API, which reads
	// them from the manager's cache of runtime pods.
	cfg.RuntimePods = mgr.GetCache()
	setup = append(setup, controller.WithSessionAPIAudience(audiences[0]))
	if !cfg.TLS.InsecureHTTP {
		var urlHost string
		if o.sessionAPIURL != "" {
			u, err := url.Parse(o.sessionAPIURL)
			if err != nil || u.Scheme != "https" {
				return nil, nil, fmt.Errorf("--session-api-url %q must be https:// while the Session API serves TLS (or set --session-api-insecure-http)", o.sessionAPIURL)
			}
			urlHost = u.Hostname()
		}
		cfg.TLS.Hosts = servingcert.Hosts(append([]string{urlHost}, strings.Split(o.tlsHosts, ",")...)...)
		if ns := managerNamespace(); ns != "" && o.tlsSecret != "" {
			cfg.TLS.Secret = types.NamespacedName{Namespace: ns, Name: o.tlsSecret}
		}
	}
	api, err := sessionserver.New(cfg)
	if err != nil {
		return nil, nil, err
	}
	if cfg.TLS.InsecureHTTP {
		return api, setup, nil
	}
	if err := api.LoadTLS(ctx, cfg.Client, cfg.Reader); err != nil {
		return nil, nil, err
	}
	setup = append(setup, controller.WithSessionAPICA(api.CABundle))
	if ns := managerNamespace(); ns != "" {
		// For the worker pods of Direct lanes, which stream to the
		// Session API (docs/deploy.md, "Direct workers").
		setup = append(setup, controller.WithSessionAPICAIn(ns))
	}
	return api, setup, nil
}

// managerNamespace is the namespace the manager runs in: $POD_NAMESPACE,
// else its service account's; empty out of a cluster.
func managerNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
