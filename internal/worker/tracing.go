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

package worker

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/trace"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/executor"
	"github.com/agentlane/agentlane/internal/tracing"
	"github.com/agentlane/agentlane/internal/workerproto"
)

// The worker's run span (docs/observability.md): a child of the trace
// context the attempt came with (an ExternalTask's TraceparentAnnotation,
// a Direct Task's Traceparent), whose own context a bash or exec task finds
// as $TRACEPARENT. An attempt without a valid trace context runs untraced
// and its task gets no $TRACEPARENT. A worker that does not trace itself
// still hands a valid incoming context to the task, so that the task's own
// spans join the command's trace.

// startRun starts the run span of attempt c, held by worker, from the
// traceparent parent. It returns the traceparent the task sees ("" for
// none) and the span, nil when the worker does not trace or parent is not
// valid.
func startRun(parent, worker string, c tracing.Command) (string, trace.Span) {
	sc, ok := tracing.Parse(parent)
	if !ok {
		return "", nil
	}
	if !tracing.Enabled() {
		return tracing.Format(sc), nil
	}
	ctx, span := tracing.Start(context.Background(), tracing.SpanRun, trace.SpanKindConsumer, parent, time.Time{}, c)
	if worker != "" {
		span.SetAttributes(tracing.AttrWorker.String(worker))
	}
	return tracing.FromContext(ctx), span
}

// endRun ends a run span with what the executor returned.
func endRun(span trace.Span, out executor.Output, err error) {
	if span == nil {
		return
	}
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		tracing.End(span, time.Time{}, tracing.OutcomeStopped, err.Error())
	case err != nil:
		tracing.End(span, time.Time{}, tracing.OutcomeFailed, err.Error())
	case out.Success:
		tracing.End(span, time.Time{}, tracing.OutcomeSucceeded, "")
	default:
		tracing.End(span, time.Time{}, tracing.OutcomeFailed, out.Error)
	}
}

// taskRunCommand names the ExternalTask's current attempt for its run span.
func taskRunCommand(task *agentlanev1alpha1.ExternalTask) tracing.Command {
	c := tracing.Command{Namespace: task.Namespace, Queue: task.Labels[agentlanev1alpha1.QueueLabel],
		Lane: string(task.Status.Lane), Session: task.Labels[agentlanev1alpha1.SessionLabel], ID: task.Name,
		Type: string(task.Spec.CommandType), Attempt: int(task.Status.Attempt), Path: tracing.PathExternalTask}
	if id := task.Spec.Identity; id != nil {
		c.Tenant = id.TenantID
	}
	return c
}

// directRunCommand names a Direct attempt for its run span. The tenant is
// not on the Task frame: the manager's spans of the trace carry it.
func directRunCommand(t *workerproto.DirectTask) tracing.Command {
	return tracing.Command{Namespace: t.Namespace, Queue: t.Queue, Lane: t.Lane, Session: t.Session, ID: t.ID,
		Type: t.CommandType, Attempt: t.Attempt, Path: tracing.PathDirect}
}
