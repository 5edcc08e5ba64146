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

package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// dispatchWatch records when (by the suite's clock) each attempt of a task
// was handed out: the task became Dispatched, or Running where the
// Dispatched write was not seen. It watches the tasks in etcd itself,
// through etcd's JSON gateway, so that it sees each write within
// milliseconds of its commit even while the API server is down or still
// filling its watch cache after a restart (an API server watch then lags
// the writes by seconds).
type dispatchWatch struct {
	mu         sync.Mutex
	seen       map[string]attemptSeen
	dispatches []dispatch
}

// attemptSeen is what the watch last saw of a task: its current attempt and
// whether that attempt was handed out.
type attemptSeen struct {
	attempt   int32
	handedOut bool
}

// dispatch is one attempt handed out: when the watch saw it, and the
// resourceVersion of the write (the etcd revision that committed it).
type dispatch struct {
	at time.Time
	rv uint64
}

// watchDispatches starts watching the tasks of ns until the spec ends.
func watchDispatches(ns string) *dispatchWatch {
	GinkgoHelper()
	prefix := "/registry/agentlane.io/externaltasks/" + ns + "/"
	body, err := json.Marshal(map[string]any{"create_request": map[string]any{
		"key": []byte(prefix), "range_end": []byte(prefix[:len(prefix)-1] + "0")}})
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(suiteCtx)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, testEnv.ControlPlane.Etcd.URL.JoinPath("/v3/watch").String(), bytes.NewReader(body))
	Expect(err).NotTo(HaveOccurred())
	resp, err := http.DefaultClient.Do(req) //nolint:bodyclose // closed by the DeferCleanup below, once the watch is followed to its end
	Expect(err).NotTo(HaveOccurred())
	Expect(resp.StatusCode).To(Equal(http.StatusOK))
	dw := &dispatchWatch{seen: map[string]attemptSeen{}}
	events := make(chan error, 1)
	go func() { events <- dw.follow(json.NewDecoder(resp.Body)) }()
	DeferCleanup(func() {
		cancel()
		_ = resp.Body.Close()
		GinkgoWriter.Printf("dispatch watch ended: %v\n", <-events)
	})
	return dw
}

// etcdWatchResponse is one message of etcd's watch stream as its JSON
// gateway writes it (bytes are base64, int64s strings).
type etcdWatchResponse struct {
	Result struct {
		Events []struct {
			Type string `json:"type"`
			KV   struct {
				ModRevision string `json:"mod_revision"`
				Value       []byte `json:"value"`
			} `json:"kv"`
		} `json:"events"`
	} `json:"result"`
}

// follow reads the watch stream until it ends.
func (dw *dispatchWatch) follow(dec *json.Decoder) error {
	for {
		var msg etcdWatchResponse
		if err := dec.Decode(&msg); err != nil {
			return err
		}
		for _, ev := range msg.Result.Events {
			if ev.Type == "DELETE" {
				continue
			}
			t := &agentlanev1alpha1.ExternalTask{}
			if err := json.Unmarshal(ev.KV.Value, t); err != nil {
				continue
			}
			t.ResourceVersion = ev.KV.ModRevision
			dw.observe(t)
		}
	}
}

func (dw *dispatchWatch) observe(t *agentlanev1alpha1.ExternalTask) {
	dw.mu.Lock()
	defer dw.mu.Unlock()
	st := &t.Status
	now := attemptSeen{attempt: st.Attempt,
		handedOut: st.Phase == agentlanev1alpha1.ExternalTaskDispatched || st.Phase == agentlanev1alpha1.ExternalTaskRunning}
	if was := dw.seen[t.Name]; now.handedOut && (!was.handedOut || was.attempt != now.attempt) {
		rv, _ := strconv.ParseUint(t.ResourceVersion, 10, 64)
		dw.dispatches = append(dw.dispatches, dispatch{at: time.Now(), rv: rv})
	}
	dw.seen[t.Name] = now
}

// firstDispatchAfter returns how long after since the first dispatch
// written after the marker came, or -1 when none did. The marker is the
// resourceVersion of a write made once the fault struck, so that writes a
// killed manager sent before it died do not count as dispatches after it
// (the API server's resourceVersions are etcd revisions, which grow).
func (dw *dispatchWatch) firstDispatchAfter(since time.Time, marker uint64) time.Duration {
	at, ok := dw.firstDispatch(marker, time.Time{})
	if !ok {
		return -1
	}
	return at.Sub(since)
}

// firstDispatch returns when the watch saw the first dispatch written after
// the marker, counting only those it saw after seenAfter.
func (dw *dispatchWatch) firstDispatch(marker uint64, seenAfter time.Time) (time.Time, bool) {
	dw.mu.Lock()
	defer dw.mu.Unlock()
	for _, d := range dw.dispatches {
		if d.rv > marker && d.at.After(seenAfter) {
			return d.at, true
		}
	}
	return time.Time{}, false
}

// writeMarker writes a ConfigMap in ns and returns its resourceVersion.
func writeMarker(ns string) uint64 {
	GinkgoHelper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "marker-"}}
	Eventually(func() error { return k8sClient.Create(suiteCtx, cm) }).Should(Succeed())
	rv, err := strconv.ParseUint(cm.ResourceVersion, 10, 64)
	Expect(err).NotTo(HaveOccurred())
	return rv
}
