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
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

func TestDirectTransitions(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	granted := metav1.NewTime(now.Add(-3 * time.Second))
	st := &Status{}

	// Waiting for a worker: Dispatched, held Direct, no worker.
	if err := DirectRecord(st, 1, now, DirectAttempt{Lane: "read", Attempt: 1, GrantedAt: granted}); err != nil {
		t.Fatal(err)
	}
	if st.Phase != agentlanev1alpha1.ExternalTaskDispatched || st.Holder != agentlanev1alpha1.HolderDirect || st.Worker != "" || st.Attempt != 1 {
		t.Fatalf("waiting: %+v", st)
	}
	// Running on a worker.
	started := metav1.NewTime(now.Add(-time.Second))
	run := DirectAttempt{Lane: "read", Attempt: 1, GrantedAt: granted, Worker: "w-1", Node: "n-1", Incarnation: "abc", StartedAt: &started}
	if err := DirectRecord(st, 1, now, run); err != nil {
		t.Fatal(err)
	}
	if st.Phase != agentlanev1alpha1.ExternalTaskRunning || st.Worker != "w-1" || st.NodeName != "n-1" || st.StartedAt == nil ||
		!meta.IsStatusConditionTrue(st.Conditions, agentlanev1alpha1.ExternalTaskClaimedCondition) {
		t.Fatalf("running: %+v", st)
	}
	// A later attempt clears the earlier one's worker.
	if err := DirectRecord(st, 1, now, DirectAttempt{Lane: "read", Attempt: 2, GrantedAt: now}); err != nil {
		t.Fatal(err)
	}
	if st.Attempt != 2 || st.Worker != "" || st.StartedAt != nil || st.Phase != agentlanev1alpha1.ExternalTaskDispatched {
		t.Fatalf("attempt 2: %+v", st)
	}
	// An older attempt is refused.
	if err := DirectRecord(st, 1, now, run); !errors.Is(err, ErrStaleAttempt) {
		t.Fatalf("stale attempt: %v", err)
	}
	// The end: final phase, result, Finished.
	res := &agentlanev1alpha1.TaskResult{Success: false, Error: "exit 3"}
	run.Attempt = 2
	if err := DirectEnd(st, 1, now, run, agentlanev1alpha1.ExternalTaskDeadLettered, res, "retries exhausted"); err != nil {
		t.Fatal(err)
	}
	if st.Phase != agentlanev1alpha1.ExternalTaskDeadLettered || st.Result == nil || st.Result.Error != "exit 3" || st.Worker != "w-1" ||
		!meta.IsStatusConditionTrue(st.Conditions, agentlanev1alpha1.ExternalTaskFinishedCondition) {
		t.Fatalf("end: %+v", st)
	}
	// A finished task never changes.
	if err := DirectRecord(st, 1, now, DirectAttempt{Lane: "read", Attempt: 3, GrantedAt: now}); !errors.Is(err, ErrFinished) {
		t.Fatalf("after the end: %v", err)
	}
	if err := DirectEnd(&Status{}, 1, now, DirectAttempt{}, agentlanev1alpha1.ExternalTaskRunning, nil, ""); !errors.Is(err, ErrPhase) {
		t.Fatalf("a non-final end: %v", err)
	}
}
