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

package main

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// peerScript is the OpenClaw command queue port the --peer mode runs.
//
//go:embed peer/openclaw-queue.js
var peerScript []byte

// comparison is the line --peer prints: each side's tasks/s per round, in
// the order they ran, their medians, and ours divided by the peer's; then
// the same for the CPU time each side spent per task (all threads, user
// and system), which a loaded machine disturbs less than the wall clock:
// cpu_ratio is the peer's CPU per task divided by ours.
type comparison struct {
	Workload    string    `json:"workload"`
	Tasks       int       `json:"tasks"`
	Rounds      int       `json:"rounds"`
	Ours        []float64 `json:"ours_tasks_per_sec"`
	Peer        []float64 `json:"peer_tasks_per_sec"`
	OursMedian  float64   `json:"ours_median"`
	PeerMedian  float64   `json:"peer_median"`
	Ratio       float64   `json:"ratio"`
	OursCPU     []float64 `json:"ours_cpu_us_per_task"`
	PeerCPU     []float64 `json:"peer_cpu_us_per_task"`
	CPURatio    float64   `json:"cpu_ratio"`
	LoadAverage string    `json:"load_average,omitempty"`
	Node        string    `json:"node"`
}

// compare runs the workload rounds times here and rounds times in the peer,
// alternately, so both see the same machine load.
func compare(workload string, tasks, sessions, rounds int) error {
	switch workload {
	case "single", "lanes", "sessions":
	default:
		return fmt.Errorf("--peer compares the single, lanes and sessions workloads, not %q", workload)
	}
	if rounds < 1 {
		return errors.New("--rounds must be at least 1")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return fmt.Errorf("--peer runs the OpenClaw queue port with Node.js, and no node is on PATH (install Node.js 18 or later): %w", err)
	}
	version, err := exec.Command(node, "--version").Output()
	if err != nil {
		return fmt.Errorf("%s --version: %w", node, err)
	}
	dir, err := os.MkdirTemp("", "lanebench-peer-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "openclaw-queue.js")
	if err := os.WriteFile(script, peerScript, 0o600); err != nil {
		return err
	}
	tasks = orDefault(tasks, 100_000)
	c := comparison{Workload: workload, Tasks: tasks, Rounds: rounds, Node: strings.TrimSpace(string(version))}
	for range rounds {
		runtime.GC() // start from the same heap every round
		r, err := run(workload, tasks, sessions)
		if err != nil {
			return err
		}
		c.Ours = append(c.Ours, r.TasksPerSec)
		c.OursCPU = append(c.OursCPU, r.CPUSeconds*1e6/float64(tasks))
		p, err := runPeer(node, script, workload, tasks, sessions)
		if err != nil {
			return err
		}
		c.Peer = append(c.Peer, p.TasksPerSec)
		c.PeerCPU = append(c.PeerCPU, p.CPUSeconds*1e6/float64(tasks))
	}
	c.OursMedian, c.PeerMedian = median(c.Ours), median(c.Peer)
	c.Ratio = c.OursMedian / c.PeerMedian
	if ours := median(c.OursCPU); ours > 0 {
		c.CPURatio = median(c.PeerCPU) / ours
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			c.LoadAverage = strings.Join(f[:3], " ")
		}
	}
	out, _ := json.Marshal(c)
	fmt.Println(string(out))
	return nil
}

func runPeer(node, script, workload string, tasks, sessions int) (report, error) {
	cmd := exec.Command(node, script, "--workload="+workload,
		"--tasks="+strconv.Itoa(tasks), "--sessions="+strconv.Itoa(sessions))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return report{}, fmt.Errorf("peer %s: %w", workload, err)
	}
	var r report
	if err := json.Unmarshal(out, &r); err != nil || r.TasksPerSec <= 0 || r.Tasks != tasks {
		return report{}, fmt.Errorf("peer %s printed %q", workload, out)
	}
	return r, nil
}

func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
