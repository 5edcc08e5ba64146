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
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/tracing"
	"github.com/agentlane/agentlane/internal/workerproto"
)

// The ExternalTask path's manager spans (docs/observability.md), children
// of the submit span the task's TraceparentAnnotation names: its lane wait
// and dispatch, recorded once the dispatch write succeeded, and its result,
// recorded when the manager takes an attempt's end. Nothing is written to
// the API server for them; a task without the annotation (created by
// kubectl, or while the Session API did not trace) has none.

// traceTask is the task's traceparent when tracing is on and the task has
// one, "" otherwise.
func traceTask(task *agentlanev1alpha1.ExternalTask) string {
	if !tracing.Enabled() {
		return ""
	}
	return task.Annotations[workerproto.TraceparentAnnotation]
}

// traceCommand names attempt n of task for its spans.
func traceCommand(task *agentlanev1alpha1.ExternalTask, lane string, n int32) tracing.Command {
	c := tracing.Command{Namespace: task.Namespace, Queue: task.Labels[agentlanev1alpha1.QueueLabel], Lane: lane,
		Session: task.Labels[agentlanev1alpha1.SessionLabel], ID: task.Name, Type: string(task.Spec.CommandType),
		Attempt: int(n), Path: tracing.PathExternalTask}
	if id := task.Spec.Identity; id != nil {
		c.Tenant = id.TenantID
	}
	return c
}

// traceDispatched records the lane wait of attempt n, from when it was
// queued (the task's creation, or its previous attempt's end, as the API
// server keeps them: to the second) to its grant, and its dispatch, from
// the grant to the end of the write that handed it to holder (and worker,
// when a worker holds it).
func traceDispatched(tp string, task *agentlanev1alpha1.ExternalTask, lane string, n int32, granted, written time.Time, holder agentlanev1alpha1.HolderKind, worker string) {
	c := traceCommand(task, lane, n)
	queued := task.CreationTimestamp.Time
	for i := range task.Status.Attempts {
		if a := &task.Status.Attempts[i]; a.Attempt == n-1 && a.FinishedAt != nil {
			queued = a.FinishedAt.Time
		}
	}
	if queued.After(granted) {
		queued = granted
	}
	tracing.Record(tracing.SpanLaneWait, tp, queued, granted, c, tracing.OutcomeGranted)
	_, span := tracing.Start(context.Background(), tracing.SpanDispatch, trace.SpanKindProducer, tp, granted, c)
	if worker != "" {
		span.SetAttributes(tracing.AttrWorker.String(worker))
	}
	tracing.End(span, written, "Dispatched to "+string(holder), "")
}

// traceResult records the manager's taking of attempt n's end from the
// task: a result a worker, a Job or a handler wrote, or an end the manager
// judged (a lost worker, a failed Job).
func traceResult(tp string, task *agentlanev1alpha1.ExternalTask, n int32, outcome agentlanev1alpha1.AttemptOutcome, start, finish time.Time) {
	tracing.Record(tracing.SpanResult, tp, start, finish, traceCommand(task, string(task.Status.Lane), n), string(outcome))
}
