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

package laneview

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// TestDashboardFitsTheTerminal renders dashboards for terminals of several
// sizes: no frame is taller or wider than its terminal, every section keeps
// its rule while it can, and what is cut is counted.
func TestDashboardFitsTheTerminal(t *testing.T) {
	cases := map[string]struct {
		snap          *Snapshot
		width, height int
		selected      string
		// want are lines the frame must hold, in this order.
		want []string
		// absent are lines it must not hold.
		absent []string
	}{
		"80x24: the detail pane gives way to the lists": {
			snap: a3sSnapshot(), width: 80, height: 24,
			want: []string{
				rule("QUEUES (1)", 80),
				"    generate  P3  Internal  ●0/8   1/session  ○0  ✓0   ✗0  ☠0",
				"▸ build-2  bash  execute  reviewer-42  Running  worker-a@node-a  10s  make build",
				"  ✗ test-2  bash  execute  worker-a@node-a  ran 10s    1m40s ago  exit status 1",
				rule("TASK build-2", 80),
				"  state       Running · attempt 1 · for 10s",
				"  … 8 more",
			},
			absent: []string{"  result      —"},
		},
		"120x40: everything fits": {
			snap: a3sSnapshot(), width: 120, height: 40,
			want: []string{
				rule("QUEUES (1)", 120),
				"  identity    tenant acme-corp · principal user:42 · template reviewer-v3 · correlation req-9f2c",
				"  result      —",
			},
			absent: []string{"  … 1 more"},
		},
		"80x24 with many tasks: the list keeps the selected task in view": {
			snap: manySnapshot(), width: 80, height: 24, selected: "t6",
			want: []string{
				rule("IN-FLIGHT (8)", 80),
				"▸ t6  bash  q-team-a/execute  —  Running  w  6m00s  sleep 6",
				"  … 3 above, 1 below",
				rule("TASK team-a/t6", 80),
			},
			absent: []string{"  t0  bash  q-team-a/execute  —  Running  w  0s     sleep 0"},
		},
		"120x40 with many tasks: every task in flight is listed": {
			snap: manySnapshot(), width: 120, height: 40,
			want: []string{
				rule("IN-FLIGHT (8)", 120),
				"  job-task  bash  q-team-a/execute  —  Dispatched  job job-7  1d01h",
				"  result      —",
			},
			absent: []string{"  … 1 more"},
		},
		"30x8: the rules, and one row that counts what the queues leave out": {
			snap: a3sSnapshot(), width: 30, height: 8,
			want: []string{
				"agentlane · namespace default…",
				rule("QUEUES (1)", 30),
				"  … 5 more",
				rule("SESSIONS (1)", 30),
				"── IN-FLIGHT (2 + 1 internal)",
				rule("QUEUED (1)", 30),
				rule("RECENT (2)", 30),
				rule("TASK build-2", 30),
			},
			absent: []string{"  … 1 more"},
		},
		"40x5: fewer rows than rules": {
			snap: a3sSnapshot(), width: 40, height: 5,
			want: []string{
				"agentlane · namespace default · 2026-05…",
				rule("QUEUES (1)", 40),
				rule("SESSIONS (1)", 40),
				rule("IN-FLIGHT (2 + 1 internal)", 40),
				"  … 3 more",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var b strings.Builder
			if err := RenderDashboard(&b, tc.snap, DashboardOptions{
				Now: t0, Width: tc.width, Height: tc.height, Selected: tc.selected,
			}); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
			if len(lines) > tc.height {
				t.Errorf("%d lines for a terminal of %d rows:\n%s", len(lines), tc.height, b.String())
			}
			for _, l := range lines {
				if n := utf8.RuneCountInString(l); n > tc.width {
					t.Errorf("line of %d runes for %d columns: %q", n, tc.width, l)
				}
			}
			at := -1
			for _, w := range tc.want {
				i := slices.Index(lines, w)
				if i < 0 {
					t.Errorf("missing line %q in:\n%s", w, b.String())
					continue
				}
				if i < at {
					t.Errorf("line %q comes before the one wanted before it", w)
				}
				at = i
			}
			for _, a := range tc.absent {
				if slices.Contains(lines, a) {
					t.Errorf("unexpected line %q in:\n%s", a, b.String())
				}
			}
		})
	}
}

// rule is a section's rule line for a terminal of width columns.
func rule(title string, width int) string {
	return "── " + title + " " + strings.Repeat("─", width-utf8.RuneCountInString(title)-4)
}

func TestFitSections(t *testing.T) {
	cases := map[string]struct {
		demand []int
		rows   int
		want   []int
	}{
		"all fit":                      {demand: []int{5, 1, 2}, rows: 10, want: []int{5, 1, 2}},
		"the small keep theirs":        {demand: []int{5, 1, 2, 1, 2, 13}, rows: 16, want: []int{5, 1, 2, 1, 2, 5}},
		"equal shares, odd rows first": {demand: []int{9, 9, 9}, rows: 7, want: []int{3, 2, 2}},
		"empty sections get nothing":   {demand: []int{0, 4, 0, 4}, rows: 4, want: []int{0, 2, 0, 2}},
		"no rows":                      {demand: []int{3, 3}, rows: 0, want: []int{0, 0}},
		"negative rows":                {demand: []int{3, 3}, rows: -2, want: []int{0, 0}},
		"fewer rows than sections":     {demand: []int{3, 3, 3}, rows: 2, want: []int{1, 1, 0}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, fitSections(tc.demand, tc.rows)); diff != "" {
				t.Errorf("shares (-want,+got):\n%s", diff)
			}
		})
	}
}
