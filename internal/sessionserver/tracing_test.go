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
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/tracing"
	"github.com/agentlane/agentlane/internal/workerproto"
)

// heldExporter holds every export until release is closed, and counts
// the spans it was handed.
type heldExporter struct {
	release chan struct{}
	once    sync.Once
	mu      sync.Mutex
	spans   int
}

func (e *heldExporter) releaseAll() { e.once.Do(func() { close(e.release) }) }

func (e *heldExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	select {
	case <-e.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	e.mu.Lock()
	e.spans += len(spans)
	e.mu.Unlock()
	return nil
}

func (e *heldExporter) Shutdown(context.Context) error { return nil }

var _ = Describe("Traceparent headers from a hostile caller", func() {
	It("never refuse a submit, never reach the task unchecked, and fill no more than the export queue", func() {
		const queue, rounds = 16, 30
		exp := &heldExporter{release: make(chan struct{})}
		tp := tracing.NewProvider(exp, resource.Empty(), queue)
		uninstall := tracing.Install(tp)
		DeferCleanup(func() {
			uninstall()
			exp.releaseAll()
			Expect(tp.Shutdown(context.Background())).To(Succeed())
		})
		t := newTenant()
		t.newQueue(internalLanes())
		t.newSession("s", nil)

		const validTrace = "0af7651916cd43dd8448eb211c80319c"
		headers := map[string][]string{
			"valid":         {"00-" + validTrace + "-b7ad6b7169203331-01"},
			"malformed":     {"00-" + strings.ToUpper(validTrace) + "-b7ad6b7169203331-01"},
			"huge":          {"00-" + validTrace + "-b7ad6b7169203331-01" + strings.Repeat("-ff", 4000)},
			"repeated":      {"00-" + validTrace + "-b7ad6b7169203331-01", "00-" + validTrace + "-b7ad6b7169203331-01"},
			"other version": {"01-" + validTrace + "-b7ad6b7169203331-01"},
		}
		for i := range rounds {
			for kind, values := range headers {
				body, _ := json.Marshal(map[string]any{"id": fmt.Sprintf("%s-%d", strings.ReplaceAll(kind, " ", "-"), i),
					"type": "bash", "lane": "remote", "wait": "1ms", "payload": map[string]any{"command": "true"}})
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/v1/namespaces/"+t.ns+"/sessions/s/commands", bytes.NewReader(body))
				Expect(err).NotTo(HaveOccurred())
				req.Header.Set("Authorization", "Bearer "+t.token)
				req.Header.Set("Content-Type", "application/json")
				for _, v := range values {
					req.Header.Add("traceparent", v)
				}
				req.Header.Set("tracestate", strings.Repeat("k=v,", 1000))
				resp, err := apiHTTPClient.Do(req)
				Expect(err).NotTo(HaveOccurred())
				b, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				Expect(resp.StatusCode).To(BeElementOf(http.StatusOK, http.StatusAccepted), "%s: %s", kind, b)
			}
		}

		// A header block past the server's bound is refused before any
		// handler reads it.
		body, _ := json.Marshal(map[string]any{"id": "oversize", "type": "bash", "lane": "remote", "wait": "1ms"})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/v1/namespaces/"+t.ns+"/sessions/s/commands", bytes.NewReader(body))
		Expect(err).NotTo(HaveOccurred())
		req.Header.Set("Authorization", "Bearer "+t.token)
		req.Header.Set("traceparent", "00-"+validTrace+"-b7ad6b7169203331-01"+strings.Repeat("-ff", 2*DefaultMaxHeaderBytes/3))
		resp, err := apiHTTPClient.Do(req)
		Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusRequestHeaderFieldsTooLarge))

		tasks := &agentlanev1alpha1.ExternalTaskList{}
		Expect(k8sClient.List(ctx, tasks, client.InNamespace(t.ns))).To(Succeed())
		Expect(tasks.Items).To(HaveLen(rounds * len(headers)))
		for _, task := range tasks.Items {
			v := task.Annotations[workerproto.TraceparentAnnotation]
			sc, ok := tracing.Parse(v)
			Expect(ok).To(BeTrue(), "task %s carries a valid traceparent, not the caller's bytes: %q", task.Name, v)
			Expect(task.Annotations).To(HaveLen(1))
			if strings.HasPrefix(task.Name, "valid-") {
				Expect(sc.TraceID().String()).To(Equal(validTrace), "task %s continues the caller's trace", task.Name)
			} else {
				Expect(sc.TraceID().String()).NotTo(Equal(validTrace), "task %s starts a new trace", task.Name)
			}
		}
		// The exporter held its first batch; the queue took queue spans
		// behind it and dropped the rest.
		exp.releaseAll()
		flush, cancelFlush := context.WithTimeout(ctx, time.Minute)
		defer cancelFlush()
		Expect(tp.ForceFlush(flush)).To(Succeed())
		exp.mu.Lock()
		defer exp.mu.Unlock()
		Expect(exp.spans).To(BeNumerically(">", 0))
		Expect(exp.spans).To(BeNumerically("<=", 2*queue), "of %d submits, only what the queue holds is kept", rounds*len(headers))
	})
})
