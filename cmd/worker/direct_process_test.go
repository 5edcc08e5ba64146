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

package main

import (
	"bufio"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentlane/agentlane/internal/workerproto"
)

// directManager plays the manager's side of one Direct stream: it
// welcomes the worker, hands it one noop task, and reports the worker's
// frames.
type directManager struct {
	hellos chan workerproto.DirectHello
	frames chan workerproto.WorkerFrame
	// auth is the Authorization header the worker must send.
	auth string
}

func (m *directManager) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != workerproto.DirectPath || r.Header.Get("Authorization") != m.auth || r.ProtoMajor != 2 {
		http.Error(w, `{"code":"Forbidden","message":"refused by the test"}`, http.StatusForbidden)
		return
	}
	body := bufio.NewReader(r.Body)
	line, err := body.ReadBytes('\n')
	var hello workerproto.WorkerFrame
	if err != nil || json.Unmarshal(line, &hello) != nil || hello.Hello == nil {
		http.Error(w, `{"code":"InvalidRequest","message":"no Hello"}`, http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", workerproto.DirectContentType)
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	for _, f := range []workerproto.ManagerFrame{
		{Welcome: &workerproto.DirectWelcome{Manager: "test", RunID: "run-1"}},
		{Task: &workerproto.DirectTask{ID: "direct-1", Attempt: 1, Namespace: "default", Queue: "q", Lane: "tools", Session: "s", CommandType: "noop"}},
	} {
		if enc.Encode(f) != nil || rc.Flush() != nil {
			return
		}
	}
	m.hellos <- *hello.Hello
	for {
		line, err := body.ReadBytes('\n')
		if err != nil {
			return
		}
		var f workerproto.WorkerFrame
		if json.Unmarshal(line, &f) == nil && !f.Ping {
			m.frames <- f
		}
	}
}

// testDirectProcess starts the worker binary with --direct-server against
// a fake manager: it says Hello with its settings and the pool's
// incarnation, runs a noop task there, and drains on SIGTERM.
func testDirectProcess(t *testing.T, c client.Client, bin, kubeconfig string) {
	g := NewWithT(t)
	m := &directManager{hellos: make(chan workerproto.DirectHello, 4), frames: make(chan workerproto.WorkerFrame, 16),
		auth: "Bearer direct-token"}
	srv := httptest.NewUnstartedServer(m)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	caFile, tokenFile := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "token")
	g.Expect(os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600)).To(Succeed())
	g.Expect(os.WriteFile(tokenFile, []byte("direct-token\n"), 0o600)).To(Succeed())

	p := startProcess(t, bin, kubeconfig, "--name=direct-w", "--node-name=node-d", "--namespace=default",
		"--heartbeat-interval=200ms", "--grace-period=1s", "--lanes=tools", "--direct-capacity=3",
		"--direct-server="+srv.URL, "--direct-ca-file="+caFile, "--direct-token-file="+tokenFile, "--noop-executor")
	var hello workerproto.DirectHello
	g.Eventually(m.hellos, 20*time.Second).Should(Receive(&hello))
	g.Expect(hello.Worker).To(Equal("direct-w"))
	g.Expect(hello.Node).To(Equal("node-d"))
	g.Expect(hello.Namespace).To(Equal("default"))
	g.Expect(hello.Capacity).To(Equal(3))
	g.Expect(hello.Lanes).To(Equal([]string{"tools"}))
	g.Expect(hello.CommandTypes).To(ContainElements("bash", "exec", "noop"))
	lease := &coordinationv1.Lease{}
	g.Eventually(func() error {
		return c.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: "agentlane-worker-direct-w"}, lease)
	}, 15*time.Second).Should(Succeed(), "the pool runs beside the stream")
	g.Expect(hello.Incarnation).To(Equal(lease.Annotations[workerproto.IncarnationAnnotation]))
	g.Expect(lease.Spec.HolderIdentity).NotTo(BeNil())

	var f workerproto.WorkerFrame
	g.Eventually(m.frames, 10*time.Second).Should(Receive(&f))
	g.Expect(f.Result).NotTo(BeNil())
	res := *f.Result
	g.Expect(res.StartedAt).To(BeNumerically(">", 0), "the worker tells when the run started")
	g.Expect(time.Unix(0, res.StartedAt)).To(BeTemporally("<=", time.Now()))
	res.StartedAt = 0
	g.Expect(res).To(Equal(workerproto.DirectResult{ID: "direct-1", Attempt: 1, Success: true, Output: json.RawMessage(`{}`)}))

	g.Expect(p.cmd.Process.Signal(syscall.SIGTERM)).To(Succeed())
	g.Eventually(m.frames, 10*time.Second).Should(Receive(&f))
	g.Expect(f.Drain).To(BeTrue())
	g.Eventually(p.exited, 15*time.Second).Should(Receive(BeNil()), "exit status 0")
}
