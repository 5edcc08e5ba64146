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
	"encoding/json"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// JSON Pointer paths of the ExternalTask status fields the worker fences on
// or writes.
const (
	PathWorker            = "/status/worker"
	PathWorkerIncarnation = "/status/workerIncarnation"
	PathJobName           = "/status/jobName"
	PathNodeName          = "/status/nodeName"
	PathAttempt           = "/status/attempt"
	PathPhase             = "/status/phase"
	PathStartedAt         = "/status/startedAt"
	PathFinishedAt        = "/status/finishedAt"
	PathResult            = "/status/result"
)

// PatchOp is one JSON Patch (RFC 6902) operation. Value is omitted only when
// it is a nil interface, so false, 0 and "" are still sent.
type PatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// TestOp, AddOp, ReplaceOp and RemoveOp build the operations of their name.
func TestOp(path string, v any) PatchOp    { return PatchOp{Op: "test", Path: path, Value: v} }
func AddOp(path string, v any) PatchOp     { return PatchOp{Op: "add", Path: path, Value: v} }
func ReplaceOp(path string, v any) PatchOp { return PatchOp{Op: "replace", Path: path, Value: v} }
func RemoveOp(path string) PatchOp         { return PatchOp{Op: "remove", Path: path} }

// Fence identifies the attempt a write is about: who holds it and which
// attempt it is. A pool worker is named in status.worker; the pod of a
// Job-target lane is identified by status.jobName, because the manager names
// the Job, not the pod.
type Fence struct {
	// HolderPath is PathWorker or PathJobName.
	HolderPath string
	// Holder is the value HolderPath must have.
	Holder string
	// Attempt is the attempt number status.attempt must have.
	Attempt int32
	// Incarnation, when set, is the worker process
	// status.workerIncarnation must name.
	Incarnation string
}

// WorkerFence fences on the worker named in status.worker.
func WorkerFence(worker string, attempt int32) Fence {
	return Fence{HolderPath: PathWorker, Holder: worker, Attempt: attempt}
}

// WithIncarnation fences also on the worker process the attempt was
// dispatched to, when it names one (an attempt dispatched before workers
// advertised incarnations names none, and a test of a missing member would
// fail).
func (f Fence) WithIncarnation(incarnation string) Fence {
	f.Incarnation = incarnation
	return f
}

// JobFence fences on the Job named in status.jobName.
func JobFence(job string, attempt int32) Fence {
	return Fence{HolderPath: PathJobName, Holder: job, Attempt: attempt}
}

// Tests returns the test operations that make a patch apply only while the
// attempt is still held by f's holder and is in phase.
func (f Fence) Tests(phase agentlanev1alpha1.ExternalTaskPhase) []PatchOp {
	ops := []PatchOp{
		TestOp(f.HolderPath, f.Holder),
		TestOp(PathAttempt, f.Attempt),
		TestOp(PathPhase, phase),
	}
	if f.Incarnation != "" {
		ops = append(ops, TestOp(PathWorkerIncarnation, f.Incarnation))
	}
	return ops
}

// ClaimPatch moves a Dispatched attempt to Running and records when it
// started. extra operations (one-shot mode names its pod and node) go last.
func ClaimPatch(f Fence, startedAt metav1.Time, extra ...PatchOp) ([]byte, error) {
	ops := append(f.Tests(agentlanev1alpha1.ExternalTaskDispatched),
		ReplaceOp(PathPhase, agentlanev1alpha1.ExternalTaskRunning),
		AddOp(PathStartedAt, startedAt))
	return json.Marshal(append(ops, extra...))
}

// CompletePatch records the result of a Running attempt. Only a successful
// run moves the phase (to Succeeded); a failed run stays Running so that the
// manager applies the lane's retry policy. add, not replace, because result
// and finishedAt are usually absent (add replaces a member that exists).
func CompletePatch(f Fence, result agentlanev1alpha1.TaskResult, finishedAt metav1.Time, extra ...PatchOp) ([]byte, error) {
	ops := append(f.Tests(agentlanev1alpha1.ExternalTaskRunning),
		AddOp(PathResult, result),
		AddOp(PathFinishedAt, finishedAt))
	if result.Success {
		ops = append(ops, ReplaceOp(PathPhase, agentlanev1alpha1.ExternalTaskSucceeded))
	}
	return json.Marshal(append(ops, extra...))
}

// StartAndCompletePatch records the result of a Dispatched attempt the
// worker ran without claiming it first (a short run): when it started and
// ended, and its result, in one write. Like CompletePatch, a successful run
// moves the phase to Succeeded and a failed one leaves it Running with its
// result, for the manager's retry policy. The fence is the claim's: the
// attempt must still be Dispatched to f's holder.
func StartAndCompletePatch(f Fence, result agentlanev1alpha1.TaskResult, startedAt, finishedAt metav1.Time, extra ...PatchOp) ([]byte, error) {
	phase := agentlanev1alpha1.ExternalTaskRunning
	if result.Success {
		phase = agentlanev1alpha1.ExternalTaskSucceeded
	}
	ops := append(f.Tests(agentlanev1alpha1.ExternalTaskDispatched),
		ReplaceOp(PathPhase, phase),
		AddOp(PathStartedAt, startedAt),
		AddOp(PathResult, result),
		AddOp(PathFinishedAt, finishedAt))
	return json.Marshal(append(ops, extra...))
}

// ConditionOps replace the condition of cond's type, where task has one, with
// cond. The manager writes the Claimed and Finished conditions when it
// dispatches an attempt, so the worker's claim and a successful completion
// can update them in the same patch instead of costing the manager another
// write. The test on the type keeps the patch from replacing another
// condition if the list changed; a task without the condition gets no
// operation, and the manager writes it instead.
func ConditionOps(task *agentlanev1alpha1.ExternalTask, cond metav1.Condition) []PatchOp {
	for i, c := range task.Status.Conditions {
		if c.Type != cond.Type {
			continue
		}
		if c.Status == cond.Status && c.Reason == cond.Reason && c.Message == cond.Message {
			return nil
		}
		if c.Status == cond.Status {
			cond.LastTransitionTime = c.LastTransitionTime
		}
		path := "/status/conditions/" + strconv.Itoa(i)
		return []PatchOp{TestOp(path+"/type", cond.Type), ReplaceOp(path, cond)}
	}
	return nil
}

// HandBackPatch returns an attempt whose command the worker never started
// to its lane: phase Queued without a worker, so that the manager
// dispatches it again without counting an attempt. A claimed (Running)
// attempt also loses its startedAt, which the claim added. A command that
// started is never handed back: its attempt is completed as failed.
func HandBackPatch(f Fence, from agentlanev1alpha1.ExternalTaskPhase) ([]byte, error) {
	ops := append(f.Tests(from),
		ReplaceOp(PathPhase, agentlanev1alpha1.ExternalTaskQueued),
		RemoveOp(PathWorker))
	if from == agentlanev1alpha1.ExternalTaskRunning {
		ops = append(ops, RemoveOp(PathStartedAt))
	}
	return json.Marshal(ops)
}
