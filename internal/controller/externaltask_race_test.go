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
	"testing"
	"testing/synctest"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/scheduling"
)

// TestSettleSuccessThatRacedTheTimeout: a worker's success reached the API
// server while the scheduler's timeout of the same attempt fired (the
// scheduler already waits to retry). Status records Succeeded, so the lane
// must count one completion and no cancellation.
func TestSettleSuccessThatRacedTheTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q, err := lanequeue.New(lanequeue.Config{
			Lanes: []lanequeue.LaneConfig{{Name: "execute", Mode: lanequeue.External, Timeout: time.Second}},
			Retry: lanequeue.RetryPolicy{Strategy: lanequeue.RetryFixed, FixedDelay: time.Hour, MaxRetries: 3},
		}, lanequeue.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		tk, err := q.Submit(lanequeue.Command{ID: "t1", SessionKey: "s", Type: "bash", External: true, AwaitStart: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := q.MarkStarted("t1", 1, time.Now()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second) // attempt 1 times out; the retry waits an hour
		synctest.Wait()
		if got := tk.State(); got != lanequeue.StateRetrying {
			t.Fatalf("scheduler state after the timeout = %s, want Retrying", got)
		}

		ts := &scheduling.TaskSet{}
		ts.Put("t1", tk, false)
		task := &agentlanev1alpha1.ExternalTask{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "t1"}}
		task.Status.Phase = agentlanev1alpha1.ExternalTaskSucceeded
		task.Status.Attempt = 1
		task.Status.Result = &agentlanev1alpha1.TaskResult{Success: true}
		r := &ExternalTaskReconciler{}
		r.settleFinished(context.Background(), binding{queue: q, tasks: ts}, task)

		if o, final := tk.Outcome(); !final || o.State != lanequeue.StateSucceeded {
			t.Errorf("scheduler outcome = %+v (final %v), want Succeeded as status records", o, final)
		}
		lane := q.Stats().Lanes[0]
		if got := [3]uint64{lane.Completed, lane.Failed, lane.Cancelled}; got != [3]uint64{1, 0, 0} {
			t.Errorf("lane completed, failed, cancelled = %v, want [1 0 0]", got)
		}
		if ts.Has("t1") {
			t.Error("the finished task is still tracked")
		}
	})
}

// TestStoppingManagerCancelsNoTask: when the manager stops, its schedulers
// close and every command they hold ends Cancelled (ErrClosed); a reconcile
// that runs meanwhile must not write that as the task's phase, or a
// SIGTERM of the leader would cancel the tasks in flight.
func TestStoppingManagerCancelsNoTask(t *testing.T) {
	schedulers := boundSchedulers(t)
	lq := &agentlanev1alpha1.LaneQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "q1"}}
	if _, err := schedulers.Ensure(lq, lanequeue.Config{Lanes: []lanequeue.LaneConfig{{Name: "execute", Mode: lanequeue.External}}}); err != nil {
		t.Fatal(err)
	}
	q, tasks, _ := schedulers.TasksOf(client.ObjectKeyFromObject(lq))
	tk, err := q.Submit(lanequeue.Command{ID: "t1", SessionKey: "s", Type: "bash", External: true, AwaitStart: true})
	if err != nil {
		t.Fatal(err)
	}
	tasks.Put("t1", tk, false)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- schedulers.Start(ctx) }()
	cancel()
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if o, final := tk.Outcome(); !final || o.State != lanequeue.StateCancelled {
		t.Fatalf("outcome after the schedulers stopped = %+v, want Cancelled", o)
	}

	task := &agentlanev1alpha1.ExternalTask{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "t1"}}
	task.Status.Phase = agentlanev1alpha1.ExternalTaskQueued
	r := &ExternalTaskReconciler{Schedulers: schedulers, Clock: clocktesting.NewFakeClock(time.Now())}
	if _, err := r.converge(context.Background(), binding{queue: q, tasks: tasks}, newTaskScope(task)); err != nil {
		t.Fatal(err)
	}
	if task.Status.Phase != agentlanev1alpha1.ExternalTaskQueued {
		t.Errorf("phase = %s after the manager stopped, want Queued for the next leader", task.Status.Phase)
	}
}
