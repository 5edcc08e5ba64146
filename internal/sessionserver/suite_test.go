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
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/budget"
	"github.com/agentlane/agentlane/internal/controller"
	"github.com/agentlane/agentlane/internal/scheduling"
	"github.com/agentlane/agentlane/internal/testenv"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// retainedEvents is the suite server's per-session event log size, small
// enough for a spec to outrun it.
const retainedEvents = 64

var (
	ctx       context.Context
	cancel    context.CancelFunc
	testEnv   *envtest.Environment
	k8sClient client.Client
	baseURL   string
	// apiHTTPClient trusts the CA of the suite server's generated
	// certificate, for specs that send raw requests.
	apiHTTPClient *http.Client
	// tlsSecret keeps the suite server's generated certificate.
	tlsSecret = types.NamespacedName{Namespace: "agentlane-system", Name: "agentlane-session-api-tls"}
	// restConfig reaches the control plane, for the workers specs start.
	restConfig *rest.Config
	// server is the suite's Session API; specs that need tight bounds set
	// them and restore them with DeferCleanup.
	server *Server
	// reviews counts the TokenReviews the suite's server creates.
	reviews *reviewCounter
	// observer passes the schedulers' session events to the server that
	// serves.
	observer = &switchObserver{}
)

// reviewCounter is a client that counts the TokenReviews it creates.
type reviewCounter struct {
	client.Client
	tokenReviews atomic.Int64
}

func (c *reviewCounter) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if _, ok := obj.(*authenticationv1.TokenReview); ok {
		c.tokenReviews.Add(1)
	}
	return c.Client.Create(ctx, obj, opts...)
}

func TestSessionServer(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Session API suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	SetDefaultEventuallyTimeout(20 * time.Second)
	SetDefaultEventuallyPollingInterval(50 * time.Millisecond)

	ctx, cancel = context.WithCancel(context.Background())
	scheme := testenv.Scheme()
	var cfg *rest.Config
	var err error
	testEnv, cfg, k8sClient, err = testenv.Start(scheme)
	Expect(err).NotTo(HaveOccurred())
	restConfig = cfg

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Cache:                  controller.CacheOptions(),
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	Expect(err).NotTo(HaveOccurred())
	schedulers := &scheduling.Schedulers{StatusInterval: 100 * time.Millisecond}
	shared := controller.Shared{Schedulers: schedulers, Passivations: &controller.PassivationClock{},
		Budgets: &budget.Ledger{Publish: schedulers.Publish, Recorder: mgr.GetEventRecorder("agentlane-budget")}}
	controllers, err := controller.Setup(ctx, mgr, shared)
	Expect(err).NotTo(HaveOccurred())
	reviews = &reviewCounter{Client: mgr.GetClient()}
	Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tlsSecret.Namespace}})).To(Succeed())
	server = withStore(mgr, Config{Addr: "127.0.0.1:0", Schedulers: schedulers, Budgets: shared.Budgets,
		Checkpoints: shared.Passivations, RetainedEvents: retainedEvents, Auth: &KubeAuthorizer{Client: reviews},
		Client: mgr.GetClient(), Reader: mgr.GetAPIReader(),
		Leading: mgr.Elected(), TLS: TLS{Secret: tlsSecret, Hosts: []string{"127.0.0.1", "localhost"}}})
	Expect(mgr.Add(server)).To(Succeed())
	// As cmd/manager registers them; the metrics specs read this registry.
	Expect(RegisterMetrics(ctrlmetrics.Registry)).To(Succeed())
	// The schedulers report to whichever server serves, so that a spec can
	// restart the API (restart_test.go).
	observer.use(server)
	Expect(schedulers.Bind(scheduling.Hooks{
		Observer:          observer,
		OnSessionActivity: controllers.Sessions.SessionActivity,
		Rebuild:           controllers.Tasks.Rebuild,
	})).To(Succeed())
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	addr, err := server.BoundAddr(ctx)
	Expect(err).NotTo(HaveOccurred())
	baseURL = "https://" + addr
	apiHTTPClient = trustingClient(server.CABundle())
})

// trustingClient is an HTTP client that trusts only the CA certificates of
// caPEM.
func trustingClient(caPEM []byte) *http.Client {
	GinkgoHelper()
	roots := x509.NewCertPool()
	Expect(roots.AppendCertsFromPEM(caPEM)).To(BeTrue(), "the CA bundle holds a certificate")
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
}

var _ = AfterSuite(func() {
	cancel()
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

// tenant is a namespace with a service account allowed to use the Session
// API of the namespace's sessions, and that account's bearer token.
type tenant struct {
	ns    string
	token string
}

// newTenant creates a namespace whose service account "agent" may use the
// Session API of every AgentSession in it, and returns its token.
func newTenant() tenant {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "tenant-"}}
	Expect(k8sClient.Create(ctx, ns)).To(Succeed())
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "session-user"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{agentlanev1alpha1.GroupVersion.Group},
			Resources: []string{APIResource + "/" + APISubresource},
			Verbs:     []string{VerbRead, VerbWrite},
		}},
	}
	Expect(k8sClient.Create(ctx, role)).To(Succeed())
	token, err := testenv.ServiceAccountToken(ctx, k8sClient, ns.Name, "agent", rbacv1.RoleRef{Kind: "Role", Name: role.Name})
	Expect(err).NotTo(HaveOccurred())
	Expect(token).NotTo(BeEmpty())
	return tenant{ns: ns.Name, token: token}
}

// internalLanes are A3S-shaped lanes, all Internal; execute runs one
// command per session at a time and llm commands retry once after 50ms.
func internalLanes() agentlanev1alpha1.LaneQueueSpec {
	return agentlanev1alpha1.LaneQueueSpec{Lanes: []agentlanev1alpha1.Lane{
		{Name: "control", Priority: 0, MaxConcurrencyPerSession: 2},
		{Name: "query", Priority: 1, MaxConcurrencyPerSession: 4},
		{Name: "execute", Priority: 2, MaxConcurrencyPerSession: 1},
		{Name: "generate", Priority: 3, MaxConcurrencyPerSession: 1, RetryPolicy: &agentlanev1alpha1.RetryPolicy{
			Strategy: agentlanev1alpha1.RetryFixed, MaxRetries: ptr.To[int32](1),
			FixedDelay: &metav1.Duration{Duration: 50 * time.Millisecond},
		}},
		{Name: "remote", Priority: 2, HandlerMode: agentlanev1alpha1.HandlerModeExternal},
		{Name: "readonly", Priority: 2, HandlerMode: agentlanev1alpha1.HandlerModeExternal,
			CommandTypes: []agentlanev1alpha1.CommandType{"read", "grep"}},
	}}
}

// newQueue creates the LaneQueue "q" in the tenant's namespace.
func (t tenant) newQueue(spec agentlanev1alpha1.LaneQueueSpec) {
	GinkgoHelper()
	lq := &agentlanev1alpha1.LaneQueue{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: "q"}, Spec: spec}
	Expect(k8sClient.Create(ctx, lq)).To(Succeed())
}

// newSession creates an AgentSession on queue "q" and waits until it is
// Active.
func (t tenant) newSession(name string, mode *agentlanev1alpha1.QueueModeOptions) *agentlanev1alpha1.AgentSession {
	GinkgoHelper()
	s := &agentlanev1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: name},
		Spec: agentlanev1alpha1.AgentSessionSpec{
			QueueRef:  agentlanev1alpha1.LaneQueueReference{Name: "q"},
			QueueMode: mode,
			Identity:  &agentlanev1alpha1.Identity{TenantID: t.ns, Principal: "agent"},
		},
	}
	Expect(k8sClient.Create(ctx, s)).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
		g.Expect(s.Status.Phase).To(Equal(agentlanev1alpha1.SessionActive))
	}).Should(Succeed())
	return s
}

// session returns a client of the tenant's session name.
func (t tenant) session(name string) *sessionapi.SessionClient {
	GinkgoHelper()
	return clientWithToken(t.token).Session(t.ns, name)
}

func clientWithToken(token string) *sessionapi.Client {
	GinkgoHelper()
	var opts []sessionapi.ClientOption
	if token != "" {
		opts = append(opts, sessionapi.WithToken(token))
	}
	opts = append(opts, sessionapi.WithCA(server.CABundle()))
	c, err := sessionapi.NewClient(baseURL, opts...)
	Expect(err).NotTo(HaveOccurred())
	return c
}

// modeOptions is a session queueMode.
func modeOptions(mode agentlanev1alpha1.QueueMode, debounce time.Duration, capacity int32, drop agentlanev1alpha1.DropPolicy) *agentlanev1alpha1.QueueModeOptions {
	return &agentlanev1alpha1.QueueModeOptions{Mode: mode, Debounce: &metav1.Duration{Duration: debounce},
		Cap: ptr.To(capacity), Drop: drop}
}

// stream follows a session's events on a goroutine of its own.
type stream struct {
	es     *sessionapi.EventStream
	events chan sessionapi.Event
}

func follow(s *sessionapi.SessionClient, opts sessionapi.EventsOptions) *stream {
	GinkgoHelper()
	sctx, stop := context.WithCancel(ctx)
	es, err := s.Events(sctx, opts)
	Expect(err).NotTo(HaveOccurred())
	st := &stream{es: es, events: make(chan sessionapi.Event, 1024)}
	go func() {
		defer close(st.events)
		for {
			ev, err := es.Next()
			if err != nil {
				return
			}
			st.events <- ev
		}
	}()
	DeferCleanup(func() {
		stop()
		_ = es.Close()
	})
	return st
}

// next returns the next event of one of the types (others are skipped).
func (st *stream) next(types ...string) sessionapi.Event {
	GinkgoHelper()
	for {
		var ev sessionapi.Event
		Eventually(st.events).Should(Receive(&ev), "waiting for %v", types)
		for _, t := range types {
			if ev.Type == t {
				return ev
			}
		}
	}
}

// quiet checks that no event of the types arrives for d.
func (st *stream) quiet(d time.Duration, types ...string) {
	GinkgoHelper()
	deadline := time.After(d)
	for {
		select {
		case ev, ok := <-st.events:
			if !ok {
				return
			}
			for _, t := range types {
				Expect(ev.Type).NotTo(Equal(t), "unexpected %s event: %+v", t, ev)
			}
		case <-deadline:
			return
		}
	}
}
