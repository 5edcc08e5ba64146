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
	"time"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"

	"k8s.io/utils/clock"
)

// DashboardOptions tune RenderDashboard.
type DashboardOptions struct {
	// Now is the moment elapsed times are measured to. Required.
	Now time.Time
	// Width cuts every line to this many runes; 0 leaves lines whole.
	Width int
	// Color writes ANSI colours.
	Color bool
	// Selected names the task of the detail pane, as namespace/name or a
	// bare name; empty selects Snapshot.DefaultTask.
	Selected string
	// MaxRows is how many rows each list (SESSIONS, IN-FLIGHT, QUEUED,
	// RECENT) shows at most; a list scrolls to keep the selected task in
	// view. 0 means 10.
	MaxRows int
	// Height is how many lines the dashboard may take; 0 leaves it as long
	// as its sections are. Sections that do not fit share the rows (see
	// fitSections) and end with a "… N more" line.
	Height int
}

// indent starts the rows of the lists; a selection marker takes its place.
var indent = line{{text: "  "}}

// ruleWidth is the length of section rules when the width is not limited.
const ruleWidth = 72

// glyphs of the terminal phases, as RECENT shows them.
var phaseGlyphs = map[agentlanev1alpha1.ExternalTaskPhase]span{
	agentlanev1alpha1.ExternalTaskSucceeded:    {text: "✓", style: green},
	agentlanev1alpha1.ExternalTaskFailed:       {text: "✗", style: red},
	agentlanev1alpha1.ExternalTaskTimedOut:     {text: "⧖", style: red},
	agentlanev1alpha1.ExternalTaskDeadLettered: {text: "☠", style: magenta},
	agentlanev1alpha1.ExternalTaskCancelled:    {text: "⊘", style: dim},
}

// Selected is the task the detail pane shows for the selection sel: the
// task Find returns, or DefaultTask when sel is empty. Nil when sel names no
// task.
func (s *Snapshot) Selected(sel string) *Task {
	if sel == "" {
		return s.DefaultTask()
	}
	return s.Find(sel)
}

// RenderDashboard writes the full view of the snapshot: a header, then the
// sections QUEUES (each queue and its lanes, with caps and counters),
// SESSIONS, IN-FLIGHT (elapsed time, worker, payload preview), QUEUED,
// RECENT (the last RecentLimit finished, newest first, with outcome glyphs)
// and the detail pane of the selected task (identity, session, state,
// payload, lifecycle timestamps, result and output). Sections are set off by
// rule lines, never by blank lines, so frames written one after the other
// can be told apart by the blank line between them.
func RenderDashboard(w io.Writer, snap *Snapshot, opts DashboardOptions) error {
	d := dashboard{snap: snap, opts: opts, selected: snap.Selected(opts.Selected), bodyLimit: noLimit}
	if d.opts.MaxRows <= 0 {
		d.opts.MaxRows = 10
	}
	if d.opts.Now.IsZero() {
		d.opts.Now = clock.RealClock{}.Now()
	}
	d.header()
	d.layout(d.queues, d.sessions, d.inFlight, d.queued, d.recent, d.detail)
	var b strings.Builder
	for _, l := range d.lines {
		l.render(&b, opts.Width, opts.Color)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

type dashboard struct {
	snap     *Snapshot
	opts     DashboardOptions
	selected *Task
	lines    []line
	// bodyLimit is how many lines the section being written may add
	// under its rule; negative means no limit.
	bodyLimit int
}

func (d *dashboard) add(l ...line) {
	d.lines = append(d.lines, l...)
}

func (d *dashboard) header() {
	scope := "all namespaces"
	if d.snap.Namespace != "" {
		scope = "namespace " + d.snap.Namespace
	}
	d.add(line{
		{text: "agentlane", style: bold},
		{text: " · " + scope + " · " + timestamp(d.opts.Now), style: dim},
	})
}

// rule is a section heading: "── TITLE (detail) ────…".
func (d *dashboard) rule(title, detail string) {
	l := line{{text: "── ", style: dim}, newSpan(title, heading)}
	if detail != "" {
		l = append(l, newSpan(" "+detail, plain))
	}
	width := ruleWidth
	if d.opts.Width > 0 {
		width = d.opts.Width
	}
	if fill := width - l.width() - 1; fill > 0 {
		l = append(l, span{text: " " + strings.Repeat("─", fill), style: dim})
	}
	d.add(l)
}

func (d *dashboard) none(text string) {
	d.add(line{{text: "  " + text, style: dim}})
}

func (d *dashboard) queues() {
	d.rule("QUEUES", "("+strconv.Itoa(len(d.snap.Queues))+")")
	if len(d.snap.Queues) == 0 {
		d.none("no LaneQueues")
		return
	}
	t := table{}
	for _, q := range d.snap.Queues {
		t.add(indent, newSpan(d.snap.name(q.Namespace, q.Name), bold), span{}, span{},
			span{text: "●" + itoa(int64(q.Active)) + "/" + capText(q.Capacity), style: activeStyle(q.Active)}, span{},
			span{text: "○" + itoa(int64(q.Pending))},
			span{text: "✓" + itoa(q.Completed), style: green},
			span{text: "✗" + itoa(q.Failed), style: failedStyle(q.Failed)},
			span{text: "☠" + itoa(q.DeadLettered), style: deadStyle(q.DeadLettered)},
			cancelled(q.Cancelled),
			queueNote(q))
		for _, l := range q.Lanes {
			perSession := span{}
			if l.MaxConcurrencyPerSession > 0 {
				perSession.text = itoa(int64(l.MaxConcurrencyPerSession)) + "/session"
			}
			laneCap := Unlimited
			if l.MaxConcurrency > 0 {
				laneCap = l.MaxConcurrency
			}
			note := span{}
			if l.Isolated {
				note = span{text: "isolated", style: dim}
			}
			t.add(indent, newSpan("  "+l.Name, plain),
				span{text: "P" + itoa(int64(l.Priority)), style: dim},
				newSpan(string(l.Mode), dim),
				span{text: "●" + itoa(int64(l.Active)) + "/" + capText(laneCap), style: activeStyle(l.Active)},
				perSession,
				span{text: "○" + itoa(int64(l.Pending))},
				span{text: "✓" + itoa(l.Completed), style: green},
				span{text: "✗" + itoa(l.Failed), style: failedStyle(l.Failed)},
				span{text: "☠" + itoa(l.DeadLettered), style: deadStyle(l.DeadLettered)},
				cancelled(l.Cancelled),
				note)
		}
	}
	d.add(t.lines()...)
}

// queueNote says whether the queue is ready, how many sessions use it and
// whether it is under pressure.
func queueNote(q Queue) span {
	var parts []string
	st := dim
	switch q.Ready {
	case "True":
		parts = append(parts, "ready")
	case "":
		parts = append(parts, "no status yet")
	default:
		parts = append(parts, "not ready: "+q.NotReadyReason)
		st = red
	}
	sessions := itoa(int64(q.Sessions)) + " session"
	if q.Sessions != 1 {
		sessions += "s"
	}
	parts = append(parts, sessions)
	if q.Pressure != "" {
		parts = append(parts, "pressure: "+q.Pressure)
		st = yellow
	}
	return newSpan(strings.Join(parts, " · "), st)
}

func cancelled(n int64) span {
	if n == 0 {
		return span{}
	}
	return span{text: "⊘" + itoa(n), style: dim}
}

func deadStyle(n int64) style {
	if n > 0 {
		return magenta
	}
	return plain
}

func (d *dashboard) sessions() {
	d.rule("SESSIONS", "("+strconv.Itoa(len(d.snap.Sessions))+")")
	if len(d.snap.Sessions) == 0 {
		d.none("no AgentSessions")
		return
	}
	start, end := window(len(d.snap.Sessions), -1, d.listLimit(len(d.snap.Sessions)))
	t := table{}
	for _, s := range d.snap.Sessions[start:end] {
		dead, messages := span{}, span{}
		if s.DeadLettered > 0 {
			dead = span{text: "☠" + itoa(s.DeadLettered), style: magenta}
		}
		if s.QueuedMessages > 0 {
			messages = span{text: itoa(int64(s.QueuedMessages)) + " messages queued", style: dim}
		}
		t.add(indent, newSpan(d.snap.name(s.Namespace, s.Name), bold),
			newSpan(s.Queue, dim),
			newSpan(orDash(string(s.Phase)), sessionStyle(s.Phase)),
			newSpan(orDash(s.Node), plain),
			newSpan(s.Identity.TenantID, dim),
			span{text: "●" + itoa(int64(s.Active)), style: activeStyle(s.Active)},
			span{text: "○" + itoa(int64(s.Pending))},
			span{text: "✓" + itoa(s.Completed), style: green},
			span{text: "✗" + itoa(s.Failed), style: failedStyle(s.Failed)},
			dead, messages)
	}
	d.add(t.lines()...)
	d.more(len(d.snap.Sessions), start, end)
}

func sessionStyle(p agentlanev1alpha1.SessionPhase) style {
	switch p {
	case agentlanev1alpha1.SessionActive:
		return green
	case agentlanev1alpha1.SessionFailed:
		return red
	case agentlanev1alpha1.SessionPassivating, agentlanev1alpha1.SessionResuming:
		return yellow
	}
	return dim
}

// more notes the rows a list left out.
func (d *dashboard) more(n, start, end int) {
	var parts []string
	if start > 0 {
		parts = append(parts, strconv.Itoa(start)+" above")
	}
	if end < n {
		parts = append(parts, strconv.Itoa(n-end)+" below")
	}
	if len(parts) > 0 {
		d.none("… " + strings.Join(parts, ", "))
	}
}

// window is the part [start, end) of a list of n rows that shows at most
// limit rows and includes row sel (when sel >= 0).
func window(n, sel, limit int) (start, end int) {
	if n <= limit {
		return 0, n
	}
	if limit <= 0 {
		return 0, 0
	}
	if sel >= limit {
		start = sel - limit + 1
	}
	return start, start + limit
}

// internal is how many more commands the queues count than there are
// tasks: the commands of Internal lanes, which have no objects.
func internal(count int32, tasks int) string {
	if n := int(count) - tasks; n > 0 {
		return " + " + strconv.Itoa(n) + " internal"
	}
	return ""
}

func (d *dashboard) inFlight() {
	var active int32
	for _, q := range d.snap.Queues {
		active += q.Active
	}
	list := d.snap.InFlight
	d.rule("IN-FLIGHT", "("+strconv.Itoa(len(list))+internal(active, len(list))+")")
	if len(list) == 0 {
		d.none("no tasks running")
		return
	}
	start, end := window(len(list), d.index(list), d.listLimit(len(list)))
	t := table{}
	for _, x := range list[start:end] {
		state := string(x.Phase)
		if x.Attempt > 1 {
			state += " #" + itoa(int64(x.Attempt))
		}
		if x.Result != nil && !x.Result.Success {
			// The worker reported a failure; the operator has yet to
			// decide between a retry and the end.
			state += " (failed)"
		}
		t.add(d.marker(x), newSpan(shortName(x.Name), bold), newSpan(x.CommandType, plain), newSpan(d.lane(x), dim),
			newSpan(orDash(x.Session), plain), newSpan(state, yellow), newSpan(where(x), plain),
			span{text: age(d.opts.Now.Sub(x.since()))}, newSpan(payloadPreview(x.Payload), dim))
	}
	d.add(t.lines()...)
	d.more(len(list), start, end)
}

func (d *dashboard) queued() {
	var pending int32
	for _, q := range d.snap.Queues {
		pending += q.Pending
	}
	list := d.snap.Queued
	d.rule("QUEUED", "("+strconv.Itoa(len(list))+internal(pending, len(list))+")")
	if len(list) == 0 {
		d.none("no tasks waiting")
		return
	}
	start, end := window(len(list), d.index(list), d.listLimit(len(list)))
	t := table{}
	for _, x := range list[start:end] {
		state := string(x.Phase)
		if state == "" {
			state = "New"
		}
		if x.Attempt > 1 {
			state += " #" + itoa(int64(x.Attempt))
		}
		t.add(d.marker(x), newSpan(shortName(x.Name), bold), newSpan(x.CommandType, plain), newSpan(d.lane(x), dim),
			newSpan(orDash(x.Session), plain), newSpan(state, dim),
			span{text: "waiting " + age(d.opts.Now.Sub(x.since()))}, newSpan(payloadPreview(x.Payload), dim))
	}
	d.add(t.lines()...)
	d.more(len(list), start, end)
}

func (d *dashboard) recent() {
	list := d.snap.recent()
	detail := "(" + strconv.Itoa(len(list))
	if len(d.snap.Finished) > len(list) {
		detail += " of " + strconv.Itoa(len(d.snap.Finished))
	}
	d.rule("RECENT", detail+")")
	if len(list) == 0 {
		d.none("no tasks finished")
		return
	}
	start, end := window(len(list), d.index(list), d.listLimit(len(list)))
	t := table{}
	for _, x := range list[start:end] {
		took := span{}
		if !x.StartedAt.IsZero() && !x.Ended.IsZero() {
			took.text = "ran " + age(x.Ended.Sub(x.StartedAt))
		}
		t.add(append(d.marker(x), phaseGlyphs[x.Phase], span{text: " "}), newSpan(shortName(x.Name), bold), newSpan(x.CommandType, plain),
			newSpan(d.lane(x), dim), newSpan(where(x), plain), took,
			span{text: age(d.opts.Now.Sub(x.Ended)) + " ago", style: dim}, outcome(x))
	}
	d.add(t.lines()...)
	d.more(len(list), start, end)
}

// index is the position of the selected task in list, or -1.
func (d *dashboard) index(list []*Task) int {
	for i, t := range list {
		if t == d.selected {
			return i
		}
	}
	return -1
}

func (d *dashboard) marker(t *Task) line {
	if t == d.selected {
		return line{{text: "▸ ", style: bold}}
	}
	return indent
}

// lane is the task's lane, prefixed by its queue when the snapshot has
// several.
func (d *dashboard) lane(t *Task) string {
	if len(d.snap.Queues) > 1 {
		return t.Queue + "/" + t.Lane
	}
	return t.Lane
}

// where is the worker holding the task, and its node.
func where(t *Task) string {
	switch {
	case t.Worker != "" && t.Node != "":
		return t.Worker + "@" + t.Node
	case t.Worker != "":
		return t.Worker
	case t.Job != "":
		return "job " + t.Job
	}
	return "—"
}

// payloadPreview is the command of a bash-style payload, else the payload's
// JSON, on one line.
func payloadPreview(payload string) string {
	var p struct {
		Command string `json:"command"`
	}
	if err := unmarshal(payload, &p); err == nil && p.Command != "" {
		return preview(p.Command, 60)
	}
	return preview(payload, 60)
}

// outcome is a finished task's result in a few words: the first line of
// its output when it succeeded, its error when it did not.
func outcome(t *Task) span {
	r := t.Result
	switch {
	case t.Phase == agentlanev1alpha1.ExternalTaskSucceeded && r != nil:
		for _, text := range []string{r.Stdout, r.JSON} {
			if first := firstLine(text); first != "" {
				return newSpan(preview(first, 60), plain)
			}
		}
		return span{text: "ok", style: dim}
	case r != nil && r.Error != "":
		return newSpan(preview(firstLine(r.Error), 60), red)
	case len(t.Attempts) > 0 && t.Attempts[len(t.Attempts)-1].Error != "":
		return newSpan(preview(firstLine(t.Attempts[len(t.Attempts)-1].Error), 60), red)
	}
	return newSpan(strings.ToLower(string(t.Phase)), dim)
}

func firstLine(s string) string {
	for l := range strings.SplitSeq(s, "\n") {
		if strings.TrimSpace(l) != "" {
			return l
		}
	}
	return ""
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}
