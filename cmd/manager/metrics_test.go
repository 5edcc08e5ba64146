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

package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	"github.com/agentlane/agentlane/internal/testenv"
)

// TestMetricsNeedAuthorization scrapes the manager's metrics endpoint, as
// main configures it, on a real API server: no token is 401, a token whose
// account lacks the metrics-reader ClusterRole of config/rbac is 403, a
// token whose account has it is 200.
func TestMetricsNeedAuthorization(t *testing.T) {
	ctx, cfg, c := startAPIServer(t)

	addr := freeAddr(t)
	o := &options{metricsAddr: addr, metricsSecure: true}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := metricsserver.NewServer(o.metricsOptions(), cfg, httpClient)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Start(ctx) }()

	applyMetricsReader(ctx, t, c)
	reader := saToken(ctx, t, c, "scraper", true)
	stranger := saToken(ctx, t, c, "stranger", false)
	cases := map[string]struct {
		token string
		want  int
	}{
		"no token":                       {want: http.StatusUnauthorized},
		"a token without metrics-reader": {token: stranger, want: http.StatusForbidden},
		"a token with metrics-reader":    {token: reader, want: http.StatusOK},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			deadline := time.Now().Add(20 * time.Second)
			for {
				got, err := scrape(ctx, "https://"+addr+"/metrics", tc.token)
				if err == nil && got == tc.want {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("GET /metrics = %d, %v; want %d", got, err, tc.want)
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
	if got, err := scrape(ctx, "http://"+addr+"/metrics", reader); err == nil && got == http.StatusOK {
		t.Errorf("plain HTTP scrape answered 200; want the metrics over HTTPS only")
	}
}

// applyMetricsReader creates the ClusterRole of config/rbac.
func applyMetricsReader(ctx context.Context, t *testing.T, c client.Client) {
	t.Helper()
	b, err := os.ReadFile("../../config/rbac/metrics_reader_role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(b, role); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, role); err != nil {
		t.Fatal(err)
	}
}

// saToken creates a service account in default, bound to metrics-reader
// with a ClusterRoleBinding when bound, and returns a token of it.
func saToken(ctx context.Context, t *testing.T, c client.Client, name string, bound bool) string {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
	if err := c.Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	if bound {
		crb := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-metrics-reader"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "metrics-reader"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "default", Name: name}},
		}
		if err := c.Create(ctx, crb); err != nil {
			t.Fatal(err)
		}
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	if err := c.SubResource("token").Create(ctx, sa, tr); err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// scrape GETs url with token as the bearer token and returns the status.
// The endpoint's certificate is self-signed: the spec is about who may read,
// not about the certificate.
func scrape(ctx context.Context, url, token string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}}} //nolint:gosec // see above
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// freeAddr returns a loopback address no one listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	return fmt.Sprintf("127.0.0.1:%d", ln.Addr().(*net.TCPAddr).Port)
}

// startAPIServer starts an envtest API server without agentlane's CRDs for
// the test (skipping it when the control plane is not built) and returns a
// context that ends with the test, a config and a client of it.
func startAPIServer(t *testing.T) (context.Context, *rest.Config, client.Client) {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("KUBEBUILDER_ASSETS is not set: run with `make test`")
	}
	env, cfg, c, err := testenv.Start(testenv.Scheme(), testenv.WithoutCRDs())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx, cfg, c
}
