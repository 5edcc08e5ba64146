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

package sdk

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/agentlane/agentlane/internal/testenv"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// live is a running manager for a client's live tests: a control plane,
// the manager binary serving the Session API over TLS, and a tenant with
// the session s1, whose credentials are files in the work directory.
type live struct {
	mgr    *manager
	tenant tenant
	// Env is what a client's tests read: the Session API's address, CA,
	// tokens, OpenAPI document, namespace, session and lanes, and
	// AGENTLANE_SDK_REQUIRE_LIVE, so that a test missing any fails.
	Env []string
}

// startLive builds and starts the manager from root (files in work) and
// stops the control plane when t ends.
func startLive(ctx context.Context, t *testing.T, root, work string) *live {
	t.Helper()
	logf.SetLogger(logr.Discard())
	managerBin := goBuild(t, root, work)
	env, _, k8s, err := testenv.Start(testenv.Scheme())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop the control plane: %v", err)
		}
	})
	mgr := startManager(ctx, t, env, k8s, root, managerBin, work)
	tn := newTenant(ctx, t, k8s)
	tn.newSession(ctx, t, k8s, "s1")

	openapiJSON, err := yaml.YAMLToJSON(sessionapi.OpenAPI)
	if err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	files := map[string][]byte{
		"ca.crt":          mgr.ca,
		"token":           []byte(tn.token),
		"forbidden-token": []byte(tn.outsiderToken),
		"handler-token":   []byte(tn.handlerToken),
		"openapi.json":    openapiJSON,
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(work, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return &live{mgr: mgr, tenant: tn, Env: []string{
		"AGENTLANE_SDK_REQUIRE_LIVE=1",
		"AGENTLANE_OPENAPI_JSON=" + filepath.Join(work, "openapi.json"),
		"AGENTLANE_TEST_URL=" + mgr.url,
		"AGENTLANE_TEST_CA_FILE=" + filepath.Join(work, "ca.crt"),
		"AGENTLANE_TEST_TOKEN_FILE=" + filepath.Join(work, "token"),
		"AGENTLANE_TEST_FORBIDDEN_TOKEN_FILE=" + filepath.Join(work, "forbidden-token"),
		"AGENTLANE_TEST_NAMESPACE=" + tn.ns,
		"AGENTLANE_TEST_SESSION=s1",
		"AGENTLANE_TEST_INTERNAL_LANE=query",
		"AGENTLANE_TEST_EXTERNAL_LANE=remote",
		"AGENTLANE_TEST_HANDLER_LANE=handled",
		"AGENTLANE_TEST_DELEGATE_LANE=review",
		"AGENTLANE_TEST_HANDLER_TOKEN_FILE=" + filepath.Join(work, "handler-token"),
	}}
}

// checkNoTokens fails t when a bearer token of the tenant appears in out,
// the output of the client's tests, or in the manager's log.
func (l *live) checkNoTokens(t *testing.T, out []byte, client string) {
	t.Helper()
	for _, secret := range []string{l.tenant.token, l.tenant.outsiderToken, l.tenant.handlerToken} {
		if bytes.Contains(out, []byte(secret)) || bytes.Contains(l.mgr.log(), []byte(secret)) {
			t.Errorf("a bearer token appears in the %s tests' output or the manager's log", client)
		}
	}
}
