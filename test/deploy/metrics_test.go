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

package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/agentlane/agentlane/internal/controller"
	"github.com/agentlane/agentlane/internal/direct"
	"github.com/agentlane/agentlane/internal/scheduling"
	"github.com/agentlane/agentlane/internal/sessionserver"
	"github.com/agentlane/agentlane/internal/worker"
)

// descFields reads a metric's name and label names from its descriptor,
// which offers them only through String.
var descFields = regexp.MustCompile(`fqName: "([^"]*)".*variableLabels: \{([^}]*)\}`)

// registeredMetrics returns the agentlane metrics the manager and the worker
// register with controller-runtime's registry, by name, with their label
// names. Vectors without series yet do not show in Gather, so this reads
// the registered descriptors.
// registerManagerMetrics registers the manager's metrics once per test
// binary.
var registerManagerMetrics sync.Once

func registeredMetrics(t *testing.T) map[string][]string {
	t.Helper()
	worker.RegisterMetrics()
	registerManagerMetrics.Do(func() {
		// As cmd/manager registers them (registerMetrics), the worker pools
		// without an ExternalTask controller: only their descriptors are read.
		for _, register := range []func(prometheus.Registerer) error{scheduling.RegisterMetrics, sessionserver.RegisterMetrics,
			direct.RegisterMetrics, (&controller.Controllers{}).RegisterMetrics} {
			if err := register(ctrlmetrics.Registry); err != nil {
				t.Fatal(err)
			}
		}
	})
	registry, ok := ctrlmetrics.Registry.(prometheus.Collector)
	if !ok {
		t.Fatalf("controller-runtime's registry %T does not describe its metrics", ctrlmetrics.Registry)
	}
	descs := make(chan *prometheus.Desc)
	go func() {
		registry.Describe(descs)
		close(descs)
	}()
	metrics := map[string][]string{}
	for d := range descs {
		m := descFields.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read the name of %s", d)
		}
		if !strings.HasPrefix(m[1], "agentlane_") {
			continue
		}
		labels := []string{}
		for l := range strings.SplitSeq(m[2], ",") {
			if l = strings.TrimSpace(l); l != "" {
				labels = append(labels, l)
			}
		}
		metrics[m[1]] = labels
	}
	// The lane metrics and the Session API's and worker's: a registry that
	// lost one of the packages' metrics is a broken test, not a pass.
	for _, name := range []string{"agentlane_lane_commands_finished_total", "agentlane_session_api_requests_total",
		"agentlane_worker_tasks_finished_total", "agentlane_build_info"} {
		if _, ok := metrics[name]; !ok {
			t.Fatalf("%s is not registered; registered: %v", name, metrics)
		}
	}
	return metrics
}

// docRow is a row of a metrics table in docs/metrics.md: | `name` | type | `label`, ... | meaning |.
var docRow = regexp.MustCompile("(?m)^\\| `(agentlane_[a-z0-9_]+)` \\| (\\w+) \\| ([^|]*) \\|")

func TestMetricsDocListsEveryRegisteredMetric(t *testing.T) {
	registered := registeredMetrics(t)
	doc, err := os.ReadFile(filepath.Join(repoRoot(), "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string][]string{}
	for _, m := range docRow.FindAllStringSubmatch(string(doc), -1) {
		labels := []string{}
		if cell := strings.TrimSpace(m[3]); cell != "none" {
			for l := range strings.SplitSeq(cell, ",") {
				labels = append(labels, strings.Trim(strings.TrimSpace(l), "`"))
			}
		}
		documented[m[1]] = labels
		switch kind := m[2]; {
		case strings.HasSuffix(m[1], "_total") && kind != "counter",
			strings.HasSuffix(m[1], "_seconds") && kind != "histogram":
			t.Errorf("docs/metrics.md lists %s as a %s", m[1], kind)
		}
	}
	if diff := cmp.Diff(registered, documented); diff != "" {
		t.Errorf("metrics registered (-) and listed with their labels in docs/metrics.md (+) differ:\n%s", diff)
	}
}

// The Grafana dashboard's queries, and what they may name besides metrics.
var (
	metricName = regexp.MustCompile(`\bagentlane_[a-z0-9_]+`)
	// selector is a metric and its label matchers: name{label="v", ...}.
	selector = regexp.MustCompile(`\b(agentlane_[a-z0-9_]+)\{([^}]*)\}`)
	matcher  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	grouping = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
	// scrapeLabels are the target labels every scrape configuration gives
	// a series. Others (pod, namespace, service, ...) only some add, so a
	// query that groups by them shows nothing under the others.
	scrapeLabels = []string{"job", "instance"}
)

// queryProblems checks one PromQL expression against the registered
// metrics: every agentlane metric it names is registered, its label
// matchers name the metric's own labels, and it groups only by labels of
// the metrics it uses, le, or scrapeLabels. It returns the registered
// metrics the expression uses, and what is wrong with it.
func queryProblems(expr string, registered map[string][]string) (used, problems []string) {
	for _, name := range metricName.FindAllString(expr, -1) {
		base := baseMetric(name, registered)
		if _, ok := registered[base]; !ok {
			problems = append(problems, fmt.Sprintf("queries %s, which agentlane does not register", name))
			continue
		}
		used = append(used, base)
	}
	if len(used) == 0 {
		problems = append(problems, "queries no agentlane metric")
	}
	for _, s := range selector.FindAllStringSubmatch(expr, -1) {
		own := registered[baseMetric(s[1], registered)]
		for _, m := range matcher.FindAllStringSubmatch(s[2], -1) {
			if !slices.Contains(own, m[1]) && !slices.Contains(scrapeLabels, m[1]) && m[1] != "le" {
				problems = append(problems, fmt.Sprintf("selects %s by label %s; its labels are %v", s[1], m[1], own))
			}
		}
	}
	for _, l := range groupingLabels(expr) {
		if l != "le" && !slices.Contains(scrapeLabels, l) &&
			!slices.ContainsFunc(used, func(m string) bool { return slices.Contains(registered[m], l) }) {
			problems = append(problems, fmt.Sprintf("groups by %s, which none of %v has", l, used))
		}
	}
	return used, problems
}

// groupingLabels returns the labels of expr's by (...) and without (...).
func groupingLabels(expr string) []string {
	var labels []string
	for _, g := range grouping.FindAllStringSubmatch(expr, -1) {
		for l := range strings.SplitSeq(g[1], ",") {
			if l = strings.TrimSpace(l); l != "" {
				labels = append(labels, l)
			}
		}
	}
	return labels
}

// baseMetric maps a histogram's series to the histogram's name.
func baseMetric(name string, registered map[string][]string) string {
	if _, ok := registered[name]; ok {
		return name
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if _, ok := registered[base]; ok {
				return base
			}
		}
	}
	return name
}

// dashboard is what the test reads of a Grafana dashboard.
type dashboard struct {
	SchemaVersion int     `json:"schemaVersion"`
	UID           string  `json:"uid"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []variable `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int            `json:"id"`
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	Datasource *datasourceRef `json:"datasource"`
	Targets    []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

type datasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type variable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Query      json.RawMessage `json:"query"`
	Definition string          `json:"definition"`
}

func TestDashboardQueriesRegisteredMetrics(t *testing.T) {
	registered := registeredMetrics(t)
	data, err := os.ReadFile(filepath.Join(repoRoot(), "config", "grafana", "agentlane-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("the dashboard is not valid JSON: %v", err)
	}
	if d.SchemaVersion < 36 || d.UID == "" {
		t.Errorf("schemaVersion %d, uid %q: want a schema of Grafana 9 or later and a uid", d.SchemaVersion, d.UID)
	}

	vars := map[string]variable{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	if v := vars["datasource"]; v.Type != "datasource" || string(v.Query) != `"prometheus"` {
		t.Errorf("datasource variable = %+v, want a variable of type datasource for prometheus", v)
	}
	exprs := map[string]string{} // where -> query
	for _, name := range []string{"queue_namespace", "queue"} {
		v, ok := vars[name]
		if !ok || v.Type != "query" || !strings.HasPrefix(v.Definition, "label_values(") {
			t.Errorf("variable %s = %+v, want a label_values query", name, v)
			continue
		}
		exprs["variable "+name] = v.Definition
	}

	ids := map[int]bool{}
	queried := map[string]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d is used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q does not query the datasource variable: %+v", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no queries", p.Title)
		}
		for i, target := range p.Targets {
			exprs[fmt.Sprintf("panel %q query %d", p.Title, i+1)] = target.Expr
		}
	}

	for where, expr := range exprs {
		used, problems := queryProblems(expr, registered)
		for _, p := range problems {
			t.Errorf("%s %s: %s", where, p, expr)
		}
		for _, m := range used {
			queried[m] = true
		}
	}
	for name := range registered {
		if !queried[name] {
			t.Errorf("no panel of the dashboard shows %s", name)
		}
	}
}
