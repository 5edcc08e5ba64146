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

package taskstate

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/truncate"
	"github.com/agentlane/agentlane/internal/workerproto"
)

// Heartbeats and deadline extensions of a running attempt. Whatever runs
// the attempt records its heartbeats in status.lastHeartbeatAt (a pool
// worker with workerproto.HeartbeatPatch, a handler through the Session
// API), at most once per workerproto.HeartbeatInterval; the ExternalTask
// controller tells the lane scheduler of each one it sees. An extension of
// the attempt's deadline is made in the scheduler and recorded in
// status.deadline, so that a new manager adopting the attempt restores it.

// clearHeartbeat removes the heartbeat of the attempt that was running.
func clearHeartbeat(st *Status) {
	st.LastHeartbeatAt, st.Progress = nil, ""
}

// clearAttemptTiming removes what an attempt's runner and owner recorded
// about its time: heartbeats, the extended deadline and its count.
func clearAttemptTiming(st *Status) {
	clearHeartbeat(st)
	st.HeartbeatTimeout, st.Deadline, st.Extensions = nil, nil, 0
}

// heartbeatDue tells whether a heartbeat at now is to be written: the
// attempt's first, or one at least HeartbeatInterval after the last.
func heartbeatDue(st *Status, now metav1.Time) bool {
	return st.LastHeartbeatAt == nil || now.Sub(st.LastHeartbeatAt.Time) >= workerproto.HeartbeatInterval(st.HeartbeatTimeout) ||
		now.Time.Before(st.LastHeartbeatAt.Time)
}

// ProgressNote bounds a progress note to workerproto.MaxProgress bytes.
func ProgressNote(s string) string {
	return truncate.Runes(s, workerproto.MaxProgress, "")
}

// WorkerHeartbeat (worker) is what workerproto.HeartbeatPatch does: the
// Running attempt f holds was alive at at, with its progress note when it
// has one.
func WorkerHeartbeat(st *Status, f workerproto.Fence, at metav1.Time, progress string) error {
	if err := checkFence("WorkerHeartbeat", st, f, agentlanev1alpha1.ExternalTaskRunning); err != nil {
		return err
	}
	beat := metav1.NewMicroTime(at.Time)
	st.LastHeartbeatAt = &beat
	if progress != "" {
		st.Progress = progress
	}
	return nil
}

// HandlerHeartbeat (Session API, for a handler) records that attempt n,
// offered to handlers, was alive at now, with its progress note when it
// has one. It is fenced as HandlerComplete is (the current attempt, holder
// Handler, without a result) and coalesced: it reports false, and changes
// nothing, when the last heartbeat is less than HeartbeatInterval old.
func HandlerHeartbeat(st *Status, now metav1.Time, n int32, progress string) (bool, error) {
	const t = "HandlerHeartbeat"
	switch {
	case st.Phase.IsTerminal():
		return false, refuse(t, st, ErrFinished)
	case st.Attempt != n:
		return false, refuse(t, st, ErrStaleAttempt, fmt.Sprintf("attempt %d, current %d", n, st.Attempt))
	case st.Result != nil:
		return false, refuse(t, st, ErrHasResult)
	case heldBy(st) != "" && heldBy(st) != agentlanev1alpha1.HolderHandler:
		return false, refuse(t, st, ErrNotHolder)
	case st.Phase != agentlanev1alpha1.ExternalTaskDispatched:
		return false, refuse(t, st, ErrPhase)
	}
	if !heartbeatDue(st, now) {
		return false, nil
	}
	beat := metav1.NewMicroTime(now.Time)
	st.LastHeartbeatAt = &beat
	if progress != "" {
		st.Progress = ProgressNote(progress)
	}
	return true, nil
}

// Extend (Session API, for the session's owner) records that the deadline
// of attempt n, still running, was moved to deadline, its extensions-th
// extension (the scheduler made it and bounds both).
func Extend(st *Status, n int32, deadline time.Time, extensions int) error {
	const t = "Extend"
	switch {
	case st.Phase.IsTerminal():
		return refuse(t, st, ErrFinished)
	case st.Attempt != n:
		return refuse(t, st, ErrStaleAttempt, fmt.Sprintf("attempt %d, current %d", n, st.Attempt))
	case st.Phase != agentlanev1alpha1.ExternalTaskDispatched && st.Phase != agentlanev1alpha1.ExternalTaskRunning:
		return refuse(t, st, ErrPhase)
	}
	d := metav1.NewTime(deadline)
	st.Deadline = &d
	st.Extensions = int32(min(extensions, 8))
	return nil
}
