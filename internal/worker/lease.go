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

package worker

import (
	"context"
	"maps"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
)

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

// leaseDuration is how long a Lease stays valid after a renewal: three
// heartbeat intervals, so that two missed heartbeats do not lose the worker.
// It is rounded up to whole seconds, and is at least one.
func leaseDuration(heartbeat time.Duration) int32 {
	s := math.Ceil((3 * heartbeat).Seconds())
	return int32(max(1, min(s, math.MaxInt32)))
}

// leaseIdentity is what a worker advertises on its Lease.
type leaseIdentity struct {
	namespace    string
	name         string
	nodeName     string
	labels       map[string]string
	capacity     int
	queues       []string
	lanes        []string
	commandTypes []string
	heartbeat    time.Duration
}

// leaseMeta returns the labels and annotations of the Lease. draining adds
// the draining annotation.
func (id leaseIdentity) leaseMeta(draining bool) (labels, annotations map[string]string) {
	labels = maps.Clone(id.labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[WorkerLabel] = "true"
	labels[NodeLabel] = id.nodeName
	annotations = map[string]string{
		CapacityAnnotation:     strconv.Itoa(id.capacity),
		QueuesAnnotation:       strings.Join(id.queues, ","),
		LanesAnnotation:        strings.Join(id.lanes, ","),
		CommandTypesAnnotation: strings.Join(id.commandTypes, ","),
	}
	if draining {
		annotations[DrainingAnnotation] = "true"
	}
	return labels, annotations
}

// apply makes lease advertise id as renewed at now. It replaces the labels
// and annotations: a Lease left by an earlier run of the same worker may
// advertise something else.
func (id leaseIdentity) apply(lease *coordinationv1.Lease, draining bool, now metav1.MicroTime) {
	lease.Namespace, lease.Name = id.namespace, LeaseName(id.name)
	lease.Labels, lease.Annotations = id.leaseMeta(draining)
	if ptr.Deref(lease.Spec.HolderIdentity, "") != id.name || lease.Spec.AcquireTime == nil {
		lease.Spec.AcquireTime = &now
	}
	lease.Spec.HolderIdentity = ptr.To(id.name)
	lease.Spec.LeaseDurationSeconds = ptr.To(leaseDuration(id.heartbeat))
	lease.Spec.RenewTime = &now
}

// heartbeat keeps a worker's Lease: it creates it, renews it every interval
// and deletes it at exit. Each renewal is a single update of the Lease
// written last; the Lease is read again only after a conflict.
type heartbeat struct {
	client client.Client
	clock  clock.WithTicker
	id     leaseIdentity
	log    logr.Logger

	// mu serializes writes: renewals from the loop and the draining mark.
	mu sync.Mutex
	// draining, once set, stays set: the Lease then carries the draining
	// annotation.
	draining bool
	// lease is the Lease as last written, or nil when it must be read again.
	lease *coordinationv1.Lease
}

func newHeartbeat(c client.Client, clk clock.WithTicker, id leaseIdentity, log logr.Logger) *heartbeat {
	return &heartbeat{client: c, clock: clk, id: id, log: log}
}

// renewable tells which errors the heartbeat resolves by reading the Lease
// again: a conflict (someone else wrote it), a Lease deleted under it, or one
// created concurrently.
func renewable(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsNotFound(err) || apierrors.IsAlreadyExists(err)
}

// renew writes the Lease as renewed now, creating it when it is missing.
func (h *heartbeat) renew(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.renewLocked(ctx)
}

func (h *heartbeat) renewLocked(ctx context.Context) error {
	return retry.OnError(retry.DefaultRetry, renewable, func() error {
		now := metav1.NewMicroTime(h.clock.Now())
		if h.lease == nil {
			cur := &coordinationv1.Lease{}
			err := h.client.Get(ctx, client.ObjectKey{Namespace: h.id.namespace, Name: LeaseName(h.id.name)}, cur)
			switch {
			case apierrors.IsNotFound(err):
				h.id.apply(cur, h.draining, now)
				if err := h.client.Create(ctx, cur); err != nil {
					return err
				}
				h.lease = cur
				return nil
			case err != nil:
				return err
			}
			h.lease = cur
		}
		next := h.lease.DeepCopy()
		h.id.apply(next, h.draining, now)
		if err := h.client.Update(ctx, next); err != nil {
			if renewable(err) {
				h.lease = nil
			}
			return err
		}
		h.lease = next
		return nil
	})
}

// run renews the Lease every heartbeat interval until ctx ends. A failed
// renewal is logged and tried again at the next tick; the Lease stays valid
// for two more.
func (h *heartbeat) run(ctx context.Context) {
	t := h.clock.NewTicker(h.id.heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			if err := h.renew(ctx); err != nil && ctx.Err() == nil {
				h.log.Error(err, "Lease renewal failed", "lease", LeaseName(h.id.name))
			}
		}
	}
}

// drain marks the Lease draining at once, so that the manager stops
// assigning tasks to the worker. Later renewals keep the mark.
func (h *heartbeat) drain(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.draining = true
	return h.renewLocked(ctx)
}

// release deletes the Lease; a Lease already gone is fine.
func (h *heartbeat) release(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: h.id.namespace, Name: LeaseName(h.id.name)}}
	h.lease = nil
	return client.IgnoreNotFound(h.client.Delete(ctx, lease))
}
