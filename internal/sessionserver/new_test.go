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

package sessionserver

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/agentlane/agentlane/internal/budget"
	"github.com/agentlane/agentlane/internal/scheduling"
)

// mustNew is New for a configuration that must be valid.
func mustNew(cfg Config) *Server {
	s, err := New(cfg)
	if err != nil {
		panic(err)
	}
	return s
}

// plainConfig is cfg with the dependencies of a server that reaches no
// cluster: an empty fake client and schedulers that run no queue, for
// tests of what the server does before a session is looked up.
func plainConfig(cfg Config) Config {
	c := fake.NewClientBuilder().Build()
	cfg.Client, cfg.Reader = c, c
	cfg.Auth = &KubeAuthorizer{Client: c}
	cfg.Schedulers, cfg.Budgets = &scheduling.Schedulers{}, &budget.Ledger{}
	return cfg
}

// TestNewChecksItsDependencies: New refuses a configuration that lacks a
// dependency, naming every one missing, and builds a server otherwise.
func TestNewChecksItsDependencies(t *testing.T) {
	cases := map[string]struct {
		drop    func(*Config)
		missing string
	}{
		"complete":      {drop: func(*Config) {}},
		"no schedulers": {drop: func(c *Config) { c.Schedulers = nil }, missing: "Schedulers"},
		"no budgets":    {drop: func(c *Config) { c.Budgets = nil }, missing: "Budgets"},
		"no client":     {drop: func(c *Config) { c.Client = nil }, missing: "Client"},
		"no reader":     {drop: func(c *Config) { c.Reader = nil }, missing: "Reader"},
		"no authorizer": {drop: func(c *Config) { c.Auth = nil }, missing: "Auth"},
		"nothing":       {drop: func(c *Config) { *c = Config{} }, missing: "Auth, Budgets, Client, Reader, Schedulers"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := plainConfig(Config{})
			tc.drop(&cfg)
			s, err := New(cfg)
			if tc.missing == "" {
				if err != nil || s == nil {
					t.Fatalf("New = %v, %v; want a server", s, err)
				}
				return
			}
			if err == nil || !strings.HasSuffix(err.Error(), "needs "+tc.missing) {
				t.Fatalf("New = %v, want an error naming %s", err, tc.missing)
			}
		})
	}
}

// TestNewFillsTheDefaults: a zero bound gets its default, a negative one
// (no bound) stays, and a KubeAuthorizer without its own review bounds gets
// the server's.
func TestNewFillsTheDefaults(t *testing.T) {
	auth := &KubeAuthorizer{}
	cfg := plainConfig(Config{MaxStreamsPerCaller: -1, MaxWaitsPerSession: 7, MaxReviewsInFlight: 9})
	cfg.Auth = auth
	s := mustNew(cfg)
	type bounds struct {
		MaxWait, MaxPayload, Burst, Pending                  int64
		StreamsPerCaller, StreamsPerSession, WaitsPerSession int
		ReviewsInFlight                                      int
		Observer, Clock, StartedAt                           bool
	}
	got := bounds{
		MaxWait: int64(s.MaxWait), MaxPayload: int64(s.MaxPayloadBytes), Burst: int64(s.Burst),
		Pending: int64(s.MaxPendingPerSession), StreamsPerCaller: s.MaxStreamsPerCaller,
		StreamsPerSession: s.MaxStreamsPerSession, WaitsPerSession: s.MaxWaitsPerSession,
		ReviewsInFlight: auth.MaxReviewsInFlight,
		Observer:        s.Observer() != nil, Clock: s.Clock != nil, StartedAt: !s.StartedAt.IsZero(),
	}
	want := bounds{
		MaxWait: int64(DefaultMaxWait), MaxPayload: DefaultMaxPayloadBytes, Burst: DefaultBurst,
		Pending: DefaultMaxPendingPerSession, StreamsPerCaller: -1,
		StreamsPerSession: DefaultMaxStreamsPerSession, WaitsPerSession: 7,
		ReviewsInFlight: 9,
		Observer:        true, Clock: true, StartedAt: true,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the server's settings (-want,+got):\n%s", diff)
	}
}
