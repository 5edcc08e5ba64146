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

package main

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestProcessEnded: a standby takes the Lease early only when the kubelet
// reports that the holder's process ended after it took the Lease; a
// status that could be stale, another container, or no container status
// leaves it to the lease duration.
func TestProcessEnded(t *testing.T) {
	acquired := time.Date(2026, 1, 2, 3, 4, 5, 600_000_000, time.UTC)
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(acquired.Add(d).Truncate(time.Second)) }
	running := func(started metav1.Time) corev1.ContainerState {
		return corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}
	}
	exited := func(finished metav1.Time) corev1.ContainerState {
		return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error", FinishedAt: finished}}
	}
	tests := map[string]struct {
		name        string
		state, last corev1.ContainerState
		want        bool
	}{
		"the holder runs": {
			name: managerContainer, state: running(at(-time.Minute)),
		},
		"the holder runs, started in the second it took the Lease": {
			name: managerContainer, state: running(at(0)),
		},
		"restarted after the holder was killed": {
			name: managerContainer, state: running(at(3 * time.Second)), last: exited(at(2 * time.Second)), want: true,
		},
		"exited after the holder took the Lease, not restarted yet": {
			name: managerContainer, state: exited(at(2 * time.Second)), want: true,
		},
		"waiting to restart after the holder exited": {
			name:  managerContainer,
			state: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			last:  exited(at(2 * time.Second)), want: true,
		},
		"an exit before the holder took the Lease (an earlier process)": {
			name: managerContainer, state: running(at(-10 * time.Second)), last: exited(at(-11 * time.Second)),
		},
		"exited in the second the holder took the Lease, before it (rounded down)": {
			name: managerContainer, state: exited(at(-500 * time.Millisecond)),
		},
		"a stale status: still waiting to start": {
			name:  managerContainer,
			state: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}},
		},
		"another container restarted": {
			name: "sidecar", state: running(at(3 * time.Second)), last: exited(at(2 * time.Second)),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pod := &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
				{Name: tc.name, State: tc.state, LastTerminationState: tc.last},
			}}}
			if got, why := processEnded(pod, managerContainer, acquired); got != tc.want {
				t.Errorf("processEnded = %v (%q), want %v", got, why, tc.want)
			}
		})
	}
	if got, _ := processEnded(&corev1.Pod{}, managerContainer, acquired); got {
		t.Error("a pod without container statuses: the holder's process ended, want unknown")
	}
	pod := &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
		{Name: managerContainer, State: exited(at(2 * time.Second))},
	}}}
	if got, _ := processEnded(pod, managerContainer, time.Time{}); got {
		t.Error("a Lease without an acquire time: ended, want unknown")
	}
}
