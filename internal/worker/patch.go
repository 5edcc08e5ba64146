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
	"encoding/json"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// JSON Pointer paths of the ExternalTask status fields the worker fences on
// or writes.
const (
	pathWorker     = "/status/worker"
	pathJobName    = "/status/jobName"
	pathNodeName   = "/status/nodeName"
	pathAttempt    = "/status/attempt"
	pathPhase      = "/status/phase"
	pathStartedAt  = "/status/startedAt"
	pathFinishedAt = "/status/finishedAt"
	pathResult     = "/status/result"
)

// patchOp is one JSON Patch (RFC 6902) operation. Value is omitted only when
// it is a nil interface, so false, 0 and "" are still sent.
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

func testOp(path string, v any) patchOp    { return patchOp{Op: "test", Path: path, Value: v} }
func addOp(path string, v any) patchOp     { return patchOp{Op: "add", Path: path, Value: v} }
func replaceOp(path string, v any) patchOp { return patchOp{Op: "replace", Path: path, Value: v} }
func removeOp(path string) patchOp         { return patchOp{Op: "remove", Path: path} }

// fence identifies the attempt a write is about: who holds it and which
// attempt it is. A pool worker is named in status.worker; the pod of a
// Job-target lane is identified by status.jobName, because the manager names
// the Job, not the pod.
type fence struct {
	// holderPath is pathWorker or pathJobName.
	holderPath string
	// holder is the value holderPath must have.
	holder string
	// attempt is the attempt number status.attempt must have.
	attempt int32
}

// workerFence fences on the worker named in status.worker.
func workerFence(worker string, attempt int32) fence {
	return fence{holderPath: pathWorker, holder: worker, attempt: attempt}
}

// jobFence fences on the Job named in status.jobName.
func jobFence(job string, attempt int32) fence {
	return fence{holderPath: pathJobName, holder: job, attempt: attempt}
}

// tests returns the test operations that make a patch apply only while the
// attempt is still held by f's holder and is in phase.
func (f fence) tests(phase agentlanev1alpha1.ExternalTaskPhase) []patchOp {
	return []patchOp{
		testOp(f.holderPath, f.holder),
		testOp(pathAttempt, f.attempt),
		testOp(pathPhase, phase),
	}
}

// claimPatch moves a Dispatched attempt to Running and records when it
// started. extra operations (one-shot mode names its pod and node) go last.
func claimPatch(f fence, startedAt metav1.Time, extra ...patchOp) ([]byte, error) {
	ops := append(f.tests(agentlanev1alpha1.ExternalTaskDispatched),
		replaceOp(pathPhase, agentlanev1alpha1.ExternalTaskRunning),
		addOp(pathStartedAt, startedAt))
	return json.Marshal(append(ops, extra...))
}

// completePatch records the result of a Running attempt. Only a successful
// run moves the phase (to Succeeded); a failed run stays Running so that the
// manager applies the lane's retry policy. add, not replace, because result
// and finishedAt are usually absent (add replaces a member that exists).
func completePatch(f fence, result agentlanev1alpha1.TaskResult, finishedAt metav1.Time, extra ...patchOp) ([]byte, error) {
	ops := append(f.tests(agentlanev1alpha1.ExternalTaskRunning),
		addOp(pathResult, result),
		addOp(pathFinishedAt, finishedAt))
	if result.Success {
		ops = append(ops, replaceOp(pathPhase, agentlanev1alpha1.ExternalTaskSucceeded))
	}
	return json.Marshal(append(ops, extra...))
}

// conditionOps replace the condition of cond's type, where task has one, with
// cond. The manager writes the Claimed and Finished conditions when it
// dispatches an attempt, so the worker's claim and a successful completion
// can update them in the same patch instead of costing the manager another
// write. The test on the type keeps the patch from replacing another
// condition if the list changed; a task without the condition gets no
// operation, and the manager writes it instead.
func conditionOps(task *agentlanev1alpha1.ExternalTask, cond metav1.Condition) []patchOp {
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
		return []patchOp{testOp(path+"/type", cond.Type), replaceOp(path, cond)}
	}
	return nil
}

// handBackPatch returns an attempt the worker will not finish to its lane:
// phase Queued without a worker, so that the manager dispatches it again
// without counting an attempt. A Running attempt also loses its startedAt,
// which the claim added.
func handBackPatch(f fence, from agentlanev1alpha1.ExternalTaskPhase) ([]byte, error) {
	ops := append(f.tests(from),
		replaceOp(pathPhase, agentlanev1alpha1.ExternalTaskQueued),
		removeOp(pathWorker))
	if from == agentlanev1alpha1.ExternalTaskRunning {
		ops = append(ops, removeOp(pathStartedAt))
	}
	return json.Marshal(ops)
}
