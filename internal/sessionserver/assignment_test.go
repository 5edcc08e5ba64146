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
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
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
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/controller"
	"github.com/agentlane/agentlane/internal/testenv"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// startRuntimePodCache starts a cache of pods as the manager's
// (controller.CacheOptions), which the manager gives the assignment route.
func startRuntimePodCache() PodCache {
	GinkgoHelper()
	opts := controller.CacheOptions()
	opts.Scheme = testenv.Scheme()
	pods, err := cache.New(restConfig, opts)
	Expect(err).NotTo(HaveOccurred())
	cctx, stop := context.WithCancel(ctx)
	DeferCleanup(stop)
	go func() {
		defer GinkgoRecover()
		Expect(pods.Start(cctx)).To(Succeed())
	}()
	_, err = pods.GetInformer(cctx, &corev1.Pod{})
	Expect(err).NotTo(HaveOccurred())
	return pods
}

// startAssignmentServer starts a Session API that reads runtime pods from
// pods, with bounds on its waiting assignment calls and no other bound a
// flood from one address would meet first.
func startAssignmentServer(pods PodCache, bounds AssignmentBounds, tlsName string) (*Server, string) {
	GinkgoHelper()
	srv := mustNew(Config{Addr: "127.0.0.1:0", Client: server.Client, Reader: server.Reader, Schedulers: server.Schedulers,
		Budgets: server.Budgets, Auth: &KubeAuthorizer{Client: k8sClient, Audiences: []string{DefaultAudience}, TTL: 5 * time.Minute},
		RuntimePods: pods, Assignments: bounds, Rate: -1, MaxConnections: -1, MaxConnectionsPerAddress: -1,
		TLS: TLS{Secret: types.NamespacedName{Namespace: tlsSecret.Namespace, Name: tlsName}, Hosts: []string{"127.0.0.1"}}})
	sctx, stop := context.WithCancel(ctx)
	DeferCleanup(stop)
	go func() {
		defer GinkgoRecover()
		Expect(srv.Start(sctx)).To(Succeed())
	}()
	addr, err := srv.BoundAddr(ctx)
	Expect(err).NotTo(HaveOccurred())
	return srv, "https://" + addr
}

// warmPod is a warm runtime pod of pool "pool" and the token bound to it,
// for the Session API's audience, as its projected token is.
type warmPod struct {
	pod   *corev1.Pod
	token string
}

// newWarmPod creates a warm pod named name in ns, run as service account
// sa (created if missing), and mints its pod-bound token. labelled says
// whether it carries a warm pod's labels.
func newWarmPod(ns, name, sa string, labelled bool) warmPod {
	GinkgoHelper()
	account := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}}
	if err := k8sClient.Create(ctx, account); err != nil {
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(account), account)).To(Succeed())
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{ServiceAccountName: sa, AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "runtime", Image: "agent"}}},
	}
	if labelled {
		// As a RuntimePool labels its pods: of no session yet.
		pod.Labels = map[string]string{sessionRuntimeLabel: "", runtimePoolLabel: "pool", agentlanev1alpha1.TemplateHashLabel: "h1"}
	}
	Expect(k8sClient.Create(ctx, pod)).To(Succeed())
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences:         []string{DefaultAudience},
		ExpirationSeconds: ptr.To[int64](3600),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	Expect(k8sClient.SubResource("token").Create(ctx, account, tr)).To(Succeed())
	Expect(tr.Status.Token).NotTo(BeEmpty())
	return warmPod{pod: pod, token: tr.Status.Token}
}

// adopt hands pod to session as the manager does: session labels, the
// pool label removed, the session as controller.
func adopt(pod *corev1.Pod, session *agentlanev1alpha1.AgentSession) {
	GinkgoHelper()
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := &corev1.Pod{}
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), p); err != nil {
			return err
		}
		delete(p.Labels, runtimePoolLabel)
		p.Labels[sessionRuntimeLabel] = session.Name
		p.Labels[agentlanev1alpha1.SessionLabel] = session.Name
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[agentlanev1alpha1.AdoptedAtAnnotation] = time.Now().UTC().Format(time.RFC3339Nano)
		p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(session, agentlanev1alpha1.GroupVersion.WithKind("AgentSession"))}
		return k8sClient.Update(ctx, p)
	})).To(Succeed())
}

// assignmentClient is a client of srv at url with token.
func assignmentClient(srv *Server, url, token string) *sessionapi.Client {
	GinkgoHelper()
	c, err := sessionapi.NewClient(url, sessionapi.WithToken(token), sessionapi.WithCA(srv.CABundle()))
	Expect(err).NotTo(HaveOccurred())
	return c
}

// answer is what one GetAssignment call returned.
type answer struct {
	a   *sessionapi.Assignment
	err error
}

// getAsync calls GetAssignment in the background.
func getAsync(c *sessionapi.Client, cctx context.Context, ns string, wait time.Duration) <-chan answer {
	out := make(chan answer, 1)
	go func() {
		a, err := c.GetAssignment(cctx, ns, wait)
		out <- answer{a, err}
	}()
	return out
}

var _ = Describe("Warm runtime pod assignment", Ordered, func() {
	var (
		srv  *Server
		url  string
		pods PodCache
		a    tenant
	)
	BeforeAll(func() {
		pods = startRuntimePodCache()
		srv, url = startAssignmentServer(pods, AssignmentBounds{}, "assignment-tls")
		a = newTenant()
		a.newQueue(internalLanes())
	})

	It("waits while the pod is warm, answers 204 when the wait runs out, and 200 with the session at once once adopted", func() {
		s1 := a.newSession("s1", nil)
		p := newWarmPod(a.ns, "warm-1", "agent", true)
		c := assignmentClient(srv, url, p.token)

		By("answering 204 (nil) at once without a wait, and after a wait that ran out")
		got, err := c.GetAssignment(ctx, a.ns, 0)
		Expect(err).NotTo(HaveOccurred())
		Expect(got).To(BeNil())
		short := getAsync(c, ctx, a.ns, 2*time.Second)
		Eventually(func() int { n, _ := srv.assignments.waiting(a.ns); return n }).Should(Equal(1), "the call waits")
		Eventually(short, 30*time.Second).Should(Receive(Equal(answer{})))
		Eventually(func() int { n, _ := srv.assignments.waiting(a.ns); return n }).Should(BeZero(), "the call gave its place back")

		By("answering a long wait as soon as the pod is adopted")
		long := getAsync(c, ctx, a.ns, sessionapi.MaxAssignmentWait)
		Eventually(func() int { n, _ := srv.assignments.waiting(a.ns); return n }).Should(Equal(1))
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(s1), s1)).To(Succeed())
		adopt(p.pod, s1)
		var ans answer
		// Well within the 60s wait: the adoption woke the call.
		Eventually(long, 30*time.Second).Should(Receive(&ans))
		Expect(ans.err).NotTo(HaveOccurred())
		Expect(ans.a).To(Equal(&sessionapi.Assignment{Namespace: a.ns, Session: "s1", TenantID: a.ns, Principal: "agent"}))

		By("answering an adopted pod at once, with the session's checkpoint once it has one")
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(s1), s1); err != nil {
				return err
			}
			s1.Status.LastCheckpoint = &agentlanev1alpha1.Checkpoint{RunID: "run-7", Location: "configmap/cp-1", Time: metav1.Now()}
			return k8sClient.Status().Update(ctx, s1)
		})).To(Succeed())
		Eventually(func(g Gomega) {
			got, err := c.GetAssignment(ctx, a.ns, 0)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).NotTo(BeNil())
			g.Expect(got.ResumeRunID).To(Equal("run-7"))
			g.Expect(got.CheckpointLocation).To(Equal("configmap/cp-1"))
		}).Should(Succeed())
	})

	It("refuses a token bound to no pod, a pod that is no runtime pod, another namespace and a session the pod may not use", func() {
		refused := func(c *sessionapi.Client, ns, code, words string) {
			GinkgoHelper()
			_, err := c.GetAssignment(ctx, ns, time.Second)
			var e *sessionapi.Error
			Expect(errors.As(err, &e)).To(BeTrue(), "refused: %v", err)
			Expect(e.Code).To(Equal(code))
			Expect(e.Message).To(ContainSubstring(words))
		}
		By("a service-account token bound to no pod")
		refused(assignmentClient(srv, url, a.token), a.ns, sessionapi.CodeForbidden, "bound to no pod")

		By("the token of a pod that is neither warm nor a session's")
		plain := newWarmPod(a.ns, "plain", "agent", false)
		refused(assignmentClient(srv, url, plain.token), a.ns, sessionapi.CodeForbidden, "no runtime pod")

		By("a warm pod asking in another namespace")
		b := newTenant()
		p := newWarmPod(a.ns, "warm-ns", "agent", true)
		refused(assignmentClient(srv, url, p.token), b.ns, sessionapi.CodeForbidden, "no service account of namespace")
		// And a pod of the same name in the other namespace changes nothing.
		newWarmPod(b.ns, "warm-ns", "agent", true)
		refused(assignmentClient(srv, url, p.token), b.ns, sessionapi.CodeForbidden, "no service account of namespace")

		By("a pod adopted by a session its service account may not use")
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: a.ns, Name: "only-s2"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{agentlanev1alpha1.GroupVersion.Group},
				Resources: []string{APIResource + "/" + APISubresource}, ResourceNames: []string{"s2"}, Verbs: []string{VerbRead, VerbWrite}}}}
		Expect(k8sClient.Create(ctx, role)).To(Succeed())
		_, err := testenv.ServiceAccountToken(ctx, k8sClient, a.ns, "limited", rbacv1.RoleRef{Kind: "Role", Name: role.Name})
		Expect(err).NotTo(HaveOccurred())
		s3 := a.newSession("s3", nil)
		limited := newWarmPod(a.ns, "warm-limited", "limited", true)
		adopt(limited.pod, s3)
		Eventually(func(g Gomega) {
			_, err := assignmentClient(srv, url, limited.token).GetAssignment(ctx, a.ns, 0)
			g.Expect(sessionapi.IsCode(err, sessionapi.CodeForbidden)).To(BeTrue(), "refused: %v", err)
		}).Should(Succeed())

		By("the token of a pod deleted since")
		gone := newWarmPod(a.ns, "warm-gone", "agent", true)
		Expect(k8sClient.Delete(ctx, gone.pod, client.GracePeriodSeconds(0))).To(Succeed())
		Eventually(func(g Gomega) {
			_, err := assignmentClient(srv, url, gone.token).GetAssignment(ctx, a.ns, 0)
			g.Expect(err).To(HaveOccurred())
			g.Expect(sessionapi.IsCode(err, sessionapi.CodeForbidden) || sessionapi.IsCode(err, sessionapi.CodeUnauthenticated)).To(BeTrue(), "refused: %v", err)
		}).Should(Succeed())
	})

	It("bounds a flood of waiting calls from one namespace without holding up another namespace", func() {
		const perNamespace, total, flood = 8, 12, 1000
		fsrv, furl := startAssignmentServer(pods, AssignmentBounds{MaxWaits: total, MaxWaitsPerNamespace: perNamespace}, "assignment-flood-tls")
		victim := newTenant()
		victim.newQueue(internalLanes())
		attacker := newTenant()
		var pods []warmPod
		for i := range 10 {
			pods = append(pods, newWarmPod(attacker.ns, fmt.Sprintf("flood-%d", i), "agent", true))
		}
		clients := make([]*sessionapi.Client, len(pods))
		for i, p := range pods {
			clients[i] = assignmentClient(fsrv, furl, p.token)
			// Each token reviewed once before the flood, as a pod's first
			// call would.
			got, err := clients[i].GetAssignment(ctx, attacker.ns, 0)
			Expect(err).NotTo(HaveOccurred())
			Expect(got).To(BeNil())
		}

		fctx, stopFlood := context.WithCancel(ctx)
		defer stopFlood()
		var refusedNS, refusedPod, refusedOther atomic.Int64
		var wg sync.WaitGroup
		for i := range flood {
			wg.Go(func() {
				_, err := clients[i%len(clients)].GetAssignment(fctx, attacker.ns, sessionapi.MaxAssignmentWait)
				var e *sessionapi.Error
				switch {
				case errors.As(err, &e) && e.Status == http.StatusTooManyRequests && e.Code == sessionapi.CodeRateLimited &&
					strings.Contains(e.Message, "the most one namespace may"):
					refusedNS.Add(1)
				case errors.As(err, &e) && e.Status == http.StatusTooManyRequests && strings.Contains(e.Message, "one call per pod"):
					refusedPod.Add(1)
				case fctx.Err() != nil:
				default:
					refusedOther.Add(1)
				}
			})
		}
		Eventually(func() int64 { return refusedNS.Load() + refusedPod.Load() + refusedOther.Load() }, 2*time.Minute).
			Should(BeNumerically("==", flood-perNamespace), "every call past the namespace's bound is refused at once")
		Expect(refusedOther.Load()).To(BeZero(), "refused with RateLimited and a clear message")
		Expect(refusedNS.Load()).To(BeNumerically(">", 0))
		inNS, all := fsrv.assignments.waiting(attacker.ns)
		Expect(inNS).To(Equal(perNamespace), "the namespace holds its bound of waiting calls, no more")
		Expect(all).To(Equal(perNamespace))

		By("a pod of another namespace still waits and gets its assignment")
		s1 := victim.newSession("s1", nil)
		p := newWarmPod(victim.ns, "victim", "agent", true)
		waiting := getAsync(assignmentClient(fsrv, furl, p.token), ctx, victim.ns, sessionapi.MaxAssignmentWait)
		Eventually(func() int { n, _ := fsrv.assignments.waiting(victim.ns); return n }).Should(Equal(1))
		adopt(p.pod, s1)
		var ans answer
		Eventually(waiting, 30*time.Second).Should(Receive(&ans))
		Expect(ans.err).NotTo(HaveOccurred())
		Expect(ans.a.Session).To(Equal("s1"))

		By("the flood's calls giving their places back when they end")
		stopFlood()
		wg.Wait()
		Eventually(func() int { _, all := fsrv.assignments.waiting(attacker.ns); return all }).Should(BeZero())
	})
})

// TestAssignmentWaitsBounds: one call per pod, the namespace's bound and
// the server's, each refused 429 RateLimited, and places given back.
func TestAssignmentWaitsBounds(t *testing.T) {
	var a assignmentWaits
	b := AssignmentBounds{MaxWaits: 3, MaxWaitsPerNamespace: 2}
	_, r1, err := a.acquire(b, "a", "p1", "u1")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.acquire(b, "a", "p1", "u1"); !sessionapi.IsCode(err, sessionapi.CodeRateLimited) || !strings.Contains(err.Error(), "one call per pod") {
		t.Errorf("a second call of one pod: %v, want RateLimited", err)
	}
	_, r2, err := a.acquire(b, "a", "p2", "u2")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.acquire(b, "a", "p3", "u3"); !sessionapi.IsCode(err, sessionapi.CodeRateLimited) || !strings.Contains(err.Error(), "namespace") {
		t.Errorf("past the namespace's bound: %v, want RateLimited", err)
	}
	_, r3, err := a.acquire(b, "b", "p4", "u4")
	if err != nil {
		t.Fatalf("another namespace: %v", err)
	}
	if _, _, err := a.acquire(b, "c", "p5", "u5"); !sessionapi.IsCode(err, sessionapi.CodeRateLimited) || !strings.Contains(err.Error(), "the most it holds") {
		t.Errorf("past the server's bound: %v, want RateLimited", err)
	}
	r1()
	r1() // twice changes nothing
	if ns, all := a.waiting("a"); ns != 1 || all != 2 {
		t.Errorf("after one release: %d in the namespace, %d in all; want 1, 2", ns, all)
	}
	r2()
	r3()
	if ns, all := a.waiting("a"); ns != 0 || all != 0 {
		t.Errorf("after every release: %d in the namespace, %d in all; want 0, 0", ns, all)
	}
}
