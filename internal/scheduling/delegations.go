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
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/agentlane/agentlane/internal/delegation"
	"github.com/agentlane/agentlane/internal/lanequeue"
)

// A delegated task (command type delegation.CommandType) is a command of
// its Delegate lane like any External command: the delegation controller
// admits it to its queue's scheduler (the same TaskSet as the ExternalTask
// controller's tasks), the scheduler grants, times, retries and
// dead-letters its attempts, and the controller runs each granted attempt
// in a worker session. The delegation controller reconciles one lane per
// request; DelegationEvents wakes it for the lane of every delegated
// command whose scheduler state changed.

// DelegationEvents is where the schedulers wake the delegation controller
// for the Delegate lanes whose delegated commands were granted an attempt,
// timed out, retried or ended; the controller watches its Source.
func (s *Schedulers) DelegationEvents() *RequestSink { return &s.delegationEvents }

// LaneRequest is the reconcile request of lane of the LaneQueue queue in
// namespace, as the delegation controller takes it: Name is
// "<queue>/<lane>".
func LaneRequest(namespace, queue, lane string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: namespace, Name: queue + "/" + lane}}
}

// wakeDelegation wakes the delegation controller for the lane of a
// delegated command of the LaneQueue key; it ignores other commands.
func (s *Schedulers) wakeDelegation(key types.NamespacedName, commandType, lane string) {
	if commandType == delegation.CommandType && lane != "" {
		s.delegationEvents.Add(LaneRequest(key.Namespace, key.Name, lane))
	}
}

// delegationEnding tells which events of a delegated command its
// controller must act on: the attempt's or the command's end.
func delegationEnding(ev lanequeue.Event) bool {
	return ev.CommandType == delegation.CommandType && taskEnding(ev.Type)
}
