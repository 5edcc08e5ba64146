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
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentlane/agentlane/internal/controller"
)

// describing records the names of the metrics registered with it.
type describing struct {
	prometheus.Registerer
	names []string
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (d *describing) Register(c prometheus.Collector) error {
	if err := d.Registerer.Register(c); err != nil {
		return err
	}
	ch := make(chan *prometheus.Desc, 64)
	go func() { c.Describe(ch); close(ch) }()
	for desc := range ch {
		if m := fqName.FindStringSubmatch(desc.String()); m != nil {
			d.names = append(d.names, m[1])
		}
	}
	return nil
}

// managerMetricsOfTheDocs lists the metrics docs/metrics.md documents for
// the manager: the rows of its "Manager" sections.
func managerMetricsOfTheDocs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("^\\| `(agentlane_[a-z_]+)` \\|")
	var names []string
	manager := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "### ") {
			manager = strings.HasPrefix(line, "### Manager")
		}
		if m := row.FindStringSubmatch(line); manager && m != nil {
			names = append(names, m[1])
		}
	}
	return names
}

// TestRegisterMetricsExportsWhatTheDocsList: the manager's one
// registration adds every metric docs/metrics.md lists for the manager, and
// no other; registering twice fails rather than exporting two copies.
func TestRegisterMetricsExportsWhatTheDocsList(t *testing.T) {
	reg := &describing{Registerer: prometheus.NewPedanticRegistry()}
	controllers := &controller.Controllers{Tasks: &controller.ExternalTaskReconciler{}}
	if err := registerMetrics(reg, controllers); err != nil {
		t.Fatal(err)
	}
	want := managerMetricsOfTheDocs(t)
	if len(want) == 0 {
		t.Fatal("docs/metrics.md lists no manager metric")
	}
	slices.Sort(want)
	slices.Sort(reg.names)
	if diff := cmp.Diff(want, reg.names); diff != "" {
		t.Errorf("registered metrics (-docs,+registered):\n%s", diff)
	}
	if err := registerMetrics(reg, controllers); err == nil {
		t.Error("a second registration succeeded; want an error")
	}
}
