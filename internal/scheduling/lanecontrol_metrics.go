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

package scheduling

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentlane/agentlane/internal/lanequeue"
)

// The lane control state of a LaneQueue's spec, as gauges.
var (
	LanePaused = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "agentlane_lane_paused",
		Help: "1 while a lane is paused (spec.lanes[].paused): it queues commands but starts none; else 0.",
	}, laneLabels)
	QueueDraining = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "agentlane_queue_draining",
		Help: "1 while a LaneQueue drains (spec.drain): it refuses new commands and lets those it has finish; else 0.",
	}, queueLabels)
)

// setLaneControl exports cfg's paused lanes and drain; setCapacity, which
// calls it, has cleared the queue's earlier series.
func (m queueMetrics) setLaneControl(cfg lanequeue.Config) {
	for _, l := range cfg.Lanes {
		LanePaused.WithLabelValues(m.lane(l.Name)...).Set(boolGauge(l.Paused))
	}
	QueueDraining.WithLabelValues(m.namespace, m.queue).Set(boolGauge(cfg.Drain != nil))
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
