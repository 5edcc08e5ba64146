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
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// apiServerOutage kills the kube-apiserver with SIGKILL, as a crashed
// control-plane node would, keeps it down for downtime, and starts it again
// on the same etcd, port and certificates. It returns once the API server
// is healthy again.
func apiServerOutage(downtime time.Duration) {
	GinkgoHelper()
	apiServer := testEnv.ControlPlane.APIServer
	pid := apiServerPID(apiServer.CertDir)
	Expect(syscall.Kill(pid, syscall.SIGKILL)).To(Succeed())
	// Stop succeeds once envtest has seen the process exit.
	Eventually(apiServer.Stop).Should(Succeed())
	time.Sleep(downtime)
	Expect(apiServer.Start()).To(Succeed())
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
