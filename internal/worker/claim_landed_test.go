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
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/workerproto"
)

// flakyAPI answers status patches as an API server that dies and comes
// back would: each try takes the next answer from script. An answer of
// "apply, no reply" applies the patch and then reports no answer, as when
// the API server committed the write and died before replying.
type flakyAPI struct {
	mu     sync.Mutex
	script []string
	tries  int
}

const (
	applyNoReply = "apply, no reply"
	noReply      = "no reply"
	forbidden    = "forbidden"
	rejected     = "rejected"
)

func (f *flakyAPI) patch(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
	f.mu.Lock()
	answer := f.script[min(f.tries, len(f.script)-1)]
	f.tries++
	f.mu.Unlock()
	switch answer {
	case applyNoReply:
		if err := c.SubResource(sub).Patch(ctx, obj, p, opts...); err != nil {
			return err
		}
		return errors.New("connection reset by peer")
	case noReply:
		return errors.New("connection refused")
	case forbidden:
		return apierrors.NewForbidden(schema.GroupResource{Group: "agentlane.io", Resource: "externaltasks"}, "t", errors.New("RBAC: not ready"))
	case rejected:
		// What the API server answers when the patch's test operations fail.
		return apierrors.NewInvalid(schema.GroupKind{Group: "agentlane.io", Kind: "ExternalTask"}, "t", nil)
	}
	return c.SubResource(sub).Patch(ctx, obj, p, opts...)
}

// claimThrough claims attempt 1 of a task Dispatched to worker-a against an
// API server answering as script says, stepping the fake clock whenever
// the claim waits to retry, and returns the task and the claim's error.
func claimThrough(t *testing.T, script ...string) (*agentlanev1alpha1.ExternalTask, error) {
	t.Helper()
	clk := testingclock.NewFakeClock(time.Date(2026, 11, 24, 2, 0, 0, 0, time.UTC))
	task := &agentlanev1alpha1.ExternalTask{}
	task.Namespace, task.Name = "ns", "t"
	task.Status = agentlanev1alpha1.ExternalTaskStatus{Phase: agentlanev1alpha1.ExternalTaskDispatched, Worker: "worker-a", Attempt: 1}
	api := &flakyAPI{script: script}
	c := fake.NewClientBuilder().WithScheme(Scheme()).WithStatusSubresource(task).WithObjects(task.DeepCopy()).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: api.patch}).Build()
	a := &attempts{client: c, clock: clk, log: logr.Discard()}
	done := make(chan error, 1)
	go func() { done <- a.claim(context.Background(), task, workerproto.WorkerFence("worker-a", 1)) }()
	var err error
	for waiting := true; waiting; {
		select {
		case err = <-done:
			waiting = false
		default:
			if clk.HasWaiters() {
				clk.Step(100 * time.Millisecond)
			} else {
				time.Sleep(time.Millisecond) // let the claim reach its next wait
			}
		}
	}
	got := &agentlanev1alpha1.ExternalTask{}
	if gerr := c.Get(context.Background(), client.ObjectKeyFromObject(task), got); gerr != nil {
		t.Fatal(gerr)
	}
	return got, err
}

// TestClaimWhoseAnswerWasLostIsKept: the API server commits a claim and
// dies before answering; the retries meet no answer, then 403 while the
// restarted server's authorizer warms up, then the claim's own test of
// phase Dispatched fails because the claim is in place. The worker must
// see its claim applied and run the attempt, not drop an attempt that
// status says it runs (which then timed out unrun, counted as an attempt).
func TestClaimWhoseAnswerWasLostIsKept(t *testing.T) {
	for name, script := range map[string][]string{
		"outage, then rejected":            {applyNoReply, noReply, rejected},
		"outage, 403 at restart, rejected": {applyNoReply, noReply, forbidden, forbidden, rejected},
	} {
		task, err := claimThrough(t, script...)
		if err != nil {
			t.Errorf("%s: the claim that was applied before its answer was lost failed: %v", name, err)
		}
		if task.Status.Phase != agentlanev1alpha1.ExternalTaskRunning || task.Status.Worker != "worker-a" {
			t.Errorf("%s: the task is %s under %q, want Running under worker-a", name, task.Status.Phase, task.Status.Worker)
		}
	}
}

// TestClaimRejectedAfterUncertainTryIsLost: after a try that got no answer
// and was not applied, a rejection means the attempt went elsewhere: the
// claim is lost, as is a rejection with no uncertain try before it.
func TestClaimRejectedAfterUncertainTryIsLost(t *testing.T) {
	for name, script := range map[string][]string{
		"no reply, not applied, then rejected": {noReply, rejected},
		"rejected at once":                     {rejected},
	} {
		task, err := claimThrough(t, script...)
		if !errors.Is(err, errAttemptLost) {
			t.Errorf("%s: the claim returned %v, want errAttemptLost", name, err)
		}
		if task.Status.Phase != agentlanev1alpha1.ExternalTaskDispatched {
			t.Errorf("%s: the task is %s, want it left Dispatched", name, task.Status.Phase)
		}
	}
}

// TestClaimRetriesForbidden: a 403 from an API server whose authorizer is
// not ready yet is retried like an outage, and the claim then succeeds.
func TestClaimRetriesForbidden(t *testing.T) {
	task, err := claimThrough(t, forbidden, forbidden, "apply")
	if err != nil {
		t.Fatalf("a claim retried through 403s failed: %v", err)
	}
	if task.Status.Phase != agentlanev1alpha1.ExternalTaskRunning {
		t.Errorf("the task is %s, want Running", task.Status.Phase)
	}
}
