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

// Package v1alpha1 is version v1alpha1 of the agentlane.io API.
//
// It defines three namespaced resources:
//
//   - LaneQueue (short name lq) is the scheduling policy and capacity pool that
//     agent sessions share: its priority lanes, their concurrency caps and
//     handler modes, command routing, retry, rate limits, priority boost,
//     pressure and depth alerts, dead letters and timeouts.
//   - AgentSession (short name asn) is one long-lived agent session bound to a
//     LaneQueue: its identity labels, how inbound messages queue, per-lane
//     handler overrides, budget, retention caps and an optional runtime pod
//     that the operator moves between nodes by passivation.
//   - ExternalTask (short name xt) is one command of an External lane made
//     durable so that a worker on any node (or a batch Job) can run it and
//     record the result.
//
// Validation that can be decided from one object alone is done at admission
// with OpenAPI constraints and CEL rules, so a bad spec is rejected by the API
// server with a message that names the problem. Relations between objects (for
// example that a session's lane overrides name lanes of its queue) are checked
// by the controllers and reported in status conditions.
//
// The resources carry all categories "agentlane", so `kubectl get agentlane`
// lists them together.
package v1alpha1
