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
	"errors"
	"net"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// leaseHold keeps a leader leading through an outage of the API server
// without letting it write while its hold of the Lease is in doubt.
//
// client-go's leader election makes a leader that cannot renew its Lease
// for the renew deadline stop leading, and the manager then exits: after an
// outage of the API server longer than that, no manager leads until a
// standby has watched the Lease unchanged for a whole lease duration (or a
// restarted process wins it), seconds after the API server answers again.
// leaseHold wraps the election's lock instead:
//
//   - While this replica holds the Lease and a renewal gets no answer (the
//     API server is down or unreachable), the renewal is reported done to
//     the election, for up to hold after the last renewal the API server
//     accepted: the election keeps leading.
//   - The manager's writes go through gate: they are refused unless the API
//     server accepted a renewal by this replica less than the renew
//     deadline ago. A leader whose renewals get no answer therefore stops
//     writing exactly when client-go's leader would stop leading; it only
//     keeps its controllers, caches and schedulers.
//   - Each renewal is an update conditional on the Lease's resourceVersion
//     as this replica last wrote it. When the API server answers again, the
//     first renewal it accepts proves that no standby took the Lease in the
//     meantime (a standby's takeover changes the resourceVersion), and the
//     standbys see the Lease renewed and wait a new lease duration: the
//     leader writes again at once. If a standby took the Lease first, the
//     renewal is refused, the refusal goes to the election, which stops
//     leading, and the gate stays shut.
//
// So a standby that takes the Lease never overlaps with this replica's
// writes, by the same argument as client-go's (a standby takes the Lease
// no sooner than a lease duration after it saw the last renewal, the
// renewal was sent before that, and this replica writes for at most the
// renew deadline after sending it), and no more assumption about clocks.
type leaseHold struct {
	resourcelock.Interface
	clock clock.PassiveClock
	// renewDeadline bounds the writes after the last accepted renewal;
	// hold bounds how long renewals without an answer are reported done.
	renewDeadline, hold time.Duration

	mu sync.Mutex
	// held: the last answer the API server gave about the Lease names
	// this replica its holder; renewed is when the accepted renewal was
	// sent. led: this replica held the Lease once (a replica that never
	// led writes as before: a standby's setup writes are not gated).
	held, led bool
	renewed   time.Time
	// silentSince is when reads of the Lease began to get no answer, zero
	// while they get one. Reads that got none for the renew deadline (an
	// outage: the leader stopped writing too) make the next answer count
	// as a change; a lone timeout of a slow API server does not.
	silentSince time.Time
}

// newLeaseHold wraps lock. hold <= 0 reports every failed renewal to the
// election (client-go's own behaviour), but still gates the writes.
func newLeaseHold(lock resourcelock.Interface, renewDeadline, hold time.Duration, clk clock.PassiveClock) *leaseHold {
	return &leaseHold{Interface: lock, clock: clk, renewDeadline: renewDeadline, hold: hold}
}

// Get reads the Lease and notes whether it still names this replica.
//
// A standby that could not read the Lease for the renew deadline (the API
// server did not answer) reports the first Lease it reads again as
// changed, whatever it holds:
// the election then watches it for a whole lease duration again before it
// may take it. Without that, a standby that last saw the Lease before an
// outage takes it at its first read after the outage, racing the leader's
// first renewal, and if it wins it leads on caches that have not caught up
// with the outage yet (its informers list and watch again up to a few
// seconds after the API server is back), rebuilding its schedulers from
// tasks as they were before it. A leader that is alive renews within that
// lease duration and keeps leading; a leader that is gone is replaced
// once the standby has watched its Lease unrenewed for a lease duration of
// reads that got an answer.
func (h *leaseHold) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := h.Interface.Get(ctx)
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.clock.Now()
	if err != nil {
		if noAnswer(err) && h.silentSince.IsZero() {
			h.silentSince = now
		}
		return rec, raw, err
	}
	if rec.HolderIdentity != h.Identity() {
		h.held = false
	}
	blind := !h.silentSince.IsZero() && now.Sub(h.silentSince) >= h.renewDeadline
	h.silentSince = time.Time{}
	if blind && !h.held {
		// Not the bytes of any Lease the election saw: it restarts the
		// lease duration from now.
		raw = append(append([]byte(nil), raw...), ' ')
	}
	return rec, raw, err
}

// Create creates the Lease with this replica as its holder.
func (h *leaseHold) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	sent := h.clock.Now()
	err := h.Interface.Create(ctx, rec)
	if err == nil {
		h.accepted(sent, rec.HolderIdentity == h.Identity())
	}
	return err
}

// Update writes the Lease, conditional on the resourceVersion this replica
// last read or wrote. A renewal by the holder that gets no answer within
// hold of the last accepted one is reported done.
func (h *leaseHold) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	sent := h.clock.Now()
	err := h.Interface.Update(ctx, rec)
	renewal := rec.HolderIdentity == h.Identity()
	if err == nil {
		h.accepted(sent, renewal)
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if renewal && h.held && noAnswer(err) && sent.Before(h.renewed.Add(h.hold)) {
		return nil
	}
	if !noAnswer(err) {
		// Refused (a standby took the Lease, or it is gone): this
		// replica does not hold it any more.
		h.held = false
	}
	return err
}

func (h *leaseHold) accepted(sent time.Time, holder bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held = holder
	if holder {
		h.led, h.renewed = true, sent
	}
}

// mayWrite tells whether the manager may write now: it never led, or the
// API server accepted its renewal of the Lease less than the renew deadline
// ago.
func (h *leaseHold) mayWrite() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.led || (h.held && h.clock.Since(h.renewed) < h.renewDeadline)
}

// errLeaseInDoubt refuses a write of a leader whose renewals of the Lease
// got no answer for the renew deadline. It is a timeout (net.Error): the
// write is tried again soon, as after any write the API server did not
// answer.
var errLeaseInDoubt error = leaseInDoubt{}

type leaseInDoubt struct{}

func (leaseInDoubt) Error() string {
	return "not written: the API server has not renewed this manager's leader Lease within the renew deadline"
}
func (leaseInDoubt) Timeout() bool   { return true }
func (leaseInDoubt) Temporary() bool { return true }

var _ net.Error = leaseInDoubt{}

// noAnswer tells whether a request to the API server failed without an
// answer about the Lease: any error that is not the API server's (the
// connection was refused, reset or cut mid-request, the request timed
// out), or the API server said it cannot serve now (5xx, 429, and the 403
// a restarted API server gives until its authorizer is ready). A conflict,
// a missing Lease or any other status is an answer; so is a cancelled
// context (the manager stops). Taking an error for no answer only keeps
// the election leading: the writes wait for a renewal the API server
// accepts.
func noAnswer(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true
	}
	return apierrors.IsTooManyRequests(err) || apierrors.IsForbidden(err) || apierrors.IsServerTimeout(err) ||
		apierrors.IsTimeout(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) ||
		apierrors.IsUnexpectedServerError(err)
}

// gate returns a NewClientFunc whose clients refuse writes with
// errLeaseInDoubt while mayWrite says no; reads are not gated.
func (h *leaseHold) gate(newClient client.NewClientFunc) client.NewClientFunc {
	return func(cfg *rest.Config, o client.Options) (client.Client, error) {
		c, err := newClient(cfg, o)
		if err != nil {
			return nil, err
		}
		return &gatedClient{Client: c, may: h.mayWrite}, nil
	}
}

// gatedClient is a client whose writes wait for may.
type gatedClient struct {
	client.Client
	may func() bool
}

func (c *gatedClient) check() error {
	if c.may() {
		return nil
	}
	return errLeaseInDoubt
}

func (c *gatedClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if err := c.check(); err != nil {
		return err
	}
	return c.Client.Create(ctx, obj, opts...)
}

func (c *gatedClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if err := c.check(); err != nil {
		return err
	}
	return c.Client.Update(ctx, obj, opts...)
}

func (c *gatedClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if err := c.check(); err != nil {
		return err
	}
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c *gatedClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	if err := c.check(); err != nil {
		return err
	}
	return c.Client.Apply(ctx, obj, opts...)
}

func (c *gatedClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if err := c.check(); err != nil {
		return err
	}
	return c.Client.Delete(ctx, obj, opts...)
}

func (c *gatedClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	if err := c.check(); err != nil {
		return err
	}
	return c.Client.DeleteAllOf(ctx, obj, opts...)
}

func (c *gatedClient) Status() client.SubResourceWriter {
	return &gatedSubResource{SubResourceClient: c.Client.SubResource("status"), check: c.check}
}

func (c *gatedClient) SubResource(subResource string) client.SubResourceClient {
	return &gatedSubResource{SubResourceClient: c.Client.SubResource(subResource), check: c.check}
}

// gatedSubResource gates the writes of a subresource client.
type gatedSubResource struct {
	client.SubResourceClient
	check func() error
}

func (s *gatedSubResource) Create(ctx context.Context, obj, sub client.Object, opts ...client.SubResourceCreateOption) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.SubResourceClient.Create(ctx, obj, sub, opts...)
}

func (s *gatedSubResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.SubResourceClient.Update(ctx, obj, opts...)
}

func (s *gatedSubResource) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.SubResourceClient.Patch(ctx, obj, patch, opts...)
}

func (s *gatedSubResource) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.SubResourceClient.Apply(ctx, obj, opts...)
}
