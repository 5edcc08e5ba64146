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

// Package sdk runs the Python client's tests (sdk/python) against a live
// manager: the built cmd/manager binary, serving the Session API over TLS
// with its generated CA, against a real kube-apiserver and etcd. The tests
// call it with projected-style service-account tokens for the audience
// agentlane: one allowed to use the session, one that is not, and a
// handler's, allowed to list and complete the session's external tasks.
package sdk

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/testenv"
)

// pythonTimeout bounds the whole Python test run.
const pythonTimeout = 5 * time.Minute

// TestPythonClient runs `python3 -m unittest` in sdk/python with the
// address, CA and tokens of a live manager in its environment, and
// AGENTLANE_SDK_REQUIRE_LIVE set so that a test missing what it needs
// fails instead of skipping. python3 missing fails the test: the client's
// checks against the OpenAPI document and the live server run nowhere else.
func TestPythonClient(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is needed to test the Python client (sdk/python): %v", err)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	l := startLive(ctx, t, root, work)

	runCtx, stop := context.WithTimeout(ctx, pythonTimeout)
	defer stop()
	cmd := exec.CommandContext(runCtx, python, "-m", "unittest", "discover", "-v", "-s", "tests", "-t", ".")
	cmd.Dir = filepath.Join(root, "sdk", "python")
	cmd.Env = append(append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1"), l.Env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3 -m unittest failed: %v\n%s", err, out) // the manager's log follows
	}
	t.Logf("python3 -m unittest:\n%s", out)
	l.checkNoTokens(t, out, "Python")
	if !bytes.Contains(out, []byte("test_forbidden")) || bytes.Contains(out, []byte("skipped")) {
		t.Errorf("the live tests did not all run:\n%s", out)
	}
}

// goBuild builds cmd/manager into dir.
func goBuild(t *testing.T, root, dir string) string {
	t.Helper()
	out := filepath.Join(dir, "manager")
	if err := testenv.GoBuild(root, "./cmd/manager", out); err != nil {
		t.Fatal(err)
	}
	return out
}

// tenant is a namespace whose service account "agent" may use the Session
// API of its sessions, whose account "outsider" may not, and whose account
// "handler" may list and complete their external tasks.
type tenant struct {
	ns            string
	token         string
	outsiderToken string
	handlerToken  string
}

func newTenant(ctx context.Context, t *testing.T, k8s client.Client) tenant {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "tenant-"}}
	must(t, k8s.Create(ctx, ns))
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "session-user"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{agentlanev1alpha1.GroupVersion.Group},
			Resources: []string{"agentsessions/api"},
			Verbs:     []string{"get", "create"},
		}},
	}
	must(t, k8s.Create(ctx, role))
	agent := audienceToken(ctx, t, k8s, ns.Name, "agent", &rbacv1.RoleRef{Kind: "Role", Name: role.Name})
	outsider := audienceToken(ctx, t, k8s, ns.Name, "outsider", nil)
	handlerRole := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "session-handler"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{agentlanev1alpha1.GroupVersion.Group},
			Resources: []string{"agentsessions/api"},
			Verbs:     []string{"get", "update"},
		}},
	}
	must(t, k8s.Create(ctx, handlerRole))
	handler := audienceToken(ctx, t, k8s, ns.Name, "handler", &rbacv1.RoleRef{Kind: "Role", Name: handlerRole.Name})
	return tenant{ns: ns.Name, token: agent, outsiderToken: outsider, handlerToken: handler}
}

// newSession creates a LaneQueue "q" (the Internal lane "query", the
// External lane "remote" served by workers, and the External lane "handled"
// served by handlers through the API, retried once after a failure, and the
// Delegate lane "review", whose worker sessions no runtime serves: the test
// plays their runtime) and the AgentSession name on it, and waits until the
// session is Active.
func (tn tenant) newSession(ctx context.Context, t *testing.T, k8s client.Client, name string) {
	t.Helper()
	must(t, k8s.Create(ctx, &agentlanev1alpha1.LaneQueue{
		ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: "q"},
		Spec: agentlanev1alpha1.LaneQueueSpec{DefaultLane: "query", Lanes: []agentlanev1alpha1.Lane{
			{Name: "query", Priority: 1, MaxConcurrencyPerSession: 4},
			{Name: "remote", Priority: 2, HandlerMode: agentlanev1alpha1.HandlerModeExternal},
			{Name: "handled", Priority: 2, HandlerMode: agentlanev1alpha1.HandlerModeExternal,
				Timeout:        &metav1.Duration{Duration: 2 * time.Minute},
				ExternalTarget: &agentlanev1alpha1.ExternalTarget{Type: agentlanev1alpha1.ExternalTargetHandler},
				RetryPolicy: &agentlanev1alpha1.RetryPolicy{Strategy: agentlanev1alpha1.RetryFixed, MaxRetries: ptr.To[int32](1),
					FixedDelay: &metav1.Duration{Duration: 50 * time.Millisecond}}},
			{Name: "review", Priority: 0, MaxConcurrency: 1, ExternalTarget: &agentlanev1alpha1.ExternalTarget{
				Type: agentlanev1alpha1.ExternalTargetDelegate,
				Delegate: &agentlanev1alpha1.DelegateTarget{SessionTemplate: agentlanev1alpha1.AgentSessionTemplate{
					Spec: agentlanev1alpha1.AgentSessionTemplateSpec{AgentTemplateID: "reviewer"}}},
			}},
		}},
	}))
	s := &agentlanev1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: name},
		Spec: agentlanev1alpha1.AgentSessionSpec{
			QueueRef: agentlanev1alpha1.LaneQueueReference{Name: "q"},
			Identity: &agentlanev1alpha1.Identity{TenantID: tn.ns, Principal: "agent"},
		},
	}
	must(t, k8s.Create(ctx, s))
	eventually(ctx, t, "the session is Active", func() bool {
		return k8s.Get(ctx, client.ObjectKeyFromObject(s), s) == nil && s.Status.Phase == agentlanev1alpha1.SessionActive
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// eventually polls cond until it holds, failing the test after a minute.
func eventually(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting until %s", what)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
