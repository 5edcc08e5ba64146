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
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/agentscript"
	"github.com/agentlane/agentlane/internal/laneview"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// checks counts the demo's checks as it prints them, each with a tick or a
// cross.
type checks struct{ failed int }

func (c *checks) expect(ok bool, format string, args ...any) {
	mark := "✓"
	if !ok {
		mark = "✗"
		c.failed++
	}
	fmt.Printf("    %s %s\n", mark, fmt.Sprintf(format, args...))
}

// check prints what the scripted sessions were to show.
func (r *sessionResults) check(ctx context.Context, d *demo, c *checks) {
	step("checks (the sessions took %s)", r.took.Round(100*time.Millisecond))
	expect := c.expect

	reviewer := r.reports["reviewer-42"]
	reads := commandsOf(reviewer, 0, "read", 1)
	expect(len(reads) == 3 && allIn(reads, sessionapi.StateSucceeded) && overlapping(reads),
		"reviewer-42: 3 reads ran in parallel on the runtime (Internal query lane): %s", states(reads))
	expect(r.orderLog == "build\ntest\npackage\n",
		"reviewer-42: build, test, package ran in submission order on the workers: order.log = %q", r.orderLog)
	flaky := commandsOf(reviewer, 1, "bash", 1)
	expect(len(flaky) == 1 && flaky[0].State == sessionapi.StateDeadLettered && flaky[0].Attempts == 4,
		"reviewer-42: the failing check was retried 3 times, then dead-lettered: %s", states(flaky))
	after := commandsOf(reviewer, 1, "read", 2)
	expect(len(after) == 1 && after[0].State == sessionapi.StateSucceeded,
		"reviewer-42: the session went on after the dead letter: %s", states(after))

	builder := r.reports["builder-7"]
	shards := commandsOf(builder, 0, "bash", 1)
	workers := d.workersOf(ctx, "builder-7")
	expect(len(shards) == 6 && allIn(shards, sessionapi.StateSucceeded) && len(workers) >= min(2, len(d.pool)),
		"builder-7: 6 shards ran as ExternalTasks on %d workers (%s): %s", len(workers), strings.Join(workers, ", "), states(shards))

	chat := r.reports["chat-9"]
	queued := 0
	for _, p := range r.posted {
		if p.Queued {
			queued++
		}
	}
	expect(queued == 1+len(burst) && len(chat.Turns) == 2 && chat.Turns[0].Messages == 1 && chat.Turns[1].Messages == len(burst),
		"chat-9: the first message started a turn at once; %d posted in a burst during it became one collect turn: %s", len(burst), turnSizes(chat))
}

// commandsOf returns the commands of type typ at step of turn.
func commandsOf(rep agentscript.Report, turn int, typ string, step int) []agentscript.CommandReport {
	if turn >= len(rep.Turns) {
		return nil
	}
	var out []agentscript.CommandReport
	for _, c := range rep.Turns[turn].Commands {
		if c.Type == typ && c.Step == step {
			out = append(out, c)
		}
	}
	return out
}

func allIn(cmds []agentscript.CommandReport, state string) bool {
	for _, c := range cmds {
		if c.State != state {
			return false
		}
	}
	return true
}

// overlapping tells whether every command was submitted before any of them
// finished, that is, they were all in flight at once.
func overlapping(cmds []agentscript.CommandReport) bool {
	var lastSubmit, firstFinish time.Time
	for i, c := range cmds {
		if i == 0 || c.Submitted.After(lastSubmit) {
			lastSubmit = c.Submitted
		}
		if i == 0 || c.Finished.Before(firstFinish) {
			firstFinish = c.Finished
		}
	}
	return len(cmds) > 0 && lastSubmit.Before(firstFinish)
}

func states(cmds []agentscript.CommandReport) string {
	var out []string
	for _, c := range cmds {
		s := c.State
		if c.Attempts > 1 {
			s += fmt.Sprintf(" after %d attempts", c.Attempts)
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return "none ran"
	}
	return strings.Join(out, ", ")
}

// turnSizes lists how many messages each turn of rep answered, such as
// "turns of 1, 5 messages".
func turnSizes(rep agentscript.Report) string {
	sizes := make([]string, len(rep.Turns))
	for i, t := range rep.Turns {
		sizes[i] = strconv.Itoa(t.Messages)
	}
	return "turns of " + strings.Join(sizes, ", ") + " messages"
}

// workersOf returns the workers that ran the session's ExternalTasks.
func (d *demo) workersOf(ctx context.Context, session string) []string {
	tasks := &agentlanev1alpha1.ExternalTaskList{}
	if err := d.client.List(ctx, tasks, client.InNamespace(namespace)); err != nil {
		return nil
	}
	var out []string
	for _, t := range tasks.Items {
		if t.Spec.SessionRef.Name == session && t.Status.Worker != "" && !slices.Contains(out, t.Status.Worker) {
			out = append(out, t.Status.Worker)
		}
	}
	slices.Sort(out)
	return out
}

// summarize prints the a3s queue's lanes as its scheduler counts them, the
// workers' counts from their metrics, and the sessions' turns.
func (d *demo) summarize(ctx context.Context, r *sessionResults) error {
	stats, err := d.api.Session(namespace, "reviewer-42").Stats(ctx)
	if err != nil {
		return fmt.Errorf("stats: %w", err)
	}
	step("summary of queue %s, per lane (from the Session API's stats)", stats.Queue)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "    LANE\tMODE\tCOMPLETED\tFAILED\tDEAD-LETTERED\tWAIT P50\tWAIT P99\tRUN P99")
	for _, l := range stats.Lanes {
		fmt.Fprintf(w, "    %s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\n", l.Name, l.Mode, l.Completed, l.Failed, l.DeadLettered,
			seconds(l.Wait.P50, l.Wait.Count), seconds(l.Wait.P99, l.Wait.Count), seconds(l.Run.P99, l.Run.Count))
	}
	w.Flush()

	step("summary per worker (from each worker's /metrics)")
	w = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "    WORKER\tNODE\tSTARTED\tSUCCEEDED\tFAILED\tLOST")
	for _, wp := range d.pool {
		m, err := scrape(ctx, wp.metrics)
		if err != nil {
			return fmt.Errorf("metrics of %s: %w", wp.name, err)
		}
		fmt.Fprintf(w, "    %s\t%s\t%.0f\t%.0f\t%.0f\t%.0f\n", wp.name, wp.node,
			m.value("agentlane_worker_tasks_started_total", ""),
			m.value("agentlane_worker_tasks_finished_total", "succeeded"),
			m.value("agentlane_worker_tasks_finished_total", "failed"),
			m.value("agentlane_worker_tasks_finished_total", "lost"))
	}
	w.Flush()

	step("summary per session (from the agents' reports)")
	w = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "    SESSION\tTURNS\tCOMMANDS\tSUCCEEDED\tOTHER")
	for _, s := range scriptedSessions {
		rep := r.reports[s.name]
		total, ok := 0, 0
		other := map[string]int{}
		for _, t := range rep.Turns {
			for _, c := range t.Commands {
				total++
				if c.State == sessionapi.StateSucceeded {
					ok++
				} else {
					other[c.State]++
				}
			}
		}
		var rest []string
		for state, n := range other {
			rest = append(rest, fmt.Sprintf("%d %s", n, state))
		}
		slices.Sort(rest)
		fmt.Fprintf(w, "    %s\t%d\t%d\t%d\t%s\n", s.name, len(rep.Turns), total, ok, strings.Join(rest, ", "))
	}
	return w.Flush()
}

// seconds formats a latency; a lane that saw nothing shows a dash.
func seconds(s float64, count uint64) string {
	if count == 0 {
		return "-"
	}
	d := time.Duration(s * float64(time.Second))
	if d < time.Millisecond {
		return d.Round(time.Microsecond).String()
	}
	return d.Round(100 * time.Microsecond).String()
}

// metricFamilies are the metrics one endpoint served.
type metricFamilies map[string]*dto.MetricFamily

// scrape reads a Prometheus text endpoint.
func scrape(ctx context.Context, addr string) (metricFamilies, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(resp.Body)
}

// value is the value of a counter or gauge, of its series whose only label
// has the value label ("" for a series without labels); 0 when absent.
func (m metricFamilies) value(name, label string) float64 {
	f, ok := m[name]
	if !ok {
		return 0
	}
	for _, s := range f.GetMetric() {
		if (label == "" && len(s.GetLabel()) == 0) || (len(s.GetLabel()) == 1 && s.GetLabel()[0].GetValue() == label) {
			if s.GetCounter() != nil {
				return s.GetCounter().GetValue()
			}
			return s.GetGauge().GetValue()
		}
	}
	return 0
}

// strip is the lanetop strip of the demo's queues that have sessions:
// running over capacity, pending, succeeded, failed, dead letters and the
// latest task in flight.
func (d *demo) strip(ctx context.Context) (string, error) {
	snap, err := laneview.Load(ctx, d.client, namespace)
	if err != nil {
		return "", err
	}
	snap.Queues = slices.DeleteFunc(snap.Queues, func(q laneview.Queue) bool { return q.Sessions == 0 })
	return laneview.Strip(snap, laneview.StripOptions{}), nil
}

// dashboard prints one frame of the lanetop dashboard, its detail pane on
// the task named selected.
func (d *demo) dashboard(ctx context.Context, selected string) error {
	snap, err := laneview.Load(ctx, d.client, namespace)
	if err != nil {
		return err
	}
	step("lanetop --view=dashboard --once --task=%s", selected)
	var b strings.Builder
	if err := laneview.RenderDashboard(&b, snap, laneview.DashboardOptions{
		Now: time.Now(), Width: 118, Selected: selected, MaxRows: 6,
	}); err != nil {
		return err
	}
	fmt.Print(indent(b.String()))
	return nil
}

// deadLettered returns the id of the first command of the reports that
// ended in the dead-letter queue.
func (r *sessionResults) deadLettered() string {
	for _, s := range scriptedSessions {
		for _, t := range r.reports[s.name].Turns {
			for _, c := range t.Commands {
				if c.State == sessionapi.StateDeadLettered {
					return c.ID
				}
			}
		}
	}
	return ""
}
