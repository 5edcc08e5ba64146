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

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/lanequeue"
)

func dur(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

func TestQueueConfig(t *testing.T) {
	defaultRetry := lanequeue.RetryPolicy{
		Strategy: lanequeue.RetryExponential, MaxRetries: 3,
		InitialDelay: 100 * time.Millisecond, MaxDelay: 30 * time.Second,
	}
	base := func(lanes ...lanequeue.LaneConfig) lanequeue.Config {
		return lanequeue.Config{
			Lanes:             lanes,
			Fairness:          lanequeue.FairFIFO,
			Retry:             defaultRetry,
			Boost:             lanequeue.BoostPolicy{Strategy: lanequeue.BoostStandard},
			PressureThreshold: 50,
			Alerts:            lanequeue.AlertThresholds{Warning: 50, Critical: 100},
			DeadLetter:        lanequeue.DeadLetterConfig{MaxSize: 1000},
			DefaultTimeout:    time.Minute,
		}
	}
	// What a session may switch a lane to when the lane says nothing: never
	// External.
	ownRuntime := []lanequeue.HandlerMode{lanequeue.Internal, lanequeue.Hybrid}
	execute := lanequeue.LaneConfig{Name: "execute", Mode: lanequeue.Internal, SessionModes: ownRuntime}

	cases := map[string]struct {
		spec    agentlanev1alpha1.LaneQueueSpec
		want    lanequeue.Config
		wantErr string
	}{
		"undefaulted minimal spec gets the documented defaults": {
			spec: agentlanev1alpha1.LaneQueueSpec{Lanes: []agentlanev1alpha1.Lane{{Name: "execute"}}},
			want: base(execute),
		},
		"every field is carried over": {
			spec: agentlanev1alpha1.LaneQueueSpec{
				Lanes: []agentlanev1alpha1.Lane{
					{Name: "query", Priority: 1, MaxConcurrency: 8, MaxConcurrencyPerSession: 4, Timeout: dur(30 * time.Second)},
					{
						Name: "execute", Priority: 2, HandlerMode: agentlanev1alpha1.HandlerModeExternal,
						MaxConcurrencyPerSession: 1, StartTimeout: dur(10 * time.Minute),
						RetryPolicy: &agentlanev1alpha1.RetryPolicy{Strategy: agentlanev1alpha1.RetryFixed, FixedDelay: dur(time.Second), MaxRetries: ptr.To[int32](5)},
						RateLimit:   &agentlanev1alpha1.RateLimit{Count: 10, Per: agentlanev1alpha1.RateLimitPerMinute},
					},
					{Name: "cron", Priority: 3, Isolated: true,
						SessionOverrides: &agentlanev1alpha1.LaneSessionOverrides{AllowedModes: []agentlanev1alpha1.HandlerMode{agentlanev1alpha1.HandlerModeExternal}}},
				},
				Routing:        []agentlanev1alpha1.RoutingRule{{CommandType: "make", Lane: "execute"}},
				DefaultLane:    "execute",
				MaxConcurrent:  12,
				Fairness:       agentlanev1alpha1.FairnessWeightedTenant,
				TenantWeights:  []agentlanev1alpha1.TenantWeight{{TenantID: "acme", Weight: 3}},
				RetryPolicy:    &agentlanev1alpha1.RetryPolicy{Strategy: agentlanev1alpha1.RetryNone},
				RateLimit:      &agentlanev1alpha1.RateLimit{Count: 100, Per: agentlanev1alpha1.RateLimitPerSecond},
				PriorityBoost:  &agentlanev1alpha1.PriorityBoost{Strategy: agentlanev1alpha1.BoostAggressive, Deadline: dur(5 * time.Minute)},
				DefaultTimeout: dur(2 * time.Minute),
			},
			want: func() lanequeue.Config {
				c := base(
					lanequeue.LaneConfig{Name: "query", Priority: 1, Mode: lanequeue.Internal, MaxConcurrency: 8, MaxConcurrencyPerSession: 4, Timeout: 30 * time.Second,
						SessionModes: ownRuntime},
					lanequeue.LaneConfig{
						Name: "execute", Priority: 2, Mode: lanequeue.External, MaxConcurrencyPerSession: 1,
						StartTimeout: 10 * time.Minute,
						Retry: &lanequeue.RetryPolicy{
							Strategy: lanequeue.RetryFixed, MaxRetries: 5, FixedDelay: time.Second,
							InitialDelay: 100 * time.Millisecond, MaxDelay: 30 * time.Second,
						},
						RateLimit:    &lanequeue.RateLimit{Window: lanequeue.PerMinute, MaxOperations: 10},
						SessionModes: []lanequeue.HandlerMode{lanequeue.Internal, lanequeue.External, lanequeue.Hybrid},
					},
					lanequeue.LaneConfig{Name: "cron", Priority: 3, Mode: lanequeue.Internal, Isolated: true,
						SessionModes: []lanequeue.HandlerMode{lanequeue.Internal, lanequeue.External}},
				)
				c.Routing = map[string]string{"make": "execute"}
				c.DefaultLane = "execute"
				c.MaxConcurrent = 12
				c.Fairness = lanequeue.FairWeightedTenant
				c.TenantWeights = map[string]int{"acme": 3}
				c.Retry.Strategy = lanequeue.RetryNone
				c.RateLimit = &lanequeue.RateLimit{Window: lanequeue.PerSecond, MaxOperations: 100}
				c.Boost = lanequeue.BoostPolicy{Strategy: lanequeue.BoostAggressive, DefaultDeadline: 5 * time.Minute}
				c.DefaultTimeout = 2 * time.Minute
				return c
			}(),
		},
		"maxRetries 0 is no retries, not the scheduler's default": {
			spec: agentlanev1alpha1.LaneQueueSpec{
				Lanes:       []agentlanev1alpha1.Lane{{Name: "execute"}},
				RetryPolicy: &agentlanev1alpha1.RetryPolicy{MaxRetries: ptr.To[int32](0)},
			},
			want: func() lanequeue.Config {
				c := base(execute)
				c.Retry.Strategy = lanequeue.RetryNone
				c.Retry.MaxRetries = 0
				return c
			}(),
		},
		"dead letters off and alerts off": {
			spec: agentlanev1alpha1.LaneQueueSpec{
				Lanes:             []agentlanev1alpha1.Lane{{Name: "execute"}},
				DeadLetter:        &agentlanev1alpha1.DeadLetterPolicy{Enabled: ptr.To(false), MaxSize: ptr.To[int32](10)},
				Alerts:            &agentlanev1alpha1.DepthAlerts{WarningDepth: ptr.To[int32](0), CriticalDepth: ptr.To[int32](0)},
				PressureThreshold: ptr.To[int32](0),
			},
			want: func() lanequeue.Config {
				c := base(execute)
				c.DeadLetter = lanequeue.DeadLetterConfig{Disabled: true, MaxSize: 10}
				c.Alerts = lanequeue.AlertThresholds{Disabled: true}
				c.PressureThreshold = 0
				return c
			}(),
		},
		"only the critical alert level": {
			spec: agentlanev1alpha1.LaneQueueSpec{
				Lanes:  []agentlanev1alpha1.Lane{{Name: "execute"}},
				Alerts: &agentlanev1alpha1.DepthAlerts{WarningDepth: ptr.To[int32](0), CriticalDepth: ptr.To[int32](30)},
			},
			want: func() lanequeue.Config {
				c := base(execute)
				c.Alerts = lanequeue.AlertThresholds{Warning: 30, Critical: 30}
				return c
			}(),
		},
		"routing to a missing lane is refused by the scheduler": {
			spec: agentlanev1alpha1.LaneQueueSpec{
				Lanes:   []agentlanev1alpha1.Lane{{Name: "execute"}},
				Routing: []agentlanev1alpha1.RoutingRule{{CommandType: "grep", Lane: "query"}},
			},
			wantErr: "the scheduler cannot run this spec",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := QueueConfig(&tc.spec)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("config (-want,+got):\n%s", diff)
			}
		})
	}
}
