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

package laneview

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// Builders of the objects a Snapshot is made from. Times are offsets from
// t0, the "now" of the renderers in the tests.

var t0 = time.Date(2026, 5, 21, 17, 30, 0, 0, time.UTC)

func at(offset time.Duration) *metav1.Time {
	t := metav1.NewTime(t0.Add(offset))
	return &t
}

type queueBuilder struct{ q agentlanev1alpha1.LaneQueue }

func queue(name string) *queueBuilder {
	return &queueBuilder{q: agentlanev1alpha1.LaneQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}}
}

func (b *queueBuilder) namespace(ns string) *queueBuilder {
	b.q.Namespace = ns
	return b
}

func (b *queueBuilder) maxConcurrent(n int32) *queueBuilder {
	b.q.Spec.MaxConcurrent = n
	return b
}

// lane adds a lane with its caps and its counters: pending, active,
// completed, failed, dead-lettered.
func (b *queueBuilder) lane(name string, priority int32, mode agentlanev1alpha1.HandlerMode, maxConcurrency, perSession int32, counts ...int64) *queueBuilder {
	b.q.Spec.Lanes = append(b.q.Spec.Lanes, agentlanev1alpha1.Lane{
		Name: agentlanev1alpha1.LaneName(name), Priority: priority, HandlerMode: mode,
		MaxConcurrency: maxConcurrency, MaxConcurrencyPerSession: perSession,
	})
	c := make([]int64, 5)
	copy(c, counts)
	b.q.Status.Lanes = append(b.q.Status.Lanes, agentlanev1alpha1.LaneStatus{
		Name: agentlanev1alpha1.LaneName(name), Pending: int32(c[0]), Active: int32(c[1]),
		Completed: c[2], Failed: c[3], DeadLettered: c[4],
	})
	b.q.Status.Pending += int32(c[0])
	b.q.Status.Active += int32(c[1])
	return b
}

func (b *queueBuilder) isolated() *queueBuilder {
	b.q.Spec.Lanes[len(b.q.Spec.Lanes)-1].Isolated = true
	return b
}

func (b *queueBuilder) ready(sessions int32) *queueBuilder {
	b.q.Status.Sessions = sessions
	b.q.Status.Conditions = append(b.q.Status.Conditions, metav1.Condition{
		Type: agentlanev1alpha1.LaneQueueReadyCondition, Status: metav1.ConditionTrue, Reason: agentlanev1alpha1.LaneQueueSchedulingReason,
		LastTransitionTime: *at(-time.Hour),
	})
	return b
}

func (b *queueBuilder) pressure(reason string) *queueBuilder {
	b.q.Status.Conditions = append(b.q.Status.Conditions, metav1.Condition{
		Type: agentlanev1alpha1.LaneQueueUnderPressureCondition, Status: metav1.ConditionTrue, Reason: reason,
		LastTransitionTime: *at(-time.Minute),
	})
	return b
}

func (b *queueBuilder) obj() agentlanev1alpha1.LaneQueue { return b.q }

type taskBuilder struct {
	t agentlanev1alpha1.ExternalTask
}

func task(name, session, lane, commandType string) *taskBuilder {
	b := &taskBuilder{t: agentlanev1alpha1.ExternalTask{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec:       agentlanev1alpha1.ExternalTaskSpec{CommandType: agentlanev1alpha1.CommandType(commandType), Lane: agentlanev1alpha1.LaneName(lane)},
	}}
	if session != "" {
		b.t.Spec.SessionRef = &agentlanev1alpha1.AgentSessionReference{Name: session}
	}
	return b
}

func (b *taskBuilder) namespace(ns string) *taskBuilder {
	b.t.Namespace = ns
	return b
}

func (b *taskBuilder) queue(name string) *taskBuilder {
	b.t.Spec.QueueRef = &agentlanev1alpha1.LaneQueueReference{Name: name}
	return b
}

func (b *taskBuilder) payload(json string) *taskBuilder {
	b.t.Spec.Payload = &runtime.RawExtension{Raw: []byte(json)}
	return b
}

func (b *taskBuilder) identity(id agentlanev1alpha1.Identity, runID string) *taskBuilder {
	b.t.Spec.Identity = &id
	b.t.Spec.RunID = runID
	return b
}

// created sets the creation time and, from then on, queuedAt.
func (b *taskBuilder) created(offset time.Duration) *taskBuilder {
	b.t.CreationTimestamp = *at(offset)
	b.t.Status.Phase = agentlanev1alpha1.ExternalTaskQueued
	b.t.Status.QueuedAt = at(offset)
	return b
}

func (b *taskBuilder) attempt(n int32) *taskBuilder {
	b.t.Status.Attempt = n
	return b
}

// running sets the task Running on worker at node since offset, dispatched
// a second earlier.
func (b *taskBuilder) running(worker, node string, offset time.Duration) *taskBuilder {
	b.t.Status.Phase = agentlanev1alpha1.ExternalTaskRunning
	b.t.Status.Attempt = max(b.t.Status.Attempt, 1)
	b.t.Status.Worker, b.t.Status.NodeName = worker, node
	b.t.Status.DispatchedAt = at(offset - time.Second)
	b.t.Status.StartedAt = at(offset)
	return b
}

func (b *taskBuilder) dispatched(worker, node string, offset time.Duration) *taskBuilder {
	b.t.Status.Phase = agentlanev1alpha1.ExternalTaskDispatched
	b.t.Status.Attempt = max(b.t.Status.Attempt, 1)
	b.t.Status.Worker, b.t.Status.NodeName = worker, node
	b.t.Status.DispatchedAt = at(offset)
	return b
}

// finished ends the task in phase at offset with result (JSON, may be
// empty) and error.
func (b *taskBuilder) finished(phase agentlanev1alpha1.ExternalTaskPhase, offset time.Duration, result, errText string, exitCode int32) *taskBuilder {
	b.t.Status.Phase = phase
	b.t.Status.FinishedAt = at(offset)
	r := &agentlanev1alpha1.TaskResult{Success: phase == agentlanev1alpha1.ExternalTaskSucceeded, Error: errText, ExitCode: &exitCode}
	if result != "" {
		r.Result = &runtime.RawExtension{Raw: []byte(result)}
	}
	b.t.Status.Result = r
	return b
}

func (b *taskBuilder) failedAttempt(n int32, worker, node string, offset time.Duration, outcome agentlanev1alpha1.AttemptOutcome, errText string) *taskBuilder {
	b.t.Status.Attempts = append(b.t.Status.Attempts, agentlanev1alpha1.TaskAttempt{
		Attempt: n, Worker: worker, NodeName: node, StartedAt: at(offset - 5*time.Second), FinishedAt: at(offset),
		Outcome: outcome, Error: errText,
	})
	return b
}

func (b *taskBuilder) obj() agentlanev1alpha1.ExternalTask { return b.t }

func session(name, queue string, phase agentlanev1alpha1.SessionPhase, node string, counts ...int64) agentlanev1alpha1.AgentSession {
	c := make([]int64, 5)
	copy(c, counts)
	s := agentlanev1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: agentlanev1alpha1.AgentSessionSpec{
			QueueRef: agentlanev1alpha1.LaneQueueReference{Name: queue},
			Identity: &agentlanev1alpha1.Identity{TenantID: "acme-corp"},
		},
	}
	s.Status.Phase, s.Status.NodeName = phase, node
	if node != "" {
		s.Status.PodName = name + "-pod"
	}
	s.Status.Queue = agentlanev1alpha1.SessionQueueStatus{
		Pending: int32(c[0]), Active: int32(c[1]), Completed: c[2], Failed: c[3], DeadLettered: c[4],
	}
	return s
}
