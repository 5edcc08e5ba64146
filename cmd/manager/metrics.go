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
	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentlane/agentlane/internal/buildinfo"
	"github.com/agentlane/agentlane/internal/controller"
	"github.com/agentlane/agentlane/internal/direct"
	"github.com/agentlane/agentlane/internal/scheduling"
	"github.com/agentlane/agentlane/internal/sessionserver"
)

// registerMetrics adds agentlane's metrics (docs/metrics.md) to reg, the
// registry the manager's metrics endpoint serves beside
// controller-runtime's own: the build, the lane schedulers, the Session
// API and its Direct dispatcher (registered even when it is off, their
// series then stay empty) and
// the worker pools as the ExternalTask controller judges them.
func registerMetrics(reg prometheus.Registerer, controllers *controller.Controllers) error {
	buildinfo.Register(reg)
	if err := scheduling.RegisterMetrics(reg); err != nil {
		return err
	}
	if err := sessionserver.RegisterMetrics(reg); err != nil {
		return err
	}
	if err := direct.RegisterMetrics(reg); err != nil {
		return err
	}
	return controllers.RegisterMetrics(reg)
}
