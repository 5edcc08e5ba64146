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
	"fmt"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentlane/agentlane/internal/scheduling"
)

// routeUnknown is the route label of a request that matched no route.
const routeUnknown = "unknown"

// The Session API's metrics (docs/metrics.md). Their labels are bounded
// whatever callers send: route is the pattern of a route under
// /v1/namespaces/{namespace}/sessions/{session} (never the path, which
// names namespaces, sessions and commands), method one of a fixed set, code
// an HTTP status and error_code one of the API's error codes.
var (
	requestLabels = []string{"route", "method", "code"}

	requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentlane_session_api_requests_total",
		Help: "Session API calls, counted when they end, by route pattern, method and HTTP status code.",
	}, requestLabels)
	requestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "agentlane_session_api_request_duration_seconds",
		Help: "Seconds a Session API call took, by route pattern, method and HTTP status code; " +
			"calls that wait for a command and event streams last as long as they wait or stream.",
		Buckets: scheduling.DurationBuckets,
	}, requestLabels)
	requestErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentlane_session_api_errors_total",
		Help: "Session API calls answered with an error, by route pattern, method and the reply's error code " +
			"(Unauthenticated, Forbidden, RateLimited, TooLarge, QueueFull, ...).",
	}, []string{"route", "method", "error_code"})

	connections = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "agentlane_session_api_connections",
		Help: "Connections open to the Session API.",
	})
	connectionsRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentlane_session_api_connections_refused_total",
		Help: "Connections the Session API closed because a new one passed a bound, by bound: server (--session-api-max-connections) " +
			"or address (--session-api-max-connections-per-address), and action: refused (the new one, as no connection was idle) " +
			"or idle_closed (an idle keep-alive connection, to make room).",
	}, []string{"bound", "action"})
	longCalls = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "agentlane_session_api_long_calls",
		Help: "Session API calls open that last: kind stream (event streams) or wait (calls waiting for a command).",
	}, []string{"kind"})

	directRecords = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "agentlane_direct_records_total",
		Help: "Commands of Direct lanes recorded as ExternalTasks: they waited or ran longer than materializeAfter, " +
			"ended Failed, TimedOut or DeadLettered, or their lane records every command.",
	})
	directRecordFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "agentlane_direct_record_failures_total",
		Help: "Writes of a Direct command's ExternalTask record that failed (the command itself is not affected).",
	})
)

// RegisterMetrics adds the Session API's metrics to reg (the manager's
// controller-runtime registry); cmd/manager calls it once.
func RegisterMetrics(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{requests, requestDuration, requestErrors, connections, connectionsRefused, longCalls,
		directRecords, directRecordFailures, directTokenRefreshes} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("register the Session API metrics: %w", err)
		}
	}
	return nil
}

// methodLabel bounds the method label: a caller may send any token as its
// method.
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
		return method
	}
	return "other"
}

// instrument counts and times every call h answers, under route.
func (s *Server) instrument(route string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := s.Clock.Now()
		rec := &statusRecorder{ResponseWriter: w}
		defer func() {
			code := rec.status
			if code == 0 {
				code = http.StatusOK
			}
			labels := []string{route, methodLabel(r.Method), strconv.Itoa(code)}
			requests.WithLabelValues(labels...).Inc()
			requestDuration.WithLabelValues(labels...).Observe(s.Clock.Since(start).Seconds())
		}()
		h.ServeHTTP(rec, r)
	})
}

// countError records the API error code of a call answered with an error.
func countError(route string, r *http.Request, code string) {
	requestErrors.WithLabelValues(route, methodLabel(r.Method), code).Inc()
}

// statusRecorder remembers the status a handler answered with. It flushes
// (the event stream needs that) and unwraps for http.ResponseController.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (w *statusRecorder) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusRecorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusRecorder) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }
