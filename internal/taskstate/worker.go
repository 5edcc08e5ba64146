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
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/workerproto"
)

// The transitions a worker (a pool worker, or the pod of a Job) makes. A
// worker sends each as a fenced JSON Patch built by package workerproto
// (ClaimPatch, CompletePatch, StartAndCompletePatch, HandBackPatch, and
// ConditionOps with ClaimedCondition and SucceededCondition); the functions
// here state what that patch does to the status, and refuse it where the
// patch's fence would fail.

// SendWorkerPatch sends a worker's fenced JSON Patch (built by package
// workerproto) to the status of the ExternalTask key. Besides Scope it is
// the one place that writes an ExternalTask's status; the API server
// applies the patch only while its fence holds.
func SendWorkerPatch(ctx context.Context, c client.StatusClient, key types.NamespacedName, body []byte) error {
	obj := &agentlanev1alpha1.ExternalTask{}
	obj.Namespace, obj.Name = key.Namespace, key.Name
	return c.Status().Patch(ctx, obj, client.RawPatch(types.JSONPatchType, body))
}

// checkFence refuses a worker's transition unless the attempt is still
// held by f's holder and is in phase from.
func checkFence(transition string, st *Status, f workerproto.Fence, from ...agentlanev1alpha1.ExternalTaskPhase) error {
	holder := st.Worker
	if f.HolderPath == workerproto.PathJobName {
		holder = st.JobName
	}
	switch {
	case st.Phase.IsTerminal():
		return refuse(transition, st, ErrFinished)
	case holder != f.Holder || (f.Incarnation != "" && st.WorkerIncarnation != f.Incarnation):
		return refuse(transition, st, ErrNotHolder)
	case st.Attempt != f.Attempt:
		return refuse(transition, st, ErrStaleAttempt, fmt.Sprintf("attempt %d, current %d", f.Attempt, st.Attempt))
	}
	for _, p := range from {
		if st.Phase == p {
			return nil
		}
	}
	return refuse(transition, st, ErrPhase)
}

// ClaimedCondition is the Claimed condition a worker's claim writes.
func ClaimedCondition(generation int64, f workerproto.Fence, at metav1.Time) metav1.Condition {
	return metav1.Condition{
		Type: agentlanev1alpha1.ExternalTaskClaimedCondition, Status: metav1.ConditionTrue,
		Reason:             agentlanev1alpha1.ExternalTaskWorkerClaimedReason,
		Message:            fmt.Sprintf("attempt %d claimed by %s", f.Attempt, f.Holder),
		ObservedGeneration: generation, LastTransitionTime: at,
	}
}

// SucceededCondition is the Finished condition a worker's successful
// completion writes.
func SucceededCondition(generation int64, f workerproto.Fence, at metav1.Time) metav1.Condition {
	return metav1.Condition{
		Type: agentlanev1alpha1.ExternalTaskFinishedCondition, Status: metav1.ConditionTrue,
		Reason:             string(agentlanev1alpha1.ExternalTaskSucceeded),
		Message:            fmt.Sprintf("attempt %d succeeded", f.Attempt),
		ObservedGeneration: generation, LastTransitionTime: at,
	}
}

// replaceCondition is what workerproto.ConditionOps does: it replaces the
// condition of cond's type where the task has one, keeping its
// lastTransitionTime when its status does not change.
func replaceCondition(st *Status, cond metav1.Condition) {
	c := meta.FindStatusCondition(st.Conditions, cond.Type)
	if c == nil {
		return
	}
	if c.Status == cond.Status && c.Reason == cond.Reason && c.Message == cond.Message {
		return
	}
	if c.Status == cond.Status {
		cond.LastTransitionTime = c.LastTransitionTime
	}
	*c = cond
}

// JobPod names the pod of a Job-target lane's Job and its node, which its
// claim records.
type JobPod struct{ Name, Node string }

// Claim (worker) moves a Dispatched attempt to Running and records when it
// started; the pod of a Job also names itself and its node.
func Claim(st *Status, generation int64, f workerproto.Fence, startedAt metav1.Time, pod *JobPod) error {
	if err := checkFence("Claim", st, f, agentlanev1alpha1.ExternalTaskDispatched); err != nil {
		return err
	}
	st.Phase = agentlanev1alpha1.ExternalTaskRunning
	st.StartedAt = &startedAt
	if pod != nil {
		st.Worker = pod.Name
		if pod.Node != "" {
			st.NodeName = pod.Node
		}
	}
	replaceCondition(st, ClaimedCondition(generation, f, startedAt))
	return nil
}

// Complete (worker) records the result of a Running attempt (PhaseAfterRun).
func Complete(st *Status, generation int64, f workerproto.Fence, res agentlanev1alpha1.TaskResult, finishedAt metav1.Time) error {
	if err := checkFence("Complete", st, f, agentlanev1alpha1.ExternalTaskRunning); err != nil {
		return err
	}
	st.Result, st.FinishedAt = &res, &finishedAt
	st.Phase = PhaseAfterRun(res.Success)
	if res.Success {
		replaceCondition(st, SucceededCondition(generation, f, finishedAt))
	}
	return nil
}

// StartAndComplete (worker) records the start and the result of a
// Dispatched attempt that ran without a claim (a short run), at once.
func StartAndComplete(st *Status, generation int64, f workerproto.Fence, res agentlanev1alpha1.TaskResult, startedAt, finishedAt metav1.Time) error {
	if err := checkFence("StartAndComplete", st, f, agentlanev1alpha1.ExternalTaskDispatched); err != nil {
		return err
	}
	st.Phase = PhaseAfterRun(res.Success)
	st.StartedAt, st.Result, st.FinishedAt = &startedAt, &res, &finishedAt
	replaceCondition(st, ClaimedCondition(generation, f, startedAt))
	if res.Success {
		replaceCondition(st, SucceededCondition(generation, f, finishedAt))
	}
	return nil
}

// HandBack (worker) returns an attempt whose command never started, in
// phase from (Dispatched or Running), to its lane: Queued without a worker;
// a claimed attempt also loses its startedAt. The manager dispatches it
// again without counting an attempt.
func HandBack(st *Status, f workerproto.Fence, from agentlanev1alpha1.ExternalTaskPhase) error {
	if from != agentlanev1alpha1.ExternalTaskDispatched && from != agentlanev1alpha1.ExternalTaskRunning {
		return refuse("HandBack", st, ErrPhase, fmt.Sprintf("an attempt is handed back from Dispatched or Running, not %s", from))
	}
	if err := checkFence("HandBack", st, f, from); err != nil {
		return err
	}
	st.Phase = agentlanev1alpha1.ExternalTaskQueued
	st.Worker = ""
	if from == agentlanev1alpha1.ExternalTaskRunning {
		st.StartedAt = nil
	}
	return nil
}
