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

// Package worker runs External-lane tasks on the node it runs on, following
// the protocol in docs/workers.md.
//
// A Worker keeps a heartbeat Lease (lease.go), watches only the ExternalTasks
// whose status.worker names it, claims each Dispatched attempt, runs it with
// an executor.Registry (internal/executor) and reports the result
// (worker.go). On shutdown it drains: it stops claiming, marks its Lease
// draining, lets the running attempts finish within the grace period, hands
// back the rest and deletes its Lease. RunTask (oneshot.go) runs a single
// task for a Job-target lane.
//
// Every status write that claims, completes or hands back an attempt is a
// JSON Patch fenced by test operations (internal/workerproto), so the API
// server rejects it when the manager has taken the attempt away; the worker
// then drops that write and never retries it. A worker therefore never needs
// to know whether it still holds an attempt: the API server decides.
//
// Each Worker is one incarnation of its worker name (incarnation.go): it
// advertises a fresh ULID on its Lease, and runs only the attempts the
// manager dispatched to that incarnation, never those of an earlier process
// of the same name, which may have run them already.
//
// A DirectClient (direct.go) is the worker's side of the Direct stream of
// Direct-target lanes (workerproto/direct.go): one HTTP/2 request to the
// leading manager's Session API over which the manager hands it attempts
// and it answers each with one Result, with no API server write. Its runs go
// through the same Registry, and their results are made as the ExternalTask
// path makes them (runCommand, taskResult). An attempt is the stream's: when
// the stream is lost its runs are stopped and their results dropped.
package worker
