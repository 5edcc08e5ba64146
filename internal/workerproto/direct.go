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

package workerproto

import (
	"encoding/json"
	"time"
)

// The Direct stream (docs/workers.md, "Direct lanes"): a worker that serves
// Direct lanes holds one HTTP/2 request to the leading manager's Session
// API, POST DirectPath over TLS with its projected token for audience
// agentlane as bearer token. Both bodies are streams of JSON frames, one per
// line: the worker's request body carries WorkerFrames, the manager's
// response body ManagerFrames.
//
//  1. The worker's first frame is its Hello. The manager checks the token
//     and that its identity may serve the Hello's namespace (the access the
//     ExternalTask path needs: patch externaltasks/status there), then
//     answers 200 and a Welcome frame, or an HTTP error (401, 403, 400, 503
//     NotLeader) with a Session API error body.
//  2. The manager sends a Task frame for each attempt it hands the worker,
//     never more at once than the Hello's capacity; the worker answers
//     each with exactly one Result frame, on the same stream, naming the
//     task's id and attempt. A Result the manager did not send on this
//     stream, or sent for another attempt, is dropped.
//  3. A Cancel frame asks the worker to stop an attempt (it timed out, or
//     was cancelled); the worker kills its run and still sends its Result.
//  4. Either side sends a Ping frame when it has sent nothing for
//     DirectPingInterval; a side that hears nothing for DirectDeadAfter
//     takes the stream as lost. The manager fails the attempts it handed
//     over that stream (the lane's retry policy takes them); the worker
//     stops every attempt it received over it: their results can no
//     longer be accepted, and another manager may already run them again.
//  5. A worker that is told to stop sends a Drain frame: the manager hands
//     it nothing more, and the worker closes the stream once its attempts
//     ended.
//  6. The manager checks the stream's token again every few seconds and
//     ends the stream once it is no longer valid. A worker whose token file
//     changed (the kubelet rotates a projected token at 80% of its life)
//     sends the new token in a Token frame, at most one per
//     DirectMinTokenInterval and at most MaxDirectTokenBytes long; it
//     checks its file every DirectTokenCheckInterval. The manager reviews
//     the token as it reviews a stream's, requires it to name the identity
//     the stream was admitted with (the same user and UID, the same pod,
//     pod UID and node for a pod-bound token) with the same right to serve
//     the Hello's namespace, and checks the stream with it from then on: a
//     rotation loses no attempt. A Token frame whose token is not valid,
//     names another identity or lacks that right, that is too long, or that
//     comes sooner than DirectMinTokenInterval after the previous one, ends
//     the stream (as a lost stream: item 4). A token the manager cannot
//     review for now (the API server unreachable) is reviewed again at the
//     next check, while the stream goes on with the token it has.
const (
	// DirectPath is the Session API path of the Direct stream.
	DirectPath = "/v1/direct/stream"
	// DirectContentType is the content type of both bodies.
	DirectContentType = "application/x-ndjson"

	// DirectPingInterval is how often a quiet side sends a Ping.
	DirectPingInterval = 2 * time.Second
	// DirectDeadAfter is how long a side waits for any frame before it
	// takes the stream as lost.
	DirectDeadAfter = 3 * DirectPingInterval

	// MaxDirectCapacity bounds a Hello's capacity.
	MaxDirectCapacity = 1024
	// MaxDirectFrameBytes bounds one frame of either side: a task's
	// payload, or a result's output, with room for the frame around it.
	MaxDirectFrameBytes = 4 << 20

	// MaxDirectTokenBytes bounds the token of a Token frame.
	MaxDirectTokenBytes = 16 << 10
	// DirectMinTokenInterval is the least time between two Token frames of
	// a stream; one that comes sooner ends the stream.
	DirectMinTokenInterval = 10 * time.Second
	// DirectTokenCheckInterval is how often a worker reads its token file
	// for a rotated token.
	DirectTokenCheckInterval = 30 * time.Second
)

// DirectHello introduces a worker on its stream.
type DirectHello struct {
	// Worker is the worker's name, usually its pod name (a DNS subdomain).
	Worker string `json:"worker"`
	// Node is the node it runs on.
	Node string `json:"node,omitempty"`
	// Namespace is the namespace whose tasks it runs.
	Namespace string `json:"namespace"`
	// Incarnation names this process of the worker (see
	// IncarnationAnnotation).
	Incarnation string `json:"incarnation,omitempty"`
	// Capacity is how many attempts it runs at once, 1 to
	// MaxDirectCapacity.
	Capacity int `json:"capacity"`
	// Queues, Lanes and CommandTypes are what it serves; empty Queues or
	// Lanes mean all. CommandTypes are those its executors run.
	Queues       []string `json:"queues,omitempty"`
	Lanes        []string `json:"lanes,omitempty"`
	CommandTypes []string `json:"commandTypes,omitempty"`
	// Labels are matched against a lane's workerSelector.
	Labels map[string]string `json:"labels,omitempty"`
}

// DirectResult is the outcome of one attempt the manager sent.
type DirectResult struct {
	ID      string `json:"id"`
	Attempt int    `json:"attempt"`
	Success bool   `json:"success"`
	// ExitCode is the process's exit code, for command types that run one.
	ExitCode int `json:"exitCode,omitempty"`
	// Output is the JSON output the ExternalTask path reports in
	// status.result.result.
	Output json.RawMessage `json:"output,omitempty"`
	// Error explains a failure.
	Error string `json:"error,omitempty"`
	// Cancelled is set when the attempt stopped because of a Cancel frame
	// or because the worker was stopping.
	Cancelled bool `json:"cancelled,omitempty"`
	// StartedAt is when the worker started the attempt's run, in Unix
	// nanoseconds of the worker's clock; 0 when it ran nothing (a task it
	// refused). It is for measurement only: the manager clamps it between
	// its sending of the Task and its receipt of the Result, and nothing
	// it orders, times out or records depends on it.
	StartedAt int64 `json:"startedAt,omitempty"`
}

// WorkerFrame is one frame a worker sends; exactly one field is set.
type WorkerFrame struct {
	Hello  *DirectHello  `json:"hello,omitempty"`
	Result *DirectResult `json:"result,omitempty"`
	Ping   bool          `json:"ping,omitempty"`
	Drain  bool          `json:"drain,omitempty"`
	// Token is the worker's rotated token, which the manager checks the
	// stream with from then on (item 6 of the protocol).
	Token string `json:"token,omitempty"`
}

// DirectWelcome accepts a worker's stream.
type DirectWelcome struct {
	// Manager names the manager replica that leads, and RunID its run as
	// leader: a worker that reconnects to another run knows every attempt
	// of the earlier one is gone.
	Manager string `json:"manager,omitempty"`
	RunID   string `json:"runId"`
}

// DirectTask is one attempt the manager hands a worker.
type DirectTask struct {
	ID          string          `json:"id"`
	Attempt     int             `json:"attempt"`
	Namespace   string          `json:"namespace"`
	Queue       string          `json:"queue"`
	Lane        string          `json:"lane"`
	Session     string          `json:"session"`
	CommandType string          `json:"commandType"`
	RunID       string          `json:"runId,omitempty"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	// Timeout is how long the attempt may still run, in milliseconds; the
	// manager cancels it then in any case.
	TimeoutMillis int64 `json:"timeoutMillis,omitempty"`
	// Traceparent is the W3C traceparent of the manager's dispatch span of
	// this attempt, the parent of the worker's run span; empty when the
	// manager does not trace. A worker accepts only a valid version-00
	// value and starts a new trace otherwise.
	Traceparent string `json:"traceparent,omitempty"`
}

// DirectCancel asks a worker to stop an attempt.
type DirectCancel struct {
	ID      string `json:"id"`
	Attempt int    `json:"attempt"`
	Reason  string `json:"reason,omitempty"`
}

// ManagerFrame is one frame the manager sends; exactly one field is set.
type ManagerFrame struct {
	Welcome *DirectWelcome `json:"welcome,omitempty"`
	Task    *DirectTask    `json:"task,omitempty"`
	Cancel  *DirectCancel  `json:"cancel,omitempty"`
	Ping    bool           `json:"ping,omitempty"`
}
