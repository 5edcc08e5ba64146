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
