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
	"errors"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentlane/agentlane/internal/executor"
	"github.com/agentlane/agentlane/internal/tracing"
)

const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// What a task sees of its attempt's trace context: nothing for a context
// that is not valid, the context itself from a worker that does not trace,
// its run span's from one that does; never the bytes it came with.
func TestStartRun(t *testing.T) {
	c := tracing.Command{Namespace: "ns", Session: "s", ID: "c1", Attempt: 1}
	for _, in := range []string{"", "garbage", strings.ToUpper(parent), parent + "-00", "00-00000000000000000000000000000000-00f067aa0ba902b7-01"} {
		if tp, span := startRun(in, "w1", c); tp != "" || span != nil {
			t.Errorf("startRun(%q) = %q, %v: want nothing", in, tp, span)
		}
	}
	if tp, span := startRun(parent, "w1", c); tp != parent || span != nil {
		t.Errorf("without tracing: %q, %v; want the attempt's own context and no span", tp, span)
	}

	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithResource(resource.Empty()))
	defer tracing.Install(tp)()
	got, span := startRun(parent, "w1", c)
	if span == nil {
		t.Fatal("no run span with tracing on")
	}
	endRun(span, executor.Output{}, errors.New("boom"))
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans", len(spans))
	}
	run := spans[0]
	if got != tracing.Format(run.SpanContext) || run.Parent.SpanID().String() != "00f067aa0ba902b7" ||
		run.SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || run.Name != tracing.SpanRun {
		t.Errorf("the task sees %q of span %s %v, parent %v", got, run.Name, run.SpanContext, run.Parent)
	}
	if run.Status.Description != "boom" {
		t.Errorf("status %+v", run.Status)
	}
}
