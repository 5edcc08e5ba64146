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
	"io"
	"strconv"
	"strings"
)

// StripOptions tune RenderStrip.
type StripOptions struct {
	// Width cuts the line to this many runes; 0 leaves it whole.
	Width int
	// Color writes ANSI colours.
	Color bool
}

// Strip is the one-line summary of the snapshot's queues, without a line
// break. Its form depends on the number of queues:
//
//	1:    a3s ●2/4 ○3 ✓14 ✗2 ☠1 last: build-7 (bash)
//	2-3:  a3s ●2/4 ○3 · batch ●0/1 ○0 last: build-7 (bash)
//	4+:   5 queues · ●3/8 ○12 ✓42 ✗3 last: build-7 (bash)
//
// ● is the number of commands running over the queue's capacity (∞ when
// unbounded), ○ those waiting, ✓ those that succeeded, ✗ those that failed
// for good and ☠ the dead letters (shown when there are any); all include
// the commands of Internal lanes. last names the most recently started
// ExternalTask still in flight, and its command type. The strip shows no
// times, so it changes only when the queues do.
func Strip(snap *Snapshot, opts StripOptions) string {
	var b strings.Builder
	stripLine(snap).render(&b, opts.Width, opts.Color)
	return strings.TrimSuffix(b.String(), "\n")
}

// RenderStrip writes Strip and a line break.
func RenderStrip(w io.Writer, snap *Snapshot, opts StripOptions) error {
	_, err := io.WriteString(w, Strip(snap, opts)+"\n")
	return err
}

func stripLine(snap *Snapshot) line {
	var l line
	switch n := len(snap.Queues); {
	case n == 0:
		text := "no LaneQueues"
		if snap.Namespace != "" {
			text += " in namespace " + snap.Namespace
		}
		return line{{text: text, style: dim}}
	case n == 1:
		q := snap.Queues[0]
		l = append(l, newSpan(snap.name(q.Namespace, q.Name), bold), span{text: " "})
		l = append(l, counts(q.Active, q.Capacity, q.Pending, q.Completed, q.Failed, q.DeadLettered, true)...)
	case n <= 3:
		for i, q := range snap.Queues {
			if i > 0 {
				l = append(l, span{text: " · ", style: dim})
			}
			l = append(l, newSpan(snap.name(q.Namespace, q.Name), bold), span{text: " "})
			l = append(l, counts(q.Active, q.Capacity, q.Pending, 0, 0, 0, false)...)
		}
	default:
		var total Queue
		for _, q := range snap.Queues {
			total.Active += q.Active
			total.Pending += q.Pending
			total.Completed += q.Completed
			total.Failed += q.Failed
			total.DeadLettered += q.DeadLettered
			if total.Capacity != Unlimited {
				total.Capacity += q.Capacity
				if q.Capacity == Unlimited {
					total.Capacity = Unlimited
				}
			}
		}
		l = append(l, span{text: strconv.Itoa(n) + " queues", style: bold}, span{text: " · ", style: dim})
		l = append(l, counts(total.Active, total.Capacity, total.Pending, total.Completed, total.Failed, total.DeadLettered, true)...)
	}
	if t := snap.Latest(); t != nil {
		l = append(l, span{text: " last: ", style: dim}, newSpan(shortName(t.Name), bold))
		if t.CommandType != "" {
			l = append(l, newSpan(" ("+t.CommandType+")", plain))
		}
	}
	return l
}

// counts are the strip's "●2/4 ○3" and, with outcomes, " ✓14 ✗2 ☠1".
func counts(active, capacity, pending int32, completed, failed, dead int64, outcomes bool) line {
	l := line{
		{text: "●" + strconv.Itoa(int(active)) + "/" + capText(capacity), style: activeStyle(active)},
		{text: " "},
		{text: "○" + strconv.Itoa(int(pending))},
	}
	if !outcomes {
		return l
	}
	l = append(l, span{text: " "}, span{text: "✓" + itoa(completed), style: green})
	l = append(l, span{text: " "}, span{text: "✗" + itoa(failed), style: failedStyle(failed)})
	if dead > 0 {
		l = append(l, span{text: " "}, span{text: "☠" + itoa(dead), style: magenta})
	}
	return l
}

func capText(c int32) string {
	if c == Unlimited {
		return "∞"
	}
	return strconv.Itoa(int(c))
}

func activeStyle(active int32) style {
	if active > 0 {
		return yellow
	}
	return plain
}

func failedStyle(failed int64) style {
	if failed > 0 {
		return red
	}
	return plain
}
