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

import "slices"

// Reconfigure applies cfg to the running queue without losing or repeating
// any command:
//
//   - Lanes are matched by name. A kept lane takes its new priority, caps,
//     timeout, retry and rate limit at once; its bucket keeps its tokens.
//     A new handler mode applies to commands that start from now on.
//   - A lane missing from cfg is removed: its queued and retrying commands
//     end Failed with ErrLaneRemoved (not retried, not dead-lettered), and
//     its running commands finish where they are (a failure among them is
//     final). Renaming a lane is removing one and adding another. A removed
//     lane that is added back while still draining is revived.
//   - Lower caps never stop running commands; starts wait until there is
//     room under the new caps.
//   - Fairness, boost, routing, timeouts and thresholds apply from now on;
//     queued commands are re-ordered under the new policy.
//   - A lane's Paused and the queue's Drain take effect at once (see
//     PauseLane and DrainConfig).
func (q *Queue) Reconfigure(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return ErrClosed
	}
	now := q.now()
	q.applyConfigLocked(cfg.clone(), now)
	q.dispatchLocked(now)
	q.unlock(now)
	return nil
}

func (q *Queue) applyConfigLocked(cfg Config, now int64) {
	q.cfg = cfg
	q.fairness = cfg.Fairness
	if q.fairness == "" {
		q.fairness = FairFIFO
	}
	q.boost = cfg.Boost.Strategy
	if q.boost == "" {
		q.boost = BoostStandard
	}
	q.defaultDeadline = int64(cfg.Boost.DefaultDeadline)
	q.defaultTimeout = int64(cfg.DefaultTimeout)
	if q.defaultTimeout == 0 {
		q.defaultTimeout = int64(DefaultTimeout)
	}
	q.maxConcurrent = cfg.MaxConcurrent
	q.pressureAt = cfg.PressureThreshold
	q.warnAt, q.critAt = 0, 0
	if !cfg.Alerts.Disabled {
		q.warnAt, q.critAt = cfg.Alerts.levels()
	}
	q.bucket = q.bucket.reconfigure(cfg.RateLimit, now)
	q.rateWake = 0
	q.dlqOn = !cfg.DeadLetter.Disabled
	if q.dlqOn {
		q.dlq.resize(cfg.DeadLetter.size())
	} else {
		q.dlq.resize(0)
	}

	byName := make(map[string]*lane, len(cfg.Lanes))
	lanes := make([]*lane, 0, len(cfg.Lanes))
	for _, lc := range cfg.Lanes {
		lc.Mode = lc.Mode.orDefault()
		ln := q.byName[lc.Name]
		if ln == nil {
			for _, d := range q.draining {
				if d.name == lc.Name {
					ln = d
					ln.removed = false
					q.draining = slices.DeleteFunc(q.draining, func(l *lane) bool { return l == d })
					break
				}
			}
		}
		if ln == nil {
			ln = &lane{
				name:     lc.Name,
				sessions: make(map[string]*laneSession),
				runnable: newIndexedHeap(lsLess, lsSlot),
				m:        q.metricsLocked(lc.Name),
			}
		}
		if ln.cfg.Isolated != lc.Isolated {
			// Move the lane's running commands in or out of the queue-wide count.
			if lc.Isolated {
				q.active -= ln.active
			} else {
				q.active += ln.active
			}
		}
		pausedChanged := ln.cfg.Paused != lc.Paused
		ln.cfg = lc
		if pausedChanged {
			q.lanePausedEventLocked(ln, now)
		}
		ln.bucket = ln.bucket.reconfigure(lc.RateLimit, now)
		ln.rateWake = 0
		byName[lc.Name] = ln
		lanes = append(lanes, ln)
	}
	for _, ln := range q.lanes {
		if byName[ln.name] != ln {
			q.removeLaneLocked(ln, now)
		}
	}
	q.lanes, q.byName = lanes, byName
	q.routes, q.defLane = buildRoutes(cfg, byName)
	for _, ln := range q.lanes {
		q.rebuildLaneLocked(ln, now)
	}
	q.applyDrainLocked(cfg.Drain, now)
}

func (q *Queue) metricsLocked(name string) *laneMetrics {
	m := q.metrics[name]
	if m == nil {
		m = newLaneMetrics(q.provider, name)
		q.metrics[name] = m
	}
	return m
}

// rebuildLaneLocked recomputes ln.runnable from scratch, after a change of
// caps, priorities or fairness.
func (q *Queue) rebuildLaneLocked(ln *lane, now int64) {
	ln.runnable.Clear()
	for _, ls := range ln.sessions {
		q.refreshLocked(ls, now, true)
	}
}

// removeLaneLocked fails ln's waiting commands and leaves its running ones to
// drain.
func (q *Queue) removeLaneLocked(ln *lane, now int64) {
	ln.removed = true
	ln.runnable.Clear()
	var victims []*Ticket
	for _, ls := range ln.sessions {
		for i := 0; i < ls.queue.len(); i++ {
			victims = append(victims, ls.queue.at(i))
		}
	}
	for _, t := range q.due.items {
		if t.state == stRetrying && t.ls.lane == ln {
			victims = append(victims, t)
		}
	}
	slices.SortFunc(victims, func(a, b *Ticket) int { return compareUint(a.seq, b.seq) })
	for _, t := range victims {
		if t.state == stQueued {
			t.ls.queue.remove(t)
		}
		q.due.Delete(t)
		q.addPendingLocked(t.ls, -1, now)
		q.terminalLocked(t, stFailed, Result{}, ErrLaneRemoved, now)
		q.cmdEventLocked(EventFailed, t, now, ErrLaneRemoved).setTerminal()
	}
	if ln.active > 0 {
		q.draining = append(q.draining, ln)
	}
}
