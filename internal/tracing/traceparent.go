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
	"encoding/hex"
	"net/http"

	"go.opentelemetry.io/otel/trace"
)

const (
	// Header is the W3C Trace Context request header.
	Header = "traceparent"
	// Env is the variable a bash or exec task finds its run's traceparent
	// in.
	Env = "TRACEPARENT"
	// TraceparentLen is the length of a version-00 traceparent, the only
	// form Parse accepts.
	TraceparentLen = 55
)

// Parse reads a W3C traceparent, "00-<32 hex trace id>-<16 hex span
// id>-<2 hex flags>", lower-case, exactly TraceparentLen long, with
// neither id all zeros. Anything else (another version, extra fields, upper
// case, a longer or shorter value) is not valid: ok is false and the caller
// starts a new trace. Of the flags only sampled is kept.
func Parse(v string) (sc trace.SpanContext, ok bool) {
	if len(v) != TraceparentLen || v[0] != '0' || v[1] != '0' || v[2] != '-' || v[35] != '-' || v[52] != '-' {
		return trace.SpanContext{}, false
	}
	var tid trace.TraceID
	var sid trace.SpanID
	var flags [1]byte
	if !lowerHex(v[3:35], tid[:]) || !lowerHex(v[36:52], sid[:]) || !lowerHex(v[53:55], flags[:]) {
		return trace.SpanContext{}, false
	}
	sc = trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    tid,
		SpanID:     sid,
		TraceFlags: trace.TraceFlags(flags[0]) & trace.FlagsSampled,
		Remote:     true,
	})
	return sc, sc.IsValid()
}

// lowerHex decodes s, lower-case hex only, into dst.
func lowerHex(s string, dst []byte) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	_, err := hex.Decode(dst, []byte(s))
	return err == nil
}

// Format writes sc as a version-00 traceparent; "" when sc is not valid.
func Format(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	tid, sid := sc.TraceID(), sc.SpanID()
	b := make([]byte, 0, TraceparentLen)
	b = append(b, "00-"...)
	b = hex.AppendEncode(b, tid[:])
	b = append(b, '-')
	b = hex.AppendEncode(b, sid[:])
	b = append(b, '-')
	b = hex.AppendEncode(b, []byte{byte(sc.TraceFlags() & trace.FlagsSampled)})
	return string(b)
}

// FromRequest returns ctx with the remote span context of r's traceparent
// header when r has exactly one and it is valid (Parse), and ctx as it is
// otherwise: a request without a usable header starts a new trace, never an
// error. The tracestate header is ignored.
func FromRequest(ctx context.Context, r *http.Request) context.Context {
	vs := r.Header.Values(Header)
	if len(vs) != 1 {
		return ctx
	}
	return ContextWithTraceparent(ctx, vs[0])
}

// ContextWithTraceparent returns ctx with the remote span context of
// traceparent tp, or ctx when tp is not valid.
func ContextWithTraceparent(ctx context.Context, tp string) context.Context {
	sc, ok := Parse(tp)
	if !ok {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// FromContext is the traceparent of the span ctx holds, "" when none.
func FromContext(ctx context.Context) string {
	return Format(trace.SpanContextFromContext(ctx))
}
