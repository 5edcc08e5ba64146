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
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{[]float64{3, 1, 2}, 2}, {[]float64{5}, 5}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestCompareRefusesOtherWorkloads(t *testing.T) {
	for _, w := range []string{"idle", "memory", "nope"} {
		if err := compare(w, 10, 10, 1); err == nil || !strings.Contains(err.Error(), "--peer compares") {
			t.Errorf("compare(%q) = %v, want a refusal", w, err)
		}
	}
}

// The peer runs every workload to the end and reports the tasks it ran.
func TestPeerRunsEachWorkload(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node on PATH")
	}
	script := filepath.Join("peer", "openclaw-queue.js")
	for _, w := range []string{"single", "lanes", "sessions"} {
		r, err := runPeer(node, script, w, 2000, 10)
		if err != nil {
			t.Fatalf("%s: %v", w, err)
		}
		if r.Tasks != 2000 || r.Workload != w {
			t.Errorf("%s: report %+v", w, r)
		}
	}
	if _, err := runPeer(node, script, "idle", 10, 10); err == nil {
		t.Error("the peer accepted an unknown workload")
	}
}

// The port keeps OpenClaw's caps, no more and no less: 4 tasks at once in
// a lane of single and lanes, 8 in the global lane of sessions and 1 per
// session.
func TestPeerKeepsTheCaps(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node on PATH")
	}
	for _, c := range []struct {
		workload             string
		maxLane, maxSessions int
	}{{"single", 4, 0}, {"lanes", 4, 0}, {"sessions", 8, 1}} {
		out, err := exec.Command(node, filepath.Join("peer", "openclaw-queue.js"), "--workload="+c.workload,
			"--tasks=3000", "--sessions=20", "--check=1").Output()
		if err != nil {
			t.Fatalf("%s: %v", c.workload, err)
		}
		var r struct {
			Tasks       int `json:"tasks"`
			MaxLane     int `json:"max_lane"`
			MaxSessions int `json:"max_session"`
		}
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("%s: %q: %v", c.workload, out, err)
		}
		if r.Tasks != 3000 || r.MaxLane != c.maxLane || r.MaxSessions != c.maxSessions {
			t.Errorf("%s: %+v, want at most %d per lane and %d per session, reached", c.workload, r, c.maxLane, c.maxSessions)
		}
	}
}
