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
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// workerSightings judges whether a worker is alive by what the manager saw
// and when, on the manager's own clock, the way the node lifecycle
// controller keeps a probe time per node: a Lease's renewTime is the
// worker's clock and says nothing about whether the manager could see it.
//
// A worker is fresh while the manager has seen its Lease change (a new
// resourceVersion or renewTime) within the Lease's duration. A worker that
// is not fresh is lost only while the manager sees other workers' Leases
// change: when it has seen no worker Lease change for half a lease duration
// (one and a half heartbeats), it is blind (its watch or the API server is
// down, or every worker is) and declares nobody lost. When changes resume
// after such a gap, every worker's sighting is reset to now, so each has a
// full lease duration to renew after the outage.
//
// With no worker renewing at all (a pool of one that died) nobody is
// declared lost; the attempts' timeouts end what they held.
type workerSightings struct {
	mu   sync.Mutex
	seen map[types.NamespacedName]sighting
	// lastChange is when the manager last saw any worker Lease change.
	lastChange time.Time
}

// sighting is the last change the manager saw of one worker Lease.
type sighting struct {
	version  string        // resourceVersion and renewTime
	at       time.Time     // the manager's time when it saw the change
	duration time.Duration // the Lease's leaseDurationSeconds
}

// observe records the Lease as the manager sees it at now; a change from
// the last sighting (or a first sighting) counts as the worker seen alive.
func (s *workerSightings) observe(l *coordinationv1.Lease, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.observeLocked(l, now)
}

func (s *workerSightings) observeLocked(l *coordinationv1.Lease, now time.Time) sighting {
	key := types.NamespacedName{Namespace: l.Namespace, Name: l.Name}
	version := l.ResourceVersion
	if rt := l.Spec.RenewTime; rt != nil {
		version += "/" + rt.UTC().Format(time.RFC3339Nano)
	}
	cur, ok := s.seen[key]
	cur.duration = time.Duration(ptr.Deref(l.Spec.LeaseDurationSeconds, 0)) * time.Second
	if ok && cur.version == version {
		s.seen[key] = cur
		return cur
	}
	if s.seen == nil {
		s.seen = make(map[types.NamespacedName]sighting)
	}
	cur.version, cur.at = version, now
	s.seen[key] = cur
	s.changedLocked(now)
	return cur
}

// forget drops the sighting of a deleted Lease; the deletion is a change.
func (s *workerSightings) forget(l *coordinationv1.Lease, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.seen, types.NamespacedName{Namespace: l.Namespace, Name: l.Name})
	s.changedLocked(now)
}

// changedLocked notes a change seen at now, ending a gap if there was one.
func (s *workerSightings) changedLocked(now time.Time) {
	if !s.lastChange.IsZero() && s.blindLocked(now) {
		for k, v := range s.seen {
			v.at = now
			s.seen[k] = v
		}
	}
	s.lastChange = now
}

// blindLocked tells whether the manager has seen no worker Lease change for
// longer than half the longest lease duration.
func (s *workerSightings) blindLocked(now time.Time) bool {
	var longest time.Duration
	for _, v := range s.seen {
		longest = max(longest, v.duration)
	}
	return now.Sub(s.lastChange) > longest/2
}

// state judges the worker of Lease l at now: fresh while the manager has
// seen it change within its lease duration (until expires), lost once it
// has not and the manager is not blind. A worker neither fresh nor lost is
// in doubt: it gets no new work and keeps what it holds.
func (s *workerSightings) state(l *coordinationv1.Lease, now time.Time) (fresh, lost bool, expires time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.observeLocked(l, now)
	expires = cur.at.Add(cur.duration)
	if now.Before(expires) {
		return true, false, expires
	}
	return false, !s.blindLocked(now), expires
}
