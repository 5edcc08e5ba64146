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
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/lanequeue"
)

// row is what the audit of one scenario found: one line of the table.
type row struct {
	scenario                       string
	tasks, succeeded, deadLettered int
	stuck, lost                    int
	twiceKnown, twiceUnknown       int
	countedTwice, countedNeverRan  int
	// lostUnstarted counts the WorkerLost attempts whose worker never
	// reported starting them: recorded (the command may have run) and
	// marked notStarted, so that they do not count against the retries.
	lostUnstarted int
	// unstartedCounted counts the tasks where such an attempt was not
	// marked, or was counted against the retries all the same: a task
	// dead-lettered before its counted attempts reached maxRetries+1.
	unstartedCounted int
	drain, gap       time.Duration
	// problems describes each violation, for the failure message.
	problems []string
}

// rows collects the table of every scenario for the end of the suite.
var rows []row

func collectedRows() []row { return rows }

// executions reads the run logs of the scenario: how many times each task
// started on each worker.
func executions(dir string) map[string]map[string]int {
	GinkgoHelper()
	out := map[string]map[string]int{}
	logs, err := filepath.Glob(filepath.Join(dir, "*.runs"))
	Expect(err).NotTo(HaveOccurred())
	for _, path := range logs {
		worker := strings.TrimSuffix(filepath.Base(path), ".runs")
		b, err := os.ReadFile(path)
		Expect(err).NotTo(HaveOccurred())
		for _, name := range strings.Fields(string(b)) {
			if out[name] == nil {
				out[name] = map[string]int{}
			}
			out[name][worker]++
		}
	}
	return out
}

// audit compares the scenario's tasks, their lane's counters and the
// workers' run logs. countersReset says the manager restarted, so its lane
// counters only count what finished since.
func (s *scenario) audit(drain time.Duration, countersReset bool) row {
	GinkgoHelper()
	r := row{scenario: s.title, tasks: len(s.tasks), drain: drain, gap: -1}
	byName := map[string]agentlanev1alpha1.ExternalTask{}
	for _, t := range tasksIn(Default, s.ns) {
		byName[t.Name] = t
	}
	runs := executions(s.dir)
	for _, p := range s.tasks {
		t, ok := byName[p.name]
		if !ok {
			r.lost++
			r.problems = append(r.problems, p.name+" is gone")
			continue
		}
		r.auditTask(p, &t, runs[p.name])
	}
	r.auditCounters(s.ns, countersReset)
	return r
}

// auditTask checks one task's phase and attempts against its executions.
func (r *row) auditTask(p plannedTask, t *agentlanev1alpha1.ExternalTask, runs map[string]int) {
	st := &t.Status
	switch st.Phase {
	case agentlanev1alpha1.ExternalTaskSucceeded:
		r.succeeded++
	case agentlanev1alpha1.ExternalTaskDeadLettered:
		r.deadLettered++
	}
	if !terminal(st.Phase) {
		r.stuck++
		r.problems = append(r.problems, fmt.Sprintf("%s is stuck in %s (attempt %d, worker %q)", t.Name, st.Phase, st.Attempt, st.Worker))
		return
	}
	want := agentlanev1alpha1.ExternalTaskSucceeded
	if p.kind == fails {
		want = agentlanev1alpha1.ExternalTaskDeadLettered
	}
	if st.Phase != want {
		r.problems = append(r.problems, fmt.Sprintf("%s ended %s, want %s; attempts %s", t.Name, st.Phase, want, describeAttempts(st)))
	}

	// recorded: the attempts status names on each worker, whatever their
	// outcome; ran: those that must have run (they produced a result or ran
	// out of time); needed: the runs the task's own failures explain. Runs
	// beyond those (a lost worker, a timeout, a result that never reached
	// the API server) are double executions, known when status records
	// an attempt for each of them.
	recorded, ran := map[string]int{}, map[string]int{}
	needed, free, unmarked := 0, 0, false
	for _, a := range st.Attempts {
		recorded[a.Worker]++
		if a.Outcome == agentlanev1alpha1.AttemptWorkerLost && a.StartedAt == nil {
			r.lostUnstarted++
			unmarked = unmarked || !a.NotStarted
		}
		if a.NotStarted {
			free++
		}
		switch a.Outcome {
		case agentlanev1alpha1.AttemptFailed:
			// A run the worker stopped at its own shutdown may have been
			// killed before the shell reached the command's first line
			// (the run log): it explains a run, but need not show one.
			if !interrupted(a) {
				ran[a.Worker]++
			}
			needed++
		case agentlanev1alpha1.AttemptTimedOut:
			ran[a.Worker]++
		}
	}
	// The first lanequeue.MaxUncountedNotStarted losses before start are
	// free: a task that dead-lettered made maxRetries+1 counted attempts.
	counted := int(st.Attempt) - min(free, lanequeue.MaxUncountedNotStarted)
	if unmarked || (st.Phase == agentlanev1alpha1.ExternalTaskDeadLettered && counted < maxRetries+1) {
		r.unstartedCounted++
		r.problems = append(r.problems, fmt.Sprintf("%s: an attempt lost before it started counted against its retries (%d counted of %d allowed); attempts %s",
			t.Name, counted, maxRetries+1, describeAttempts(st)))
	}
	if st.Phase == agentlanev1alpha1.ExternalTaskSucceeded {
		recorded[st.Worker]++
		ran[st.Worker]++
		needed++
	}
	total, unknown := 0, false
	for w, n := range runs {
		total += n
		if n > recorded[w] {
			unknown = true
		}
	}
	for w, n := range ran {
		if missing := n - runs[w]; missing > 0 {
			r.countedNeverRan += missing
			r.problems = append(r.problems, fmt.Sprintf("%s: %d attempt(s) on %s counted but never ran; runs %v, attempts %s",
				t.Name, missing, w, runs, describeAttempts(st)))
		}
	}
	if total > needed {
		if unknown {
			r.twiceUnknown++
			r.problems = append(r.problems, fmt.Sprintf("%s ran more often than its status records: runs %v, attempts %s",
				t.Name, runs, describeAttempts(st)))
		} else {
			r.twiceKnown++
		}
	}
}

// interrupted reports whether a is a run its worker stopped at shutdown
// (see the worker's settle): the worker started the command and killed it.
func interrupted(a agentlanev1alpha1.TaskAttempt) bool {
	return a.StartedAt != nil && strings.HasPrefix(a.Error, "interrupted: ")
}

// auditCounters compares the lane's counters with the tasks: a completion
// counted twice shows as a counter above the number of tasks. Without a
// manager restart the counters must match the tasks exactly.
func (r *row) auditCounters(ns string, countersReset bool) {
	GinkgoHelper()
	var lane agentlanev1alpha1.LaneStatus
	check := func(g Gomega) {
		lq := &agentlanev1alpha1.LaneQueue{}
		g.Expect(k8sClient.Get(suiteCtx, types.NamespacedName{Namespace: ns, Name: "q1"}, lq)).To(Succeed())
		g.Expect(lq.Status.Lanes).To(HaveLen(1))
		lane = lq.Status.Lanes[0]
		if countersReset {
			g.Expect(lane.Completed).To(BeNumerically("<=", r.succeeded))
			g.Expect(lane.DeadLettered).To(BeNumerically("<=", r.deadLettered))
			return
		}
		g.Expect(lane.Completed).To(BeEquivalentTo(r.succeeded))
		g.Expect(lane.DeadLettered).To(BeEquivalentTo(r.deadLettered))
	}
	if err := InterceptGomegaFailure(func() { Eventually(check, 20*time.Second).Should(Succeed()) }); err != nil {
		r.problems = append(r.problems, fmt.Sprintf("lane counters %+v against %d succeeded, %d dead-lettered tasks",
			lane, r.succeeded, r.deadLettered))
	}
	r.countedTwice = max(0, int(lane.Completed)-r.succeeded) + max(0, int(lane.DeadLettered)-r.deadLettered)
}

// describeAttempts lists a task's recorded attempts and current one.
func describeAttempts(st *agentlanev1alpha1.ExternalTaskStatus) string {
	var parts []string
	for _, a := range st.Attempts {
		started := "never started"
		if a.NotStarted {
			started = "never started, notStarted"
		}
		if a.StartedAt != nil {
			started = "started " + a.StartedAt.Format(time.TimeOnly)
		}
		parts = append(parts, fmt.Sprintf("#%d %s on %s (%s)", a.Attempt, a.Outcome, a.Worker, started))
	}
	parts = append(parts, fmt.Sprintf("current #%d %s on %q", st.Attempt, st.Phase, st.Worker))
	return "[" + strings.Join(parts, ", ") + "]"
}

// report adds the row to the table and fails the spec on any violation.
func report(r row) {
	GinkgoHelper()
	rows = append(rows, r)
	var b strings.Builder
	printTable(&b, []row{r})
	AddReportEntry(r.scenario, b.String(), ReportEntryVisibilityAlways)
	Expect(r.problems).To(BeEmpty(), "seed %d", seed)
	Expect(r.stuck + r.lost + r.twiceUnknown + r.countedTwice + r.countedNeverRan + r.unstartedCounted).To(BeZero())
}

// printTable writes the rows as the suite's table.
func printTable(out io.Writer, rs []row) {
	if len(rs) == 0 {
		return
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "scenario (seed %d)\ttasks\tSucceeded\tDeadLettered\tstuck\tlost\ttwice known\ttwice unknown\tcounted twice\tcounted never ran\tlost unstarted\tunstarted counted\tdrain\tgap\t\n", seed)
	for _, r := range rs {
		gap := "-"
		if r.gap >= 0 {
			gap = r.gap.Round(100 * time.Millisecond).String()
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t\n", r.scenario, r.tasks, r.succeeded, r.deadLettered,
			r.stuck, r.lost, r.twiceKnown, r.twiceUnknown, r.countedTwice, r.countedNeverRan, r.lostUnstarted, r.unstartedCounted, r.drain.Round(100*time.Millisecond), gap)
	}
	w.Flush()
}
