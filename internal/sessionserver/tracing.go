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

package sessionserver

import (
	"context"
	"errors"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/trace"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/direct"
	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/tracing"
	"github.com/agentlane/agentlane/internal/workerproto"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// The Session API's spans (docs/observability.md): the submit span of an
// authorized POST /commands, a child of the caller's traceparent when it
// sent a valid one; its context is what the command carries to its
// dispatch and its worker (the ExternalTask's TraceparentAnnotation, a
// Direct command's handler). The functions that make spans are called only
// when tracing.Enabled; without tracing a command carries no context.

// startSubmitSpan starts the submit span of sc's POST /commands and
// returns r with it in its context.
func startSubmitSpan(r *http.Request, sc *sessionCall) (*http.Request, trace.Span) {
	ctx, span := tracing.Start(tracing.FromRequest(r.Context(), r), tracing.SpanSubmit, trace.SpanKindServer, "", time.Time{},
		tracing.Command{Namespace: sc.key.Namespace, Queue: sc.queueKey.Name, Session: sc.key.Name, Tenant: tenantOf(sc.session.Spec.Identity)})
	return r.WithContext(ctx), span
}

// routedSpan adds what routing decided to the submit span.
func routedSpan(span trace.Span, id, typ, lane string, direct bool) {
	path := tracing.PathExternalTask
	if direct {
		path = tracing.PathDirect
	}
	span.SetAttributes(tracing.AttrCommandID.String(id), tracing.AttrCommandType.String(typ), tracing.AttrLane.String(lane),
		tracing.AttrPath.String(path))
}

// endSubmitSpan ends the submit span with the command's state when it was
// answered, or the code of the error it was refused with.
func endSubmitSpan(span trace.Span, state string, err error) {
	var e *sessionapi.Error
	switch {
	case err == nil:
		tracing.End(span, time.Time{}, state, "")
	case errors.As(err, &e):
		tracing.End(span, time.Time{}, e.Code, e.Message)
	default:
		tracing.End(span, time.Time{}, sessionapi.CodeInternal, err.Error())
	}
}

// withTraceparent sets the ExternalTask's trace context when tp is one.
func withTraceparent(task *agentlanev1alpha1.ExternalTask, tp string) *agentlanev1alpha1.ExternalTask {
	if tp != "" {
		if task.Annotations == nil {
			task.Annotations = map[string]string{}
		}
		task.Annotations[workerproto.TraceparentAnnotation] = tp
	}
	return task
}

// tenantOf is the tenant of an identity, "" when it names none.
func tenantOf(id *agentlanev1alpha1.Identity) string {
	if id == nil {
		return ""
	}
	return id.TenantID
}

// traceCommand names attempt n of the Direct command d for its spans.
func (d *directCall) traceCommand(n int) tracing.Command {
	return tracing.Command{Namespace: d.key.Namespace, Queue: d.queue, Lane: d.lane, Session: d.session,
		Tenant: tenantOf(d.identity), ID: d.key.Name, Type: d.typ, Attempt: n, Path: tracing.PathDirect}
}

// startDispatchSpan records how long attempt a waited in its lane and
// starts its dispatch span, whose context t carries to the worker.
func (d *directCall) startDispatchSpan(t *direct.Task, a lanequeue.Attempt) trace.Span {
	c := d.traceCommand(a.Number)
	d.mu.Lock()
	queued := d.queuedAt
	d.mu.Unlock()
	tracing.Record(tracing.SpanLaneWait, d.traceparent, queued, a.StartedAt, c, tracing.OutcomeGranted)
	ctx, span := tracing.Start(context.Background(), tracing.SpanDispatch, trace.SpanKindProducer, d.traceparent, a.StartedAt, c)
	t.Traceparent = tracing.FromContext(ctx)
	return span
}

// endDispatchSpan ends the dispatch span of attempt a with the worker it
// was sent to, when, and the attempt's outcome; the command's next attempt,
// if any, waits in its lane from now.
func (d *directCall) endDispatchSpan(span trace.Span, at *directAttempt, a lanequeue.Attempt, r lanequeue.Result, err error) {
	if at.sent.Worker != "" {
		span.SetAttributes(tracing.AttrWorker.String(at.sent.Worker))
		span.AddEvent("sent", trace.WithTimestamp(at.sent.Since))
	}
	now := d.s.Clock.Now()
	switch {
	case err != nil:
		tracing.End(span, now, tracing.OutcomeError, err.Error())
	case r.Success:
		tracing.End(span, now, tracing.OutcomeSucceeded, "")
	default:
		tracing.End(span, now, tracing.OutcomeFailed, r.Error)
	}
	d.mu.Lock()
	d.queuedAt = now
	d.mu.Unlock()
}
