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

package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"k8s.io/client-go/rest"
)

// sample is one Prometheus series: its labels and value.
type series struct {
	labels map[string]string
	value  float64
}

// metrics is a scrape: the series of each metric name.
type metrics map[string][]series

var labelPair = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// parseMetrics reads the Prometheus text format, enough of it for counters
// and gauges.
func parseMetrics(text string) metrics {
	m := metrics{}
	for _, line := range strings.Split(text, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest := line, ""
		if i := strings.IndexByte(line, '{'); i >= 0 {
			name, rest = line[:i], line[i:]
		} else if i := strings.IndexByte(line, ' '); i >= 0 {
			name, rest = line[:i], line[i:]
		}
		labels := map[string]string{}
		valuePart := rest
		if strings.HasPrefix(rest, "{") {
			end := strings.LastIndexByte(rest, '}')
			for _, p := range labelPair.FindAllStringSubmatch(rest[:end], -1) {
				labels[p[1]] = p[2]
			}
			valuePart = rest[end+1:]
		}
		f := strings.Fields(valuePart)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		m[name] = append(m[name], series{labels: labels, value: v})
	}
	return m
}

// sum adds the series of name whose labels match want.
func (m metrics) sum(name string, want map[string]string) float64 {
	total := 0.0
	for _, s := range m[name] {
		ok := true
		for k, v := range want {
			if s.labels[k] != v {
				ok = false
				break
			}
		}
		if ok {
			total += s.value
		}
	}
	return total
}

// apiServerMetrics scrapes the API server's /metrics as an administrator.
func apiServerMetrics(ctx context.Context, cfg *rest.Config) (metrics, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	return scrape(ctx, hc, strings.TrimSuffix(cfg.Host, "/")+"/metrics")
}

// scrape reads a metrics endpoint.
func scrape(ctx context.Context, hc *http.Client, url string) (metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return parseMetrics(string(b)), nil
}

// writeVerbs are the API server's request verbs that change something.
var writeVerbs = []string{"POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION"}

// writeCounts is the API server's write requests between two scrapes, by
// "resource[/subresource] VERB".
func writeCounts(before, after metrics) map[string]float64 {
	out := map[string]float64{}
	for _, s := range after["apiserver_request_total"] {
		verb := s.labels["verb"]
		isWrite := false
		for _, w := range writeVerbs {
			isWrite = isWrite || verb == w
		}
		if !isWrite {
			continue
		}
		key := s.labels["resource"]
		if sub := s.labels["subresource"]; sub != "" {
			key += "/" + sub
		}
		key += " " + verb
		out[key] += s.value
	}
	for _, s := range before["apiserver_request_total"] {
		key := s.labels["resource"]
		if sub := s.labels["subresource"]; sub != "" {
			key += "/" + sub
		}
		key += " " + s.labels["verb"]
		if _, ok := out[key]; ok {
			out[key] -= s.value
		}
	}
	for k, v := range out {
		if v == 0 {
			delete(out, k)
		}
	}
	return out
}

// sortedKeys returns the keys of m in order.
func sortedKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
