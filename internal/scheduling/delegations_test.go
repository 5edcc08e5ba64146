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

package scheduling

import (
	"errors"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/delegation"
	"github.com/agentlane/agentlane/internal/lanequeue"
)

// TestDelegationEventsWakeTheLane: the grant, the retry and the end of a
// delegated command wake the delegation controller for its lane; an
// External command of another type wakes only the ExternalTask controller.
func TestDelegationEventsWakeTheLane(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := bound(t, &Schedulers{})
		lq := &agentlanev1alpha1.LaneQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "agents"}}
		cfg := metricsTestConfig(lanequeue.LaneConfig{Name: "review", MaxConcurrency: 1})
		if _, err := s.Ensure(lq, cfg); err != nil {
			t.Fatal(err)
		}
		defer s.Remove(types.NamespacedName{Namespace: lq.Namespace, Name: lq.Name})
		q, _ := s.Get(types.NamespacedName{Namespace: lq.Namespace, Name: lq.Name})
		taken := func() []reconcile.Request {
			synctest.Wait()
			s.delegationEvents.mu.Lock()
			defer s.delegationEvents.mu.Unlock()
			got := s.delegationEvents.pending
			s.delegationEvents.pending = nil
			return got
		}
		review := LaneRequest("team-a", "agents", "review")

		if _, err := q.Submit(lanequeue.Command{ID: "tool", SessionKey: "lead", Type: "bash", Lane: "review", External: true, AwaitStart: true}); err != nil {
			t.Fatal(err)
		}
		if err := q.CompleteAttempt("tool", 1, lanequeue.Result{Success: true}); err != nil {
			t.Fatal(err)
		}
		if got := taken(); len(got) != 0 {
			t.Fatalf("a command of type bash woke the delegation controller: %v", got)
		}

		if _, err := q.Submit(lanequeue.Command{ID: "d1", SessionKey: "lead", Type: delegation.CommandType, Lane: "review", External: true, AwaitStart: true}); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]reconcile.Request{review}, taken()); diff != "" {
			t.Fatalf("the grant's wake-ups (-want,+got):\n%s", diff)
		}
		if err := q.FailAttempt("d1", 1, errors.New("worker lost")); err != nil {
			t.Fatal(err)
		}
		if got := taken(); len(got) == 0 || got[0] != review {
			t.Fatalf("the retry woke %v, want the lane %v", got, review)
		}
	})
}
