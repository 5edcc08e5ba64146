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

package capacity

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/utils/clock"
)

// Default stabilization windows, the HPA's.
const (
	DefaultScaleUpWindow   = 0 * time.Second
	DefaultScaleDownWindow = 300 * time.Second
)

// Limit names the bound that cut a pool's replicas.
type Limit string

const (
	// LimitNone: the replicas are within every bound.
	LimitNone Limit = ""
	// LimitMax: cut to the pool's maxReplicas.
	LimitMax Limit = "AtMaxReplicas"
	// LimitMin: raised to the pool's minReplicas.
	LimitMin Limit = "AtMinReplicas"
	// LimitManager: cut to the manager's bound, below maxReplicas.
	LimitManager Limit = "ManagerBound"
)

// Bounds are the replicas a pool may have.
type Bounds struct {
	// Min and Max are the pool's minReplicas and maxReplicas.
	Min, Max int32
	// Manager is the manager's bound on every pool; none when <= 0.
	Manager int32
}

// max is the effective upper bound.
func (b Bounds) max() int32 {
	if b.Manager > 0 && b.Manager < b.Max {
		return b.Manager
	}
	return b.Max
}

// Clamp bounds replicas and says which bound, if any, cut it. An upper
// bound wins over Min when the two cross.
func (b Bounds) Clamp(replicas int32) (int32, Limit) {
	hi := b.max()
	upper := LimitMax
	if b.Manager > 0 && b.Manager < b.Max {
		upper = LimitManager
	}
	replicas = max(replicas, 0)
	switch {
	case replicas > hi:
		return hi, upper
	case replicas < b.Min && b.Min <= hi:
		return b.Min, LimitMin
	case replicas < b.Min:
		return hi, upper
	}
	return replicas, LimitNone
}

// Workers is how many workers of capacity slots each run work commands at
// once: work / capacity, rounded up. A capacity below 1 counts as 1.
func Workers(work int64, capacity int32) int32 {
	if work <= 0 {
		return 0
	}
	c := int64(max(capacity, 1))
	n := (work + c - 1) / c
	if n > 1<<30 {
		return 1 << 30
	}
	return int32(n)
}

// LaneWork is the work of one lane: its queued and running commands, cut
// to what the lane may run at once when it has a cap (a command that must
// wait for the lane's cap needs no worker).
func LaneWork(pending, active int, maxConcurrency int32) int64 {
	w := int64(max(pending, 0)) + int64(max(active, 0))
	if maxConcurrency > 0 && w > int64(maxConcurrency) {
		return int64(maxConcurrency)
	}
	return w
}

// Windows are a pool's stabilization windows.
type Windows struct {
	Up, Down time.Duration
}

// Decision is what a Sizer recommends.
type Decision struct {
	// Replicas is the pool's size: stabilized, then bounded.
	Replicas int32
	// Raw is what the work alone asks for, before stabilization and bounds.
	Raw int32
	// Limit is the bound that cut Replicas.
	Limit Limit
	// Reason says, for a person, why the size is what it is.
	Reason string
	// RecheckAfter is when the size may change without new work: a window
	// holding the size back ends then. Zero when nothing is held back.
	RecheckAfter time.Duration
}

// recommendation is a raw recommendation and when it was made.
type recommendation struct {
	at    time.Time
	value int32
}

// Sizer sizes one pool, remembering its past recommendations for the
// stabilization windows. The zero value is not usable; use NewSizer.
type Sizer struct {
	clock clock.PassiveClock
	// recs are past recommendations, oldest first. Invariant: each entry is
	// either above every later one (it may still be a window's maximum)
	// or below every later one (it may be a window's minimum); the others
	// can never decide and are dropped. Values are cut to the upper bound,
	// so at most 2*(bound+1) entries are kept.
	recs []recommendation
}

// NewSizer returns a Sizer reading clk; the real clock when nil.
func NewSizer(clk clock.PassiveClock) *Sizer {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Sizer{clock: clk}
}

// Recommend sizes a pool that has current replicas now, for work commands
// on workers of capacity slots.
func (s *Sizer) Recommend(work int64, capacity int32, current int32, b Bounds, w Windows) Decision {
	now := s.clock.Now()
	raw := Workers(work, capacity)
	stored := min(raw, max(b.max(), 0))
	if len(s.recs) == 0 {
		// A pool first seen (or seen again by a new manager) starts from
		// its current size, as an HPA does: a restart is no reason to
		// skip the scale-down window.
		s.recs = append(s.recs, recommendation{at: now, value: min(max(current, 0), max(b.max(), 0))})
	}
	s.record(now, stored, w)

	// HPA: up only to the window's lowest, down only to its highest.
	upRec, downRec := stored, stored
	var upUntil, downUntil time.Time
	for i, r := range s.recs {
		// The newest (this one) counts whatever the window.
		newest := i == len(s.recs)-1
		age := now.Sub(r.at)
		if newest || age < w.Up {
			if r.value < upRec {
				upRec = r.value
			}
			if r.value < stored && (upUntil.IsZero() || r.at.Add(w.Up).Before(upUntil)) {
				upUntil = r.at.Add(w.Up)
			}
		}
		if newest || age < w.Down {
			if r.value > downRec {
				downRec = r.value
			}
			if r.value > stored && (downUntil.IsZero() || r.at.Add(w.Down).Before(downUntil)) {
				downUntil = r.at.Add(w.Down)
			}
		}
	}
	desired := max(current, 0)
	reason := fmt.Sprintf("backlog %d needs %d workers of capacity %d", work, raw, max(capacity, 1))
	held := time.Time{}
	switch {
	case desired < upRec:
		desired = upRec
		if upRec < stored {
			reason += fmt.Sprintf("; scale-up window holds %d", upRec)
			held = upUntil
		}
	case desired > downRec:
		desired = downRec
		if downRec > stored {
			reason += fmt.Sprintf("; scale-down window holds %d", downRec)
			held = downUntil
		}
	case desired > stored:
		reason += fmt.Sprintf("; scale-down window holds %d", desired)
		held = downUntil
	case desired < stored:
		reason += fmt.Sprintf("; scale-up window holds %d", desired)
		held = upUntil
	}
	out, limit := b.Clamp(desired)
	if _, rawLimit := b.Clamp(raw); limit == LimitNone && out == b.max() && (rawLimit == LimitMax || rawLimit == LimitManager) {
		// The stored recommendations are cut to the upper bound already.
		limit = rawLimit
	}
	if limit != LimitNone {
		reason += "; " + string(limit)
	}
	d := Decision{Replicas: out, Raw: raw, Limit: limit, Reason: reason}
	if !held.IsZero() && held.After(now) {
		d.RecheckAfter = held.Sub(now)
	}
	return d
}

// record appends value at now and drops the recommendations that can no
// longer decide: those older than both windows, and those neither above
// nor below every later one (see Sizer.recs).
func (s *Sizer) record(now time.Time, value int32, w Windows) {
	longest := max(w.Up, w.Down)
	kept := []recommendation{{at: now, value: value}}
	laterMax, laterMin := value, value
	for i := len(s.recs) - 1; i >= 0; i-- {
		r := s.recs[i]
		if now.Sub(r.at) >= longest {
			break // older ones are older still
		}
		if r.value > laterMax || r.value < laterMin {
			kept = append(kept, r)
		}
		laterMax, laterMin = max(laterMax, r.value), min(laterMin, r.value)
	}
	slices.Reverse(kept)
	s.recs = kept
}

// External sizes a pool whose replicas something else sets (an HPA, KEDA,
// a person through the scale subresource): what it asked for, bounded,
// without stabilization and whatever the backlog.
func External(requested int32, b Bounds) Decision {
	out, limit := b.Clamp(requested)
	reason := fmt.Sprintf("external autoscaler asks for %d", requested)
	if limit != LimitNone {
		reason += "; " + string(limit)
	}
	return Decision{Replicas: out, Raw: requested, Limit: limit, Reason: reason}
}
