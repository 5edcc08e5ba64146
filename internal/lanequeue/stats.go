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
	"math/bits"
	"time"
)

// Percentiles summarizes a latency distribution. Values come from a
// fixed-bucket histogram with 8 buckets per power of two and are reported as
// bucket midpoints, so each is within 6.25% of the true percentile (exact
// below 8ns).
type Percentiles struct {
	Count uint64
	P50   time.Duration
	P90   time.Duration
	P95   time.Duration
	P99   time.Duration
}

// LaneStats is a snapshot of one lane.
type LaneStats struct {
	Name     string
	Priority int
	Mode     HandlerMode
	// Draining is set on a lane removed by Reconfigure that still has
	// running commands.
	Draining bool
	// Paused is the lane's LaneConfig.Paused.
	Paused bool
	// Pending counts queued and retrying commands; Active running ones.
	Pending int
	Active  int
	// Terminal outcomes: Completed (Succeeded), Failed (Failed or TimedOut),
	// DeadLettered and Cancelled, plus Submitted.
	Submitted    uint64
	Completed    uint64
	Failed       uint64
	DeadLettered uint64
	Cancelled    uint64
	// Per attempt: Retried counts retries scheduled, Timeouts attempts that
	// timed out.
	Retried  uint64
	Timeouts uint64
	// Wait is ready-to-start latency, Run start-to-end latency per attempt.
	Wait Percentiles
	Run  Percentiles
}

// Stats is a snapshot of the queue.
type Stats struct {
	// Pending and Active sum the lanes, isolated ones included.
	Pending int
	Active  int
	// Lanes lists configured lanes in configuration order, then draining ones.
	Lanes []LaneStats
	// Wait and Run aggregate all lanes.
	Wait Percentiles
	Run  Percentiles
	// PendingExternal counts External attempts waiting for a result.
	PendingExternal int
	// DeadLetters is the length of the dead-letter list; DeadLettersDropped
	// counts entries evicted to respect its bound.
	DeadLetters        int
	DeadLettersDropped uint64
	Sessions           int
	// Drain is set while the queue drains (Config.Drain).
	Drain *DrainStats
}

// SessionStats is a snapshot of one session.
type SessionStats struct {
	Key          string
	Paused       bool
	Pending      int
	Active       int
	Completed    uint64
	Failed       uint64
	DeadLettered uint64
	Cancelled    uint64
	// LaneModes lists the session's handler-mode overrides by lane.
	LaneModes map[string]HandlerMode
}

// Stats returns a snapshot of the queue.
func (q *Queue) Stats() Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := Stats{
		Pending:            0,
		Active:             0,
		Wait:               q.wait.percentiles(),
		Run:                q.runLat.percentiles(),
		PendingExternal:    len(q.external),
		DeadLetters:        q.dlq.n,
		DeadLettersDropped: q.dlq.dropped,
		Sessions:           len(q.sessions),
		Drain:              q.drainStatsLocked(),
	}
	for _, group := range [][]*lane{q.lanes, q.draining} {
		for _, ln := range group {
			s.Pending += ln.pending
			s.Active += ln.active
			s.Lanes = append(s.Lanes, LaneStats{
				Name:         ln.name,
				Priority:     ln.cfg.Priority,
				Mode:         ln.cfg.Mode,
				Draining:     ln.removed,
				Paused:       ln.cfg.Paused,
				Pending:      ln.pending,
				Active:       ln.active,
				Submitted:    ln.counts.submitted,
				Completed:    ln.counts.completed,
				Failed:       ln.counts.failed,
				DeadLettered: ln.counts.deadLettered,
				Cancelled:    ln.counts.cancelled,
				Retried:      ln.counts.retried,
				Timeouts:     ln.counts.timeouts,
				Wait:         ln.wait.percentiles(),
				Run:          ln.runLat.percentiles(),
			})
		}
	}
	return s
}

// SessionStats returns a snapshot of one session (zero counts if unknown).
func (q *Queue) SessionStats(key string) SessionStats {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := SessionStats{Key: key}
	s := q.sessions[key]
	if s == nil {
		return out
	}
	out.Paused = s.paused
	out.Pending, out.Active = s.pending, s.active
	out.Completed, out.Failed = s.counts.completed, s.counts.failed
	out.DeadLettered, out.Cancelled = s.counts.deadLettered, s.counts.cancelled
	if len(s.modes) > 0 {
		out.LaneModes = make(map[string]HandlerMode, len(s.modes))
		for k, v := range s.modes {
			out.LaneModes[k] = v
		}
	}
	return out
}

// DeadLetters returns the dead-letter list, oldest first.
func (q *Queue) DeadLetters() []DeadLetter {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.dlq.list()
}

const (
	histSubBits = 3 // 8 buckets per power of two
	histBuckets = (63-histSubBits)<<histSubBits + 1<<histSubBits
)

// histogram counts nanosecond durations in log-linear buckets: exact below
// 8, then 8 buckets per power of two. Observing is a few instructions and
// allocation-free; the bucket width bounds the relative error.
type histogram struct {
	n      uint64
	counts [histBuckets]uint64
}

func histIndex(v int64) int {
	if v < 1<<histSubBits {
		return int(max(v, 0))
	}
	e := bits.Len64(uint64(v)) - 1
	m := int(uint64(v)>>(e-histSubBits)) & (1<<histSubBits - 1)
	return (e-histSubBits+1)<<histSubBits + m
}

// histValue returns the midpoint of bucket i.
func histValue(i int) int64 {
	if i < 1<<histSubBits {
		return int64(i)
	}
	e := i>>histSubBits + histSubBits - 1
	m := int64(i & (1<<histSubBits - 1))
	width := int64(1) << (e - histSubBits)
	return (1<<histSubBits+m)*width + width/2
}

func (h *histogram) observe(ns int64) {
	h.counts[histIndex(ns)]++
	h.n++
}

func (h *histogram) quantile(p float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(p*float64(h.n) + 0.999999)
	rank = max(rank, 1)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return time.Duration(histValue(i))
		}
	}
	return time.Duration(histValue(histBuckets - 1))
}

func (h *histogram) percentiles() Percentiles {
	return Percentiles{
		Count: h.n,
		P50:   h.quantile(0.50),
		P90:   h.quantile(0.90),
		P95:   h.quantile(0.95),
		P99:   h.quantile(0.99),
	}
}
