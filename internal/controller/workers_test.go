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
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/workerproto"
)

func TestParseWorkerLease(t *testing.T) {
	renew := metav1.NewMicroTime(time.Date(2026, 5, 21, 14, 30, 0, 0, time.UTC))
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name:   workerproto.LeaseName("w1"),
			Labels: map[string]string{workerproto.WorkerLabel: "true", workerproto.NodeLabel: "node-a", "zone": "z1"},
			Annotations: map[string]string{
				workerproto.CapacityAnnotation: "3", workerproto.QueuesAnnotation: "q1, q2", workerproto.LanesAnnotation: "",
				workerproto.CommandTypesAnnotation: "bash,exec", workerproto.DrainingAnnotation: "true",
			},
		},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("w1"), LeaseDurationSeconds: ptr.To[int32](3), RenewTime: &renew},
	}
	w, ok := parseWorkerLease(l)
	if !ok {
		t.Fatal("a worker Lease was not recognized")
	}
	if w.name != "w1" || w.node != "node-a" || w.capacity != 3 || !w.draining {
		t.Errorf("parsed %+v", w)
	}
	if want := renew.Add(3 * time.Second); !w.expires.Equal(want) {
		t.Errorf("expires = %v, want renewTime + leaseDurationSeconds = %v", w.expires, want)
	}
	sel := labels.SelectorFromSet(labels.Set{"zone": "z1"})
	for _, c := range []struct {
		queue, lane, typ string
		sel              labels.Selector
		want             bool
	}{
		{"q1", "any", "bash", nil, true},
		{"q2", "any", "exec", sel, true},
		{"q3", "any", "bash", nil, false},
		{"q1", "any", "python", nil, false},
		{"q1", "any", "bash", labels.SelectorFromSet(labels.Set{"zone": "z2"}), false},
	} {
		if got := w.serves(c.queue, c.lane, c.typ, c.sel); got != c.want {
			t.Errorf("serves(%s, %s, %s, %v) = %v, want %v", c.queue, c.lane, c.typ, c.sel, got, c.want)
		}
	}

	l.Labels[workerproto.WorkerLabel] = "false"
	if _, ok := parseWorkerLease(l); ok {
		t.Error("a Lease without the worker label was taken for a worker")
	}
}

func TestWorkerLedgerPick(t *testing.T) {
	task := func(n string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: n} }
	workers := []workerInfo{{name: "big", capacity: 4}, {name: "small", capacity: 1}}
	var l workerLedger

	// Free share decides: big (0/4) and small (0/1) tie, then by name; next
	// big is 1/4 used, small 0/1: small; then only big has room.
	var got []string
	for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
		w, ok := l.pick(task(n), workers)
		if !ok {
			got = append(got, "-")
			continue
		}
		got = append(got, w.name)
	}
	want := []string{"big", "small", "big", "big", "big", "-"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("picks = %v, want %v", got, want)
		}
	}

	// A task that finished frees its slot.
	l.release(task("b"))
	if w, ok := l.pick(task("g"), workers); !ok || w.name != "small" {
		t.Errorf("after a release, pick = %v %v, want small", w.name, ok)
	}

	// A worker that hands a task back is not given it again while another
	// worker has room.
	var m workerLedger
	x := &agentlanev1alpha1.ExternalTask{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x"}}
	x.Status = agentlanev1alpha1.ExternalTaskStatus{Phase: agentlanev1alpha1.ExternalTaskDispatched, Worker: "big", Attempt: 1}
	m.observe(x)
	x.Status = agentlanev1alpha1.ExternalTaskStatus{Phase: agentlanev1alpha1.ExternalTaskQueued, Attempt: 1}
	m.observe(x)
	if w, _ := m.pick(task("x"), workers); w.name != "small" {
		t.Errorf("handed-back task went to %q, want small", w.name)
	}
	y := x.DeepCopy()
	y.Name = "y"
	y.Status = agentlanev1alpha1.ExternalTaskStatus{Phase: agentlanev1alpha1.ExternalTaskDispatched, Worker: "big", Attempt: 1}
	m.observe(y)
	y.Status = agentlanev1alpha1.ExternalTaskStatus{Phase: agentlanev1alpha1.ExternalTaskQueued, Attempt: 1}
	m.observe(y)
	if w, _ := m.pick(task("y"), workers[:1]); w.name != "big" {
		t.Errorf("with no other worker, the task went to %q, want big", w.name)
	}
}
