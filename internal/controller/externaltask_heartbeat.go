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

package controller

import (
	"context"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// Heartbeats of held attempts. Whatever runs an attempt records its
// heartbeats in status.lastHeartbeatAt (coalesced by the writer); the
// controller tells the scheduler of each new value it sees, on the
// manager's clock (the writer's clock may differ), so that the lane's
// heartbeatTimeout ends an attempt whose runner went silent.

// heartbeatsSeen remembers, per task, the last heartbeat the controller
// passed to the scheduler, so that a pass run for another reason (a
// Lease renewal, a periodic check) does not count it again.
type heartbeatsSeen struct {
	mu   sync.Mutex
	last map[types.NamespacedName]seenBeat
}

type seenBeat struct {
	attempt int32
	at      metav1.MicroTime
}

// fresh records the heartbeat of attempt n at at, and tells whether it is
// one the controller has not seen.
func (h *heartbeatsSeen) fresh(key types.NamespacedName, n int32, at metav1.MicroTime) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if b, ok := h.last[key]; ok && b.attempt == n && b.at.Equal(&at) {
		return false
	}
	if h.last == nil {
		h.last = make(map[types.NamespacedName]seenBeat)
	}
	h.last[key] = seenBeat{attempt: n, at: at}
	return true
}

func (h *heartbeatsSeen) forget(key types.NamespacedName) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.last, key)
}

// noteHeartbeat tells the scheduler of a heartbeat of the held attempt n
// that the task's status shows and the controller has not passed on yet.
func (r *ExternalTaskReconciler) noteHeartbeat(ctx context.Context, b binding, task *agentlanev1alpha1.ExternalTask, n int32) {
	st := &task.Status
	if st.LastHeartbeatAt == nil || st.Attempt != n {
		return
	}
	if !r.heartbeats.fresh(client.ObjectKeyFromObject(task), n, *st.LastHeartbeatAt) {
		return
	}
	if err := b.queue.Heartbeat(task.Name, int(n)); err != nil {
		logf.FromContext(ctx).V(1).Info("Heartbeat of an attempt no longer running", "attempt", n, "reason", err.Error())
	}
}

// restoreDeadline gives an adopted attempt back the deadline its status
// records an extension to. The scheduler bounds it as any extension (a
// status that records more than the bounds allow gets the lane's timeout).
func restoreDeadline(b binding, task *agentlanev1alpha1.ExternalTask) {
	st := &task.Status
	if st.Deadline != nil {
		_, _ = b.queue.ExtendDeadlineTo(task.Name, int(st.Attempt), st.Deadline.Time)
	}
}

// laneHeartbeatTimeout is lane's heartbeatTimeout in lq, 0 when it sets none.
func laneHeartbeatTimeout(lq *agentlanev1alpha1.LaneQueue, lane string) time.Duration {
	if lq == nil {
		return 0
	}
	for i := range lq.Spec.Lanes {
		if l := &lq.Spec.Lanes[i]; string(l.Name) == lane && l.HeartbeatTimeout != nil {
			return l.HeartbeatTimeout.Duration
		}
	}
	return 0
}

// heartbeatDetail is what a heartbeat timeout's error says after the
// scheduler's prefix: "timed out: no heartbeat for 3s (lane execute
// heartbeatTimeout 3s)".
func heartbeatDetail(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "timed out: "); i >= 0 {
		return msg[i:]
	}
	return msg
}
