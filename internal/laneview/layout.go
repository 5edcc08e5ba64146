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
	"strconv"
)

// noLimit is the bodyLimit of a section that may take all the lines it has.
const noLimit = -1

// layout writes the sections under the lines already written. Without a
// height each section is written whole. With one, every section first
// shows its rule line, then the remaining rows are shared by fitSections,
// and a section that gets fewer rows than it has writes that many: its
// first rows and a last line "… N more" (the lists keep the selected task in
// view and say how many rows are above and below). When not even the rules
// fit, the dashboard is cut to the height and its last line says how many
// lines are left out.
func (d *dashboard) layout(sections ...func()) {
	if d.opts.Height <= 0 {
		for _, write := range sections {
			d.add(d.write(write, noLimit)...)
		}
		return
	}
	demand := make([]int, len(sections))
	rules := 0
	for i, write := range sections {
		if lines := d.write(write, noLimit); len(lines) > 0 {
			rules++
			demand[i] = len(lines) - 1
		}
	}
	shares := fitSections(demand, d.opts.Height-len(d.lines)-rules)
	for i, write := range sections {
		if lines := d.write(write, shares[i]); len(lines) > 0 {
			d.add(lines[0])
			d.add(fitLines(lines[1:], shares[i])...)
		}
	}
	d.lines = fitLines(d.lines, d.opts.Height)
}

// write runs one section's writer with a limit on the lines under its rule
// and returns the lines it wrote, leaving d.lines as it was.
func (d *dashboard) write(section func(), bodyLimit int) []line {
	before := len(d.lines)
	d.bodyLimit = bodyLimit
	section()
	d.bodyLimit = noLimit
	lines := slices.Clone(d.lines[before:])
	d.lines = d.lines[:before]
	return lines
}

// listLimit is how many of a list's n rows its section shows: at most
// MaxRows, and within the body limit, keeping a line for "… N more" when the
// list does not fit.
func (d *dashboard) listLimit(n int) int {
	limit := d.opts.MaxRows
	if d.bodyLimit == noLimit || n <= min(limit, d.bodyLimit) {
		return limit
	}
	return max(min(limit, d.bodyLimit-1), 0)
}

// fitLines cuts lines to at most n, the last of them then saying how many
// lines were left out. n <= 0 keeps nothing.
func fitLines(lines []line, n int) []line {
	if len(lines) <= n {
		return lines
	}
	if n <= 0 {
		return nil
	}
	kept := slices.Clone(lines[:n-1])
	return append(kept, line{{text: "  … " + strconv.Itoa(len(lines)-n+1) + " more", style: dim}})
}

// fitSections shares rows among sections that want demand[i] rows each:
// all of them when they fit; otherwise each gets the same share, and what
// the sections that want less than their share leave over goes to the
// others, in equal parts (the earlier sections get the odd rows). No
// section gets more than it wants, nor less than 0.
func fitSections(demand []int, rows int) []int {
	shares := make([]int, len(demand))
	rows = max(rows, 0)
	open := 0
	for _, want := range demand {
		if want > 0 {
			open++
		}
	}
	for rows > 0 && open > 0 {
		share, extra := rows/open, rows%open
		given := 0
		for i, want := range demand {
			if shares[i] >= want {
				continue
			}
			add := share
			if extra > 0 && share == 0 {
				add, extra = 1, extra-1
			}
			add = min(add, want-shares[i])
			shares[i] += add
			given += add
			if shares[i] >= want {
				open--
			}
		}
		if given == 0 {
			break
		}
		rows -= given
	}
	return shares
}
