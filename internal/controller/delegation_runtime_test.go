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
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// TestRuntimeLost: when the runtime pod of a worker session no longer runs
// the attempt it took, and when it still does (a session that passivates
// and resumes in another pod keeps its attempt).
func TestRuntimeLost(t *testing.T) {
	pod := func(name, uid string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid)}, Status: corev1.PodStatus{Phase: phase}}
	}
	cases := map[string]struct {
		pods        []client.Object
		phase       agentlanev1alpha1.SessionPhase
		podName     string
		incarnation string
		noRuntime   bool
		wantLost    string // a fragment of the reason; empty: not lost
		wantInc     string
	}{
		"the first pod is recorded": {
			pods: []client.Object{pod("p1", "aa-11", corev1.PodPending)}, phase: agentlanev1alpha1.SessionActive, podName: "p1",
			wantInc: "aa11",
		},
		"the same pod runs": {
			pods: []client.Object{pod("p1", "aa-11", corev1.PodRunning)}, phase: agentlanev1alpha1.SessionActive, podName: "p1",
			incarnation: "aa11", wantInc: "aa11",
		},
		"the pod failed": {
			pods: []client.Object{pod("p1", "aa-11", corev1.PodFailed)}, phase: agentlanev1alpha1.SessionActive, podName: "p1",
			incarnation: "aa11", wantLost: "stopped (Failed)", wantInc: "aa11",
		},
		"the pod is gone": {
			phase: agentlanev1alpha1.SessionActive, podName: "p1", incarnation: "aa11", wantLost: "is gone", wantInc: "aa11",
		},
		"another pod replaced it": {
			pods: []client.Object{pod("p2", "bb-22", corev1.PodPending)}, phase: agentlanev1alpha1.SessionActive, podName: "p2",
			incarnation: "aa11", wantLost: "now shows pod p2", wantInc: "aa11",
		},
		"a pod of the same name replaced it": {
			pods: []client.Object{pod("p1", "cc-33", corev1.PodRunning)}, phase: agentlanev1alpha1.SessionActive, podName: "p1",
			incarnation: "aa11", wantLost: "now shows pod p1", wantInc: "aa11",
		},
		"the session shows no pod any more": {
			phase: agentlanev1alpha1.SessionActive, incarnation: "aa11", wantLost: "shows none", wantInc: "aa11",
		},
		"the session passivates: the attempt moves with it": {
			phase: agentlanev1alpha1.SessionPassivating, incarnation: "aa11", wantInc: "",
		},
		"the session resumes in a new pod": {
			pods: []client.Object{pod("p2", "bb-22", corev1.PodPending)}, phase: agentlanev1alpha1.SessionResuming, podName: "p2",
			incarnation: "aa11", wantInc: "",
		},
		"a session without a runtime has no pod to lose": {
			noRuntime: true, phase: agentlanev1alpha1.SessionActive, incarnation: "", wantInc: "",
		},
	}
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := &DelegationReconciler{Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(tc.pods...).Build()}
			w := &agentlanev1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w"},
				Status: agentlanev1alpha1.AgentSessionStatus{Phase: tc.phase, PodName: tc.podName}}
			if !tc.noRuntime {
				w.Spec.Runtime = &agentlanev1alpha1.SessionRuntime{}
			}
			st := &agentlanev1alpha1.ExternalTaskStatus{Phase: agentlanev1alpha1.ExternalTaskRunning, Attempt: 1,
				Holder: agentlanev1alpha1.HolderDelegate, Worker: "w", WorkerIncarnation: tc.incarnation}
			lost := r.runtimeLost(context.Background(), st, w)
			switch {
			case tc.wantLost == "" && lost != "":
				t.Errorf("lost: %q, want the attempt kept", lost)
			case tc.wantLost != "" && !strings.Contains(lost, tc.wantLost):
				t.Errorf("lost: %q, want it to say %q", lost, tc.wantLost)
			}
			if st.WorkerIncarnation != tc.wantInc {
				t.Errorf("workerIncarnation %q, want %q", st.WorkerIncarnation, tc.wantInc)
			}
		})
	}
}
