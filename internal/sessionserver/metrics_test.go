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
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	dto "github.com/prometheus/client_model/go"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// apiSeries returns every series of the Session API's metrics that the
// manager's registry exports, by name and label set ("k=v,k=v"), with a
// counter's value or a histogram's sample count.
func apiSeries() map[string]map[string]float64 {
	GinkgoHelper()
	families, err := ctrlmetrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	out := map[string]map[string]float64{}
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "agentlane_session_api_") {
			continue
		}
		out[f.GetName()] = map[string]float64{}
		for _, m := range f.GetMetric() {
			out[f.GetName()][labelString(m)] = m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
		}
	}
	return out
}

func labelString(m *dto.Metric) string {
	var parts []string
	for _, l := range m.GetLabel() {
		parts = append(parts, l.GetName()+"="+l.GetValue())
	}
	return strings.Join(parts, ",")
}

// rawCall sends method to path with token and returns the status.
func rawCall(method, path, token string) int {
	GinkgoHelper()
	req, err := http.NewRequestWithContext(context.Background(), method, baseURL+path, nil)
	Expect(err).NotTo(HaveOccurred())
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := apiHTTPClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	return resp.StatusCode
}

var _ = Describe("Session API metrics", func() {
	It("count calls by route pattern, method and HTTP status, time them, and count error codes apart", func() {
		a := newTenant()
		a.newQueue(internalLanes())
		a.newSession("s1", nil)
		b := newTenant()
		before := apiSeries()

		_, err := a.session("s1").Stats(ctx)
		Expect(err).NotTo(HaveOccurred())
		_, err = clientWithToken(b.token).Session(a.ns, "s1").Stats(ctx)
		Expect(err).To(HaveOccurred())
		Expect(rawCall(http.MethodGet, fmt.Sprintf("/v1/namespaces/%s/sessions/s1/stats", a.ns), "")).To(Equal(http.StatusUnauthorized))

		after := apiSeries()
		delta := func(name, labels string) float64 { return after[name][labels] - before[name][labels] }
		for labels, want := range map[string]float64{
			"code=200,method=GET,route=/stats": 1,
			"code=403,method=GET,route=/stats": 1,
			"code=401,method=GET,route=/stats": 1,
		} {
			Expect(delta("agentlane_session_api_requests_total", labels)).To(Equal(want), "requests %s", labels)
			Expect(delta("agentlane_session_api_request_duration_seconds", labels)).To(Equal(want), "duration samples %s", labels)
		}
		Expect(delta("agentlane_session_api_errors_total", "error_code=Forbidden,method=GET,route=/stats")).To(Equal(1.0))
		Expect(delta("agentlane_session_api_errors_total", "error_code=Unauthenticated,method=GET,route=/stats")).To(Equal(1.0))
	})

	It("keep their labels bounded whatever paths, sessions and methods callers send", func() {
		a := newTenant()
		for i := range 20 {
			rawCall(http.MethodGet, fmt.Sprintf("/v1/namespaces/%s/sessions/secret-%d/commands/cmd-%d", a.ns, i, i), a.token)
			rawCall(fmt.Sprintf("BREW%d", i), fmt.Sprintf("/v1/namespaces/%s/sessions/secret-%d/stats", a.ns, i), a.token)
			rawCall(http.MethodGet, fmt.Sprintf("/no/such/secret-%d", i), a.token)
		}
		routes := []string{routeUnknown, routeDirectStream, routeAssignment}
		for _, rt := range server.routes() {
			routes = append(routes, rt.path)
		}
		status := regexp.MustCompile(`^[1-5][0-9][0-9]$`)
		methods := []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "other"}
		series := apiSeries()
		Expect(series).To(HaveKey("agentlane_session_api_requests_total"))
		for name, byLabels := range series {
			for labels := range byLabels {
				Expect(labels).NotTo(ContainSubstring("secret"), "%s{%s}", name, labels)
				Expect(labels).NotTo(ContainSubstring(a.ns), "%s{%s}", name, labels)
				for kv := range strings.SplitSeq(labels, ",") {
					k, v, _ := strings.Cut(kv, "=")
					switch k {
					case "route":
						Expect(slices.Contains(routes, v)).To(BeTrue(), "%s{%s}: route %q", name, labels, v)
					case "method":
						Expect(slices.Contains(methods, v)).To(BeTrue(), "%s{%s}: method %q", name, labels, v)
					case "code":
						Expect(v).To(MatchRegexp(status.String()), "%s{%s}", name, labels)
					}
				}
			}
		}
		Expect(series["agentlane_session_api_requests_total"]).To(HaveKey("code=405,method=other,route=/stats"))
		Expect(series["agentlane_session_api_requests_total"]).To(HaveKey("code=404,method=GET,route=unknown"))
		Expect(series["agentlane_session_api_requests_total"]).To(HaveKey("code=404,method=GET,route=/commands/{id}"))
	})
})
