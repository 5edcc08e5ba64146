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
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// The fault strikes once this fraction of the tasks finished: the rest are
// running, dispatched or queued.
const faultAfter = 0.25

// workerGrace is the grace period of workers the scenario does not stop
// on purpose; they only stop when the spec ends.
const workerGrace = 5 * time.Second

var _ = Describe("Chaos", func() {
	It("loses nothing when half the workers are killed with SIGKILL", func() {
		startManager("manager", false)
		s := newScenario("SIGKILL half the workers")
		s.startPool(workerGrace)
		s.submit()
		s.waitForProgress(faultAfter)
		for _, w := range s.half() {
			s.procs[w.name].kill()
		}
		report(s.audit(s.drain(), false))
	})

	It("loses nothing when half the workers are killed with SIGKILL and restarted", func() {
		killAndRestartHalf("SIGKILL half the workers, restart them", 2*time.Second)
	})

	// The new processes usually take over their Leases before they lapse:
	// the attempts dispatched to the killed ones must be recorded, not run
	// again unseen.
	It("runs nothing unrecorded when half the workers are killed with SIGKILL and restarted at once", func() {
		killAndRestartHalf("SIGKILL half the workers, restart them at once", 0)
	})

	It("hands the work over when the leading manager is killed with SIGKILL", func() {
		leader := startManager("manager-a", true)
		Eventually(leaseHolder).ShouldNot(BeEmpty(), "manager-a leads")
		holder := leaseHolder()
		standby := startManager("manager-b", true)
		s := newScenario("SIGKILL the leading manager")
		s.startPool(workerGrace)
		s.submit()
		s.waitForProgress(faultAfter)
		Expect(leaseHolder()).To(Equal(holder), "manager-a still leads")
		leader.kill()
		marker := writeMarker(s.ns)
		Eventually(leaseHolder, time.Minute).ShouldNot(Equal(holder), "manager-b takes the lead")
		Expect(standby.exited()).To(BeFalse())
		r := s.audit(s.drain(), true)
		r.gap = s.watch.firstDispatchAfter(s.faultAt, marker)
		report(r)
	})

	It("loses nothing when the only manager is killed with SIGKILL and restarted", func() {
		m := startManager("manager", false)
		s := newScenario("SIGKILL the manager, restart it")
		s.startPool(workerGrace)
		s.submit()
		s.waitForProgress(faultAfter)
		m.kill()
		marker := writeMarker(s.ns)
		time.Sleep(time.Second)
		startManager("manager-restarted", false)
		r := s.audit(s.drain(), true)
		r.gap = s.watch.firstDispatchAfter(s.faultAt, marker)
		report(r)
	})

	It("loses nothing and runs nothing unrecorded through a 10s API server outage", func() {
		startManager("manager", false)
		outageScenario("API server down 10s", 10*time.Second, false)
	})

	// The leader cannot renew its Lease while the API server is down; one
	// of the two managers leads once it is back, and dispatches as soon as
	// one manager alone would.
	It("resumes dispatching soon after a 10s API server outage with two managers", func() {
		startManager("manager-a", true)
		Eventually(leaseHolder).ShouldNot(BeEmpty(), "manager-a leads")
		startManager("manager-b", true)
		outageScenario("API server down 10s, two managers", 10*time.Second, true)
	})

	It("lets workers stopped with SIGTERM finish their tasks within the grace period", func() {
		startManager("manager", false)
		s := newScenario("SIGTERM half the workers, 30s grace")
		s.startPool(30 * time.Second)
		s.submit()
		s.waitForProgress(faultAfter)
		victims := s.half()
		for _, w := range victims {
			s.procs[w.name].terminate()
		}
		for _, w := range victims {
			Eventually(s.procs[w.name].Done, time.Minute).Should(BeClosed())
		}
		report(s.audit(s.drain(), false))
	})

	It("records the interrupted runs of workers stopped with SIGTERM and no grace period", func() {
		startManager("manager", false)
		s := newScenario("SIGTERM half the workers, no grace")
		s.startPool(0)
		s.submit()
		s.waitForProgress(faultAfter)
		victims := s.half()
		for _, w := range victims {
			s.procs[w.name].terminate()
		}
		for _, w := range victims {
			Eventually(s.procs[w.name].Done, time.Minute).Should(BeClosed())
		}
		report(s.audit(s.drain(), false))
	})
})

// killAndRestartHalf runs the scenario title: half the workers are killed
// with SIGKILL and started again under the same names after pause.
func killAndRestartHalf(title string, pause time.Duration) {
	GinkgoHelper()
	startManager("manager", false)
	s := newScenario(title)
	s.startPool(workerGrace)
	s.submit()
	s.waitForProgress(faultAfter)
	victims := s.half()
	for _, w := range victims {
		s.procs[w.name].kill()
	}
	time.Sleep(pause)
	for _, w := range victims {
		s.startWorker(w, workerGrace)
	}
	report(s.audit(s.drain(), false))
}

// leaseHolder returns the holder of the managers' leader-election Lease.
func leaseHolder() string {
	lease := &coordinationv1.Lease{}
	if err := k8sClient.Get(suiteCtx, types.NamespacedName{Namespace: leaderNamespace, Name: leaderElectionID}, lease); err != nil {
		return ""
	}
	return ptr.Deref(lease.Spec.HolderIdentity, "")
}
