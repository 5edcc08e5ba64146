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

// Package direct is the manager's side of Direct lanes: a Hub that holds the
// workers' Direct streams (workerproto.DirectPath) and runs each attempt of
// a Direct command on one of them.
//
// # Guarantees
//
//   - A worker is admitted only after its Hello is valid (bounded lists, a
//     capacity of 1 to workerproto.MaxDirectCapacity) and Options.Admit
//     accepted its token and namespace. It receives only tasks of that
//     namespace.
//   - A worker never holds more attempts than its capacity: a slot is busy
//     from the Task frame until that attempt's Result arrives on the same
//     stream or the stream ends, even when Run already returned (timeout,
//     cancel).
//   - A Result counts only on the stream its attempt was sent over, for that
//     very attempt, once; every other Result is dropped and counted.
//   - Every Run returns: with the worker's Result, with ErrWorkerLost when the
//     stream that held the attempt ended, with ErrInterrupted when the hub
//     stopped leading (Close), or with its context's error.
//
// # Order and cost
//
// Run picks the least loaded worker of the task's namespace that serves the
// task and has a free slot (O(workers in the namespace)). When none has one,
// the attempt waits in its namespace's FIFO; a slot that frees goes to the
// oldest waiter the worker serves, and a worker that connects takes waiters
// in order until it is full. So no waiter is ever servable by a free slot,
// and a new attempt that finds a free worker does not overtake anyone.
//
// # Concurrency
//
// One mutex guards the hub's workers, waiters and attempts; it is never held
// while a stream is written. Each stream has one writer goroutine (the
// request's handler) that drains the stream's queue of frames and flushes
// once per batch, and one reader goroutine that decodes the worker's frames.
// The queue is bounded because a worker holds at most capacity attempts:
// at most one Task and one Cancel frame per attempt, plus a Ping.
//
// # Memory a worker can make the hub hold
//
// One frame (workerproto.MaxDirectFrameBytes) while it is decoded, the
// Outputs of at most capacity Results, a Hello of bounded lists, and at
// most MaxWorkers streams (MaxWorkersPerNamespace per namespace). Results
// for attempts the stream does not hold are dropped at once.
package direct
