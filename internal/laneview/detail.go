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
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// detailLabelWidth aligns the values of the detail pane.
const detailLabelWidth = 12

func (d *dashboard) detail() {
	t := d.selected
	if t == nil {
		if d.opts.Selected != "" {
			d.rule("TASK", d.opts.Selected)
			d.none("not found")
		}
		return
	}
	d.rule("TASK", d.snap.name(t.Namespace, t.Name))
	d.state(t)
	d.placement(t)
	d.field("payload", line{newSpan(orDash(t.Payload), dim)})
	d.times(t)
	d.result(t)
	d.attempts(t)
}

// state is the detail's state line: phase, attempt, and how long the task
// has run or waited.
func (d *dashboard) state(t *Task) {
	state := line{newSpan(orDash(string(t.Phase)), phaseStyle(t.Phase))}
	if t.Attempt > 0 {
		state = append(state, span{text: " · attempt " + itoa(int64(t.Attempt))})
	}
	switch {
	case t.inFlight():
		state = append(state, span{text: " · for " + age(d.opts.Now.Sub(t.since()))})
	case !t.Phase.IsTerminal():
		state = append(state, span{text: " · waiting " + age(d.opts.Now.Sub(t.since()))})
	}
	d.field("state", state)
}

// placement is where the task is: queue and lane, session, identity, run,
// worker or Job.
func (d *dashboard) placement(t *Task) {
	queue := orDash(t.Queue) + " · lane " + orDash(t.Lane) + " · " + orDash(t.CommandType)
	d.field("queue", line{newSpan(queue, plain)})
	if t.Session != "" {
		session := line{newSpan(t.Session, bold)}
		if s := d.snap.session(t); s != nil {
			session = append(session, newSpan(" · "+orDash(string(s.Phase)), sessionStyle(s.Phase)))
			if s.Node != "" {
				session = append(session, newSpan(" on "+s.Node, plain))
			}
			if s.Pod != "" {
				session = append(session, newSpan(" · pod "+s.Pod, dim))
			}
		}
		d.field("session", session)
	}
	if id := identity(t.Identity); id != "" {
		d.field("identity", line{newSpan(id, plain)})
	}
	if t.RunID != "" {
		d.field("run", line{newSpan(t.RunID, dim)})
	}
	var worker []string
	if t.Worker != "" {
		worker = append(worker, t.Worker)
		if t.Node != "" {
			worker[0] += " on " + t.Node
		}
	}
	if t.Job != "" {
		worker = append(worker, "job "+t.Job)
	}
	if len(worker) > 0 {
		d.field("worker", line{newSpan(strings.Join(worker, " · "), plain)})
	}
}

// times is the detail's lifecycle timestamps.
func (d *dashboard) times(t *Task) {
	for _, ts := range []struct {
		label string
		at    time.Time
	}{
		{"created", t.Created}, {"queued", t.QueuedAt}, {"dispatched", t.DispatchedAt},
		{"started", t.StartedAt}, {"finished", firstSet(t.FinishedAt, t.Ended)},
	} {
		l := line{{text: timestamp(ts.at)}}
		if !ts.at.IsZero() {
			l = append(l, span{text: " (" + age(d.opts.Now.Sub(ts.at)) + " ago)", style: dim})
		}
		d.field(ts.label, l)
	}
}

// attempts lists the task's ended attempts.
func (d *dashboard) attempts(t *Task) {
	for _, a := range t.Attempts {
		l := line{newSpan(string(a.Outcome), red)}
		if a.Worker != "" {
			l = append(l, newSpan(" · "+a.Worker, plain))
			if a.NodeName != "" {
				l = append(l, newSpan(" on "+a.NodeName, plain))
			}
		}
		if a.FinishedAt != nil {
			l = append(l, span{text: " · " + timestamp(a.FinishedAt.Time), style: dim})
		}
		if a.Error != "" {
			l = append(l, newSpan(" · "+firstLine(a.Error), plain))
		}
		d.field("attempt "+itoa(int64(a.Attempt)), l)
	}
}

func (d *dashboard) result(t *Task) {
	r := t.Result
	if r == nil {
		d.field("result", line{{text: "—"}})
		return
	}
	l := line{{text: "ok", style: green}}
	if !r.Success {
		l = line{{text: "failed", style: red}}
	}
	if r.ExitCode != nil {
		l = append(l, span{text: " · exit " + itoa(int64(*r.ExitCode))})
	}
	if r.Truncated {
		l = append(l, span{text: " · output truncated", style: dim})
	}
	d.field("result", l)
	d.text("stdout", r.Stdout, 8, plain)
	d.text("stderr", r.Stderr, 4, yellow)
	d.text("output", r.JSON, 1, plain)
	d.text("error", r.Error, 4, red)
}

// text shows the last n lines of s, each on its own row.
func (d *dashboard) text(label, s string, n int, st style) {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if strings.TrimSpace(s) == "" {
		return
	}
	if len(lines) > n {
		d.field(label, line{{text: "… " + strconv.Itoa(len(lines)-n) + " earlier lines", style: dim}})
		label = ""
		lines = lines[len(lines)-n:]
	}
	for _, l := range lines {
		d.field(label, line{newSpan(l, st)})
		label = ""
	}
}

// field is one row of the detail pane: a label and its value.
func (d *dashboard) field(label string, value line) {
	pad := detailLabelWidth - utf8.RuneCountInString(label)
	l := line{{text: "  " + label + strings.Repeat(" ", max(pad, 1)), style: dim}}
	d.add(append(l, value...))
}

func phaseStyle(p agentlanev1alpha1.ExternalTaskPhase) style {
	switch p {
	case agentlanev1alpha1.ExternalTaskSucceeded:
		return green
	case agentlanev1alpha1.ExternalTaskRunning, agentlanev1alpha1.ExternalTaskDispatched:
		return yellow
	case agentlanev1alpha1.ExternalTaskFailed, agentlanev1alpha1.ExternalTaskTimedOut:
		return red
	case agentlanev1alpha1.ExternalTaskDeadLettered:
		return magenta
	}
	return bold
}

// identity is the identity labels that are set, in a few words.
func identity(id agentlanev1alpha1.Identity) string {
	var parts []string
	for _, p := range []struct{ label, value string }{
		{"tenant", id.TenantID}, {"principal", id.Principal},
		{"template", id.AgentTemplateID}, {"correlation", id.CorrelationID},
	} {
		if p.value != "" {
			parts = append(parts, p.label+" "+p.value)
		}
	}
	return strings.Join(parts, " · ")
}

// firstSet is the first of times that is set.
func firstSet(times ...time.Time) time.Time {
	for _, t := range times {
		if !t.IsZero() {
			return t
		}
	}
	return time.Time{}
}
