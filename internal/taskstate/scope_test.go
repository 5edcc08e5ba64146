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
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

func newFakeClient(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := agentlanev1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&agentlanev1alpha1.ExternalTask{}).Build()
}

func readTask(t *testing.T, c client.Client) *agentlanev1alpha1.ExternalTask {
	t.Helper()
	got := &agentlanev1alpha1.ExternalTask{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "t"}, got); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestScopeWritesOnceFencedOnItsRead(t *testing.T) {
	ctx := context.Background()
	c := newFakeClient(t, &agentlanev1alpha1.ExternalTask{
		ObjectMeta: metaOf("t"), Spec: agentlanev1alpha1.ExternalTaskSpec{CommandType: "bash"},
	})
	var versions Versions
	task := readTask(t, c)
	read := task.ResourceVersion
	s := NewScope(task)
	if err := Wait(&task.Status, task.Generation, t0, "no queue"); err != nil {
		t.Fatal(err)
	}
	if err := Queue(&task.Status, task.Generation, t0, "execute", agentlanev1alpha1.ExternalTaskAwaitingWorkerReason, "waiting"); err != nil {
		t.Fatal(err)
	}
	wrote := 0
	s.AfterWrite(func() { wrote++ })
	s.IfWriteFails(func() { t.Error("the write failed") })
	if err := s.Write(ctx, c, &versions, true); err != nil {
		t.Fatal(err)
	}
	got := readTask(t, c)
	if got.Status.Phase != queued || got.Status.Lane != "execute" || got.Status.ObservedGeneration != got.Generation || wrote != 1 {
		t.Errorf("written status %+v, after-write hooks run %d times; want Queued in lane execute, observed, hooks run once", got.Status, wrote)
	}
	if !versions.Stale(client.ObjectKeyFromObject(got), read) || task.ResourceVersion != got.ResourceVersion {
		t.Errorf("the version read (%s) is not recorded as replaced, or the task does not carry the written one (%s, want %s)", read, task.ResourceVersion, got.ResourceVersion)
	}
}

func TestScopeReportsAConflictAndWritesNothing(t *testing.T) {
	ctx := context.Background()
	c := newFakeClient(t, &agentlanev1alpha1.ExternalTask{
		ObjectMeta: metaOf("t"), Spec: agentlanev1alpha1.ExternalTaskSpec{CommandType: "bash"},
		Status: *status(dispatched, 1, heldByWorker("w1")),
	})
	task := readTask(t, c)
	s := NewScope(task)
	// A worker claims the attempt after the pass read the task.
	other := readTask(t, c)
	other.Status.Phase = running
	if err := c.Status().Update(ctx, other); err != nil {
		t.Fatal(err)
	}
	if err := Close(&task.Status, task.Generation, t1, cancelled, "cancelled"); err != nil {
		t.Fatal(err)
	}
	failedHooks, written := 0, 0
	s.IfWriteFails(func() { failedHooks++ })
	s.AfterWrite(func() { written++ })
	err := s.Write(ctx, c, nil, true)
	if !apierrors.IsConflict(err) {
		t.Fatalf("Write returned %v, want a conflict", err)
	}
	if failedHooks != 1 || written != 0 {
		t.Errorf("if-write-fails hooks run %d times, after-write %d; want 1 and 0", failedHooks, written)
	}
	if got := readTask(t, c); got.Status.Phase != running {
		t.Errorf("phase %s after a stale write, want the worker's Running", got.Status.Phase)
	}
}

func TestScopeSkipsWhatNeedsNoWrite(t *testing.T) {
	ctx := context.Background()
	c := newFakeClient(t, &agentlanev1alpha1.ExternalTask{ObjectMeta: metaOf("t")})
	for name, prepare := range map[string]func(*Scope){
		"unchanged": func(*Scope) {},
		"deferred": func(s *Scope) {
			_ = Wait(&s.Task.Status, 1, t0, "x")
			s.Deferred = true
		},
	} {
		t.Run(name, func(t *testing.T) {
			task := readTask(t, c)
			rv := task.ResourceVersion
			s := NewScope(task)
			prepare(s)
			ran := false
			s.AfterWrite(func() { ran = true })
			if err := s.Write(ctx, c, nil, false); err != nil {
				t.Fatal(err)
			}
			if got := readTask(t, c); got.ResourceVersion != rv || !ran {
				t.Errorf("resourceVersion %s (was %s), after-write hooks run: %v; want no write and the hooks run", got.ResourceVersion, rv, ran)
			}
		})
	}
	t.Run("deleted", func(t *testing.T) {
		task := readTask(t, c)
		s := NewScope(task)
		_ = Wait(&task.Status, 1, t0, "x")
		s.Deleted = true
		ran := false
		s.AfterWrite(func() { ran = true })
		if err := s.Write(ctx, c, nil, false); err != nil || ran {
			t.Errorf("Write of a deleted task: %v, hooks run: %v; want nothing done", err, ran)
		}
	})
}

func metaOf(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: "ns", Name: name, Generation: 1}
}
