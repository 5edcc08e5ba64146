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
// Package scheduling holds the manager's in-process lane schedulers, one
// per LaneQueue, as state shared by the controllers (internal/controller)
// and the Session API (internal/sessionserver); neither imports the other.
//
// cmd/manager builds one Schedulers and hands it to both. The LaneQueue
// controller starts, reconfigures and stops schedulers (Ensure, Remove);
// the ExternalTask controller admits and closes tasks (TasksOf, TaskEvents);
// the Session API submits commands and messages (SubmitTask, Session). The
// schedulers call back into their consumers through Hooks, which
// cmd/manager binds once its consumers are built (Bind): what they do for
// sessions goes to one SessionObserver (the Session API's event streams)
// and, for the idle reaper, to OnSessionActivity (the AgentSession
// controller); a starting scheduler is refilled by Rebuild (the
// ExternalTask controller). Schedulers.Start coalesces status refreshes: at
// most one per LaneQueue per StatusInterval. RegisterMetrics adds the lane
// metrics to the manager's registry.
//
// See docs/architecture.md for which package owns which state.
package scheduling
