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

// Package buildinfo says which build of agentlane runs, for the
// agentlane_build_info metric that the manager and the worker export.
package buildinfo

import (
	"errors"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// Version and Revision are the release and the VCS commit the binary was
// built from, set at link time where Go cannot record them (an image built
// without the .git directory):
//
//	-ldflags "-X github.com/agentlane/agentlane/internal/buildinfo.Version=v0.2.0
//	          -X github.com/agentlane/agentlane/internal/buildinfo.Revision=0123abc"
//
// When unset, what Go recorded is used: the main module's version and the
// vcs.revision setting.
var Version, Revision string

// Info is one build's identity.
type Info struct {
	// Version is the release, the Go module version, or "unknown".
	Version string
	// Revision is the VCS commit the binary was built from, or "unknown".
	Revision string
	// GoVersion is the Go toolchain that built it.
	GoVersion string
}

// Read returns this binary's Info.
func Read() Info {
	info := Info{Version: Version, Revision: Revision, GoVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			info.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && info.Revision == "" {
				info.Revision = s.Value
			}
		}
	}
	if info.Version == "" {
		info.Version = "unknown"
	}
	if info.Revision == "" {
		info.Revision = "unknown"
	}
	return info
}

// NewCollector returns the agentlane_build_info gauge: 1, labelled with info.
func NewCollector(info Info) prometheus.Collector {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "agentlane_build_info",
		Help: "Always 1; its labels say which build runs: version, revision (VCS commit) and goversion.",
	}, []string{"version", "revision", "goversion"})
	g.WithLabelValues(info.Version, info.Revision, info.GoVersion).Set(1)
	return g
}

// Register adds agentlane_build_info for this binary to reg. The manager's
// and the worker's metrics both call it; a second call on the same
// registry does nothing.
func Register(reg prometheus.Registerer) {
	err := reg.Register(NewCollector(Read()))
	var already prometheus.AlreadyRegisteredError
	if err != nil && !errors.As(err, &already) {
		panic(err)
	}
}
