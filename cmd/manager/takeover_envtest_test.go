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
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestTakeoverFromAGoneLeader runs a standby's leader election, as main
// sets it up, on a real API server against a Lease of a minute held by a
// leader in pod "old": while the kubelet reports the holder's container
// running since before it took the Lease, the standby waits; once it
// reports the container restarted, the standby takes the Lease and its
// leader election leads, long before the minute is out.
func TestTakeoverFromAGoneLeader(t *testing.T) {
	ctx, cfg, c := startAPIServer(t)

	const ns, name = "default", "manager.agentlane.io"
	acquired := time.Now().Add(-10 * time.Second)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "old"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: managerContainer, Image: "manager"}}}}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	setState := func(st, last corev1.ContainerState) {
		t.Helper()
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: managerContainer, State: st, LastTerminationState: last}}
		if err := c.Status().Update(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	setState(corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(acquired.Add(-time.Minute))}}, corev1.ContainerState{})
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: coordinationv1.LeaseSpec{
		HolderIdentity: ptr.To("old_1234"), LeaseDurationSeconds: ptr.To[int32](60),
		AcquireTime: &metav1.MicroTime{Time: acquired}, RenewTime: &metav1.MicroTime{Time: time.Now()},
	}}
	if err := c.Create(ctx, lease); err != nil {
		t.Fatal(err)
	}

	l := &leaderElection{leaseDuration: time.Minute, renewDeadline: 40 * time.Second, retryPeriod: 100 * time.Millisecond}
	electionLock, takeoverLock, err := l.leaseLocks(cfg, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	elected := make(chan struct{})
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: electionLock, LeaseDuration: l.leaseDuration, RenewDeadline: l.renewDeadline, RetryPeriod: l.retryPeriod,
		Callbacks: leaderelection.LeaderCallbacks{OnStartedLeading: func(context.Context) { close(elected) }, OnStoppedLeading: func() {}},
	})
	if err != nil {
		t.Fatal(err)
	}
	go elector.Run(ctx)
	tk := &takeover{lock: takeoverLock, pods: c, ns: ns, period: l.retryPeriod, elected: elected}
	go func() { _ = tk.Start(ctx) }()

	select { // ten checks of an unchanged Lease held by a running leader
	case <-elected:
		t.Fatal("took the Lease of a leader whose process runs")
	case <-time.After(time.Second):
	}
	killed := time.Now()
	setState(corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(killed.Add(time.Second))}},
		corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, FinishedAt: metav1.NewTime(killed)}})
	select {
	case <-elected:
	case <-time.After(30 * time.Second):
		t.Fatal("the standby did not lead after the leader's container restarted")
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(lease), lease); err != nil {
		t.Fatal(err)
	}
	if got := ptr.Deref(lease.Spec.HolderIdentity, ""); got != electionLock.Identity() {
		t.Errorf("Lease holder = %q, want the standby %q", got, electionLock.Identity())
	}
	if got := ptr.Deref(lease.Spec.LeaseTransitions, 0); got != 1 {
		t.Errorf("Lease transitions = %d, want 1", got)
	}
}
