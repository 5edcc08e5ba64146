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

package worker

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/agentlane/agentlane/internal/testenv"
)

// The suite plays the manager: it creates ExternalTasks and writes their
// status directly, and checks what the worker under test does with them.
var (
	testEnv   *envtest.Environment
	cfg       *rest.Config
	k8sClient client.Client
	// suiteCtx lives as long as the suite.
	suiteCtx    context.Context
	cancelSuite context.CancelFunc
)

func TestWorker(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Worker Suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	suiteCtx, cancelSuite = context.WithCancel(context.Background())

	var err error
	testEnv, cfg, k8sClient, err = testenv.Start(Scheme())
	Expect(err).NotTo(HaveOccurred())

	SetDefaultEventuallyTimeout(10 * time.Second)
	SetDefaultEventuallyPollingInterval(50 * time.Millisecond)
	SetDefaultConsistentlyDuration(500 * time.Millisecond)
	SetDefaultConsistentlyPollingInterval(50 * time.Millisecond)
})

var _ = AfterSuite(func() {
	cancelSuite()
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})
