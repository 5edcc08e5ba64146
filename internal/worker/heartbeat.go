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
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/executor"
	"github.com/agentlane/agentlane/internal/taskstate"
	"github.com/agentlane/agentlane/internal/workerproto"
)

// heartbeatWriteTimeout bounds one heartbeat write. A heartbeat is never
// retried: the next one follows an interval later.
const heartbeatWriteTimeout = 5 * time.Second

// withHeartbeat makes the run of f's attempt under ctx offer its command a
// heartbeat file (executor.WithHeartbeat), looked at once per
// workerproto.HeartbeatInterval of the lane's heartbeatTimeout: each look
// that finds the file changed is one fenced heartbeat write
// (workerproto.HeartbeatPatch), however often the command wrote it. A
// heartbeat waits for the attempt's claim (the patch needs phase Running);
// claim is the run's lazy claim, nil when the attempt was claimed first. A
// heartbeat the fence rejects means the attempt was taken away: onLost
// stops the run.
func (a *attempts) withHeartbeat(ctx context.Context, task *agentlanev1alpha1.ExternalTask, f workerproto.Fence, claim *lazyClaim, onLost func()) context.Context {
	key := types.NamespacedName{Namespace: task.Namespace, Name: task.Name}
	log := a.log.WithValues("externalTask", klog.KObj(task), "attempt", f.Attempt)
	beat := func(progress string) {
		if claim != nil {
			select {
			case <-claim.done:
				if claim.err != nil {
					return
				}
			case <-ctx.Done():
				return
			}
		}
		body, err := workerproto.HeartbeatPatch(f, a.now(), taskstate.ProgressNote(progress))
		if err != nil {
			return
		}
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), heartbeatWriteTimeout)
		defer cancel()
		err = taskstate.SendWorkerPatch(wctx, a.client, key, body)
		switch {
		case err == nil:
		case apierrors.IsInvalid(err) || apierrors.IsConflict(err) || apierrors.IsNotFound(err):
			log.V(1).Info("Heartbeat rejected: the attempt was taken away; stopping its run", "reason", err.Error())
			if onLost != nil {
				onLost()
			}
		default:
			log.V(1).Info("Heartbeat not written; the next one follows", "error", err.Error())
		}
	}
	return executor.WithHeartbeat(ctx, workerproto.HeartbeatInterval(task.Status.HeartbeatTimeout), beat)
}

// claimDelay is how long a run lasts before its lazy claim: RunningAfter,
// or nothing for an attempt whose lane wants heartbeats, which need the
// attempt Running and must not wait for the claim.
func claimDelay(task *agentlanev1alpha1.ExternalTask, runningAfter time.Duration) time.Duration {
	if task.Status.HeartbeatTimeout != nil && runningAfter > 0 {
		return 0
	}
	return runningAfter
}

// maxExtendedFactor bounds how far an extension recorded in a task's
// status moves a run's own bound: never past this many times its
// spec.timeout (the manager's bound on extensions).
const maxExtendedFactor = 10

// runBound is the bound a run of an attempt puts on its command: its
// spec.timeout from the start, moved later when the attempt's deadline is
// extended.
type runBound struct {
	attempt int32
	mu      sync.Mutex
	start   time.Time
	timeout time.Duration
	timer   *time.Timer
	// deadline is when the timer fires.
	deadline time.Time
}

// bound returns ctx stopped once the task's attempt has run its
// spec.timeout, or until the later deadline its status records (now or
// once moveDeadline is called), and a stop that releases the bound.
func (a *attempts) bound(ctx context.Context, task *agentlanev1alpha1.ExternalTask, timeout time.Duration) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	start := time.Now()
	b := &runBound{attempt: task.Status.Attempt, start: start, timeout: timeout, deadline: start.Add(timeout)}
	b.timer = time.AfterFunc(timeout, func() {
		b.mu.Lock()
		bound := b.deadline.Sub(b.start)
		b.mu.Unlock()
		cancel(fmt.Errorf("attempt timed out after %s", bound))
	})
	key := types.NamespacedName{Namespace: task.Namespace, Name: task.Name}
	a.bounds.Store(key, b)
	if d := task.Status.Deadline; d != nil {
		b.moveTo(d.Time)
	}
	return ctx, func() {
		b.timer.Stop()
		a.bounds.CompareAndDelete(key, b)
		cancel(nil)
	}
}

// moveDeadline moves the bound of the task's running attempt, when it is
// attempt, to deadline: only later, and never past maxExtendedFactor times
// its spec.timeout. The worker calls it when the task's status records an
// extension.
func (a *attempts) moveDeadline(key types.NamespacedName, attempt int32, deadline time.Time) {
	v, ok := a.bounds.Load(key)
	if !ok {
		return
	}
	if b := v.(*runBound); b.attempt == attempt {
		b.moveTo(deadline)
	}
}

func (b *runBound) moveTo(deadline time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	deadline = minTime(deadline, b.start.Add(maxExtendedFactor*b.timeout))
	if !deadline.After(b.deadline) {
		return
	}
	if b.timer.Stop() {
		b.deadline = deadline
		b.timer.Reset(time.Until(deadline))
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
