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
	"fmt"
	"time"
)

// BoostStrategy names how a command's priority improves as its deadline nears.
type BoostStrategy string

const (
	// BoostStandard improves priority by one level when 75%, 50%, 25% and
	// 10% of the time between submit and deadline is left.
	BoostStandard BoostStrategy = "Standard"
	// BoostAggressive improves priority by two levels when 80%, 60%, 40% and
	// 20% is left.
	BoostAggressive BoostStrategy = "Aggressive"
	// BoostDisabled never changes priority.
	BoostDisabled BoostStrategy = "Disabled"
)

// BoostPolicy configures deadline-driven priority boost. Under every enabled
// strategy a command at or past its deadline runs at priority 0, and no boost
// takes a priority below 0.
type BoostPolicy struct {
	// Strategy defaults to Standard.
	Strategy BoostStrategy
	// DefaultDeadline, when > 0, gives commands without a Deadline one of
	// submit time + DefaultDeadline. With 0 only commands that carry a
	// Deadline are boosted.
	DefaultDeadline time.Duration
}

func (b BoostPolicy) validate(path string) []error {
	var errs []error
	switch b.Strategy {
	case "", BoostStandard, BoostAggressive, BoostDisabled:
	default:
		errs = append(errs, fmt.Errorf("%s.strategy: unknown strategy %q (want Standard, Aggressive or Disabled)", path, b.Strategy))
	}
	if b.DefaultDeadline < 0 {
		errs = append(errs, fmt.Errorf("%s.defaultDeadline: must be >= 0", path))
	}
	return errs
}

// boostStep is one threshold: once no more than percentLeft of the span is
// left, priority improves by levels.
type boostStep struct {
	percentLeft int64
	levels      int
}

var (
	standardSteps   = []boostStep{{75, 1}, {50, 1}, {25, 1}, {10, 1}}
	aggressiveSteps = []boostStep{{80, 2}, {60, 2}, {40, 2}, {20, 2}}
)

func (s BoostStrategy) steps() []boostStep {
	switch s {
	case BoostDisabled:
		return nil
	case BoostAggressive:
		return aggressiveSteps
	default:
		return standardSteps
	}
}

// boostedPriority returns the effective priority at now of a command with
// base priority base, submitted at submit (unix nanos) with deadline deadline
// (0 for none), and the next instant its effective priority will change (0 if
// never). Step i is reached at deadline - span*percentLeft/100, which keeps
// the level and the next change time consistent in integer arithmetic.
func boostedPriority(s BoostStrategy, base int, submit, deadline, now int64) (prio int, next int64) {
	steps := s.steps()
	if deadline == 0 || steps == nil || base <= 0 {
		return max(base, 0), 0
	}
	if now >= deadline {
		return 0, 0
	}
	span := deadline - submit
	if span <= 0 {
		return 0, 0
	}
	levels := 0
	for _, st := range steps {
		at := deadline - span/100*st.percentLeft - span%100*st.percentLeft/100
		if now >= at {
			levels += st.levels
		} else if next == 0 {
			next = at
		}
	}
	if next == 0 {
		next = deadline
	}
	prio = base - levels
	if prio <= 0 {
		// Nothing left to gain, so no need to wake up again.
		return 0, 0
	}
	return prio, next
}
