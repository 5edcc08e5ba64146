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

package main

import (
	"fmt"
	"hash/fnv"
	"slices"
	"time"
)

// shardOf is the shard that leads the LaneQueue namespace/name when there
// are shards of them: FNV-1a of "namespace/name" modulo shards. Every
// replica computes the same answer from the name alone (docs/scaling.md,
// "Which shard a LaneQueue belongs to").
func shardOf(namespace, name string, shards int) int {
	if shards <= 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(namespace))
	h.Write([]byte{'/'})
	h.Write([]byte(name))
	return int(h.Sum32() % uint32(shards))
}

// percentile is the p-th percentile (0 < p <= 100) of sorted, by the
// nearest-rank method; 0 for no samples.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(float64(len(sorted))*p/100+0.999999) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

// median is the median of vs (the lower middle one for an even count); 0
// for none.
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

// Writes of the API server, as the code makes them (docs/scaling.md,
// "What the API server still carries").
const (
	// writesPerMaterialized is what a Direct task recorded because it
	// waited or ran past materializeAfter costs: the ExternalTask's
	// create, the status write of its Dispatched or Running record, and
	// the status write of its end (internal/sessionserver/direct.go).
	writesPerMaterialized = 3
	// writesPerFailed is what a Direct task that was never recorded and
	// ends Failed, TimedOut or DeadLettered costs: the create and one
	// status write of its end.
	writesPerFailed = 2
	// writesPerCRTask is the Workers target's task: the create, the
	// manager's dispatch and the worker's report.
	writesPerCRTask = 3
	// leaseRenewalsPerSecond is a leader's writes of its Lease: one
	// renewal per retry period (--leader-elect-retry-period, 500ms).
	leaseRenewalsPerSecond = 2
)

// load is what runs through the shards in one second, for the write model.
type load struct {
	// Shards is the number of shard Leases held.
	Shards int
	// TasksPerSec is the Direct tasks started per second, all shards.
	TasksPerSec float64
	// Materialized and Failed are the fractions of those tasks recorded
	// because they waited or ran long, and that end failed without having
	// been recorded.
	Materialized, Failed float64
	// BusySessions are the sessions with a command in the last second, and
	// BusyQueues the LaneQueues: each writes its status at most once a
	// second (sessionRefreshInterval, StatusInterval).
	BusySessions, BusyQueues int
}

// writes is the model's API writes per second for l, by source.
type writes struct {
	Tasks, Sessions, Queues, Leases float64
}

// Total is the sum of the sources.
func (w writes) Total() float64 { return w.Tasks + w.Sessions + w.Queues + w.Leases }

// apiWrites is the API server's write rate for l: the recorded tasks'
// writes, at most one status write per busy session and per busy queue a
// second, and each shard leader's Lease renewals. A session or queue that
// finishes fewer tasks than one a second writes fewer times, so the
// session and queue terms are bounded by the task rate too.
func apiWrites(l load) (writes, error) {
	if l.Shards < 1 || l.TasksPerSec < 0 || l.Materialized < 0 || l.Failed < 0 || l.Materialized+l.Failed > 1 ||
		l.BusySessions < 0 || l.BusyQueues < 0 {
		return writes{}, fmt.Errorf("invalid load %+v", l)
	}
	return writes{
		Tasks:    l.TasksPerSec * (l.Materialized*writesPerMaterialized + l.Failed*writesPerFailed),
		Sessions: min(float64(l.BusySessions), l.TasksPerSec),
		Queues:   min(float64(l.BusyQueues), l.TasksPerSec),
		Leases:   float64(l.Shards * leaseRenewalsPerSecond),
	}, nil
}

// extrapolate is the task rate of shards managers, each on its own
// coresPerShard cores, from the CPU one task costs (cpuPerTask, seconds):
// shards * coresPerShard / cpuPerTask. It assumes the queues are spread
// evenly and ignores what the shards share (the API server, the network).
func extrapolate(shards int, coresPerShard, cpuPerTask float64) float64 {
	if cpuPerTask <= 0 {
		return 0
	}
	return float64(shards) * coresPerShard / cpuPerTask
}
