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

// Package deploy holds the suite that renders config/default with kustomize
// and applies every object it deploys to a real kube-apiserver (server-side
// apply, dry run), and checks the manifests against the binaries they run:
// the image, the flags, the ports, the service accounts. It also checks that
// docs/metrics.md and the Grafana dashboard name the metrics agentlane
// registers. It installs the admission policies and RBAC of config/default
// for real and attacks them with the identities of workers, Job pods and the
// manager. It renders the other ways to install, dist/install.yaml's
// rendering (hack/render.sh) and the Helm chart charts/agentlane, compares
// them with config/default and dry-runs them, and renders the components of
// config/components.
package deploy

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"strings"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/agentlane/agentlane/internal/manifest"
	"github.com/agentlane/agentlane/internal/testenv"
)

var (
	ctx       context.Context
	cancel    context.CancelFunc
	testEnv   *envtest.Environment
	cfg       *rest.Config
	k8sClient client.Client

	// rendered is the output of `kustomize build config/default`.
	rendered []*unstructured.Unstructured
	// managerFlags, workerFlags and runnerFlags are the flags the built
	// binaries define (runnerFlags those of `worker runner`).
	managerFlags, workerFlags, runnerFlags map[string]bool
)

func TestDeploy(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Deployment manifests suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	ctx, cancel = context.WithCancel(context.Background())

	kustomize, err := kustomizeBinary()
	Expect(err).NotTo(HaveOccurred())
	out, err := run(exec.CommandContext(ctx, kustomize, "build", filepath.Join(repoRoot(), "config", "default")))
	Expect(err).NotTo(HaveOccurred())
	rendered, err = manifest.Decode("kustomize build config/default", out)
	Expect(err).NotTo(HaveOccurred())
	Expect(rendered).NotTo(BeEmpty())

	bin := GinkgoT().TempDir()
	build := exec.CommandContext(ctx, "go", "build", "-o", bin+string(filepath.Separator), "./cmd/manager", "./cmd/worker")
	build.Dir = repoRoot()
	_, err = run(build)
	Expect(err).NotTo(HaveOccurred())
	managerFlags, err = definedFlags(filepath.Join(bin, "manager"))
	Expect(err).NotTo(HaveOccurred())
	workerFlags, err = definedFlags(filepath.Join(bin, "worker"))
	Expect(err).NotTo(HaveOccurred())
	runnerFlags, err = definedFlags(filepath.Join(bin, "worker"), "runner")
	Expect(err).NotTo(HaveOccurred())

	// The CRDs come from the kustomize output, as a cluster gets them.
	scheme := testenv.Scheme()
	Expect(apiextensionsv1.AddToScheme(scheme)).To(Succeed())
	testEnv, cfg, k8sClient, err = testenv.Start(scheme, testenv.WithoutCRDs())
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
	}
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

// repoRoot is the root of this repository, wherever the suite runs.
func repoRoot() string {
	_, file, _, _ := goruntime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// kustomizeBinary is $KUSTOMIZE (set by `make test`), else the
// bin/kustomize-<version> that `make kustomize` builds.
func kustomizeBinary() (string, error) { return toolBinary("kustomize") }

// toolBinary locates a build tool the Makefile builds into bin/: $<TOOL>
// (set by `make test`), else bin/<tool>-<$(TOOL_VERSION)>.
func toolBinary(tool string) (string, error) {
	env := strings.ToUpper(tool)
	if t := os.Getenv(env); t != "" {
		path, err := exec.LookPath(t)
		if err != nil {
			return "", fmt.Errorf("%s=%s: %w; run `make %s`", env, t, err, tool)
		}
		return path, nil
	}
	makefile, err := os.ReadFile(filepath.Join(repoRoot(), "Makefile"))
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`(?m)^` + env + `_VERSION \?= (\S+)$`).FindSubmatch(makefile)
	if m == nil {
		return "", fmt.Errorf("%s is not set and the Makefile sets no %s_VERSION", env, env)
	}
	path := filepath.Join(repoRoot(), "bin", tool+"-"+string(m[1]))
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("%s is not set and %s is missing: run the suite with `make test`, or run `make %s` first", env, path, tool)
	}
	return path, nil
}

// run runs cmd and returns its standard output; a failure carries its
// standard error.
func run(cmd *exec.Cmd) ([]byte, error) {
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %w\n%s", cmd, err, stderr.String())
	}
	return out, nil
}

// flagLine matches a flag in the usage the flag package prints for --help.
var flagLine = regexp.MustCompile(`(?m)^  -([A-Za-z0-9][A-Za-z0-9._-]*)`)

// definedFlags runs binary with args and --help and returns the names of
// its flags.
func definedFlags(binary string, args ...string) (map[string]bool, error) {
	cmd := exec.CommandContext(ctx, binary, append(args, "--help")...)
	var usage bytes.Buffer
	cmd.Stdout, cmd.Stderr = &usage, &usage
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s --help: %w\n%s", binary, err, usage.String())
	}
	flags := map[string]bool{}
	for _, m := range flagLine.FindAllStringSubmatch(usage.String(), -1) {
		flags[m[1]] = true
	}
	if len(flags) == 0 {
		return nil, fmt.Errorf("%s --help listed no flags:\n%s", binary, usage.String())
	}
	return flags, nil
}
