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
	version, revision := Version, Revision
	t.Cleanup(func() { Version, Revision = version, revision })
	Version, Revision = "v1.2.3", "0123abc"
	want := Info{Version: "v1.2.3", Revision: "0123abc", GoVersion: runtime.Version()}
	if got := Read(); got != want {
		t.Errorf("Read() = %+v, want %+v", got, want)
	}
}
