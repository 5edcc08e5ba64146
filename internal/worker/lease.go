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
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentlane/agentlane/internal/workerproto"
)

// leaseIdentity is what a worker advertises on its Lease, and where.
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
	// incarnation names this process of the worker.
	incarnation string
}

// apply makes lease advertise id as renewed at now (workerproto.Encode).
func (id leaseIdentity) apply(lease *coordinationv1.Lease, draining bool, now metav1.MicroTime) {
	workerproto.Encode(lease, id.namespace, workerproto.Advertisement{
		Name: id.name, NodeName: id.nodeName, Labels: id.labels, Capacity: id.capacity,
		Queues: id.queues, Lanes: id.lanes, CommandTypes: id.commandTypes, Incarnation: id.incarnation,
	}, id.heartbeat, draining, now)
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
			err := h.client.Get(ctx, client.ObjectKey{Namespace: h.id.namespace, Name: workerproto.LeaseName(h.id.name)}, cur)
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
				h.log.Error(err, "Lease renewal failed", "lease", workerproto.LeaseName(h.id.name))
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
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: h.id.namespace, Name: workerproto.LeaseName(h.id.name)}}
	h.lease = nil
	return client.IgnoreNotFound(h.client.Delete(ctx, lease))
}
