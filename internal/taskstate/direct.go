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

package taskstate

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// DirectInterruptedMessage is why a recorded Direct task that no manager
// carries any more failed (the ExternalTask controller closes it so), and
// how the Session API recognizes such a task.
const DirectInterruptedMessage = "interrupted: the manager run that dispatched this Direct task stopped before the task ended, " +
	"and its result cannot be taken any more; submit the command again to run it"

// DirectAttempt is the attempt of a Direct lane's task as the manager's
// Direct dispatcher knows it when it records the task.
type DirectAttempt struct {
	Lane    string
	Attempt int32
	// GrantedAt is when the attempt was granted its slot.
	GrantedAt metav1.Time
	// Worker, Node and Incarnation name the streaming worker that runs it,
	// and StartedAt when it was handed over; empty while it waits for one.
	Worker, Node, Incarnation string
	StartedAt                 *metav1.Time
}

// DirectRecord (Session API, Direct dispatcher) records what a Direct
// task's current attempt is doing: Dispatched to no worker yet (it waits
// for a free streaming worker), or Running on the worker a.Worker names.
// An attempt older than the one recorded is refused.
func DirectRecord(st *Status, generation int64, now metav1.Time, a DirectAttempt) error {
	if err := notFinished("DirectRecord", st); err != nil {
		return err
	}
	if a.Attempt < 1 || a.Attempt < st.Attempt {
		return refuse("DirectRecord", st, ErrStaleAttempt, fmt.Sprintf("attempt %d, current %d", a.Attempt, st.Attempt))
	}
	if st.Attempt != a.Attempt {
		ClearAttempt(st)
	}
	st.Lane = agentlanev1alpha1.LaneName(a.Lane)
	st.Attempt = a.Attempt
	if st.QueuedAt == nil {
		st.QueuedAt = &a.GrantedAt
	}
	st.Holder = agentlanev1alpha1.HolderDirect
	st.DispatchedAt = &a.GrantedAt
	setInProgress(st, generation, now)
	if a.Worker == "" {
		st.Phase = agentlanev1alpha1.ExternalTaskDispatched
		st.Worker, st.WorkerIncarnation, st.NodeName, st.StartedAt = "", "", "", nil
		SetCondition(st, generation, now, agentlanev1alpha1.ExternalTaskClaimedCondition, metav1.ConditionFalse,
			agentlanev1alpha1.ExternalTaskAwaitingWorkerReason,
			fmt.Sprintf("attempt %d has a slot in lane %s and waits for a free streaming worker", a.Attempt, a.Lane))
		return nil
	}
	st.Phase = agentlanev1alpha1.ExternalTaskRunning
	st.Worker, st.WorkerIncarnation, st.NodeName = a.Worker, a.Incarnation, a.Node
	st.StartedAt = a.StartedAt
	SetCondition(st, generation, now, agentlanev1alpha1.ExternalTaskClaimedCondition, metav1.ConditionTrue,
		agentlanev1alpha1.ExternalTaskWorkerClaimedReason,
		fmt.Sprintf("attempt %d runs on worker %s on node %s, over its stream", a.Attempt, a.Worker, a.Node))
	return nil
}

// DirectEnd (Session API, Direct dispatcher) records how a Direct task
// ended: its final phase, the last attempt's result when it reported one,
// and why (msg). It is DirectRecord of the last attempt followed by Close.
func DirectEnd(st *Status, generation int64, now metav1.Time, a DirectAttempt, phase agentlanev1alpha1.ExternalTaskPhase, res *agentlanev1alpha1.TaskResult, msg string) error {
	if err := notFinished("DirectEnd", st); err != nil {
		return err
	}
	if !phase.IsTerminal() {
		return refuse("DirectEnd", st, ErrPhase, fmt.Sprintf("%s is not a final phase", phase))
	}
	if a.Attempt >= 1 {
		if err := DirectRecord(st, generation, now, a); err != nil {
			return err
		}
	}
	if res != nil {
		st.Result = res.DeepCopy()
	}
	return Close(st, generation, now, phase, msg)
}
