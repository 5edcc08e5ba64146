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
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.39.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// The batch span processor's queue: spans that ended and wait for export.
// A span that ends while it is full is dropped, so this is the most a
// process holds however many sampled spans its callers ask for.
const (
	// DefaultMaxQueueSize is the queue's length unless OTEL_BSP_MAX_QUEUE_SIZE
	// sets another (the SDK's default).
	DefaultMaxQueueSize = 2048
	// MaxQueueSize bounds OTEL_BSP_MAX_QUEUE_SIZE.
	MaxQueueSize = 65536
	// maxExportBatch is the largest batch sent at once (the SDK's default).
	maxExportBatch = 512
)

// instrumentation is the name agentlane's tracer reports.
const instrumentation = "github.com/agentlane/agentlane"

// active holds agentlane's tracer while tracing is on; nil when off.
var active atomic.Pointer[installed]

type installed struct{ tracer trace.Tracer }

// Enabled tells whether Setup (or Install) installed a provider. Code that
// makes spans checks it first, so that nothing is built when tracing is off.
func Enabled() bool { return active.Load() != nil }

// Tracer is agentlane's tracer: a no-op one when tracing is off.
func Tracer() trace.Tracer {
	if in := active.Load(); in != nil {
		return in.tracer
	}
	return noop.NewTracerProvider().Tracer(instrumentation)
}

// Options are what Setup needs of its binary.
type Options struct {
	// Service is the service.name of the process's spans unless
	// OTEL_SERVICE_NAME names another.
	Service string
	// Getenv reads the OTEL_* variables that decide whether to trace
	// (os.Getenv; the OTLP exporter reads its own, such as
	// OTEL_EXPORTER_OTLP_HEADERS, from the environment).
	Getenv func(string) string
	// Log receives the export errors; discarded when zero.
	Log logr.Logger
}

// Setup installs the global tracer provider and the W3C TraceContext
// propagator from the standard OTEL_* variables and returns the function
// that flushes and stops it.
//
// Tracing stays off, and Setup installs nothing, when OTEL_SDK_DISABLED is
// true, OTEL_TRACES_EXPORTER is none, or neither
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT nor OTEL_EXPORTER_OTLP_ENDPOINT is set.
// Otherwise spans are exported over OTLP/HTTP (protobuf), the only exporter
// and protocol agentlane ships; service names the process unless
// OTEL_SERVICE_NAME does, and OTEL_TRACES_SAMPLER picks the sampler (by
// default parentbased_always_on: a caller's sampled flag is followed).
func Setup(ctx context.Context, o Options) (shutdown func(context.Context) error, err error) {
	getenv := o.Getenv
	off := func(context.Context) error { return nil }
	if on, err := wanted(getenv); err != nil || !on {
		return off, err
	}
	queue, err := queueSize(getenv("OTEL_BSP_MAX_QUEUE_SIZE"))
	if err != nil {
		return off, err
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return off, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(o.Service)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
	)
	if err != nil {
		return off, fmt.Errorf("trace resource: %w", err)
	}
	if o.Log.GetSink() != nil {
		log := o.Log
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Error(err, "Trace export failed") }))
	}
	tp := NewProvider(exp, res, queue)
	uninstall := Install(tp)
	return func(ctx context.Context) error {
		uninstall()
		return tp.Shutdown(ctx) // flushes the queue first
	}, nil
}

// NewProvider is the tracer provider Setup installs: spans of res exported
// to exp in batches, through a queue of queue spans (at most MaxQueueSize)
// that drops what comes while it is full.
func NewProvider(exp sdktrace.SpanExporter, res *resource.Resource, queue int) *sdktrace.TracerProvider {
	queue = min(max(queue, 1), MaxQueueSize)
	return sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithBatcher(exp, sdktrace.WithMaxQueueSize(queue), sdktrace.WithMaxExportBatchSize(min(queue, maxExportBatch))),
	)
}

// Install makes tp the global tracer provider, with the W3C TraceContext
// propagator, and turns tracing on, as Setup does; tests install their own
// provider with it. The returned function turns tracing off again.
func Install(tp trace.TracerProvider) (uninstall func()) {
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	in := &installed{tracer: tp.Tracer(instrumentation)}
	active.Store(in)
	return func() { active.CompareAndSwap(in, nil) }
}

// wanted tells whether the OTEL_* variables ask for exported traces.
func wanted(getenv func(string) string) (bool, error) {
	if v := strings.TrimSpace(getenv("OTEL_SDK_DISABLED")); v != "" {
		disabled, err := strconv.ParseBool(v)
		if err != nil {
			return false, fmt.Errorf("OTEL_SDK_DISABLED=%q is not true or false", v)
		}
		if disabled {
			return false, nil
		}
	}
	switch v := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); v {
	case "none":
		return false, nil
	case "", "otlp":
	default:
		return false, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: agentlane exports traces with otlp only (or none)", v)
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			if v != "http/protobuf" {
				return false, fmt.Errorf("%s=%q: agentlane exports traces over http/protobuf only", name, v)
			}
			break
		}
	}
	return getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "", nil
}

// queueSize reads OTEL_BSP_MAX_QUEUE_SIZE, bounded by MaxQueueSize.
func queueSize(v string) (int, error) {
	if v = strings.TrimSpace(v); v == "" {
		return DefaultMaxQueueSize, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > MaxQueueSize {
		return 0, fmt.Errorf("OTEL_BSP_MAX_QUEUE_SIZE=%q: want 1 to %d", v, MaxQueueSize)
	}
	return n, nil
}

// flushTimeout bounds the export of the spans still queued at exit.
const flushTimeout = 5 * time.Second

// Flush exports the spans still queued, for at most five seconds, and
// stops the tracer provider that Setup returned stop for (a no-op when
// tracing is off); a binary calls it as it exits.
func Flush(stop func(context.Context) error, log logr.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	if err := stop(ctx); err != nil {
		log.Error(err, "Could not flush the traces")
	}
}
