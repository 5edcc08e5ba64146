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

package tracing

import (
	"context"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// The spans of a command's life (docs/observability.md lists their parents
// and attributes).
const (
	// SpanSubmit is the Session API's POST /commands, a server span whose
	// parent is the caller's traceparent.
	SpanSubmit = "agentlane.submit"
	// SpanLaneWait is the time an attempt waited in its lane, from queued
	// to granted.
	SpanLaneWait = "agentlane.lane.wait"
	// SpanDispatch is the manager handing an attempt to a worker: the
	// ExternalTask's dispatch write, or on a Direct lane the attempt on the
	// worker's stream until its Result.
	SpanDispatch = "agentlane.dispatch"
	// SpanRun is the worker's run of an attempt.
	SpanRun = "agentlane.worker.run"
	// SpanResult is the manager taking an attempt's outcome.
	SpanResult = "agentlane.result"
)

// The values of AttrOutcome besides a command's states.
const (
	OutcomeGranted   = "Granted"
	OutcomeSucceeded = "Succeeded"
	OutcomeFailed    = "Failed"
	// OutcomeStopped: the run was stopped (cancelled, timed out, lost).
	OutcomeStopped = "Stopped"
	// OutcomeError: the attempt ended without a result.
	OutcomeError = "Error"
)

// The attributes of the spans.
const (
	AttrNamespace   = attribute.Key("k8s.namespace.name")
	AttrSession     = attribute.Key("agentlane.session")
	AttrQueue       = attribute.Key("agentlane.queue")
	AttrLane        = attribute.Key("agentlane.lane")
	AttrTenant      = attribute.Key("agentlane.tenant")
	AttrCommandID   = attribute.Key("agentlane.command.id")
	AttrCommandType = attribute.Key("agentlane.command.type")
	AttrAttempt     = attribute.Key("agentlane.attempt")
	AttrPath        = attribute.Key("agentlane.path")
	AttrWorker      = attribute.Key("agentlane.worker")
	AttrOutcome     = attribute.Key("agentlane.outcome")
)

// The values of AttrPath.
const (
	PathExternalTask = "ExternalTask"
	PathDirect       = "Direct"
)

// Command names a command for its spans' attributes.
type Command struct {
	Namespace, Queue, Lane, Session, Tenant string
	ID, Type                                string
	// Attempt is the attempt's number; 0 for a span of the whole command.
	Attempt int
	// Path is PathExternalTask or PathDirect; empty when not known yet.
	Path string
}

// Attributes are c's span attributes, the empty ones left out.
func (c Command) Attributes() []attribute.KeyValue {
	kv := make([]attribute.KeyValue, 0, 9)
	for _, a := range [...]struct {
		k attribute.Key
		v string
	}{{AttrNamespace, c.Namespace}, {AttrQueue, c.Queue}, {AttrLane, c.Lane}, {AttrSession, c.Session},
		{AttrTenant, c.Tenant}, {AttrCommandID, c.ID}, {AttrCommandType, c.Type}, {AttrPath, c.Path}} {
		if a.v != "" {
			kv = append(kv, a.k.String(a.v))
		}
	}
	if c.Attempt > 0 {
		kv = append(kv, AttrAttempt.Int(c.Attempt))
	}
	return kv
}

// Start starts span name, of kind, for c, as a child of the span ctx holds
// or, when it holds none, of the traceparent parent (a new root when that
// is not valid either). A zero start means now. Only for use when Enabled.
func Start(ctx context.Context, name string, kind trace.SpanKind, parent string, start time.Time, c Command) (context.Context, trace.Span) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		ctx = ContextWithTraceparent(ctx, parent)
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(kind), trace.WithAttributes(c.Attributes()...)}
	if !start.IsZero() {
		opts = append(opts, trace.WithTimestamp(start))
	}
	return Tracer().Start(ctx, name, opts...)
}

// Record records a span that already ended: name, for c, from start to end,
// as a child of the traceparent parent, with outcome when it is not empty.
// Only for use when Enabled.
func Record(name string, parent string, start, end time.Time, c Command, outcome string) {
	_, span := Start(context.Background(), name, trace.SpanKindInternal, parent, start, c)
	End(span, end, outcome, "")
}

// End ends span at end (now when zero) with outcome, as AttrOutcome, and
// marks it failed with message msg when msg is not empty.
func End(span trace.Span, end time.Time, outcome, msg string) {
	if outcome != "" {
		span.SetAttributes(AttrOutcome.String(outcome))
	}
	if msg != "" {
		span.SetStatus(codes.Error, Truncate(msg))
	}
	if end.IsZero() {
		span.End()
		return
	}
	span.End(trace.WithTimestamp(end))
}

// maxMessage bounds the error message a span keeps.
const maxMessage = 256

// Truncate bounds msg to maxMessage bytes, cut at a character's start.
func Truncate(msg string) string {
	if len(msg) <= maxMessage {
		return msg
	}
	n := maxMessage
	for n > 0 && !utf8.RuneStart(msg[n]) {
		n--
	}
	return msg[:n]
}
