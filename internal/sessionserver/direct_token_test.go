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
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/agentlane/agentlane/internal/direct"
	"github.com/agentlane/agentlane/internal/executor"
	"github.com/agentlane/agentlane/internal/worker"
	"github.com/agentlane/agentlane/internal/workerproto"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// boundToken returns a token of service account sa of namespace ns that is
// valid while the Secret secret exists (it is created): deleting the
// Secret makes the token expire at once, as its lifetime would.
func boundToken(ns, sa, secret string) string {
	GinkgoHelper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secret}}
	Expect(k8sClient.Create(ctx, s)).To(Succeed())
	account := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To[int64](3600),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Secret", APIVersion: "v1", Name: s.Name, UID: s.UID},
	}}
	Expect(k8sClient.SubResource("token").Create(ctx, account, tr)).To(Succeed())
	Expect(tr.Status.Token).NotTo(BeEmpty())
	return tr.Status.Token
}

// startRotatingWorker runs a Direct worker of srv (at url) that reads its
// token file every tokenCheck, and returns that file.
func startRotatingWorker(srv *Server, url, ns, name, token string, tokenCheck time.Duration) (tokenFile string) {
	GinkgoHelper()
	dir := GinkgoT().TempDir()
	caFile, tokenFile := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "token")
	Expect(os.WriteFile(caFile, srv.CABundle(), 0o600)).To(Succeed())
	Expect(os.WriteFile(tokenFile, []byte(token), 0o600)).To(Succeed())
	reg := executor.NewSandboxedRegistry(64<<10, executor.Sandbox{Root: filepath.Join(dir, "tasks")})
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		err := worker.RunDirect(wctx, worker.DirectOptions{Server: url, CAFile: caFile, TokenFile: tokenFile,
			TokenCheckInterval: tokenCheck, Name: name, NodeName: "node-" + name, Namespace: ns, Capacity: 1,
			Registry: reg, GracePeriod: time.Second})
		Expect(err).NotTo(HaveOccurred())
	}()
	DeferCleanup(func() {
		cancel()
		<-done
	})
	Eventually(func() *direct.WorkerInfo { return workerOf(srv, ns, name) }).ShouldNot(BeNil(), "the worker's stream is admitted")
	return tokenFile
}

// writeAtomically replaces file with content as the kubelet does: the
// worker never reads it half written.
func writeAtomically(file, content string) {
	GinkgoHelper()
	tmp := file + ".new"
	Expect(os.WriteFile(tmp, []byte(content), 0o600)).To(Succeed())
	Expect(os.Rename(tmp, file)).To(Succeed())
}

// startCheckingServer starts a Session API with auth that checks its
// long-lived calls every 200ms, and returns it and its URL.
func startCheckingServer(auth Authorizer, tlsName string) (*Server, string) {
	GinkgoHelper()
	srv := mustNew(Config{Addr: "127.0.0.1:0", Client: server.Client, Reader: server.Reader, Schedulers: server.Schedulers,
		Budgets: server.Budgets, Auth: auth, RetainedEvents: retainedEvents, ReauthorizeInterval: 200 * time.Millisecond,
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

// unreachableAuth is a KubeAuthorizer whose token reviews fail, as when
// the API server does not answer, while down is set.
type unreachableAuth struct {
	*KubeAuthorizer
	down atomic.Bool
}

func (a *unreachableAuth) Authenticate(ctx context.Context, r *http.Request) (Caller, error) {
	if a.down.Load() {
		return Caller{}, reviewError("TokenReview", errors.New("dial tcp: connection refused"))
	}
	return a.KubeAuthorizer.Authenticate(ctx, r)
}

// workerOf is the connected worker name of namespace ns of srv, or nil.
func workerOf(srv *Server, ns, name string) *direct.WorkerInfo {
	for _, w := range srv.DirectHub().Workers() {
		if w.Namespace == ns && w.Name == name {
			return &w
		}
	}
	return nil
}

// rawStream is a Direct stream the spec writes frames on itself.
type rawStream struct {
	pw *io.PipeWriter
	// ended is closed when the manager's body ends.
	ended chan struct{}
}

// openRawStream opens a Direct stream on the suite's server with token and
// a Hello of worker name of namespace ns, and waits for its Welcome. It
// pings the manager until the stream ends.
func openRawStream(token, ns, name string) *rawStream {
	GinkgoHelper()
	roots := x509.NewCertPool()
	Expect(roots.AppendCertsFromPEM(server.CABundle())).To(BeTrue())
	hc := &http.Client{Transport: &http.Transport{ForceAttemptHTTP2: true,
		TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	pr, pw := io.Pipe()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+workerproto.DirectPath, pr)
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", workerproto.DirectContentType)
	s := &rawStream{pw: pw, ended: make(chan struct{})}
	go func() {
		defer GinkgoRecover()
		s.send(workerproto.WorkerFrame{Hello: &workerproto.DirectHello{Worker: name, Namespace: ns, Capacity: 1,
			CommandTypes: []string{executor.NoopCommandType}}})
	}()
	resp, err := hc.Do(req) //nolint:bodyclose // closed by the DeferCleanup below, when the spec ends
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { _ = resp.Body.Close() })
	Expect(resp.StatusCode).To(Equal(http.StatusOK))
	body := bufio.NewReader(resp.Body)
	line, err := body.ReadBytes('\n')
	Expect(err).NotTo(HaveOccurred())
	var welcome workerproto.ManagerFrame
	Expect(json.Unmarshal(line, &welcome)).To(Succeed())
	Expect(welcome.Welcome).NotTo(BeNil())
	go func() {
		defer close(s.ended)
		_, _ = io.Copy(io.Discard, body)
	}()
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-s.ended:
				return
			case <-t.C:
				b, _ := json.Marshal(workerproto.WorkerFrame{Ping: true})
				if _, err := pw.Write(append(b, '\n')); err != nil {
					return
				}
			}
		}
	}()
	DeferCleanup(func() { _ = pw.Close() })
	return s
}

// send writes one frame on the stream; a stream that ended takes none.
func (s *rawStream) send(f workerproto.WorkerFrame) {
	b, err := json.Marshal(f)
	Expect(err).NotTo(HaveOccurred())
	_, _ = s.pw.Write(append(b, '\n'))
}

// streamsEnded is how many Direct streams ended for reason.
func streamsEnded(reason string) float64 {
	return testutil.ToFloat64(direct.StreamsEnded.WithLabelValues(reason))
}

var _ = Describe("Direct lanes: token rotation", func() {
	It("keeps a stream, and the attempt it runs, past the end of the token it connected with", func() {
		t := newTenant()
		t.newQueue(directLanesAfter(time.Minute))
		t.newSession("s", nil)
		workerToken(t.ns, "worker", true)
		first := boundToken(t.ns, "worker", "token-1")

		By("a Session API that checks its streams every 200ms, with answers reused for 1s")
		srv, url := startCheckingServer(&KubeAuthorizer{Client: reviews, TTL: time.Second}, "direct-rotation-tls")
		tokenFile := startRotatingWorker(srv, url, t.ns, "w1", first, 100*time.Millisecond)
		since := workerOf(srv, t.ns, "w1").Since
		// w2 connected with the same token never rotates it: its stream
		// ends once the token does, which shows that the streams were
		// checked after that.
		startRotatingWorker(srv, url, t.ns, "w2", first, time.Hour)

		By("a command runs on w1 until the spec lets it end")
		gate := filepath.Join(GinkgoT().TempDir(), "go")
		c, err := sessionapi.NewClient(url, sessionapi.WithToken(t.token), sessionapi.WithCA(srv.CABundle()))
		Expect(err).NotTo(HaveOccurred())
		done := make(chan *sessionapi.Command, 1)
		go func() {
			defer GinkgoRecover()
			cmd, err := c.Session(t.ns, "s").Submit(ctx, sessionapi.SubmitRequest{ID: "long", Type: "bash", Lane: "direct",
				Payload: json.RawMessage(`{"command":"while [ ! -e ` + gate + ` ]; do sleep 0.05; done; echo through"}`)})
			Expect(err).NotTo(HaveOccurred())
			done <- cmd
		}()
		Eventually(func() int {
			if w := workerOf(srv, t.ns, "w1"); w != nil {
				return w.Busy
			}
			return 0
		}).Should(Equal(1))

		By("the kubelet rotates w1's token: w1 sends it on its stream")
		accepted := testutil.ToFloat64(directTokenRefreshes.WithLabelValues(tokenAccepted))
		writeAtomically(tokenFile, boundToken(t.ns, "worker", "token-2"))
		Eventually(func() float64 { return testutil.ToFloat64(directTokenRefreshes.WithLabelValues(tokenAccepted)) }, "20s").
			Should(Equal(accepted + 1))

		By("the first token ends: w2's stream ends at the next check, w1's goes on")
		Expect(k8sClient.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: "token-1"}})).To(Succeed())
		Eventually(func() *direct.WorkerInfo { return workerOf(srv, t.ns, "w2") }, "30s").Should(BeNil())
		Consistently(func() *direct.WorkerInfo { return workerOf(srv, t.ns, "w1") }, "1s").Should(
			And(Not(BeNil()), HaveField("Since", since), HaveField("Busy", 1)), "w1 keeps its stream and its attempt")

		By("the command ends Succeeded, in its first attempt")
		Expect(os.WriteFile(gate, nil, 0o600)).To(Succeed())
		var cmd *sessionapi.Command
		Eventually(done, "30s").Should(Receive(&cmd))
		Expect(cmd.State).To(Equal(sessionapi.StateSucceeded), "%+v", cmd)
		Expect(cmd.Attempt).To(BeEquivalentTo(1), "no retry")
		Expect(workerOf(srv, t.ns, "w1")).To(HaveField("Since", since), "the same stream")
	})

	It("reviews a rotated token again at the next check when the API server could not review it", func() {
		t := newTenant()
		workerToken(t.ns, "worker", true)
		first := boundToken(t.ns, "worker", "token-1")
		auth := &unreachableAuth{KubeAuthorizer: &KubeAuthorizer{Client: reviews, TTL: time.Second}}
		srv, url := startCheckingServer(auth, "direct-deferred-tls")
		tokenFile := startRotatingWorker(srv, url, t.ns, "w1", first, 100*time.Millisecond)
		since := workerOf(srv, t.ns, "w1").Since

		By("the API server does not answer when the worker sends its rotated token: the stream goes on")
		refreshes := func(outcome string) float64 { return testutil.ToFloat64(directTokenRefreshes.WithLabelValues(outcome)) }
		deferred, accepted := refreshes(tokenDeferred), refreshes(tokenAccepted)
		auth.down.Store(true)
		writeAtomically(tokenFile, boundToken(t.ns, "worker", "token-2"))
		Eventually(func() float64 { return refreshes(tokenDeferred) }, "20s").Should(BeNumerically(">", deferred))
		Expect(workerOf(srv, t.ns, "w1")).To(HaveField("Since", since))

		By("the first token ends while the API server is away; once it answers, the kept token is accepted at the next check")
		Expect(k8sClient.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: "token-1"}})).To(Succeed())
		auth.down.Store(false)
		Eventually(func() float64 { return refreshes(tokenAccepted) }, "20s").Should(Equal(accepted + 1))
		Consistently(func() *direct.WorkerInfo { return workerOf(srv, t.ns, "w1") }, "2s").Should(
			And(Not(BeNil()), HaveField("Since", since)), "w1 keeps its stream, checked with its new token")
	})

	It("ends a stream whose Token frame is not a valid token of its own identity", func() {
		t := newTenant()
		token := workerToken(t.ns, "worker", true)
		intruder := workerToken(t.ns, "intruder", true)
		refused := streamsEnded(direct.EndTokenRefused)

		By("another service account's token, with the same rights")
		s := openRawStream(token, t.ns, "w1")
		s.send(workerproto.WorkerFrame{Token: intruder})
		Eventually(s.ended, "20s").Should(BeClosed())
		Expect(streamsEnded(direct.EndTokenRefused)).To(Equal(refused + 1))
		Expect(workerOf(server, t.ns, "w1")).To(BeNil())
		By("the intruder's identity gained nothing: the worker's own user takes its name again")
		s = openRawStream(token, t.ns, "w1")

		By("a token that is not valid")
		s.send(workerproto.WorkerFrame{Token: "not-a-token"})
		Eventually(s.ended, "20s").Should(BeClosed())
		Expect(streamsEnded(direct.EndTokenRefused)).To(Equal(refused + 2))

		By("a token over the bound")
		tooLarge := streamsEnded(direct.EndTooLarge)
		s = openRawStream(token, t.ns, "w1")
		s.send(workerproto.WorkerFrame{Token: strings.Repeat("x", workerproto.MaxDirectTokenBytes+1)})
		Eventually(s.ended, "20s").Should(BeClosed())
		Expect(streamsEnded(direct.EndTooLarge)).To(Equal(tooLarge + 1))
	})

	It("ends a stream that floods Token frames", func() {
		t := newTenant()
		workerToken(t.ns, "worker", true)
		token := boundToken(t.ns, "worker", "token-1")
		rotated := boundToken(t.ns, "worker", "token-2")
		flood := streamsEnded(direct.EndTokenFlood)
		accepted := testutil.ToFloat64(directTokenRefreshes.WithLabelValues(tokenAccepted))

		s := openRawStream(token, t.ns, "w1")
		for range 100 {
			s.send(workerproto.WorkerFrame{Token: rotated})
		}
		Eventually(s.ended, "20s").Should(BeClosed())
		Expect(streamsEnded(direct.EndTokenFlood)).To(Equal(flood + 1))
		Expect(testutil.ToFloat64(directTokenRefreshes.WithLabelValues(tokenAccepted))).To(BeNumerically("<=", accepted+1),
			"one token is reviewed at most")
	})
})
