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

// Package tracing checks the traces of agentlane's processes end to end:
// the manager and a worker run as separate operating-system processes (the
// built binaries) against a real kube-apiserver, export their spans over
// OTLP/HTTP to a receiver in this process, and one External command
// submitted with a caller's traceparent makes one trace across both, on
// an ExternalTask lane and on a Direct lane.
package tracing

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/servingcert"
	"github.com/agentlane/agentlane/internal/testenv"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

const (
	managerUser = "agentlane-manager"
	workerUser  = "agentlane-worker"
	// audience is the Session API's default token audience.
	audience = "agentlane"
	// The lanes of the queue: one served by the worker pool through
	// ExternalTasks, one by the worker's Direct stream.
	poolLane   = "pool"
	directLane = "direct"
)

// traceRE finds a traceparent in a task's output.
var traceRE = regexp.MustCompile(`00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]`)

func TestOneCommandIsOneTrace(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run `make test`, or set it to $(hack/envtest-assets.sh)")
	}
	logf.SetLogger(logr.Discard())
	g := NewWithT(t)
	ctx := t.Context()
	work := t.TempDir()
	root := filepath.Join("..", "..")
	managerBin, workerBin := filepath.Join(work, "manager"), filepath.Join(work, "worker")
	g.Expect(testenv.GoBuild(root, "./cmd/manager", managerBin)).To(Succeed())
	g.Expect(testenv.GoBuild(root, "./cmd/worker", workerBin)).To(Succeed())

	env, _, k8s, err := testenv.Start(testenv.Scheme())
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop the control plane: %v", err)
		}
	})
	managerKubeconfig, err := testenv.User(ctx, env, k8s, work, managerUser, filepath.Join(root, "config", "rbac", "role.yaml"), "")
	g.Expect(err).NotTo(HaveOccurred())
	workerKubeconfig, err := testenv.User(ctx, env, k8s, work, workerUser, filepath.Join(root, "config", "rbac", "worker", "role.yaml"), "")
	g.Expect(err).NotTo(HaveOccurred())

	// Both processes export to the receiver, quickly.
	rc := startReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rc.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	t.Setenv("OTEL_SERVICE_NAME", "")

	api, caFile, ca := startManager(t, managerBin, managerKubeconfig, work)
	ns := prepare(t, g, k8s, root)
	workerToken := filepath.Join(work, "worker.token")
	token, err := testenv.ServiceAccountToken(ctx, k8s, ns, "worker", rbacv1.RoleRef{Kind: "ClusterRole", Name: "worker-role"}, audience)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(workerToken, []byte(token), 0o600)).To(Succeed())
	userToken, err := testenv.ServiceAccountToken(ctx, k8s, ns, "agent", rbacv1.RoleRef{Kind: "ClusterRole", Name: "session-user"}, audience)
	g.Expect(err).NotTo(HaveOccurred())

	w := startProcess(t, work, "worker", workerBin, workerKubeconfig,
		"--name=w1", "--node-name=node-1", "--namespace="+ns, "--heartbeat-interval=300ms", "--grace-period=2s",
		"--metrics-bind-address=0",
		"--direct-server=https://"+api, "--direct-ca-file="+caFile, "--direct-token-file="+workerToken)
	g.Eventually(func() string {
		g.Expect(w.Exited()).To(BeFalse(), "the worker exited:\n%s", w.LogTail(4000))
		return w.LogTail(1 << 20)
	}, time.Minute, 100*time.Millisecond).Should(ContainSubstring("Direct stream open"))

	c := &caller{base: "https://" + api + "/v1/namespaces/" + ns + "/sessions/s1", token: userToken, http: httpsClient(g, ca)}
	for i, lane := range []string{poolLane, directLane} {
		t.Run(lane, func(t *testing.T) {
			g := NewWithT(t)
			traceID, callerSpan := fmt.Sprintf("4bf92f3577b34da6a3ce929d0e0e47%02x", i), "00f067aa0ba902b7"
			cmd := c.submit(g, lane, "00-"+traceID+"-"+callerSpan+"-01")
			g.Expect(cmd.State).To(Equal(sessionapi.StateSucceeded), "command %+v", cmd)
			seen := traceRE.FindString(string(cmd.Result.Output))
			g.Expect(seen).NotTo(BeEmpty(), "the task echoed $TRACEPARENT: %s", cmd.Result.Output)
			g.Expect(seen[3:35]).To(Equal(traceID), "the task's TRACEPARENT is of the caller's trace")

			want := []string{"agentlane.submit", "agentlane.lane.wait", "agentlane.dispatch", "agentlane.worker.run"}
			if lane == poolLane {
				want = append(want, "agentlane.result")
			}
			var spans map[string]span
			g.Eventually(func(g Gomega) {
				spans = byName(g, rc.trace(traceID))
				g.Expect(spans).To(HaveLen(len(want)))
				for _, name := range want {
					g.Expect(spans).To(HaveKey(name))
				}
			}, time.Minute, 100*time.Millisecond).Should(Succeed())

			submit, wait, dispatch, run := spans["agentlane.submit"], spans["agentlane.lane.wait"], spans["agentlane.dispatch"], spans["agentlane.worker.run"]
			// One tree: the caller's span, the Session API's under it, and
			// everything else under that.
			g.Expect(submit.Parent).To(Equal(callerSpan), "the submit span is a child of the caller's")
			g.Expect(wait.Parent).To(Equal(submit.SpanID))
			g.Expect(dispatch.Parent).To(Equal(submit.SpanID))
			if lane == directLane {
				g.Expect(run.Parent).To(Equal(dispatch.SpanID), "a Direct run is a child of the stream's dispatch")
			} else {
				g.Expect(run.Parent).To(Equal(submit.SpanID), "a pool run is a child of the span its ExternalTask carries")
				g.Expect(spans["agentlane.result"].Parent).To(Equal(submit.SpanID))
			}
			g.Expect(seen[36:52]).To(Equal(run.SpanID), "the task's TRACEPARENT is its run span")
			for name, s := range spans {
				service := "agentlane-manager"
				if name == "agentlane.worker.run" {
					service = "agentlane-worker"
				}
				g.Expect(s.Service).To(Equal(service), "span %s", name)
				g.Expect(s.Attrs).To(HaveKeyWithValue("agentlane.session", "s1"), "span %s", name)
				g.Expect(s.Attrs).To(HaveKeyWithValue("k8s.namespace.name", ns), "span %s", name)
				g.Expect(s.Attrs).To(HaveKeyWithValue("agentlane.lane", lane), "span %s", name)
				g.Expect(s.Attrs).To(HaveKeyWithValue("agentlane.command.id", cmd.ID), "span %s", name)
				if name != "agentlane.submit" {
					g.Expect(s.Attrs).To(HaveKeyWithValue("agentlane.attempt", "1"), "span %s", name)
				}
				if name != "agentlane.worker.run" || lane == poolLane {
					g.Expect(s.Attrs).To(HaveKeyWithValue("agentlane.tenant", "acme"), "span %s", name)
				}
			}
			g.Expect(run.Attrs).To(HaveKeyWithValue("agentlane.outcome", "Succeeded"))
			g.Expect(submit.Attrs).To(HaveKeyWithValue("agentlane.outcome", sessionapi.StateSucceeded))
		})
	}

	// A malformed traceparent is no error: the command runs in a new trace.
	cmd := c.submit(g, directLane, "00-"+strings.Repeat("Z", 32)+"-00f067aa0ba902b7-01")
	g.Expect(cmd.State).To(Equal(sessionapi.StateSucceeded))
	seen := traceRE.FindString(string(cmd.Result.Output))
	g.Expect(seen).NotTo(BeEmpty())
	g.Eventually(func(g Gomega) {
		spans := byName(g, rc.trace(seen[3:35]))
		g.Expect(spans).To(HaveKey("agentlane.submit"))
		g.Expect(spans["agentlane.submit"].Parent).To(BeEmpty(), "a new root")
	}, time.Minute, 100*time.Millisecond).Should(Succeed())
}

// byName indexes spans by name; each name once.
func byName(g Gomega, spans []span) map[string]span {
	out := map[string]span{}
	for _, s := range spans {
		g.Expect(out).NotTo(HaveKey(s.Name), "one %s span", s.Name)
		out[s.Name] = s
	}
	return out
}

// caller submits commands to session s1 as its runtime would.
type caller struct {
	base, token string
	http        *http.Client
}

// submit submits a bash command that echoes $TRACEPARENT on lane, with
// the traceparent header tp, and waits for it to end.
func (c *caller) submit(g Gomega, lane, tp string) sessionapi.Command {
	body, _ := json.Marshal(map[string]any{"type": "bash", "lane": lane, "wait": "50s",
		"payload": map[string]any{"command": `echo "$TRACEPARENT"`}})
	var cmd sessionapi.Command
	c.do(g, http.MethodPost, "/commands", tp, body, &cmd)
	g.Eventually(func(g Gomega) {
		if !cmd.Final() {
			c.do(g, http.MethodGet, "/commands/"+cmd.ID+"?wait=10s", "", nil, &cmd)
		}
		g.Expect(cmd.Final()).To(BeTrue())
	}, 2*time.Minute, 100*time.Millisecond).Should(Succeed())
	return cmd
}

func (c *caller) do(g Gomega, method, path, tp string, body []byte, out any) {
	req, err := http.NewRequest(method, c.base+path, bytes.NewReader(body))
	g.Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	if tp != "" {
		req.Header.Set("traceparent", tp)
		req.Header.Set("tracestate", "vendor=opaque")
	}
	resp, err := c.http.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.StatusCode).To(BeElementOf(http.StatusOK, http.StatusAccepted), "%s %s: %s", method, path, b)
	g.Expect(json.Unmarshal(b, out)).To(Succeed())
}

func httpsClient(g Gomega, ca []byte) *http.Client {
	roots := x509.NewCertPool()
	g.Expect(roots.AppendCertsFromPEM(ca)).To(BeTrue())
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
}

// startManager starts the manager with its Session API over TLS on a free
// loopback port and waits until it answers; it returns the API's address
// and its CA (file and PEM).
func startManager(t *testing.T, bin, kubeconfig, work string) (addr, caFile string, ca []byte) {
	t.Helper()
	b, err := servingcert.Generate([]string{"127.0.0.1", "localhost"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"tls.crt": b.Cert, "tls.key": b.Key, "ca.crt": b.CACert}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(work, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	addr = freeAddress(t)
	m := startProcess(t, work, "manager", bin, kubeconfig,
		"--metrics-bind-address=0", "--health-probe-bind-address=0", "--session-api-bind-address="+addr,
		"--session-api-cert-file="+filepath.Join(work, "tls.crt"), "--session-api-key-file="+filepath.Join(work, "tls.key"),
		"--session-api-ca-file="+filepath.Join(work, "ca.crt"))
	NewWithT(t).Eventually(func() error {
		if m.Exited() {
			t.Fatalf("the manager exited:\n%s", m.LogTail(4000))
		}
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
		}
		return err
	}, time.Minute, 100*time.Millisecond).Should(Succeed())
	return addr, filepath.Join(work, "ca.crt"), b.CACert
}

// prepare creates the roles runtimes and workers get, a namespace with the
// LaneQueue q (an ExternalTask lane and a Direct lane) and the session s1
// of tenant acme, and returns the namespace.
func prepare(t *testing.T, g *WithT, k8s client.Client, root string) string {
	t.Helper()
	ctx := t.Context()
	role := &rbacv1.ClusterRole{}
	data, err := os.ReadFile(filepath.Join(root, "config", "rbac", "session_user_role.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(yaml.Unmarshal(data, role)).To(Succeed())
	g.Expect(k8s.Create(ctx, role)).To(Succeed())
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "traces-"}}
	g.Expect(k8s.Create(ctx, ns)).To(Succeed())
	g.Expect(k8s.Create(ctx, &agentlanev1alpha1.LaneQueue{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "q"},
		Spec: agentlanev1alpha1.LaneQueueSpec{DefaultLane: poolLane, Lanes: []agentlanev1alpha1.Lane{
			{Name: poolLane, HandlerMode: agentlanev1alpha1.HandlerModeExternal, MaxConcurrency: 2},
			{Name: directLane, HandlerMode: agentlanev1alpha1.HandlerModeExternal, MaxConcurrency: 2,
				ExternalTarget: &agentlanev1alpha1.ExternalTarget{Type: agentlanev1alpha1.ExternalTargetDirect}},
		}},
	})).To(Succeed())
	s := &agentlanev1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "s1"},
		Spec: agentlanev1alpha1.AgentSessionSpec{QueueRef: agentlanev1alpha1.LaneQueueReference{Name: "q"},
			Identity: &agentlanev1alpha1.Identity{TenantID: "acme", Principal: "user-1"}},
	}
	g.Expect(k8s.Create(ctx, s)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
		g.Expect(s.Status.Phase).To(Equal(agentlanev1alpha1.SessionActive))
	}, time.Minute, 100*time.Millisecond).Should(Succeed())
	return ns.Name
}

// startProcess starts bin with args and stops it when t ends, showing its
// log if t failed.
func startProcess(t *testing.T, work, name, bin, kubeconfig string, args ...string) *testenv.Process {
	t.Helper()
	p, err := testenv.StartProcess(filepath.Join(work, name+".log"), bin, kubeconfig, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop(20 * time.Second)
		if t.Failed() {
			t.Logf("---- log of %s ----\n%s", name, p.LogTail(8000))
		}
	})
	return p
}

func freeAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
