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
	"fmt"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/agentlane/agentlane/internal/testenv"
)

// process is a manager or worker process started by the suite.
type process struct {
	*testenv.Process
	name string
}

// startProcess starts bin with args, authenticated by kubeconfig; its
// output goes to a log file, shown when a spec fails. The spec stops the
// process when it ends.
func startProcess(name, bin, kubeconfig string, args ...string) *process {
	GinkgoHelper()
	logPath := filepath.Join(workDir, fmt.Sprintf("%s-%d.log", name, time.Now().UnixNano()))
	tp, err := testenv.StartProcess(logPath, bin, kubeconfig, args...)
	Expect(err).NotTo(HaveOccurred())
	p := &process{Process: tp, name: name}
	DeferCleanup(func() {
		p.stop()
		if CurrentSpecReport().Failed() {
			GinkgoWriter.Printf("---- log of %s ----\n%s\n", name, p.logTail())
		}
	})
	return p
}

// exited tells whether the process has exited.
func (p *process) exited() bool { return p.Exited() }

// kill ends the process at once, as a crashed pod or a lost node would.
func (p *process) kill() { p.Kill() }

// terminate sends SIGTERM and returns without waiting.
func (p *process) terminate() { p.Terminate() }

// stop sends SIGTERM and waits, killing the process after 20s.
func (p *process) stop() { p.Stop(20 * time.Second) }

// logTail returns the end of the process log.
func (p *process) logTail() string { return p.LogTail(6000) }

// startManager starts a manager process without the Session API, electing
// a leader when leaderElect is set.
func startManager(name string, leaderElect bool) *process {
	GinkgoHelper()
	args := []string{"--metrics-bind-address=0", "--health-probe-bind-address=0", "--session-api-bind-address=0"}
	if leaderElect {
		args = append(args, "--leader-elect", "--leader-election-namespace="+leaderNamespace)
	}
	return startProcess(name, managerBin, managerKubeconfig, args...)
}

// leaderElectionID names the managers' leader-election Lease (cmd/manager).
const leaderElectionID = "manager.agentlane.io"

// Worker timing: quick heartbeats (a Lease lapses after a few hundred
// milliseconds of silence) keep the scenarios that lose workers short.
const workerHeartbeat = "300ms"

// workerSpec names one worker of a scenario's pool: its identity, node, and
// the file its tasks append their names to.
type workerSpec struct {
	name, node, runLog string
	capacity           int
}

// startWorker starts the worker process for w serving namespace ns. Its
// tasks see the run log as $CHAOS_RUNLOG; a restarted worker (same name)
// appends to the same file.
func startWorker(ns string, w workerSpec, grace time.Duration) *process {
	GinkgoHelper()
	return startProcess(w.name, workerBin, workerKubeconfig,
		"--name="+w.name, "--node-name="+w.node, "--namespace="+ns,
		fmt.Sprintf("--capacity=%d", w.capacity),
		"--heartbeat-interval="+workerHeartbeat, "--grace-period="+grace.String(),
		"--task-env=CHAOS_RUNLOG="+w.runLog)
}
