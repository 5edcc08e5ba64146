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
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// managerContainer is the name of the manager's container in its pod (the
// chart's and config/manager's).
const managerContainer = "manager"

// inClusterNamespace is where a pod finds its own namespace.
const inClusterNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// leaseLocks returns two locks on the Lease ns/name with one identity, the
// pod's name and a unique suffix (as controller-runtime names a replica):
// one for the leader election, one for the takeover, which must not share
// the election's state.
func (l *leaderElection) leaseLocks(cfg *rest.Config, ns, name string) (election, takeover resourcelock.Interface, err error) {
	host, err := os.Hostname()
	if err != nil {
		return nil, nil, err
	}
	id := host + "_" + string(uuid.NewUUID())
	cfg = rest.AddUserAgent(rest.CopyConfig(cfg), "leader-election")
	// A hung request must not outlast the renew deadline.
	cfg.Timeout = max(l.renewDeadline/2, time.Second)
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	coord, err := coordinationv1client.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	newLock := func() (resourcelock.Interface, error) {
		return resourcelock.New(resourcelock.LeasesResourceLock, ns, name, core, coord, resourcelock.ResourceLockConfig{Identity: id})
	}
	if election, err = newLock(); err != nil {
		return nil, nil, err
	}
	takeover, err = newLock()
	return election, takeover, err
}

// withTakeover has the manager of options o elect its leader with a Lease
// lock of this package's making, held through outages of the API server
// (leaseHold, which also gates the manager's writes), and returns the
// takeover that shares its identity, nil when the Lease's namespace is not
// known (the manager runs out of a cluster: controller-runtime's own lock
// then serves alone).
func (l *leaderElection) withTakeover(cfg *rest.Config, o ctrl.Options) (ctrl.Options, *takeover, error) {
	ns := leaderNamespace(o.LeaderElectionNamespace)
	if !o.LeaderElection || ns == "" {
		return o, nil, nil
	}
	election, lock, err := l.leaseLocks(cfg, ns, o.LeaderElectionID)
	if err != nil {
		return o, nil, fmt.Errorf("build the leader election lock: %w", err)
	}
	hold := newLeaseHold(election, l.renewDeadline, l.outageHold, clock.RealClock{})
	o.LeaderElectionResourceLockInterface = hold
	newClient := o.NewClient
	if newClient == nil {
		newClient = client.New
	}
	o.NewClient = hold.gate(newClient)
	return o, &takeover{lock: lock, ns: ns, period: l.retryPeriod}, nil
}

// addTo runs the takeover on mgr's standbys.
func (t *takeover) addTo(mgr manager.Manager) error {
	t.pods, t.elected = mgr.GetAPIReader(), mgr.Elected()
	return mgr.Add(t)
}

// leaderNamespace is the namespace of the Lease: the flag's, else the pod's
// own; "" when neither is known (out of a cluster).
func leaderNamespace(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	b, err := os.ReadFile(inClusterNamespace)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// takeover lets a standby take the Lease at once from a leader whose
// process is known to have ended, instead of waiting out the lease
// duration: after a crash or a SIGKILL the kubelet restarts or reports the
// leader's container within about a second. A standby that has seen the
// Lease unchanged for two retry periods reads the holder's pod: when its
// manager container ended (or another process runs in it) after the holder
// took the Lease, the holder is gone, and the standby writes itself as the
// holder, conditional on the Lease's resourceVersion. Its leader election
// then finds itself holding the Lease and leads. A holder whose pod cannot
// be read, or whose node stopped reporting (a lost node), is left to the
// lease duration.
type takeover struct {
	lock    resourcelock.Interface
	pods    client.Reader
	ns      string
	period  time.Duration
	elected <-chan struct{}
}

// NeedLeaderElection is false: the takeover runs on standbys.
func (t *takeover) NeedLeaderElection() bool { return false }

// Start checks the Lease every retry period until this replica leads.
func (t *takeover) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("leader-takeover")
	ticker := time.NewTicker(t.period)
	defer ticker.Stop()
	var seen string
	var since time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.elected:
			return nil
		case <-ticker.C:
		}
		rec, raw, err := t.lock.Get(ctx)
		now := time.Now()
		if err != nil {
			continue
		}
		if string(raw) != seen {
			seen, since = string(raw), now
			continue
		}
		if now.Sub(since) < 2*t.period || rec.HolderIdentity == "" || rec.HolderIdentity == t.lock.Identity() {
			continue
		}
		gone, why := t.holderGone(ctx, rec)
		if !gone {
			continue
		}
		took := *rec
		took.HolderIdentity = t.lock.Identity()
		took.AcquireTime, took.RenewTime = metav1.NewTime(now), metav1.NewTime(now)
		took.LeaderTransitions++
		if err := t.lock.Update(ctx, took); err != nil {
			log.Info("Could not take the Lease of a leader that is gone", "holder", rec.HolderIdentity, "error", err.Error())
			continue
		}
		log.Info("Took the Lease of a leader that is gone", "holder", rec.HolderIdentity, "why", why)
		return nil
	}
}

// holderGone reads the pod of the Lease's holder and tells whether the
// holder's process has ended.
func (t *takeover) holderGone(ctx context.Context, rec *resourcelock.LeaderElectionRecord) (bool, string) {
	i := strings.LastIndex(rec.HolderIdentity, "_")
	if i <= 0 {
		return false, ""
	}
	pod := &corev1.Pod{}
	if err := t.pods.Get(ctx, client.ObjectKey{Namespace: t.ns, Name: rec.HolderIdentity[:i]}, pod); err != nil {
		return false, ""
	}
	return processEnded(pod, managerContainer, rec.AcquireTime.Time)
}

// processEnded tells whether the process in pod's container that took the
// Lease at acquired has ended, as the kubelet reports it: the container
// exited at or after acquired, or a process that started after acquired
// runs in it (the holder started before it took the Lease, and a container
// runs one process at a time). The kubelet and the holder share their
// node's clock; the kubelet's times are whole seconds, rounded down, which
// can only hide an end, never make one up. A stale status (the container's
// start not reported yet) shows only times before acquired.
func processEnded(pod *corev1.Pod, container string, acquired time.Time) (bool, string) {
	if acquired.IsZero() {
		return false, ""
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name != container {
			continue
		}
		for _, st := range []corev1.ContainerState{cs.State, cs.LastTerminationState} {
			if r := st.Running; r != nil && !r.StartedAt.IsZero() && r.StartedAt.Time.After(acquired) {
				return true, fmt.Sprintf("container %s restarted at %s, after the holder took the Lease", container, r.StartedAt.UTC().Format(time.RFC3339))
			}
			if x := st.Terminated; x != nil && !x.FinishedAt.Time.Before(acquired) {
				return true, fmt.Sprintf("container %s exited at %s (%s), after the holder took the Lease", container, x.FinishedAt.UTC().Format(time.RFC3339), x.Reason)
			}
		}
	}
	return false, ""
}
