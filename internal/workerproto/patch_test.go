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
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

func TestPatches(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 5, 21, 14, 30, 0, 0, time.UTC))
	cases := map[string]struct {
		build func() ([]byte, error)
		want  string
	}{
		"claim by a pool worker": {
			build: func() ([]byte, error) { return ClaimPatch(WorkerFence("w1", 2), at) },
			want: `[
				{"op":"test","path":"/status/worker","value":"w1"},
				{"op":"test","path":"/status/attempt","value":2},
				{"op":"test","path":"/status/phase","value":"Dispatched"},
				{"op":"replace","path":"/status/phase","value":"Running"},
				{"op":"add","path":"/status/startedAt","value":"2026-05-21T14:30:00Z"}]`,
		},
		"claim by the pod of a Job": {
			build: func() ([]byte, error) {
				return ClaimPatch(JobFence("job-1", 1), at, AddOp(PathWorker, "pod-x"), AddOp(PathNodeName, "node-a"))
			},
			want: `[
				{"op":"test","path":"/status/jobName","value":"job-1"},
				{"op":"test","path":"/status/attempt","value":1},
				{"op":"test","path":"/status/phase","value":"Dispatched"},
				{"op":"replace","path":"/status/phase","value":"Running"},
				{"op":"add","path":"/status/startedAt","value":"2026-05-21T14:30:00Z"},
				{"op":"add","path":"/status/worker","value":"pod-x"},
				{"op":"add","path":"/status/nodeName","value":"node-a"}]`,
		},
		"completion of a successful run": {
			build: func() ([]byte, error) {
				return CompletePatch(WorkerFence("w1", 2), agentlanev1alpha1.TaskResult{
					Success:  true,
					Result:   &runtime.RawExtension{Raw: []byte(`{"exitCode":0,"stdout":"hi\n"}`)},
					ExitCode: ptr.To[int32](0),
				}, at)
			},
			want: `[
				{"op":"test","path":"/status/worker","value":"w1"},
				{"op":"test","path":"/status/attempt","value":2},
				{"op":"test","path":"/status/phase","value":"Running"},
				{"op":"add","path":"/status/result","value":{"success":true,"result":{"exitCode":0,"stdout":"hi\n"},"exitCode":0}},
				{"op":"add","path":"/status/finishedAt","value":"2026-05-21T14:30:00Z"},
				{"op":"replace","path":"/status/phase","value":"Succeeded"}]`,
		},
		"completion of a failed run keeps the phase": {
			build: func() ([]byte, error) {
				return CompletePatch(WorkerFence("w1", 1), agentlanev1alpha1.TaskResult{
					Error: "exit code 3", ExitCode: ptr.To[int32](3),
				}, at)
			},
			want: `[
				{"op":"test","path":"/status/worker","value":"w1"},
				{"op":"test","path":"/status/attempt","value":1},
				{"op":"test","path":"/status/phase","value":"Running"},
				{"op":"add","path":"/status/result","value":{"success":false,"error":"exit code 3","exitCode":3}},
				{"op":"add","path":"/status/finishedAt","value":"2026-05-21T14:30:00Z"}]`,
		},
		"one-write report of a short successful run": {
			build: func() ([]byte, error) {
				return StartAndCompletePatch(WorkerFence("w1", 1), agentlanev1alpha1.TaskResult{Success: true}, at, at)
			},
			want: `[
				{"op":"test","path":"/status/worker","value":"w1"},
				{"op":"test","path":"/status/attempt","value":1},
				{"op":"test","path":"/status/phase","value":"Dispatched"},
				{"op":"replace","path":"/status/phase","value":"Succeeded"},
				{"op":"add","path":"/status/startedAt","value":"2026-05-21T14:30:00Z"},
				{"op":"add","path":"/status/result","value":{"success":true}},
				{"op":"add","path":"/status/finishedAt","value":"2026-05-21T14:30:00Z"}]`,
		},
		"one-write report of a short failed run leaves it Running for the retry policy": {
			build: func() ([]byte, error) {
				return StartAndCompletePatch(WorkerFence("w1", 1), agentlanev1alpha1.TaskResult{Error: "boom"}, at, at)
			},
			want: `[
				{"op":"test","path":"/status/worker","value":"w1"},
				{"op":"test","path":"/status/attempt","value":1},
				{"op":"test","path":"/status/phase","value":"Dispatched"},
				{"op":"replace","path":"/status/phase","value":"Running"},
				{"op":"add","path":"/status/startedAt","value":"2026-05-21T14:30:00Z"},
				{"op":"add","path":"/status/result","value":{"success":false,"error":"boom"}},
				{"op":"add","path":"/status/finishedAt","value":"2026-05-21T14:30:00Z"}]`,
		},
		"one-write report fenced on the worker process the attempt was dispatched to": {
			build: func() ([]byte, error) {
				f := WorkerFence("w1", 1).WithIncarnation("01J0INCARNATION")
				return StartAndCompletePatch(f, agentlanev1alpha1.TaskResult{Success: true}, at, at)
			},
			want: `[
				{"op":"test","path":"/status/worker","value":"w1"},
				{"op":"test","path":"/status/attempt","value":1},
				{"op":"test","path":"/status/phase","value":"Dispatched"},
				{"op":"test","path":"/status/workerIncarnation","value":"01J0INCARNATION"},
				{"op":"replace","path":"/status/phase","value":"Succeeded"},
				{"op":"add","path":"/status/startedAt","value":"2026-05-21T14:30:00Z"},
				{"op":"add","path":"/status/result","value":{"success":true}},
				{"op":"add","path":"/status/finishedAt","value":"2026-05-21T14:30:00Z"}]`,
		},
		"hand back of a running attempt": {
			build: func() ([]byte, error) {
				return HandBackPatch(WorkerFence("w1", 4), agentlanev1alpha1.ExternalTaskRunning)
			},
			want: `[
				{"op":"test","path":"/status/worker","value":"w1"},
				{"op":"test","path":"/status/attempt","value":4},
				{"op":"test","path":"/status/phase","value":"Running"},
				{"op":"replace","path":"/status/phase","value":"Queued"},
				{"op":"remove","path":"/status/worker"},
				{"op":"remove","path":"/status/startedAt"}]`,
		},
		"hand back of an unstarted attempt": {
			build: func() ([]byte, error) {
				return HandBackPatch(WorkerFence("w1", 1), agentlanev1alpha1.ExternalTaskDispatched)
			},
			want: `[
				{"op":"test","path":"/status/worker","value":"w1"},
				{"op":"test","path":"/status/attempt","value":1},
				{"op":"test","path":"/status/phase","value":"Dispatched"},
				{"op":"replace","path":"/status/phase","value":"Queued"},
				{"op":"remove","path":"/status/worker"}]`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := tc.build()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(decode(t, []byte(tc.want)), decode(t, got)); diff != "" {
				t.Errorf("patch (-want,+got):\n%s", diff)
			}
		})
	}
}

func decode(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("invalid JSON %s: %v", b, err)
	}
	return v
}

func TestConditionOps(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 5, 21, 14, 30, 0, 0, time.UTC))
	earlier := metav1.NewTime(at.Add(-time.Minute))
	task := &agentlanev1alpha1.ExternalTask{Status: agentlanev1alpha1.ExternalTaskStatus{Conditions: []metav1.Condition{
		{Type: agentlanev1alpha1.ExternalTaskClaimedCondition, Status: metav1.ConditionTrue, Reason: "WorkerClaimed", Message: "m", LastTransitionTime: earlier},
		{Type: agentlanev1alpha1.ExternalTaskFinishedCondition, Status: metav1.ConditionFalse, Reason: "InProgress", LastTransitionTime: earlier},
	}}}
	cases := map[string]struct {
		cond metav1.Condition
		want string
	}{
		"a change of status replaces the condition at its index": {
			cond: metav1.Condition{Type: agentlanev1alpha1.ExternalTaskFinishedCondition, Status: metav1.ConditionTrue, Reason: "Succeeded", Message: "done", LastTransitionTime: at},
			want: `[
				{"op":"test","path":"/status/conditions/1/type","value":"Finished"},
				{"op":"replace","path":"/status/conditions/1","value":{"type":"Finished","status":"True","lastTransitionTime":"2026-05-21T14:30:00Z","reason":"Succeeded","message":"done"}}]`,
		},
		"the same status keeps the transition time": {
			cond: metav1.Condition{Type: agentlanev1alpha1.ExternalTaskClaimedCondition, Status: metav1.ConditionTrue, Reason: "WorkerClaimed", Message: "other", LastTransitionTime: at},
			want: `[
				{"op":"test","path":"/status/conditions/0/type","value":"Claimed"},
				{"op":"replace","path":"/status/conditions/0","value":{"type":"Claimed","status":"True","lastTransitionTime":"2026-05-21T14:29:00Z","reason":"WorkerClaimed","message":"other"}}]`,
		},
		"an unchanged condition needs no operation": {
			cond: metav1.Condition{Type: agentlanev1alpha1.ExternalTaskClaimedCondition, Status: metav1.ConditionTrue, Reason: "WorkerClaimed", Message: "m", LastTransitionTime: at},
			want: `null`,
		},
		"a missing condition is left to the manager": {
			cond: metav1.Condition{Type: "Other", Status: metav1.ConditionTrue, Reason: "R", LastTransitionTime: at},
			want: `null`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := json.Marshal(ConditionOps(task, tc.cond))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(decode(t, []byte(tc.want)), decode(t, got)); diff != "" {
				t.Errorf("ops (-want,+got):\n%s", diff)
			}
		})
	}
}
