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
	"encoding/pem"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/agentlane/agentlane/internal/servingcert"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// audienceToken returns a token of the tenant's service account "agent"
// for audiences, as a projected service-account token would be.
func (t tenant) audienceToken(audiences ...string) string {
	GinkgoHelper()
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences: audiences, ExpirationSeconds: ptr.To[int64](3600)}}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: "agent"}}
	Expect(k8sClient.SubResource("token").Create(ctx, sa, tr)).To(Succeed())
	return tr.Status.Token
}

// servedCertificate connects to addr with tlsCfg and returns the leaf
// certificate the server presented.
func servedCertificate(addr string, tlsCfg *tls.Config) (*x509.Certificate, error) {
	conn, err := tls.Dial("tcp", addr, tlsCfg)
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }()
	return conn.ConnectionState().PeerCertificates[0], nil
}

// secretCA is the CA certificate kept in the suite server's Secret.
func secretCA() []byte {
	GinkgoHelper()
	secret := &corev1.Secret{}
	Expect(k8sClient.Get(ctx, tlsSecret, secret)).To(Succeed())
	return secret.Data[servingcert.KeyCACert]
}

var _ = Describe("TLS", func() {
	It("serves TLS by default, with a certificate that verifies against the generated CA for its names", func() {
		roots := x509.NewCertPool()
		Expect(roots.AppendCertsFromPEM(secretCA())).To(BeTrue())
		addr := strings.TrimPrefix(baseURL, "https://")
		for _, name := range []string{"127.0.0.1", "localhost"} {
			cert, err := servedCertificate(addr, &tls.Config{RootCAs: roots, ServerName: name, MinVersion: tls.VersionTLS12})
			Expect(err).NotTo(HaveOccurred(), "verifying the certificate for %s", name)
			Expect(cert.IsCA).To(BeFalse())
		}
		By("refusing a name the certificate does not hold")
		_, err := servedCertificate(addr, &tls.Config{RootCAs: roots, ServerName: "api.example.com", MinVersion: tls.VersionTLS12})
		Expect(err).To(MatchError(ContainSubstring("certificate is valid for")))
		By("failing verification with the system roots")
		_, err = servedCertificate(addr, &tls.Config{ServerName: "localhost", MinVersion: tls.VersionTLS12})
		Expect(err).To(HaveOccurred())
		By("answering a client that trusts the CA")
		resp, err := trustingClient(secretCA()).Get(baseURL + "/healthz")
		Expect(err).NotTo(HaveOccurred())
		Expect(resp.StatusCode).To(Equal(http.StatusOK))
		_ = resp.Body.Close()
	})

	It("refuses plain HTTP", func() {
		resp, err := http.Get("http://" + strings.TrimPrefix(baseURL, "https://") + "/healthz")
		Expect(err).NotTo(HaveOccurred())
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		Expect(resp.StatusCode).To(Equal(http.StatusBadRequest))
		Expect(string(body)).To(ContainSubstring("HTTP request to an HTTPS server"))
	})

	It("keeps the generated CA and certificate in its Secret across restarts, never overwriting them", func() {
		before := &corev1.Secret{}
		Expect(k8sClient.Get(ctx, tlsSecret, before)).To(Succeed())
		Expect(before.Data[servingcert.KeyCAKey]).NotTo(BeEmpty())
		for range 2 {
			restarted := mustNew(Config{TLS: TLS{Secret: tlsSecret, Hosts: []string{"localhost", "127.0.0.1"}},
				Client: server.Client, Reader: server.Reader, Schedulers: server.Schedulers, Budgets: server.Budgets, Auth: server.Auth})
			Expect(restarted.LoadTLS(ctx, k8sClient, k8sClient)).To(Succeed())
			Expect(restarted.CABundle()).To(Equal(before.Data[servingcert.KeyCACert]))
		}
		after := &corev1.Secret{}
		Expect(k8sClient.Get(ctx, tlsSecret, after)).To(Succeed())
		Expect(after.ResourceVersion).To(Equal(before.ResourceVersion), "the Secret was written")
		Expect(after.Data).To(Equal(before.Data))
	})

	It("serves a replaced certificate file after reloading it", func() {
		dir := GinkgoT().TempDir()
		certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
		write := func() *x509.Certificate {
			b, err := servingcert.Generate([]string{"127.0.0.1"}, server.Clock.Now())
			Expect(err).NotTo(HaveOccurred())
			Expect(os.WriteFile(keyFile+".new", b.Key, 0o600)).To(Succeed())
			Expect(os.WriteFile(certFile+".new", b.Cert, 0o600)).To(Succeed())
			Expect(os.Rename(keyFile+".new", keyFile)).To(Succeed())
			Expect(os.Rename(certFile+".new", certFile)).To(Succeed())
			block, _ := pem.Decode(b.Cert)
			cert, err := x509.ParseCertificate(block.Bytes)
			Expect(err).NotTo(HaveOccurred())
			return cert
		}
		first := write()
		files := mustNew(plainConfig(Config{Addr: "127.0.0.1:0", TLS: TLS{CertFile: certFile, KeyFile: keyFile}}))
		// Loaded before Start, as cmd/manager does: the server is not set
		// up from two goroutines at once.
		Expect(files.LoadTLS(ctx, nil, nil)).To(Succeed())
		sctx, stop := context.WithCancel(ctx)
		DeferCleanup(stop)
		go func() { _ = files.Start(sctx) }()
		addr, err := files.BoundAddr(ctx)
		Expect(err).NotTo(HaveOccurred())
		insecure := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12} //nolint:gosec // the spec compares serials
		Eventually(func(g Gomega) {
			cert, err := servedCertificate(addr, insecure)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cert.SerialNumber).To(Equal(first.SerialNumber))
		}).Should(Succeed())
		second := write()
		Eventually(func(g Gomega) {
			cert, err := servedCertificate(addr, insecure)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cert.SerialNumber).To(Equal(second.SerialNumber))
		}).Should(Succeed())
	})
})

var _ = Describe("token audiences", func() {
	var t tenant
	BeforeEach(func() {
		t = newTenant()
		t.newQueue(internalLanes())
		t.newSession("s1", nil)
	})

	It("accepts a token for the agentlane audience, with one TokenReview", func() {
		token := t.audienceToken("agentlane")
		Expect(claimedAudiences(token)).To(Equal([]string{"agentlane"}))
		before := reviews.tokenReviews.Load()
		_, err := clientWithToken(token).Session(t.ns, "s1").Stats(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(reviews.tokenReviews.Load() - before).To(Equal(int64(1)))
	})

	It("refuses a token for another audience with 401", func() {
		_, err := clientWithToken(t.audienceToken("some-other-service")).Session(t.ns, "s1").Stats(ctx)
		expectCode(err, http.StatusUnauthorized, sessionapi.CodeUnauthenticated)
	})

	It("refuses a token that claims agentlane but is signed by no one", func() {
		real := t.audienceToken("agentlane")
		parts := strings.Split(real, ".")
		forged := parts[0] + "." + parts[1] + "." + strings.Repeat("A", len(parts[2]))
		_, err := clientWithToken(forged).Session(t.ns, "s1").Stats(ctx)
		expectCode(err, http.StatusUnauthorized, sessionapi.CodeUnauthenticated)
	})

	It("refuses API-server tokens when told to, and still accepts agentlane's", func() {
		strict := &KubeAuthorizer{Client: k8sClient, RefuseAPIServerTokens: true}
		req := func(token string) *http.Request {
			r, err := http.NewRequest(http.MethodGet, baseURL, nil)
			Expect(err).NotTo(HaveOccurred())
			r.Header.Set("Authorization", "Bearer "+token)
			return r
		}
		_, err := strict.Authenticate(ctx, req(t.token))
		expectCode(err, http.StatusUnauthorized, sessionapi.CodeUnauthenticated)
		caller, err := strict.Authenticate(ctx, req(t.audienceToken("agentlane")))
		Expect(err).NotTo(HaveOccurred())
		Expect(caller.Username).To(Equal("system:serviceaccount:" + t.ns + ":agent"))
		By("accepting API-server tokens by default")
		_, err = (&KubeAuthorizer{Client: k8sClient}).Authenticate(ctx, req(t.token))
		Expect(err).NotTo(HaveOccurred())
	})
})
