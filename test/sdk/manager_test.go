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
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/agentlane/agentlane/internal/testenv"
)

const (
	// managerNamespace is where the manager keeps its generated CA.
	managerNamespace = "agentlane-system"
	// managerUser is the identity the manager runs as: not an
	// administrator, only the roles generated from the RBAC markers.
	managerUser = "agentlane-manager"
	// audience is the Session API's token audience, as in runtime pods.
	audience = "agentlane"
)

// manager is the running manager process.
type manager struct {
	url     string
	ca      []byte
	logPath string
}

func (m *manager) log() []byte {
	b, _ := os.ReadFile(m.logPath)
	return b
}

// startManager runs the manager binary with its Session API on a free
// loopback port, serving TLS with the CA it generates and keeps in the
// Secret agentlane-session-api-tls, and waits until the API answers.
func startManager(ctx context.Context, t *testing.T, env *envtest.Environment, k8s client.Client, root, bin, work string) *manager {
	t.Helper()
	must(t, k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managerNamespace}}))
	kubeconfig := managerKubeconfig(ctx, t, env, k8s, filepath.Join(root, "config", "rbac", "role.yaml"), work)
	addr := freeAddress(t)
	m := &manager{url: "https://" + addr, logPath: filepath.Join(work, "manager.log")}
	logFile, err := os.Create(m.logPath)
	must(t, err)
	cmd := exec.Command(bin, "--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--session-api-bind-address="+addr, "--session-api-tls-hosts=127.0.0.1")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "POD_NAMESPACE="+managerNamespace)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	must(t, cmd.Start())
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("manager log:\n%s", m.log())
		}
	})

	secret := &corev1.Secret{}
	key := types.NamespacedName{Namespace: managerNamespace, Name: "agentlane-session-api-tls"}
	eventually(ctx, t, "the manager generated its CA", func() bool {
		return k8s.Get(ctx, key, secret) == nil && len(secret.Data["ca.crt"]) > 0
	})
	m.ca = secret.Data["ca.crt"]
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(m.ca) {
		t.Fatal("the Secret's ca.crt holds no certificate")
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	eventually(ctx, t, "the Session API answers /healthz over TLS", func() bool {
		select {
		case <-done:
			t.Fatalf("the manager exited:\n%s", m.log())
		default:
		}
		resp, err := hc.Get(m.url + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return m
}

// managerKubeconfig creates managerUser with the roles of roleFile (the
// ClusterRole bound cluster-wide, the Role bound in managerNamespace) and
// returns the path of a kubeconfig that authenticates as it.
func managerKubeconfig(ctx context.Context, t *testing.T, env *envtest.Environment, k8s client.Client, roleFile, work string) string {
	t.Helper()
	path, err := testenv.User(ctx, env, k8s, work, managerUser, roleFile, managerNamespace)
	must(t, err)
	return path
}

// audienceToken creates the service account name in namespace, binds it to
// role if not nil, and returns a token of it for the Session API's
// audience, valid for an hour, as a runtime pod's projected token is.
func audienceToken(ctx context.Context, t *testing.T, k8s client.Client, namespace, name string, role *rbacv1.RoleRef) string {
	t.Helper()
	var ref rbacv1.RoleRef
	if role != nil {
		ref = *role
	}
	token, err := testenv.ServiceAccountToken(ctx, k8s, namespace, name, ref, audience)
	must(t, err)
	return token
}

func freeAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer l.Close()
	return l.Addr().String()
}
