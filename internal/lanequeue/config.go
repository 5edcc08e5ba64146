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
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Queue-wide defaults.
const (
	DefaultTimeout            = 60 * time.Second
	DefaultWarningDepth       = 50
	DefaultCriticalDepth      = 100
	DefaultLaneName           = "execute"
	laneControl, laneQuery    = "control", "query"
	laneExecute, laneGenerate = "execute", "generate"
)

// AlertThresholds configures per-lane depth alerts. Each level fires once
// when a lane's pending count reaches it and again only after the count has
// dropped back below it.
type AlertThresholds struct {
	Disabled bool
	// Warning defaults to 50.
	Warning int
	// Critical defaults to 100.
	Critical int
}

// Config is a queue's policy. The zero value of every optional field means
// its documented default; Validate reports mistakes, and New and
// Reconfigure refuse a Config that does not validate.
type Config struct {
	// Lanes lists the lanes; names must be unique. At least one is required.
	Lanes []LaneConfig
	// Routing maps command types to lane names, merged over the built-in
	// routes (see DefaultRoutes); a built-in route whose lane is not
	// configured is ignored.
	Routing map[string]string
	// DefaultLane receives command types nothing routes; it defaults to
	// "execute" and must name a configured lane.
	DefaultLane string
	// MaxConcurrent caps running commands across all lanes; 0 is unlimited.
	MaxConcurrent int
	// Fairness orders sessions within a lane; defaults to FIFO.
	Fairness FairnessPolicy
	// TenantWeights gives WeightedTenant shares; a tenant not listed weighs 1.
	TenantWeights map[string]int
	// Retry is the queue's retry policy; lanes may override it.
	Retry RetryPolicy
	// RateLimit, when set, limits starts across the whole queue.
	RateLimit *RateLimit
	// Boost configures deadline-driven priority boost.
	Boost BoostPolicy
	// PressureThreshold, when > 0, emits queue.lane.pressure once a lane's
	// pending count reaches it, and queue.lane.idle when that lane drains to 0.
	PressureThreshold int
	// Alerts configures depth alerts.
	Alerts AlertThresholds
	// DeadLetter configures the dead-letter list.
	DeadLetter DeadLetterConfig
	// DefaultTimeout bounds attempts of lanes without their own timeout;
	// 0 means 60s.
	DefaultTimeout time.Duration
	// Drain, when set, drains the queue: see DrainConfig.
	Drain *DrainConfig
}

// DefaultConfig returns the four classic lanes of an agent session queue:
//
//	control  P0  2 per session
//	query    P1  4 per session
//	execute  P2  2 per session
//	generate P3  1 per session
//
// with no shared or queue-wide caps, Internal mode and the built-in routes.
func DefaultConfig() Config {
	return Config{
		Lanes: []LaneConfig{
			{Name: laneControl, Priority: 0, MaxConcurrencyPerSession: 2},
			{Name: laneQuery, Priority: 1, MaxConcurrencyPerSession: 4},
			{Name: laneExecute, Priority: 2, MaxConcurrencyPerSession: 2},
			{Name: laneGenerate, Priority: 3, MaxConcurrencyPerSession: 1},
		},
		DefaultLane: DefaultLaneName,
	}
}

// Validate reports every problem in c at once, each naming the field.
func (c Config) Validate() error {
	var errs []error
	if len(c.Lanes) == 0 {
		errs = append(errs, errors.New("lanes: at least one lane is required"))
	}
	names := make(map[string]bool, len(c.Lanes))
	for i, l := range c.Lanes {
		path := fmt.Sprintf("lanes[%d]", i)
		errs = append(errs, l.validate(path)...)
		if l.Name != "" && names[l.Name] {
			errs = append(errs, fmt.Errorf("%s.name: duplicate lane %q", path, l.Name))
		}
		names[l.Name] = true
	}
	for typ, target := range c.Routing {
		if !names[target] {
			errs = append(errs, fmt.Errorf("routing[%q]: unknown lane %q", typ, target))
			continue
		}
		for _, l := range c.Lanes {
			if l.Name == target && !l.accepts(typ) {
				errs = append(errs, fmt.Errorf("routing[%q]: lane %q does not accept command type %q (its commandTypes: %s)",
					typ, target, typ, strings.Join(l.CommandTypes, ", ")))
			}
		}
	}
	if def := c.defaultLane(); len(c.Lanes) > 0 && !names[def] {
		errs = append(errs, fmt.Errorf("defaultLane: lane %q is not configured; set defaultLane to one of the lanes", def))
	}
	if c.Drain != nil && c.Drain.Timeout < 0 {
		errs = append(errs, fmt.Errorf("drain.timeout: must be >= 0"))
	}
	if c.MaxConcurrent < 0 {
		errs = append(errs, fmt.Errorf("maxConcurrent: must be >= 0, got %d", c.MaxConcurrent))
	}
	switch c.Fairness {
	case "", FairFIFO, FairRoundRobin, FairWeightedTenant:
	default:
		errs = append(errs, fmt.Errorf("fairness: unknown policy %q (want FIFO, RoundRobin or WeightedTenant)", c.Fairness))
	}
	for tenant, w := range c.TenantWeights {
		if w <= 0 {
			errs = append(errs, fmt.Errorf("tenantWeights[%q]: must be > 0, got %d", tenant, w))
		}
	}
	errs = append(errs, c.Retry.validate("retry")...)
	errs = append(errs, c.RateLimit.validate("rateLimit")...)
	errs = append(errs, c.Boost.validate("boost")...)
	if c.PressureThreshold < 0 {
		errs = append(errs, fmt.Errorf("pressureThreshold: must be >= 0, got %d", c.PressureThreshold))
	}
	if c.Alerts.Warning < 0 || c.Alerts.Critical < 0 {
		errs = append(errs, errors.New("alerts: thresholds must be >= 0"))
	} else if w, cr := c.Alerts.levels(); !c.Alerts.Disabled && cr < w {
		errs = append(errs, fmt.Errorf("alerts: critical (%d) is below warning (%d)", cr, w))
	}
	errs = append(errs, c.DeadLetter.validate("deadLetter")...)
	if c.DefaultTimeout < 0 {
		errs = append(errs, errors.New("defaultTimeout: must be >= 0"))
	}
	return errors.Join(errs...)
}

func (c Config) defaultLane() string {
	if c.DefaultLane == "" {
		return DefaultLaneName
	}
	return c.DefaultLane
}

func (a AlertThresholds) levels() (warning, critical int) {
	warning, critical = a.Warning, a.Critical
	if warning == 0 {
		warning = DefaultWarningDepth
	}
	if critical == 0 {
		critical = DefaultCriticalDepth
	}
	return warning, critical
}

// clone copies c deeply enough that the caller may modify its maps and lanes.
func (c Config) clone() Config {
	c.Lanes = append([]LaneConfig(nil), c.Lanes...)
	for i := range c.Lanes {
		if r := c.Lanes[i].Retry; r != nil {
			rc := *r
			c.Lanes[i].Retry = &rc
		}
		c.Lanes[i].CommandTypes = slices.Clone(c.Lanes[i].CommandTypes)
		c.Lanes[i].SessionModes = slices.Clone(c.Lanes[i].SessionModes)
		if r := c.Lanes[i].RateLimit; r != nil {
			rc := *r
			c.Lanes[i].RateLimit = &rc
		}
	}
	if c.RateLimit != nil {
		rc := *c.RateLimit
		c.RateLimit = &rc
	}
	if c.Drain != nil {
		d := *c.Drain
		c.Drain = &d
	}
	if c.Routing != nil {
		m := make(map[string]string, len(c.Routing))
		for k, v := range c.Routing {
			m[k] = v
		}
		c.Routing = m
	}
	if c.TenantWeights != nil {
		m := make(map[string]int, len(c.TenantWeights))
		for k, v := range c.TenantWeights {
			m[k] = v
		}
		c.TenantWeights = m
	}
	return c
}
