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
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

func TestWorkerName(t *testing.T) {
	task := "01jq3k7c4m2x8v5n6b9d0f1g2h"
	cases := map[string]struct {
		lane, want string
	}{
		"lane then task": {lane: "review", want: "review-" + task},
		"long lane cut to fit 63 characters": {lane: strings.Repeat("a", 40) + "-b",
			want: strings.Repeat("a", 36) + "-" + task},
		"cut that would end in a dash": {lane: strings.Repeat("a", 35) + "-bbbb", want: strings.Repeat("a", 35) + "-" + task},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := workerName(tc.lane, task)
			if got != tc.want {
				t.Errorf("workerName(%q) = %q, want %q", tc.lane, got, tc.want)
			}
			if len(got) > 63 {
				t.Errorf("%q is %d characters long", got, len(got))
			}
		})
	}
}

func TestResultMessage(t *testing.T) {
	finished := metav1.NewTime(time.Date(2026, 5, 21, 14, 30, 0, 0, time.FixedZone("CEST", 7200)))
	task := func(phase agentlanev1alpha1.ExternalTaskPhase, res *agentlanev1alpha1.TaskResult) *agentlanev1alpha1.ExternalTask {
		return &agentlanev1alpha1.ExternalTask{ObjectMeta: metav1.ObjectMeta{Name: "t1"},
			Status: agentlanev1alpha1.ExternalTaskStatus{Phase: phase, Result: res, FinishedAt: &finished}}
	}
	cases := map[string]struct {
		task *agentlanev1alpha1.ExternalTask
		want string
	}{
		"ok with the answer": {
			task: task(agentlanev1alpha1.ExternalTaskSucceeded, &agentlanev1alpha1.TaskResult{Success: true,
				Result: &runtime.RawExtension{Raw: []byte(`{"answer":"PR looks clean."}`)}}),
			want: "from queue:review · task#t1 · ok · 2026-05-21T12:30:00Z\nPR looks clean.",
		},
		"error with the reason": {
			task: task(agentlanev1alpha1.ExternalTaskFailed, &agentlanev1alpha1.TaskResult{Error: "interrupted: the manager restarted"}),
			want: "from queue:review · task#t1 · error · 2026-05-21T12:30:00Z\ninterrupted: the manager restarted",
		},
		"cancelled without a result": {
			task: task(agentlanev1alpha1.ExternalTaskCancelled, nil),
			want: "from queue:review · task#t1 · error · 2026-05-21T12:30:00Z\nCancelled",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := resultMessage("review", tc.task); got != tc.want {
				t.Errorf("resultMessage() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestFirstTurn(t *testing.T) {
	cases := map[string]struct{ payload, want string }{
		"text field":   {payload: `{"text":"review PR 42"}`, want: "review PR 42"},
		"other object": {payload: `{"pr":42}`, want: `{"pr":42}`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			task := &agentlanev1alpha1.ExternalTask{Spec: agentlanev1alpha1.ExternalTaskSpec{Payload: &runtime.RawExtension{Raw: []byte(tc.payload)}}}
			if got := firstTurn(task); got != tc.want {
				t.Errorf("firstTurn(%s) = %q, want %q", tc.payload, got, tc.want)
			}
		})
	}
}
