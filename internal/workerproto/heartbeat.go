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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// JSON Pointer paths of the heartbeat fields of an ExternalTask's status.
const (
	PathLastHeartbeatAt = "/status/lastHeartbeatAt"
	PathProgress        = "/status/progress"
)

// Heartbeats are coalesced: whoever runs an attempt writes at most one
// heartbeat per HeartbeatInterval of the attempt's heartbeatTimeout, however
// often the command signals, so that a task that heartbeats in a tight loop
// costs the API server a bounded number of writes.
const (
	// MinHeartbeatInterval is the shortest interval between two heartbeat
	// writes of one attempt.
	MinHeartbeatInterval = 500 * time.Millisecond
	// DefaultHeartbeatInterval spaces the heartbeats (progress notes) of an
	// attempt whose lane sets no heartbeatTimeout.
	DefaultHeartbeatInterval = 5 * time.Second
	// MaxProgress is the longest progress note a heartbeat carries, in
	// bytes (status.progress allows 256 characters).
	MaxProgress = 256
)

// HeartbeatInterval is the least time between two heartbeat writes of an
// attempt whose lane's heartbeatTimeout is timeout (nil: none): a quarter
// of it, so that three heartbeats in a row may be late or lost before the
// attempt times out, and never less than MinHeartbeatInterval.
func HeartbeatInterval(timeout *metav1.Duration) time.Duration {
	if timeout == nil || timeout.Duration <= 0 {
		return DefaultHeartbeatInterval
	}
	return max(timeout.Duration/4, MinHeartbeatInterval)
}

// HeartbeatPatch records that the worker running f's attempt was alive at
// at, with the command's latest progress note when it has one. The fence
// is the completion's: the attempt must still be Running under f's holder.
// add, not replace: both fields are absent until the first heartbeat.
func HeartbeatPatch(f Fence, at metav1.Time, progress string) ([]byte, error) {
	ops := append(f.Tests(agentlanev1alpha1.ExternalTaskRunning), AddOp(PathLastHeartbeatAt, metav1.NewMicroTime(at.Time)))
	if progress != "" {
		ops = append(ops, AddOp(PathProgress, progress))
	}
	return json.Marshal(ops)
}
