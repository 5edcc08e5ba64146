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
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/lanequeue"
)

// A LaneQueue whose spec now allows a session's switch, while its running
// scheduler still runs the older spec that refuses it, is reported behind:
// the AgentSession controller applies the override again instead of leaving
// it refused until something else brings the session back.
func TestLaneOverrideAheadOfTheScheduler(t *testing.T) {
	// The scheduler runs the older spec: the lane lets sessions switch to
	// no other mode.
	q, err := lanequeue.New(lanequeue.Config{Lanes: []lanequeue.LaneConfig{{Name: "execute", Mode: lanequeue.Internal,
		SessionModes: []lanequeue.HandlerMode{}}}}, lanequeue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	session := &agentlanev1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: "s"},
		Spec: agentlanev1alpha1.AgentSessionSpec{LaneOverrides: []agentlanev1alpha1.LaneOverride{{
			Lane: "execute", HandlerMode: agentlanev1alpha1.HandlerModeExternal}}}}
	lane := agentlanev1alpha1.Lane{Name: "execute", HandlerMode: agentlanev1alpha1.HandlerModeInternal}
	refusing := &agentlanev1alpha1.LaneQueue{Spec: agentlanev1alpha1.LaneQueueSpec{Lanes: []agentlanev1alpha1.Lane{lane}}}
	lane.SessionOverrides = &agentlanev1alpha1.LaneSessionOverrides{AllowedModes: []agentlanev1alpha1.HandlerMode{agentlanev1alpha1.HandlerModeExternal}}
	allowing := &agentlanev1alpha1.LaneQueue{Spec: agentlanev1alpha1.LaneQueueSpec{Lanes: []agentlanev1alpha1.Lane{lane}}}

	if _, refused, behind := applyLaneOverrides(q, refusing, session, nil); len(refused) != 1 || behind {
		t.Errorf("the spec refuses the switch: refused %v, behind %v; want one refusal, not behind", refused, behind)
	}
	if _, refused, behind := applyLaneOverrides(q, allowing, session, nil); len(refused) != 1 || !behind {
		t.Errorf("the spec allows what the scheduler still refuses: refused %v, behind %v; want one refusal, behind", refused, behind)
	}
}
