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
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// Without OTEL_* variables nothing is installed: tracing is off, the
// global provider stays as it was, and shutting down does nothing.
func TestSetupWithoutEnvironmentIsOff(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"nothing":       {},
		"only a name":   {"OTEL_SERVICE_NAME": "x", "OTEL_TRACES_SAMPLER": "always_on"},
		"sdk disabled":  {"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"},
		"exporter none": {"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1"},
	} {
		t.Run(name, func(t *testing.T) {
			before := otel.GetTracerProvider()
			stop, err := Setup(t.Context(), Options{Service: "test", Getenv: envOf(env)})
			if err != nil {
				t.Fatalf("Setup: %v", err)
			}
			if Enabled() {
				t.Error("tracing is on without an endpoint")
			}
			if otel.GetTracerProvider() != before {
				t.Error("Setup replaced the global tracer provider")
			}
			if Tracer() == nil {
				t.Error("no tracer")
			}
			_, span := Tracer().Start(t.Context(), "x")
			if span.IsRecording() || span.SpanContext().IsValid() {
				t.Error("the tracer of tracing that is off records spans")
			}
			if err := stop(t.Context()); err != nil {
				t.Errorf("shutdown: %v", err)
			}
		})
	}
}

// Settings agentlane cannot honour are refused at start, not ignored.
func TestSetupRefusesUnsupportedSettings(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"console exporter": {"OTEL_TRACES_EXPORTER": "console", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"},
		"grpc":             {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"},
		"traces grpc":      {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"},
		"bad disabled":     {"OTEL_SDK_DISABLED": "maybe"},
		"huge queue":       {"OTEL_BSP_MAX_QUEUE_SIZE": "100000000", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"},
		"zero queue":       {"OTEL_BSP_MAX_QUEUE_SIZE": "0", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Setup(t.Context(), Options{Service: "test", Getenv: envOf(env)}); err == nil {
				t.Error("Setup accepted it")
			}
			if Enabled() {
				t.Error("tracing is on")
			}
		})
	}
}

func TestParse(t *testing.T) {
	const valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	cases := map[string]struct {
		in      string
		ok      bool
		sampled bool
	}{
		"valid sampled":      {in: valid, ok: true, sampled: true},
		"valid not sampled":  {in: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", ok: true},
		"unknown flags kept": {in: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-ff", ok: true, sampled: true},
		"empty":              {in: ""},
		"upper case":         {in: strings.ToUpper(valid)},
		"version 01":         {in: "01" + valid[2:]},
		"version ff":         {in: "ff" + valid[2:]},
		"longer":             {in: valid + "-00"},
		"shorter":            {in: valid[:54]},
		"zero trace id":      {in: "00-00000000000000000000000000000000-00f067aa0ba902b7-01"},
		"zero span id":       {in: "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"},
		"not hex":            {in: "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01"},
		"wrong separators":   {in: "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01"},
		"huge":               {in: strings.Repeat("a", 1<<20)},
		"spaces":             {in: " " + valid[1:]},
		"newline":            {in: valid[:54] + "\n"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			sc, ok := Parse(tc.in)
			if ok != tc.ok {
				t.Fatalf("Parse(%.60q) ok = %v, want %v", tc.in, ok, tc.ok)
			}
			if !ok {
				if sc.IsValid() {
					t.Error("an invalid value gave a valid span context")
				}
				return
			}
			if sc.IsSampled() != tc.sampled || !sc.IsRemote() {
				t.Errorf("sampled %v remote %v", sc.IsSampled(), sc.IsRemote())
			}
			want := tc.in[:53] + "00"
			if tc.sampled {
				want = tc.in[:53] + "01"
			}
			if got := Format(sc); got != want {
				t.Errorf("Format = %q, want %q", got, want)
			}
		})
	}
	if Format(trace.SpanContext{}) != "" {
		t.Error("Format of an invalid span context is not empty")
	}
}

// Only a request with exactly one valid traceparent header has a parent.
func TestFromRequest(t *testing.T) {
	const valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	cases := map[string]struct {
		headers []string
		want    string
	}{
		"none":     {},
		"valid":    {headers: []string{valid}, want: valid},
		"two":      {headers: []string{valid, valid}},
		"invalid":  {headers: []string{"garbage"}},
		"oversize": {headers: []string{valid + strings.Repeat("0", 8192)}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/", nil)
			for _, h := range tc.headers {
				r.Header.Add(Header, h)
			}
			r.Header.Set("tracestate", "vendor=value")
			ctx := FromRequest(context.Background(), r)
			if got := FromContext(ctx); got != tc.want {
				t.Errorf("parent %q, want %q", got, tc.want)
			}
		})
	}
}

// blockingExporter holds its first export until release is closed, and
// counts the spans it was given.
type blockingExporter struct {
	release chan struct{}
	mu      sync.Mutex
	got     int
}

func (e *blockingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	select {
	case <-e.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	e.mu.Lock()
	e.got += len(spans)
	e.mu.Unlock()
	return nil
}

func (e *blockingExporter) Shutdown(context.Context) error { return nil }

// A flood of sampled spans whose export is stuck is held up to the queue
// and no further: what a caller that marks every request sampled can make
// a process keep is bounded by MaxQueueSize, whatever it sends.
func TestQueueBoundsAFloodOfSampledSpans(t *testing.T) {
	const queue, flood = 64, 20000
	exp := &blockingExporter{release: make(chan struct{})}
	tp := NewProvider(exp, resource.Empty(), queue)
	uninstall := Install(tp)
	defer uninstall()
	r := httptest.NewRequest(http.MethodPost, "/", nil)
	for i := range flood {
		// Valid and sampled, malformed, and huge headers, in turn.
		switch i % 3 {
		case 0:
			r.Header.Set(Header, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
		case 1:
			r.Header.Set(Header, "00-zz")
		default:
			r.Header.Set(Header, strings.Repeat("f", 64<<10))
		}
		_, span := Start(FromRequest(context.Background(), r), SpanSubmit, trace.SpanKindServer, "", time.Time{}, Command{Session: "s"})
		End(span, time.Time{}, OutcomeSucceeded, "")
	}
	close(exp.release)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	exp.mu.Lock()
	defer exp.mu.Unlock()
	// The exporter holds one batch while the queue fills behind it.
	if exp.got == 0 || exp.got > queue+maxExportBatch {
		t.Errorf("%d spans exported of %d made, want 1 to %d: the rest dropped at the queue", exp.got, flood, queue+maxExportBatch)
	}
}

// Truncate bounds a message without splitting a character.
func TestTruncate(t *testing.T) {
	msg := strings.Repeat("é", maxMessage)
	got := Truncate(msg)
	if len(got) > maxMessage || !strings.HasPrefix(msg, got) || strings.ToValidUTF8(got, "") != got {
		t.Errorf("Truncate: %d bytes, valid %v", len(got), strings.ToValidUTF8(got, "") == got)
	}
}

// With tracing off, the instrumented code's guard allocates nothing.
func TestOffAllocatesNothing(t *testing.T) {
	if Enabled() {
		t.Skip("a provider is installed")
	}
	c := Command{Namespace: "ns", Session: "s", Lane: "l", ID: "id", Attempt: 1}
	allocs := testing.AllocsPerRun(1000, func() {
		if Enabled() {
			_, span := Start(context.Background(), SpanRun, trace.SpanKindConsumer, "", time.Time{}, c)
			End(span, time.Time{}, OutcomeSucceeded, "")
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per command with tracing off", allocs)
	}
}

// BenchmarkSpan is what one span costs: Off is the guard of every
// instrumented site with tracing off, On a span of a command with a
// provider installed (its export held back by a full queue).
func BenchmarkSpan(b *testing.B) {
	c := Command{Namespace: "ns", Queue: "q", Lane: "tools", Session: "s", Tenant: "t", ID: "cmd-1", Type: "bash", Attempt: 1, Path: PathDirect}
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	run := func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if Enabled() {
				_, span := Start(context.Background(), SpanRun, trace.SpanKindConsumer, parent, time.Time{}, c)
				End(span, time.Time{}, OutcomeSucceeded, "")
			}
		}
	}
	b.Run("Off", run)
	exp := &blockingExporter{release: make(chan struct{})}
	tp := NewProvider(exp, resource.Empty(), DefaultMaxQueueSize)
	uninstall := Install(tp)
	b.Run("On", run)
	uninstall()
	close(exp.release)
	_ = tp.Shutdown(context.Background())
}
