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
	"fmt"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/lanequeue"
)

// laneControlEvent is the reason and note of the Kubernetes Event of a lane
// control event of a scheduler: a lane paused or resumed, the queue
// draining or drained.
func laneControlEvent(ev lanequeue.Event) (string, string) {
	switch ev.Type {
	case lanequeue.EventLanePaused:
		return agentlanev1alpha1.LaneQueueLanePausedReason,
			fmt.Sprintf("lane %s paused with %d pending commands: none starts until it is resumed", ev.Lane, ev.Depth)
	case lanequeue.EventLaneResumed:
		return agentlanev1alpha1.LaneQueueLaneResumedReason,
			fmt.Sprintf("lane %s resumed with %d pending commands", ev.Lane, ev.Depth)
	case lanequeue.EventQueueDraining:
		return agentlanev1alpha1.LaneQueueDrainingEventReason,
			"the queue is draining: new commands are refused, queued and running ones finish"
	default:
		return agentlanev1alpha1.LaneQueueDrainedEventReason, "the queue is drained: no command is left"
	}
}
