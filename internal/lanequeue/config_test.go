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

package lanequeue

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestDefaultConfig(t *testing.T) {
	cfg := DefaultConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	type lane struct {
		Name                 string
		Priority, PerSession int
	}
	var got []lane
	for _, l := range cfg.Lanes {
		got = append(got, lane{l.Name, l.Priority, l.MaxConcurrencyPerSession})
	}
	want := []lane{{"control", 0, 2}, {"query", 1, 4}, {"execute", 2, 2}, {"generate", 3, 1}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lanes (-want,+got):\n%s", diff)
	}
}

func TestValidate(t *testing.T) {
	base := func() Config { return oneLane(LaneConfig{Name: "execute"}) }
	tests := map[string]struct {
		mutate  func(*Config)
		wantErr string // substring; empty for valid
	}{
		"valid":             {mutate: func(*Config) {}},
		"no lanes":          {mutate: func(c *Config) { c.Lanes = nil }, wantErr: "at least one lane"},
		"duplicate lane":    {mutate: func(c *Config) { c.Lanes = append(c.Lanes, c.Lanes[0]) }, wantErr: `duplicate lane "execute"`},
		"unnamed lane":      {mutate: func(c *Config) { c.Lanes = append(c.Lanes, LaneConfig{}) }, wantErr: "lanes[1].name: required"},
		"negative priority": {mutate: func(c *Config) { c.Lanes[0].Priority = -1 }, wantErr: "priority: must be >= 0"},
		"negative lane cap": {mutate: func(c *Config) { c.Lanes[0].MaxConcurrency = -1 }, wantErr: "maxConcurrency: must be >= 0"},
		"negative per-session cap": {
			mutate:  func(c *Config) { c.Lanes[0].MaxConcurrencyPerSession = -2 },
			wantErr: "maxConcurrencyPerSession: must be >= 0",
		},
		"negative queue cap": {mutate: func(c *Config) { c.MaxConcurrent = -1 }, wantErr: "maxConcurrent"},
		"unknown mode":       {mutate: func(c *Config) { c.Lanes[0].Mode = "Remote" }, wantErr: `unknown mode "Remote"`},
		"fixed without delay": {
			mutate:  func(c *Config) { c.Retry.Strategy = RetryFixed },
			wantErr: "retry.fixedDelay: must be > 0 when strategy is Fixed",
		},
		"lane fixed without delay": {
			mutate:  func(c *Config) { c.Lanes[0].Retry = &RetryPolicy{Strategy: RetryFixed} },
			wantErr: "lanes[0].retry.fixedDelay",
		},
		"unknown retry strategy": {mutate: func(c *Config) { c.Retry.Strategy = "Linear" }, wantErr: `unknown strategy "Linear"`},
		"unknown fairness":       {mutate: func(c *Config) { c.Fairness = "Lottery" }, wantErr: `unknown policy "Lottery"`},
		"zero tenant weight": {
			mutate:  func(c *Config) { c.TenantWeights = map[string]int{"acme": 0} },
			wantErr: `tenantWeights["acme"]: must be > 0`,
		},
		"routing to unknown lane": {
			mutate:  func(c *Config) { c.Routing = map[string]string{"read": "query"} },
			wantErr: `routing["read"]: unknown lane "query"`,
		},
		"default lane missing": {
			mutate:  func(c *Config) { c.Lanes[0].Name = "main" },
			wantErr: `defaultLane: lane "execute" is not configured`,
		},
		"bad rate window": {
			mutate:  func(c *Config) { c.RateLimit = &RateLimit{Window: "Day", MaxOperations: 1} },
			wantErr: `rateLimit.window: unknown window "Day"`,
		},
		"rate without operations": {
			mutate:  func(c *Config) { c.Lanes[0].RateLimit = &RateLimit{Window: PerSecond} },
			wantErr: "lanes[0].rateLimit.maxOperations",
		},
		"unknown boost": {mutate: func(c *Config) { c.Boost.Strategy = "Turbo" }, wantErr: `boost.strategy: unknown strategy "Turbo"`},
		"critical below warning": {
			mutate:  func(c *Config) { c.Alerts = AlertThresholds{Warning: 10, Critical: 5} },
			wantErr: "critical (5) is below warning (10)",
		},
		"negative dead-letter size": {mutate: func(c *Config) { c.DeadLetter.MaxSize = -1 }, wantErr: "deadLetter.maxSize"},
		"negative timeout":          {mutate: func(c *Config) { c.DefaultTimeout = -time.Second }, wantErr: "defaultTimeout"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := base()
			tc.mutate(&cfg)
			err := cfg.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error = %v, want it to mention %q", err, tc.wantErr)
			}
			if tc.wantErr != "" {
				if _, err := New(cfg, Options{}); err == nil {
					t.Error("New accepted an invalid config")
				}
			}
		})
	}
	// All problems are reported at once.
	cfg := base()
	cfg.MaxConcurrent, cfg.Fairness = -1, "x"
	if err := cfg.Validate(); strings.Count(err.Error(), "\n") != 1 {
		t.Errorf("want two errors, got %v", err)
	}
}

// Config returns a copy: changing it does not change the queue.
func TestConfigIsACopy(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Routing = map[string]string{"x": "query"}
	h := newHarness(t, cfg)
	cfg.Routing["x"] = "control"
	got := h.q.Config()
	got.Lanes[0].Name = "changed"
	got.Routing["x"] = "generate"
	if c := h.q.Config(); c.Lanes[0].Name != "control" || c.Routing["x"] != "query" {
		t.Errorf("queue config was modified through a copy: %+v", c)
	}
}
