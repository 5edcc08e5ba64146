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
// Package workerproto is the wire protocol between the manager and its
// workers (docs/workers.md), written down once for both sides:
//
//   - A worker's heartbeat Lease: its name (LeaseName), the labels and
//     annotations that advertise what the worker serves, and its duration.
//     The worker writes it with Encode; the manager reads it with Parse.
//   - The JSON Patches a worker sends to an ExternalTask's status to claim,
//     complete or hand back an attempt. Each starts with test operations (a
//     Fence) on the holder and the attempt number, so the API server rejects
//     the write once the manager has taken the attempt away. Each patch is
//     one transition of the task state machine (package taskstate: Claim,
//     Complete, StartAndComplete, HandBack), whose tests apply these
//     patches and check that they make exactly that transition.
//
// The package has no client: it only builds and reads objects.
package workerproto
