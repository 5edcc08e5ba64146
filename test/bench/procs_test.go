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

package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/agentlane/agentlane/internal/testenv"
)

// process is a manager or worker process the benchmark started.
type process struct{ *testenv.Process }

// startProcess starts bin with args as the user of kubeconfig; its output
// goes to a log file in dir.
func startProcess(t *testing.T, dir, name, bin, kubeconfig string, args ...string) *process {
	t.Helper()
	p, err := testenv.StartProcess(filepath.Join(dir, name+".log"), bin, kubeconfig, args...)
	if err != nil {
		t.Fatal(err)
	}
	return &process{p}
}

// stop sends SIGTERM and kills the process if it has not exited after 20s.
func (p *process) stop() { p.Stop(20 * time.Second) }

// usage is what /proc says about a process at one moment.
type usage struct {
	at  time.Time
	cpu time.Duration // user + system time so far
	// children is the user + system time of the process's children that
	// ended and were waited for (a worker's task processes).
	children time.Duration
	rssBytes int64
}

// sample reads the process's CPU time and resident memory from /proc.
func (p *process) sample() (usage, error) { return sampleProc(p.Cmd.Process.Pid) }

// sampleProc reads the CPU time and resident memory of process pid from
// /proc.
func sampleProc(pid int) (usage, error) {
	u := usage{at: time.Now()}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, err
	}
	// Fields after the parenthesised command name; utime, stime, cutime
	// and cstime are the 14th to 17th fields of the line, in clock ticks
	// (100 per second).
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	u.cpu = time.Duration(utime+stime) * (time.Second / 100)
	cutime, _ := strconv.ParseInt(fields[13], 10, 64)
	cstime, _ := strconv.ParseInt(fields[14], 10, 64)
	u.children = time.Duration(cutime+cstime) * (time.Second / 100)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			u.rssBytes = kb << 10
		}
	}
	return u, nil
}

// cores is the CPU the process used between two samples, in cores.
func cores(a, b usage) float64 {
	return (b.cpu - a.cpu).Seconds() / b.at.Sub(a.at).Seconds()
}

// findProc returns the pid of the process whose command line has every one
// of args, or 0.
func findProc(args ...string) int {
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile("/proc/" + d.Name() + "/cmdline")
		if err != nil {
			continue
		}
		cmdline := strings.Split(string(raw), "\x00")
		found := 0
		for _, a := range args {
			for _, c := range cmdline {
				if c == a {
					found++
					break
				}
			}
		}
		if found == len(args) {
			return pid
		}
	}
	return 0
}

// goBuild builds the main package pkg of the repository into dir.
func goBuild(t *testing.T, dir, pkg string) string {
	t.Helper()
	out := filepath.Join(dir, filepath.Base(pkg))
	if err := testenv.GoBuild(filepath.Join("..", ".."), pkg, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// userKubeconfig creates user, bound to the ClusterRole in roleFile, and
// writes a kubeconfig of it into dir.
func userKubeconfig(t *testing.T, ctx context.Context, env *envtest.Environment, c client.Client, dir, user, roleFile string) string {
	t.Helper()
	path, err := testenv.User(ctx, env, c, dir, user, roleFile, "")
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// freeAddress returns a loopback address with a free port.
func freeAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
