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
	"github.com/agentlane/agentlane/internal/delegation"
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

func TestWorkerSession(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := agentlanev1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	lane := &agentlanev1alpha1.Lane{Name: "review", MaxConcurrency: 2, ExternalTarget: &agentlanev1alpha1.ExternalTarget{
		Type: agentlanev1alpha1.ExternalTargetDelegate,
		Delegate: &agentlanev1alpha1.DelegateTarget{SessionTemplate: agentlanev1alpha1.AgentSessionTemplate{
			Spec: agentlanev1alpha1.AgentSessionTemplateSpec{AgentTemplateID: "reviewer",
				Budget: &agentlanev1alpha1.WorkerBudget{CheckEveryTool: true}},
		}},
	}}
	dl := &delegateLane{namespace: "tenant-a", queue: "q1", name: "review", spec: lane}
	task := &agentlanev1alpha1.ExternalTask{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "01jq3k7c"},
		Spec: agentlanev1alpha1.ExternalTaskSpec{
			// A task's own identity is not what the worker acts as.
			Identity: &agentlanev1alpha1.Identity{TenantID: "tenant-b", Principal: "mallory"},
		}}
	cases := map[string]struct {
		producer  *agentlanev1alpha1.AgentSession
		wantID    agentlanev1alpha1.Identity
		wantDepth string
	}{
		"a session nobody delegated to": {
			producer: &agentlanev1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "lead", UID: "u1"},
				Spec: agentlanev1alpha1.AgentSessionSpec{Identity: &agentlanev1alpha1.Identity{TenantID: "tenant-a", Principal: "alice", AgentTemplateID: "lead", CorrelationID: "c-7"}}},
			wantID:    agentlanev1alpha1.Identity{TenantID: "tenant-a", Principal: "alice", AgentTemplateID: "reviewer", CorrelationID: "c-7"},
			wantDepth: "1",
		},
		"a worker that delegates in turn, without an identity": {
			producer: &agentlanev1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "review-01", UID: "u2",
				Labels:      map[string]string{agentlanev1alpha1.DelegationTaskLabel: "01"},
				Annotations: map[string]string{agentlanev1alpha1.DelegationDepthAnnotation: "2"}}},
			wantID:    agentlanev1alpha1.Identity{AgentTemplateID: "reviewer", CorrelationID: "01jq3k7c"},
			wantDepth: "3",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w, err := workerSession(task, tc.producer, dl, lane.ExternalTarget.Delegate.SessionTemplate.Spec.Budget.Budget(), scheme, 1)
			if err != nil {
				t.Fatal(err)
			}
			if w.Namespace != "tenant-a" || w.Name != "review-01jq3k7c" || w.Spec.QueueRef.Name != "q1" {
				t.Errorf("worker %s/%s on queue %s, want tenant-a/review-01jq3k7c on q1", w.Namespace, w.Name, w.Spec.QueueRef.Name)
			}
			if *w.Spec.Identity != tc.wantID {
				t.Errorf("identity %+v, want %+v", *w.Spec.Identity, tc.wantID)
			}
			if got := w.Annotations[agentlanev1alpha1.DelegationDepthAnnotation]; got != tc.wantDepth {
				t.Errorf("depth %q, want %q", got, tc.wantDepth)
			}
			if !metav1.IsControlledBy(w, tc.producer) {
				t.Errorf("owners %v: not controlled by the producer", w.OwnerReferences)
			}
			if w.Spec.Budget == nil || !w.Spec.Budget.CheckEveryTool {
				t.Errorf("budget %+v, want the template's", w.Spec.Budget)
			}
			if w.Labels[agentlanev1alpha1.DelegationTaskLabel] != task.Name || w.Labels[delegation.ProducerLabel] != string(tc.producer.UID) {
				t.Errorf("labels %v, want the task's and the producer's UID", w.Labels)
			}
		})
	}
}
