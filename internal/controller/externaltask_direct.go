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
	"context"
	"errors"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/taskstate"
)

// isDirectRecord tells whether task is the record of a Direct lane's
// command, which the Session API's Direct dispatcher carries.
func isDirectRecord(task *agentlanev1alpha1.ExternalTask) bool {
	return task.Labels[agentlanev1alpha1.TargetLabel] == string(agentlanev1alpha1.ExternalTargetDirect)
}

// reconcileDirect settles the record of a Direct lane's command. While this
// manager run carries it (scheduling.DirectTasks) and it has not finished,
// the Session API writes its status and nothing is done here (an optimistic
// lock keeps a stale read from overwriting it). A finished one is retained like any
// finished task. One that has not finished and that this run does not
// carry was dispatched by an earlier run, which ended with it in flight:
// nobody can take its result any more, so it fails, interrupted (its
// submitter, who was told Interrupted, submits it again).
func (r *ExternalTaskReconciler) reconcileDirect(ctx context.Context, task *agentlanev1alpha1.ExternalTask) (_ ctrl.Result, reterr error) {
	if !task.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	if !task.Status.Phase.IsTerminal() && r.Schedulers.DirectTasks().Holds(client.ObjectKeyFromObject(task)) {
		return ctrl.Result{}, nil
	}
	s := newTaskScope(task)
	defer func() {
		reterr = errors.Join(reterr, r.writeStatus(ctx, s, reterr == nil))
	}()
	if task.Status.Phase.IsTerminal() {
		b, err := r.bind(ctx, task)
		if err != nil {
			return ctrl.Result{}, err
		}
		return r.reconcileFinished(ctx, s, b.lq)
	}
	return ctrl.Result{}, r.finishUnscheduled(s, agentlanev1alpha1.ExternalTaskFailed, taskstate.DirectInterruptedMessage)
}
