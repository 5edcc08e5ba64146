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

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/scheduling"
	"github.com/agentlane/agentlane/internal/testenv"
)

// timedOutTask runs, in the synctest bubble, a LaneQueue scheduler built as
// the manager builds it (Prometheus series of namespace ns) with one
// External lane of 1s attempts and maxRetries retries an hour apart (none
// for 0), submits task t1, starts its attempt 1 and lets it time out.
func timedOutTask(t *testing.T, ns string, maxRetries int) (binding, *lanequeue.Ticket, func()) {
	t.Helper()
	schedulers := boundSchedulers(t)
	lq := &agentlanev1alpha1.LaneQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "q1"}}
	retry := lanequeue.RetryPolicy{Strategy: lanequeue.RetryFixed, FixedDelay: time.Hour, MaxRetries: maxRetries}
	if maxRetries == 0 {
		retry.Strategy = lanequeue.RetryNone
	}
	if _, err := schedulers.Ensure(lq, lanequeue.Config{
		Lanes: []lanequeue.LaneConfig{{Name: "execute", Mode: lanequeue.External, Timeout: time.Second}},
		Retry: retry,
	}); err != nil {
		t.Fatal(err)
	}
	stop := func() { schedulers.Remove(client.ObjectKeyFromObject(lq)) }
	q, tasks, _ := schedulers.TasksOf(client.ObjectKeyFromObject(lq))
	tk, err := q.Submit(lanequeue.Command{ID: "t1", SessionKey: "s", Type: "bash", External: true, AwaitStart: true})
	if err != nil {
		t.Fatal(err)
	}
	tasks.Put("t1", tk, false)
	if err := q.MarkStarted("t1", 1, time.Now()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // attempt 1 times out
	synctest.Wait()
	return binding{queue: q, tasks: tasks}, tk, stop
}

// laneCounts is what the lane counted: its LaneQueue status counts and its
// Prometheus counters.
type laneCounts struct {
	Completed, Failed, DeadLettered, Retried, Timeouts uint64
	Succeeded, DeadLetteredMetric, TimedOut, Retries   float64
}

func countsOfLane(q *lanequeue.Queue, ns string) laneCounts {
	ln := q.Stats().Lanes[0]
	lane := []string{ns, "q1", "execute"}
	with := func(outcome string) []string { return append(append([]string{}, lane...), outcome) }
	return laneCounts{
		Completed: ln.Completed, Failed: ln.Failed, DeadLettered: ln.DeadLettered, Retried: ln.Retried, Timeouts: ln.Timeouts,
		Succeeded:          testutil.ToFloat64(scheduling.LaneCommandsFinished.WithLabelValues(with("succeeded")...)),
		DeadLetteredMetric: testutil.ToFloat64(scheduling.LaneCommandsFinished.WithLabelValues(with("dead_lettered")...)),
		TimedOut:           testutil.ToFloat64(scheduling.LaneAttemptsFinished.WithLabelValues(with("timed_out")...)),
		Retries:            testutil.ToFloat64(scheduling.LaneRetries.WithLabelValues(lane...)),
	}
}

// TestSuccessThatBeatTheTimeoutsRecordIsCountedOnce: the scheduler's
// timeout of attempt 1 fired, and the worker's success of that attempt
// reached the API server before the manager's record of the timeout (which
// then failed on the task's resourceVersion). Status records Succeeded, so
// the lane counts one success and neither a dead letter (on the last
// attempt) nor a retry or a timed-out attempt (with retries left).
func TestSuccessThatBeatTheTimeoutsRecordIsCountedOnce(t *testing.T) {
	for name, maxRetries := range map[string]int{"last-attempt": 0, "retries-left": 2} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ns := "race-success-" + name
				b, tk, stop := timedOutTask(t, ns, maxRetries)
				defer stop()
				task := &agentlanev1alpha1.ExternalTask{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "t1"}}
				task.Status.Phase = agentlanev1alpha1.ExternalTaskSucceeded
				task.Status.Attempt = 1
				task.Status.Result = &agentlanev1alpha1.TaskResult{Success: true}
				r := &ExternalTaskReconciler{}
				r.settleFinished(context.Background(), b, task)

				if o, final := tk.Outcome(); !final || o.State != lanequeue.StateSucceeded {
					t.Errorf("scheduler outcome = %+v (final %v), want Succeeded as status records", o, final)
				}
				want := laneCounts{Completed: 1, Succeeded: 1}
				if diff := cmp.Diff(want, countsOfLane(b.queue, ns)); diff != "" {
					t.Errorf("lane counts (-want,+got):\n%s", diff)
				}
				if n := len(b.queue.DeadLetters()); n != 0 {
					t.Errorf("%d dead letters, want none", n)
				}
			})
		})
	}
}

// TestTimeoutIsCountedOnceItsRecordIsWritten: the manager's record of the
// timeout won (its status write succeeded): the lane counts the timed-out
// attempt and the dead letter, once, and a success seen afterwards changes
// nothing.
func TestTimeoutIsCountedOnceItsRecordIsWritten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ns = "race-timeout"
		b, tk, stop := timedOutTask(t, ns, 0)
		defer stop()
		task := &agentlanev1alpha1.ExternalTask{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "t1"}}
		task.Status.Phase = agentlanev1alpha1.ExternalTaskRunning
		task.Status.Attempt = 1
		task.Status.Worker = "w1"
		task.Status.StartedAt = &metav1.Time{Time: time.Now().Add(-2 * time.Second)}
		c := fake.NewClientBuilder().WithScheme(testenv.Scheme()).WithObjects(task).WithStatusSubresource(task).Build()
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(task), task); err != nil {
			t.Fatal(err)
		}
		r := &ExternalTaskReconciler{Client: c, Clock: clocktesting.NewFakeClock(time.Now())}
		s := newTaskScope(task)
		if _, err := r.converge(context.Background(), b, s); err != nil {
			t.Fatal(err)
		}
		if task.Status.Phase != agentlanev1alpha1.ExternalTaskDeadLettered {
			t.Fatalf("phase = %s, want DeadLettered", task.Status.Phase)
		}
		if diff := cmp.Diff(laneCounts{}, countsOfLane(b.queue, ns)); diff != "" {
			t.Errorf("counted before the record was written (-want,+got):\n%s", diff)
		}
		if err := r.writeStatus(context.Background(), s, true); err != nil { // the status write succeeds
			t.Fatal(err)
		}
		want := laneCounts{DeadLettered: 1, Timeouts: 1, DeadLetteredMetric: 1, TimedOut: 1}
		if diff := cmp.Diff(want, countsOfLane(b.queue, ns)); diff != "" {
			t.Errorf("lane counts once the record is written (-want,+got):\n%s", diff)
		}
		if o, _ := tk.Outcome(); o.State != lanequeue.StateDeadLettered {
			t.Errorf("scheduler outcome = %+v, want DeadLettered", o)
		}
	})
}
