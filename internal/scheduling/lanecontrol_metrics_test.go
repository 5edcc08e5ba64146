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
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/lanequeue"
)

// TestLaneControlGaugesFollowTheConfiguration: a paused lane and a drain
// show as 1, and go back to 0 when the spec lifts them.
func TestLaneControlGaugesFollowTheConfiguration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := bound(t, &Schedulers{})
		lq := &agentlanev1alpha1.LaneQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "team-c", Name: "ctl"}}
		defer s.Remove(types.NamespacedName{Namespace: "team-c", Name: "ctl"})
		cfg := metricsTestConfig(lanequeue.LaneConfig{Name: "query"}, lanequeue.LaneConfig{Name: "execute", Paused: true})
		cfg.Drain = &lanequeue.DrainConfig{Timeout: time.Minute}
		if _, err := s.Ensure(lq, cfg); err != nil {
			t.Fatal(err)
		}
		paused := func(lane string) float64 {
			return testutil.ToFloat64(LanePaused.WithLabelValues("team-c", "ctl", lane))
		}
		draining := func() float64 { return testutil.ToFloat64(QueueDraining.WithLabelValues("team-c", "ctl")) }
		if paused("query") != 0 || paused("execute") != 1 || draining() != 1 {
			t.Errorf("paused query %v, execute %v; draining %v; want 0, 1, 1", paused("query"), paused("execute"), draining())
		}
		cfg = metricsTestConfig(lanequeue.LaneConfig{Name: "query"}, lanequeue.LaneConfig{Name: "execute"})
		if _, err := s.Ensure(lq, cfg); err != nil {
			t.Fatal(err)
		}
		if paused("execute") != 0 || draining() != 0 {
			t.Errorf("after the spec lifted them: paused execute %v, draining %v; want 0, 0", paused("execute"), draining())
		}
	})
}
