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
	"context"
	"testing"
	"testing/synctest"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/lanequeue"
)

// TestUnchangedEnsureAsksForNoRefresh: the LaneQueue controller calls
// Ensure at each status refresh of a queue. With the queue's spec
// unchanged, that must not ask for another refresh, or an idle queue would
// be refreshed every StatusInterval forever.
func TestUnchangedEnsureAsksForNoRefresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := bound(t, &Schedulers{StatusInterval: time.Second})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { _ = s.Start(ctx); close(done) }()
		defer func() { cancel(); <-done }()
		changes := s.Changes()
		refreshes := func() int {
			time.Sleep(5 * time.Second)
			synctest.Wait()
			n := 0
			for len(changes) > 0 {
				<-changes
				n++
			}
			return n
		}
		lq := &agentlanev1alpha1.LaneQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "agents"}}
		config := func(maxConcurrency int) lanequeue.Config {
			return metricsTestConfig(lanequeue.LaneConfig{Name: "execute", MaxConcurrency: maxConcurrency, CommandTypes: []string{"bash"}})
		}
		if _, err := s.Ensure(lq, config(3)); err != nil {
			t.Fatal(err)
		}
		if n := refreshes(); n != 1 {
			t.Fatalf("a started scheduler asked for %d refreshes, want 1", n)
		}
		for range 3 { // what each status refresh does
			if _, err := s.Ensure(lq, config(3)); err != nil {
				t.Fatal(err)
			}
			if n := refreshes(); n != 0 {
				t.Fatalf("an unchanged Ensure asked for %d refreshes, want 0", n)
			}
		}
		if _, err := s.Ensure(lq, config(4)); err != nil {
			t.Fatal(err)
		}
		if n := refreshes(); n != 1 {
			t.Fatalf("a reconfiguration asked for %d refreshes, want 1", n)
		}
		if got := s.queues[types.NamespacedName{Namespace: "team-a", Name: "agents"}].queue.Config().Lanes[0].MaxConcurrency; got != 4 {
			t.Fatalf("MaxConcurrency = %d after the reconfiguration, want 4", got)
		}
	})
}
