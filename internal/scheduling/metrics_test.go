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
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/lanequeue"
)

// failOnce fails the first attempt of every command and lets the next
// succeed.
type failOnce struct{ calls atomic.Int32 }

func (f *failOnce) Run(_ context.Context, _ lanequeue.Attempt) (lanequeue.Result, error) {
	if f.calls.Add(1) == 1 {
		return lanequeue.Result{}, errors.New("flaky tool")
	}
	return lanequeue.Result{Success: true}, nil
}

func metricsTestConfig(lanes ...lanequeue.LaneConfig) lanequeue.Config {
	return lanequeue.Config{
		Lanes:         lanes,
		DefaultLane:   lanes[0].Name,
		MaxConcurrent: 5,
		Retry:         lanequeue.RetryPolicy{Strategy: lanequeue.RetryFixed, FixedDelay: time.Second, MaxRetries: 2},
	}
}

// TestLaneMetricsOfARetriedCommand runs a command that fails once and then
// succeeds through a real scheduler, and reads what the manager's registry
// exports: one command, two attempts, labelled with the LaneQueue's
// namespace as queue_namespace.
func TestLaneMetricsOfARetriedCommand(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := bound(t, &Schedulers{Options: lanequeue.Options{Handler: &failOnce{}}})
		lq := &agentlanev1alpha1.LaneQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "agents"}}
		key := types.NamespacedName{Namespace: "team-a", Name: "agents"}
		if _, err := s.Ensure(lq, metricsTestConfig(lanequeue.LaneConfig{Name: "execute", MaxConcurrency: 3, MaxConcurrencyPerSession: 1})); err != nil {
			t.Fatal(err)
		}
		defer s.Remove(key)
		q, _ := s.Get(key)
		tk, err := q.Submit(lanequeue.Command{ID: "c1", SessionKey: "s1"})
		if err != nil {
			t.Fatal(err)
		}
		if out, err := tk.Wait(t.Context()); err != nil || out.State != lanequeue.StateSucceeded {
			t.Fatalf("Wait = %+v, %v; want Succeeded", out, err)
		}

		const labels = `queue="agents",queue_namespace="team-a"`
		want := `
# HELP agentlane_lane_commands_finished_total Commands that ended, each once, by outcome: succeeded, failed, dead_lettered, cancelled.
# TYPE agentlane_lane_commands_finished_total counter
agentlane_lane_commands_finished_total{lane="execute",outcome="cancelled",` + labels + `} 0
agentlane_lane_commands_finished_total{lane="execute",outcome="dead_lettered",` + labels + `} 0
agentlane_lane_commands_finished_total{lane="execute",outcome="failed",` + labels + `} 0
agentlane_lane_commands_finished_total{lane="execute",outcome="succeeded",` + labels + `} 1
# HELP agentlane_lane_attempts_finished_total Attempts that ended, each once, by outcome: succeeded, failed, timed_out, cancelled.
# TYPE agentlane_lane_attempts_finished_total counter
agentlane_lane_attempts_finished_total{lane="execute",outcome="cancelled",` + labels + `} 0
agentlane_lane_attempts_finished_total{lane="execute",outcome="failed",` + labels + `} 1
agentlane_lane_attempts_finished_total{lane="execute",outcome="succeeded",` + labels + `} 1
agentlane_lane_attempts_finished_total{lane="execute",outcome="timed_out",` + labels + `} 0
# HELP agentlane_lane_attempts_started_total Attempts started in a lane; a retried command starts several.
# TYPE agentlane_lane_attempts_started_total counter
agentlane_lane_attempts_started_total{lane="execute",` + labels + `} 2
# HELP agentlane_lane_commands_submitted_total Commands accepted into a lane.
# TYPE agentlane_lane_commands_submitted_total counter
agentlane_lane_commands_submitted_total{lane="execute",` + labels + `} 1
# HELP agentlane_lane_retries_total Failed or timed-out attempts whose command was scheduled to run again.
# TYPE agentlane_lane_retries_total counter
agentlane_lane_retries_total{lane="execute",` + labels + `} 1
# HELP agentlane_lane_max_concurrency A lane's configured maxConcurrency across all sessions; 0 is unlimited.
# TYPE agentlane_lane_max_concurrency gauge
agentlane_lane_max_concurrency{lane="execute",` + labels + `} 3
# HELP agentlane_lane_max_concurrency_per_session A lane's configured maxConcurrencyPerSession; 0 is unlimited.
# TYPE agentlane_lane_max_concurrency_per_session gauge
agentlane_lane_max_concurrency_per_session{lane="execute",` + labels + `} 1
# HELP agentlane_queue_max_concurrent A LaneQueue's configured maxConcurrent across its lanes (isolated lanes excepted); 0 is unlimited.
# TYPE agentlane_queue_max_concurrent gauge
agentlane_queue_max_concurrent{` + labels + `} 5
`
		reg := prometheus.NewPedanticRegistry()
		for _, v := range laneVectors {
			reg.MustRegister(v)
		}
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
			"agentlane_lane_commands_finished_total", "agentlane_lane_attempts_finished_total",
			"agentlane_lane_attempts_started_total", "agentlane_lane_commands_submitted_total",
			"agentlane_lane_retries_total", "agentlane_lane_max_concurrency",
			"agentlane_lane_max_concurrency_per_session", "agentlane_queue_max_concurrent"); err != nil {
			t.Error(err)
		}
		// Both attempts land in the lane's one run-duration series.
		if n := testutil.CollectAndCount(LaneRun, "agentlane_lane_run_duration_seconds"); n != 1 {
			t.Errorf("%d run-duration series, want 1", n)
		}
	})
}

// TestCapacityFollowsTheConfiguration: a reconfigured queue exports its new
// caps, a removed lane's go away, and a removed queue's series all go.
func TestCapacityFollowsTheConfiguration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := bound(t, &Schedulers{})
		lq := &agentlanev1alpha1.LaneQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "caps"}}
		key := types.NamespacedName{Namespace: "team-b", Name: "caps"}
		if _, err := s.Ensure(lq, metricsTestConfig(
			lanequeue.LaneConfig{Name: "query", MaxConcurrencyPerSession: 4},
			lanequeue.LaneConfig{Name: "execute", MaxConcurrency: 2})); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Ensure(lq, metricsTestConfig(lanequeue.LaneConfig{Name: "query", MaxConcurrency: 8})); err != nil {
			t.Fatal(err)
		}
		caps := func(v *prometheus.GaugeVec, lane string) float64 {
			return testutil.ToFloat64(v.WithLabelValues("team-b", "caps", lane))
		}
		if got := caps(LaneMaxConcurrency, "query"); got != 8 {
			t.Errorf("query maxConcurrency = %v, want 8", got)
		}
		if got := caps(LaneMaxConcurrencyPerSession, "query"); got != 0 {
			t.Errorf("query maxConcurrencyPerSession = %v, want 0 (unlimited)", got)
		}
		// WithLabelValues above recreated query's series; execute's must be gone.
		match := prometheus.Labels{LabelQueueNamespace: "team-b", LabelQueue: "caps", LabelLane: "execute"}
		if n := LaneMaxConcurrency.DeletePartialMatch(match); n != 0 {
			t.Errorf("the removed lane execute still had %d maxConcurrency series", n)
		}

		s.Remove(key)
		queue := prometheus.Labels{LabelQueueNamespace: "team-b", LabelQueue: "caps"}
		for _, v := range laneVectors {
			if n := v.DeletePartialMatch(queue); n != 0 {
				t.Errorf("%d series of the removed queue left in a vector", n)
			}
		}
	})
}
