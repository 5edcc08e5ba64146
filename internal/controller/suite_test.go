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

package controller

import (
	"context"
	"github.com/go-logr/logr"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/agentlane/agentlane/internal/budget"
	"github.com/agentlane/agentlane/internal/scheduling"
	"github.com/agentlane/agentlane/internal/testenv"
)

var (
	ctx        context.Context
	cancel     context.CancelFunc
	testEnv    *envtest.Environment
	k8sClient  client.Client
	schedulers *scheduling.Schedulers
	// controllers are the reconcilers Setup built.
	controllers *Controllers
	// reconciles counts the manager's reconciles per controller and object.
	reconciles = &reconcileLog{}
	// managerCache is the manager's cache, as the reconcilers read it.
	managerCache client.Reader
)

func TestControllers(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Controller suite")
}

var _ = BeforeSuite(func() {
	base := zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true))
	logf.SetLogger(logr.New(countingSink{LogSink: base.GetSink(), log: reconciles}))
	SetDefaultEventuallyTimeout(20 * time.Second)
	SetDefaultEventuallyPollingInterval(50 * time.Millisecond)

	ctx, cancel = context.WithCancel(context.Background())
	scheme := testenv.Scheme()
	var cfg *rest.Config
	var err error
	testEnv, cfg, k8sClient, err = testenv.Start(scheme)
	Expect(err).NotTo(HaveOccurred())

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Cache:                  CacheOptions(),
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	Expect(err).NotTo(HaveOccurred())
	managerCache = mgr.GetCache()
	schedulers = &scheduling.Schedulers{StatusInterval: 100 * time.Millisecond}
	budgets := &budget.Ledger{Publish: schedulers.Publish, Recorder: mgr.GetEventRecorder("agentlane-budget")}
	controllers, err = Setup(ctx, mgr, Shared{Schedulers: schedulers, Budgets: budgets})
	Expect(err).NotTo(HaveOccurred())
	// As cmd/manager wires them, without a Session API.
	Expect(schedulers.Bind(scheduling.Hooks{
		Observer:          scheduling.NoObserver,
		OnSessionActivity: controllers.Sessions.SessionActivity,
		Rebuild:           controllers.Tasks.Rebuild,
	})).To(Succeed())
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
})

var _ = AfterSuite(func() {
	cancel()
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})
