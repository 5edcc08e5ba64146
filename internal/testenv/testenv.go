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

// Package testenv starts the envtest control plane that agentlane's suites
// run against: a real kube-apiserver and etcd, built by `make test` and
// found through $KUBEBUILDER_ASSETS, with agentlane's CRDs installed.
package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// Scheme returns a scheme that knows Kubernetes' built-in types and
// agentlane's.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(agentlanev1alpha1.AddToScheme(s))
	return s
}

// Option changes how Start sets up the control plane.
type Option func(*envtest.Environment)

// WithoutCRDs starts the control plane with no CRDs installed, for a suite
// that installs them itself (such as from the kustomize output).
func WithoutCRDs() Option {
	return func(env *envtest.Environment) {
		env.CRDDirectoryPaths = nil
		env.ErrorIfCRDPathMissing = false
	}
}

// Start starts the control plane with agentlane's CRDs installed and returns
// it with its config and an administrator's client using scheme. Stop the
// environment when done.
func Start(scheme *runtime.Scheme, opts ...Option) (*envtest.Environment, *rest.Config, client.Client, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, nil, nil, errors.New("KUBEBUILDER_ASSETS is not set: run the suite with `make test`, which builds the control plane")
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{crdDir()},
		ErrorIfCRDPathMissing: true,
	}
	for _, opt := range opts {
		opt(env)
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("start the control plane: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, nil, nil, errors.Join(fmt.Errorf("create a client: %w", err), env.Stop())
	}
	return env, cfg, c, nil
}

// crdDir is config/crd/bases of this repository, wherever the suite runs.
func crdDir() string {
	_, file, _, _ := goruntime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "config", "crd", "bases")
}
