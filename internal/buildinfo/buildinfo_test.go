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

package buildinfo

import (
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestBuildInfoIsOneSeriesLabelledWithTheBuild(t *testing.T) {
	reg := prometheus.NewRegistry()
	Register(reg)
	Register(reg) // the manager's and the worker's packages both register it
	want := `
# HELP agentlane_build_info Always 1; its labels say which build runs: version, revision (VCS commit) and goversion.
# TYPE agentlane_build_info gauge
agentlane_build_info{goversion="` + runtime.Version() + `",revision="` + Read().Revision + `",version="` + Read().Version + `"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "agentlane_build_info"); err != nil {
		t.Error(err)
	}
}

func TestVersionSetAtLinkTimeWins(t *testing.T) {
	old := Version
	t.Cleanup(func() { Version = old })
	Version = "v1.2.3"
	if got := Read(); got.Version != "v1.2.3" || got.Revision == "" || got.GoVersion != runtime.Version() {
		t.Errorf("Read() = %+v, want version v1.2.3, a revision and %s", got, runtime.Version())
	}
}
