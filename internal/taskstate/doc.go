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

// Package taskstate owns the state machine of an ExternalTask's status:
// every change any component makes to it is one of the transitions below,
// a pure function over the status that refuses, with an error wrapping
// ErrIllegal, a change its actor may not make from the state it finds.
// Scope carries the transitions of one pass to the API server in one write.
//
// Phases and who moves them:
//
//	transition        actor                 from                    to
//	Wait              ExternalTask ctrl     "" or Queued            Queued (why it cannot be scheduled)
//	Grant             ExternalTask ctrl     not finished            same phase, attempt n with its slot
//	AwaitWorker       ExternalTask ctrl     not finished            Queued (attempt n has a slot, no worker)
//	Dispatch          ExternalTask ctrl     not finished            Dispatched to Workers, Job or Handler
//	EndAttempt        ExternalTask ctrl     attempt not recorded    same phase, the attempt recorded
//	Queue             ExternalTask ctrl     not finished            Queued (waiting for a slot or a retry)
//	Close             ExternalTask ctrl     not finished            Succeeded, Failed, TimedOut, DeadLettered, Cancelled
//	MarkFinished      ExternalTask ctrl     finished                same phase, Finished=True
//	Claim             worker (workerproto)  Dispatched, its fence   Running
//	Complete          worker (workerproto)  Running, its fence      Succeeded, or Running with a failed result
//	StartAndComplete  worker (workerproto)  Dispatched, its fence   Succeeded, or Running with a failed result
//	HandBack          worker (workerproto)  Dispatched or Running   Queued without a worker
//	HandlerComplete   Session API           Dispatched to Handler   Succeeded, or Running with a failed result
//	DelegateWait      delegation ctrl       "" or Queued            Queued (waiting for a worker slot)
//	DelegateStart     delegation ctrl       "" or Queued            Running, held by a worker session
//	FirstTurnPosted   delegation ctrl       Running, Delegate       Running, Claimed=True
//	DelegateEnd       delegation ctrl       not finished            Failed or TimedOut
//	SessionFinish     Session API           Running, its session    Succeeded or Failed
//	Deliver           delegation ctrl       finished                same phase, Delivered set
//	DirectRecord      Session API (Direct)  not finished            Dispatched (no worker) or Running, held Direct
//	DirectEnd         Session API (Direct)  not finished            Succeeded, Failed, TimedOut, DeadLettered, Cancelled
//
// A finished phase never changes (the CRD enforces it too). The kind of
// holder an attempt was dispatched to (status.holder: Workers, Job,
// Handler, Delegate, Direct) is recorded by Dispatch, DelegateStart and
// DirectRecord and read
// with HolderOf; tasks written before the field existed have theirs
// inferred once and recorded by the next manager write (RecordHolder).
//
// Workers write their transitions as fenced JSON Patches built by package
// workerproto, because a worker must not overwrite what the manager wrote
// since it read the task; this package's tests apply those patches and
// check that each makes exactly the change its transition describes.
package taskstate
