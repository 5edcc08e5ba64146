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
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// apiServerOutage kills the kube-apiserver with SIGKILL, as a crashed
// control-plane node would, keeps it down for downtime, and starts it again
// on the same etcd, port and certificates. It returns when it killed it and
// when the API server answered again (envtest polls its /healthz every
// 100ms).
func apiServerOutage(downtime time.Duration) (killed, back time.Time) {
	GinkgoHelper()
	apiServer := testEnv.ControlPlane.APIServer
	pid := apiServerPID(apiServer.CertDir)
	Expect(syscall.Kill(pid, syscall.SIGKILL)).To(Succeed())
	killed = time.Now()
	// Stop succeeds once envtest has seen the process exit.
	Eventually(apiServer.Stop).Should(Succeed())
	time.Sleep(downtime)
	// A loaded two-core machine can take longer than envtest's default to
	// start it.
	apiServer.StartTimeout = 2 * time.Minute
	Expect(apiServer.Start()).To(Succeed())
	return killed, time.Now()
}

// timeOfDay formats the timeline of a scenario, to compare with the
// processes' logs.
const timeOfDay = "15:04:05.000"

// dispatchGapBound bounds the time from the API server answering again
// (its /healthz) to the first dispatch, with one manager or two. It holds
// the API server's own warm-up: a restarted API server answers writes of
// custom resources with "retry after 1s" until their storage is ready,
// which takes from a few hundred milliseconds to several seconds after its
// /healthz on a loaded two-core machine.
const dispatchGapBound = 6 * time.Second

// outageScenario runs the API server scenario: the tasks in flight, the API
// server down for downtime, and the time from its return to the first
// dispatch measured and bounded. leaderElect tells that the managers elect
// a leader, which may change during the outage.
func outageScenario(title string, downtime time.Duration, leaderElect bool) {
	GinkgoHelper()
	s := newScenario(title)
	s.startPool(workerGrace)
	s.submit()
	s.waitForProgress(faultAfter)
	// Writes after the marker, seen by the watch once the API server went
	// down, were made after it came back.
	marker := writeMarker(s.ns)
	killed, back := apiServerOutage(downtime)
	served := tasksWritable(s.ns, s.tasks[0].name)
	r := s.audit(s.drain(), leaderElect)
	first, ok := s.watch.firstDispatch(marker, killed.Add(time.Second))
	Expect(ok).To(BeTrue(), "a task was dispatched after the API server came back")
	r.gap = max(first.Sub(back), 0)
	AddReportEntry(title+": timeline", fmt.Sprintf("API server killed %s; answering again (/healthz) %s, +%s; tasks writable +%s; first dispatch +%s (%s after tasks writable); Lease held by %q",
		killed.Format(timeOfDay), back.Format(timeOfDay), back.Sub(killed).Round(time.Millisecond),
		served.Sub(back).Round(time.Millisecond), r.gap.Round(time.Millisecond), first.Sub(served).Round(time.Millisecond), leaseHolder()),
		ReportEntryVisibilityAlways)
	report(r)
	Expect(r.gap).To(BeNumerically("<", dispatchGapBound), "the first dispatch after the API server answered again")
}

// tasksWritable returns when the API server first accepted a write of the
// ExternalTask ns/name (an annotation), trying every 50ms with a short
// timeout: client-go would otherwise sleep the second its "retry after"
// answers ask for.
func tasksWritable(ns, name string) time.Time {
	GinkgoHelper()
	probe := &agentlanev1alpha1.ExternalTask{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"chaos.agentlane.io/probe":"written"}}}`))
	Eventually(func() error {
		ctx, cancel := context.WithTimeout(suiteCtx, 250*time.Millisecond)
		defer cancel()
		return k8sClient.Patch(ctx, probe.DeepCopy(), patch)
	}, time.Minute, 50*time.Millisecond).Should(Succeed())
	return time.Now()
}

// apiServerPID finds the kube-apiserver process that envtest started with
// certDir, the suite's own certificate directory.
func apiServerPID(certDir string) int {
	GinkgoHelper()
	entries, err := os.ReadDir("/proc")
	Expect(err).NotTo(HaveOccurred())
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if filepath.Base(args[0]) == "kube-apiserver" && strings.Contains(string(b), "--cert-dir="+certDir) {
			return pid
		}
	}
	Fail("no kube-apiserver process with --cert-dir=" + certDir)
	return 0
}
