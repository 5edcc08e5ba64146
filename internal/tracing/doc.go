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

// Package tracing holds agentlane's OpenTelemetry traces: the provider the
// binaries set up from the standard OTEL_* environment variables, the W3C
// traceparent a command carries from the Session API caller to the worker
// and the task's environment, and the names and attributes of the spans
// (docs/observability.md).
//
// Tracing is off unless an OTLP endpoint is configured: Setup then installs
// nothing, Enabled is false, and the instrumented code checks Enabled
// before it builds a span or its attributes, so that a manager or worker
// without tracing allocates nothing for it.
//
// A traceparent comes from a tenant (the Session API caller's header, an
// ExternalTask's annotation): Parse accepts only the exact 55-character
// version-00 form and anything else starts a new root. tracestate is never
// carried. What a caller that marks every request sampled can make the
// manager hold is bounded by the batch span processor's queue
// (MaxQueueSize): a span that ends while the queue is full is dropped, not
// kept.
package tracing
