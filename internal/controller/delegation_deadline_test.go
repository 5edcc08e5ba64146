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

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/delegation"
)

// TestDelegationDeadline: a delegation's own timeout is bounded by its
// lane's (else its queue's defaultTimeout); without one the lane's, the
// queue's or the manager's default applies.
func TestDelegationDeadline(t *testing.T) {
	d := func(v time.Duration) *metav1.Duration { return &metav1.Duration{Duration: v} }
	cases := map[string]struct {
		task, lane, queue time.Duration
		want              time.Duration
		wantSource        string
	}{
		"the task's, shorter than the lane's":  {task: 10 * time.Second, lane: time.Minute, want: 10 * time.Second, wantSource: "delegation"},
		"the lane's bounds a longer one":       {task: time.Hour, lane: time.Minute, want: time.Minute, wantSource: "lane review"},
		"the queue's bounds it without a lane": {task: time.Hour, queue: 2 * time.Minute, want: 2 * time.Minute, wantSource: "LaneQueue defaultTimeout"},
		"the lane's before the queue's":        {lane: time.Minute, queue: 2 * time.Minute, want: time.Minute, wantSource: "lane review"},
		"the task's alone":                     {task: 3 * time.Hour, want: 3 * time.Hour, wantSource: "delegation"},
		"the manager's default":                {want: delegation.DefaultTimeout, wantSource: "delegation default"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := &DelegationReconciler{}
			dl := &delegateLane{name: "review", spec: &agentlanev1alpha1.Lane{Name: "review"}, lq: &agentlanev1alpha1.LaneQueue{}}
			task := &agentlanev1alpha1.ExternalTask{}
			if tc.task > 0 {
				task.Spec.Timeout = d(tc.task)
			}
			if tc.lane > 0 {
				dl.spec.Timeout = d(tc.lane)
			}
			if tc.queue > 0 {
				dl.lq.Spec.DefaultTimeout = d(tc.queue)
			}
			got, source := r.deadlineOf(dl, task)
			if got != tc.want || source != tc.wantSource {
				t.Errorf("deadlineOf = %s (%s), want %s (%s)", got, source, tc.want, tc.wantSource)
			}
		})
	}
}

// TestAttemptWorkerName: each attempt's worker session has a name of its
// own, within the 63 characters a name may have.
func TestAttemptWorkerName(t *testing.T) {
	long := strings.Repeat("t", 63)
	cases := map[string]struct {
		task string
		n    int32
		want string
	}{
		"the first attempt":           {task: "t1", n: 1, want: "review-t1"},
		"a retry":                     {task: "t1", n: 2, want: "review-t1-a2"},
		"a retry of a long task name": {task: long, n: 12, want: long[:59] + "-a12"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := attemptWorkerName("review", tc.task, tc.n)
			if got != tc.want || len(got) > 63 {
				t.Errorf("attemptWorkerName = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestDelegateLaneTimeout: a Delegate lane without a timeout of its own or
// of its queue runs its attempts for the delegation default, in the
// scheduler too (a task the scheduler takes back after a restart has no
// timeout of its own); any timeout the spec sets wins.
func TestDelegateLaneTimeout(t *testing.T) {
	delegate := &agentlanev1alpha1.ExternalTarget{Type: agentlanev1alpha1.ExternalTargetDelegate,
		Delegate: &agentlanev1alpha1.DelegateTarget{}}
	cases := map[string]struct {
		lane, queue time.Duration
		want        time.Duration
	}{
		"no timeout anywhere":    {want: delegation.DefaultTimeout},
		"the lane's":             {lane: time.Minute, want: time.Minute},
		"the queue's default":    {queue: 2 * time.Minute, want: 0},
		"the lane's and a queue": {lane: time.Minute, queue: 2 * time.Minute, want: time.Minute},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			spec := agentlanev1alpha1.LaneQueueSpec{DefaultLane: "execute", Lanes: []agentlanev1alpha1.Lane{
				{Name: "execute"}, {Name: "review", MaxConcurrency: 1, ExternalTarget: delegate}}}
			if tc.lane > 0 {
				spec.Lanes[1].Timeout = &metav1.Duration{Duration: tc.lane}
			}
			if tc.queue > 0 {
				spec.DefaultTimeout = &metav1.Duration{Duration: tc.queue}
			}
			cfg, err := QueueConfig(&spec)
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Lanes[1].Timeout; got != tc.want {
				t.Errorf("the review lane's timeout = %s, want %s (0: the queue's)", got, tc.want)
			}
			if got := cfg.Lanes[0].Timeout; got != 0 {
				t.Errorf("the execute lane's timeout = %s, want none of its own", got)
			}
		})
	}
}
