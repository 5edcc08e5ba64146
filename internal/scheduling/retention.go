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

package scheduling

import (
	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// Defaults of an AgentSession's spec.retention, the same as the CRD's.
const (
	DefaultMaxRuns             = 100
	DefaultMaxEventsPerRun     = 10000
	DefaultMaxEventBytesPerRun = 16 << 20
	DefaultMaxTraceEvents      = 10000
	DefaultMaxFinishedTasks    = 100
)

// RetentionLimits are an AgentSession's retention caps with the defaults
// filled in. What each bounds:
//   - MaxRuns: the runs whose events the Session API keeps for the
//     session's stream, and the runs whose checkpoints the session store
//     keeps (within the store's own bound);
//   - MaxEventsPerRun and MaxEventBytesPerRun: one run's events in that
//     log, bytes counted on the events' JSON;
//   - MaxTraceEvents: the session's events in that log across runs;
//   - MaxFinishedTasks: the session's finished ExternalTasks, and the ended
//     commands the Session API still answers GET /commands/{id} for.
//
// The oldest go first; work in flight is never dropped.
type RetentionLimits struct {
	MaxRuns             int
	MaxEventsPerRun     int
	MaxEventBytesPerRun int64
	MaxTraceEvents      int
	MaxFinishedTasks    int
}

// RetentionLimitsOf reads a session's spec.retention; nil, or a field left
// out, gets the default.
func RetentionLimitsOf(r *agentlanev1alpha1.SessionRetention) RetentionLimits {
	out := RetentionLimits{MaxRuns: DefaultMaxRuns, MaxEventsPerRun: DefaultMaxEventsPerRun,
		MaxEventBytesPerRun: DefaultMaxEventBytesPerRun, MaxTraceEvents: DefaultMaxTraceEvents,
		MaxFinishedTasks: DefaultMaxFinishedTasks}
	if r == nil {
		return out
	}
	out.MaxRuns = intOr(r.MaxRuns, out.MaxRuns)
	out.MaxEventsPerRun = intOr(r.MaxEventsPerRun, out.MaxEventsPerRun)
	if r.MaxEventBytesPerRun != nil {
		out.MaxEventBytesPerRun = *r.MaxEventBytesPerRun
	}
	out.MaxTraceEvents = intOr(r.MaxTraceEvents, out.MaxTraceEvents)
	out.MaxFinishedTasks = intOr(r.MaxFinishedTasks, out.MaxFinishedTasks)
	return out
}

// intOr is *v, or fallback when v is nil.
func intOr(v *int32, fallback int) int {
	if v == nil {
		return fallback
	}
	return int(*v)
}
