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
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/delegation"
	"github.com/agentlane/agentlane/internal/lanequeue"
)

// QueueConfig translates a LaneQueue spec into the scheduler configuration.
// Fields the apiserver normally defaults are defaulted here as well, so a
// spec read without defaulting (for example from a file) means the same. The
// result is validated by the scheduler; the error names the offending field.
func QueueConfig(spec *agentlanev1alpha1.LaneQueueSpec) (lanequeue.Config, error) {
	cfg := lanequeue.Config{
		DefaultLane:    string(spec.DefaultLane),
		MaxConcurrent:  int(spec.MaxConcurrent),
		Fairness:       lanequeue.FairnessPolicy(spec.Fairness),
		Retry:          retryPolicy(spec.RetryPolicy),
		RateLimit:      rateLimit(spec.RateLimit),
		DefaultTimeout: duration(spec.DefaultTimeout, lanequeue.DefaultTimeout),
	}
	if cfg.Fairness == "" {
		cfg.Fairness = lanequeue.FairFIFO
	}
	if spec.Drain != nil {
		cfg.Drain = &lanequeue.DrainConfig{Timeout: duration(spec.Drain.Timeout, 0)}
	}
	for _, l := range spec.Lanes {
		lc := lanequeue.LaneConfig{
			Name:                     string(l.Name),
			Priority:                 int(l.Priority),
			Mode:                     lanequeue.HandlerMode(l.HandlerMode),
			MaxConcurrency:           int(l.MaxConcurrency),
			MaxConcurrencyPerSession: int(l.MaxConcurrencyPerSession),
			Isolated:                 l.Isolated,
			Paused:                   l.Paused,
			Timeout:                  duration(l.Timeout, 0),
			StartTimeout:             duration(l.StartTimeout, 0),
			HeartbeatTimeout:         duration(l.HeartbeatTimeout, 0),
			RateLimit:                rateLimit(l.RateLimit),
		}
		if t := l.ExternalTarget; t != nil && t.Type == agentlanev1alpha1.ExternalTargetDelegate && lc.Timeout == 0 && spec.DefaultTimeout == nil {
			// A delegated task's attempt is a whole run of a worker
			// session, not one tool call: without a timeout of its lane or
			// its queue it gets the delegation default, not the engine's.
			lc.Timeout = delegation.DefaultTimeout
		}
		for _, t := range l.CommandTypes {
			lc.CommandTypes = append(lc.CommandTypes, string(t))
		}
		lc.SessionModes = sessionModes(&l)
		if lc.Mode == "" {
			lc.Mode = lanequeue.Internal
		}
		if l.RetryPolicy != nil {
			p := retryPolicy(l.RetryPolicy)
			lc.Retry = &p
		}
		cfg.Lanes = append(cfg.Lanes, lc)
	}
	if len(spec.Routing) > 0 {
		cfg.Routing = make(map[string]string, len(spec.Routing))
		for _, r := range spec.Routing {
			cfg.Routing[string(r.CommandType)] = string(r.Lane)
		}
	}
	if len(spec.TenantWeights) > 0 {
		cfg.TenantWeights = make(map[string]int, len(spec.TenantWeights))
		for _, w := range spec.TenantWeights {
			cfg.TenantWeights[w.TenantID] = int(w.Weight)
		}
	}

	cfg.Boost = lanequeue.BoostPolicy{Strategy: lanequeue.BoostStandard}
	if b := spec.PriorityBoost; b != nil {
		if b.Strategy != "" {
			cfg.Boost.Strategy = lanequeue.BoostStrategy(b.Strategy)
		}
		cfg.Boost.DefaultDeadline = duration(b.Deadline, 0)
	}

	cfg.PressureThreshold = int(int32Or(spec.PressureThreshold, 50))
	warning, critical := int32(lanequeue.DefaultWarningDepth), int32(lanequeue.DefaultCriticalDepth)
	if a := spec.Alerts; a != nil {
		warning, critical = int32Or(a.WarningDepth, warning), int32Or(a.CriticalDepth, critical)
	}
	switch {
	case warning == 0 && critical == 0:
		cfg.Alerts = lanequeue.AlertThresholds{Disabled: true}
	case warning == 0:
		// Only the critical level is wanted; both levels fire at its depth.
		cfg.Alerts = lanequeue.AlertThresholds{Warning: int(critical), Critical: int(critical)}
	case critical == 0:
		cfg.Alerts = lanequeue.AlertThresholds{Warning: int(warning), Critical: int(warning)}
	default:
		cfg.Alerts = lanequeue.AlertThresholds{Warning: int(warning), Critical: int(critical)}
	}

	cfg.DeadLetter = lanequeue.DeadLetterConfig{MaxSize: lanequeue.DefaultDeadLetterSize}
	if d := spec.DeadLetter; d != nil {
		cfg.DeadLetter.Disabled = d.Enabled != nil && !*d.Enabled
		cfg.DeadLetter.MaxSize = int(int32Or(d.MaxSize, int32(cfg.DeadLetter.MaxSize)))
	}

	if err := cfg.Validate(); err != nil {
		return lanequeue.Config{}, fmt.Errorf("the scheduler cannot run this spec: %w", err)
	}
	return cfg, nil
}

func retryPolicy(p *agentlanev1alpha1.RetryPolicy) lanequeue.RetryPolicy {
	out := lanequeue.RetryPolicy{
		Strategy:     lanequeue.RetryExponential,
		MaxRetries:   lanequeue.DefaultMaxRetries,
		InitialDelay: lanequeue.DefaultInitialDelay,
		MaxDelay:     lanequeue.DefaultMaxDelay,
	}
	if p == nil {
		return out
	}
	if p.Strategy != "" {
		out.Strategy = lanequeue.RetryStrategy(p.Strategy)
	}
	out.MaxRetries = int(int32Or(p.MaxRetries, int32(out.MaxRetries)))
	if out.MaxRetries == 0 {
		// The scheduler reads MaxRetries 0 as its default; maxRetries 0
		// means no retries, which is its None strategy.
		out.Strategy = lanequeue.RetryNone
	}
	out.InitialDelay = duration(p.InitialDelay, out.InitialDelay)
	out.MaxDelay = duration(p.MaxDelay, out.MaxDelay)
	out.FixedDelay = duration(p.FixedDelay, 0)
	return out
}

func rateLimit(r *agentlanev1alpha1.RateLimit) *lanequeue.RateLimit {
	if r == nil {
		return nil
	}
	return &lanequeue.RateLimit{Window: lanequeue.RateWindow(r.Per), MaxOperations: int(r.Count)}
}

func duration(d *metav1.Duration, fallback time.Duration) time.Duration {
	if d == nil {
		return fallback
	}
	return d.Duration
}

func int32Or(v *int32, fallback int32) int32 {
	if v == nil {
		return fallback
	}
	return *v
}

// sessionModes are the modes the lane lets a session switch it to
// (Lane.SessionModeAllowed): sessionOverrides.allowedModes, else Internal and
// Hybrid, never nil, so that the scheduler enforces the rule as well.
func sessionModes(l *agentlanev1alpha1.Lane) []lanequeue.HandlerMode {
	modes := []lanequeue.HandlerMode{}
	for _, m := range []agentlanev1alpha1.HandlerMode{agentlanev1alpha1.HandlerModeInternal, agentlanev1alpha1.HandlerModeExternal, agentlanev1alpha1.HandlerModeHybrid} {
		if l.SessionModeAllowed(m) {
			modes = append(modes, lanequeue.HandlerMode(m))
		}
	}
	return modes
}
