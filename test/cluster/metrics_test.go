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

package cluster

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var _ = Describe("the manager's metrics endpoint", func() {
	// scrape GETs the manager pod's /metrics with token (none when empty).
	// The endpoint's certificate is its own self-signed one: the spec is
	// about who may read.
	scrape := func(token string) (int, string) {
		GinkgoHelper()
		url := fmt.Sprintf("https://%s:%d/metrics", managerPod().Status.PodIP, metricsPort)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		Expect(err).NotTo(HaveOccurred())
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}}} //nolint:gosec // see above
		resp, err := hc.Do(req)
		Expect(err).NotTo(HaveOccurred())
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}

	It("answers 401 without a token, 403 to an account without metrics-reader and 200 to one with it", func() {
		for _, name := range []string{"scraper", "stranger"} {
			Expect(k8sClient.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})).To(Succeed())
		}
		Expect(k8sClient.Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "e2e-scraper-metrics-reader"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "agentlane-metrics-reader"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "scraper"}},
		})).To(Succeed())

		status, _ := scrape("")
		Expect(status).To(Equal(http.StatusUnauthorized))
		status, _ = scrape(audienceToken(ns, "stranger"))
		Expect(status).To(Equal(http.StatusForbidden))
		reader := audienceToken(ns, "scraper")
		Eventually(func(g Gomega) {
			status, body := scrape(reader)
			g.Expect(status).To(Equal(http.StatusOK))
			g.Expect(body).To(ContainSubstring("controller_runtime_"))
			// agentlane's own metrics are served beside controller-runtime's.
			g.Expect(body).To(MatchRegexp(`agentlane_build_info\{goversion="go[^"]+",revision="[^"]+",version="[^"]+"\} 1`))
		}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	})
})
