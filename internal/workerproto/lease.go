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
	"maps"
	"math"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Labels and annotations of a worker's Lease, read by the manager to pick
// workers for a lane (docs/workers.md).
const (
	// WorkerLabel marks a Lease as the heartbeat of an agentlane worker.
	WorkerLabel = "agentlane.io/worker"
	// NodeLabel carries the node the worker runs on.
	NodeLabel = "agentlane.io/node"

	// CapacityAnnotation is how many tasks the worker runs at once.
	CapacityAnnotation = "agentlane.io/capacity"
	// QueuesAnnotation lists the LaneQueues the worker serves, comma-separated;
	// empty means all.
	QueuesAnnotation = "agentlane.io/queues"
	// LanesAnnotation lists the lanes the worker serves, comma-separated;
	// empty means all.
	LanesAnnotation = "agentlane.io/lanes"
	// CommandTypesAnnotation lists the command types the worker's executors
	// run, comma-separated.
	CommandTypesAnnotation = "agentlane.io/command-types"
	// DrainingAnnotation is "true" once the worker stops taking work.
	DrainingAnnotation = "agentlane.io/draining"
	// IncarnationAnnotation names the worker process that renews the Lease:
	// a new id (a ULID) each time a worker process starts, so that the
	// manager tells a restarted worker from the process it replaced.
	IncarnationAnnotation = "agentlane.io/incarnation"
)

// MaxIncarnationLength is the longest incarnation a Lease may advertise.
const MaxIncarnationLength = 64

// ValidIncarnation tells whether s can name a worker process: at most
// MaxIncarnationLength letters and digits. Empty is valid: a worker that
// advertises no incarnation.
func ValidIncarnation(s string) bool {
	if len(s) > MaxIncarnationLength {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'A' || c > 'Z') && (c < 'a' || c > 'z') {
			return false
		}
	}
	return true
}

// SplitList reads a comma-separated list, such as a Lease's queues
// annotation or the --queues flag, dropping blanks around and between items.
func SplitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// leasePrefix starts the name of every worker Lease.
const leasePrefix = "agentlane-worker-"

// LeaseName returns the name of the Lease of the worker called name.
func LeaseName(name string) string { return leasePrefix + name }

// LeaseDuration is how long a Lease stays valid after a renewal: three
// heartbeat intervals, so that two missed heartbeats do not lose the worker.
// It is rounded up to whole seconds, and is at least one.
func LeaseDuration(heartbeat time.Duration) int32 {
	s := math.Ceil((3 * heartbeat).Seconds())
	return int32(max(1, min(s, math.MaxInt32)))
}

// Advertisement is what a worker advertises on its Lease.
type Advertisement struct {
	// Name is the worker's name, the Lease's holder.
	Name string
	// NodeName is the node the worker runs on.
	NodeName string
	// Labels are matched by lanes' workerSelector. Encode adds WorkerLabel
	// and NodeLabel; Parse returns every label of the Lease.
	Labels map[string]string
	// Capacity is how many tasks the worker runs at once.
	Capacity int
	// Queues and Lanes restrict what the worker serves; empty means all.
	Queues, Lanes []string
	// CommandTypes are the command types the worker runs; empty means any.
	CommandTypes []string
	// Incarnation identifies the worker process (IncarnationAnnotation);
	// empty for a worker that advertises none.
	Incarnation string
}

// meta returns the labels and annotations of the Lease. draining adds the
// draining annotation.
func (a Advertisement) meta(draining bool) (labels, annotations map[string]string) {
	labels = maps.Clone(a.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[WorkerLabel] = "true"
	labels[NodeLabel] = a.NodeName
	annotations = map[string]string{
		CapacityAnnotation:     strconv.Itoa(a.Capacity),
		QueuesAnnotation:       strings.Join(a.Queues, ","),
		LanesAnnotation:        strings.Join(a.Lanes, ","),
		CommandTypesAnnotation: strings.Join(a.CommandTypes, ","),
	}
	if draining {
		annotations[DrainingAnnotation] = "true"
	}
	if a.Incarnation != "" {
		annotations[IncarnationAnnotation] = a.Incarnation
	}
	return labels, annotations
}

// Encode makes lease, in namespace, advertise a as renewed at now by a worker
// that renews every heartbeat. It replaces the labels and annotations: a Lease
// left by an earlier run of the same worker may advertise something else.
// The acquire time is kept while the holder and its incarnation stay the
// same.
func Encode(lease *coordinationv1.Lease, namespace string, a Advertisement, heartbeat time.Duration, draining bool, now metav1.MicroTime) {
	sameProcess := ptr.Deref(lease.Spec.HolderIdentity, "") == a.Name && lease.Annotations[IncarnationAnnotation] == a.Incarnation
	lease.Namespace, lease.Name = namespace, LeaseName(a.Name)
	lease.Labels, lease.Annotations = a.meta(draining)
	if !sameProcess || lease.Spec.AcquireTime == nil {
		lease.Spec.AcquireTime = &now
	}
	lease.Spec.HolderIdentity = ptr.To(a.Name)
	lease.Spec.LeaseDurationSeconds = ptr.To(LeaseDuration(heartbeat))
	lease.Spec.RenewTime = &now
}

// WorkerLease is a worker Lease as the manager reads it.
type WorkerLease struct {
	Advertisement
	// Draining is set once the worker stops taking work.
	Draining bool
	// Expires is when the Lease lapses unless renewed; zero when the Lease
	// has no renew time or duration.
	Expires time.Time
}

// WorkerOfLease returns the worker a Lease is named after: name for a Lease
// called LeaseName(name); ok is false for any other name.
func WorkerOfLease(leaseName string) (name string, ok bool) {
	name, ok = strings.CutPrefix(leaseName, leasePrefix)
	if !ok || name == "" {
		return "", false
	}
	return name, true
}

// Parse reads a worker Lease; ok is false for a Lease that is not a worker's
// heartbeat, or whose incarnation is not ValidIncarnation (such a worker
// can be given no task). The worker is the one the Lease is named after
// (WorkerOfLease), never its label or holder alone: a Lease carrying
// WorkerLabel under another name, or whose holderIdentity is not the worker
// of its name, is not a worker's heartbeat. The admission policy lets only a
// pool worker write a Lease so named and held, so the name is the identity
// the API server authenticated. An unreadable capacity reads as 0.
func Parse(l *coordinationv1.Lease) (w WorkerLease, ok bool) {
	name, named := WorkerOfLease(l.Name)
	if !named || l.Labels[WorkerLabel] != "true" || ptr.Deref(l.Spec.HolderIdentity, "") != name ||
		!ValidIncarnation(l.Annotations[IncarnationAnnotation]) {
		return WorkerLease{}, false
	}
	w = WorkerLease{
		Advertisement: Advertisement{
			Name:         name,
			NodeName:     l.Labels[NodeLabel],
			Labels:       l.Labels,
			Queues:       SplitList(l.Annotations[QueuesAnnotation]),
			Lanes:        SplitList(l.Annotations[LanesAnnotation]),
			CommandTypes: SplitList(l.Annotations[CommandTypesAnnotation]),
			Incarnation:  l.Annotations[IncarnationAnnotation],
		},
		Draining: l.Annotations[DrainingAnnotation] == "true",
	}
	if n, err := strconv.Atoi(l.Annotations[CapacityAnnotation]); err == nil {
		w.Capacity = n
	}
	if l.Spec.RenewTime != nil && l.Spec.LeaseDurationSeconds != nil {
		w.Expires = l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second)
	}
	return w, true
}
