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
	"strings"
	"text/tabwriter"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// directRow is what the audit of one Direct scenario found: one line of
// the Direct table.
type directRow struct {
	scenario string
	tasks    int
	// succeeded: planned commands answered Succeeded (once each: a
	// submitter stops at its first Succeeded answer); submissions: every
	// call, resubmissions included.
	succeeded, submissions int
	// interruptedPost and interruptedGet: submissions told Interrupted on
	// their POST, or by GET after their connection failed; each was
	// submitted again. refused: submissions refused before they were taken
	// (and submitted again).
	interruptedPost, interruptedGet, refused int
	// executions: the commands' starts in the workers' run logs; extra:
	// starts beyond one per command, each explained by a killed worker or
	// an interruption.
	executions, extra int
	// countedTwice: completions the lane counted beyond the Succeeded
	// answers, commands answered twice, or a record's end contradicting
	// its answer.
	countedTwice int
	// stuck: planned commands without a Succeeded answer at the deadline,
	// and records left unfinished; lost: commands answered Succeeded that
	// never started on a worker; untold: submissions left without an
	// answer; failed: commands that ended otherwise than Succeeded, or with
	// another command's result.
	stuck, lost, untold, failed int
	// recorded: the commands recorded as ExternalTasks (waited or ran past
	// materializeAfter, or interrupted while recorded).
	recorded int
	// endUnrecorded: records failed, interrupted, by the next leader
	// although their submitter was answered Succeeded before the leader's
	// kill. A leader answers a recorded command only once the record's end
	// is written, so there must be none (a problem of the audit).
	endUnrecorded int
	// inFlight: submissions in flight at a manager's kill.
	inFlight int
	// duringOutage: commands submitted and answered Succeeded while the
	// API server was down.
	duringOutage int
	elapsed      time.Duration
	problems     []string
}

// directRows collects the Direct table for the end of the suite.
var directRows []directRow

var _ = ReportAfterSuite("chaos Direct table", func(r Report) {
	printDirectTable(os.Stdout, directRows)
})

// directAllowance says which extra executions a scenario explains: those
// of commands that started on a killed worker, or whose submission was
// interrupted (the old leader's attempt may have run before the command
// was submitted again).
type directAllowance struct {
	victims     []workerSpec
	interrupted bool
	// killed is when the leading manager was killed, if it was.
	killed time.Time
}

// audit compares the submitters' answers with the workers' run logs, the
// lane's counters and the Direct records of the namespace. countersReset
// says a manager took over, whose lane counters only count what ended
// since.
func (s *directScenario) audit(allow directAllowance, countersReset bool) directRow {
	GinkgoHelper()
	r := directRow{scenario: s.title, tasks: len(s.tasks), elapsed: s.ended.Sub(s.started)}
	subs := s.submissions()
	r.submissions = len(subs)
	byTask := map[string][]directSubmission{}
	byID := map[string]directSubmission{}
	for _, sub := range subs {
		byTask[sub.task] = append(byTask[sub.task], sub)
		byID[sub.id] = sub
		switch sub.outcome {
		case outInterrupted:
			r.interruptedPost++
		case outInterruptedGet:
			r.interruptedGet++
		case outRefused:
			r.refused++
		case outUntold:
			r.untold++
			r.problems = append(r.problems, fmt.Sprintf("%s (id %s) left its submitter untold: %s", sub.task, sub.id, sub.detail))
		case outFailed, outWrongResult:
			r.failed++
			r.problems = append(r.problems, fmt.Sprintf("%s (id %s) ended %s: %s", sub.task, sub.id, sub.outcome, sub.detail))
		}
	}
	victims := map[string]bool{}
	for _, w := range allow.victims {
		victims[w.name] = true
	}
	runs := executions(s.dir)
	for _, t := range s.tasks {
		ok, interrupted := 0, 0
		for _, sub := range byTask[t.name] {
			switch sub.outcome {
			case outSucceeded:
				ok++
			case outInterrupted, outInterruptedGet:
				interrupted++
			}
		}
		total, onVictims := 0, 0
		for w, n := range runs[t.name] {
			total += n
			if victims[w] {
				onVictims += n
			}
		}
		r.executions += total
		switch {
		case ok == 0:
			r.stuck++
			r.problems = append(r.problems, fmt.Sprintf("%s has no Succeeded answer after %s; submissions %s", t.name, directRunTimeout, describeSubmissions(byTask[t.name])))
			continue
		case ok > 1:
			r.countedTwice += ok - 1
			r.problems = append(r.problems, fmt.Sprintf("%s answered Succeeded %d times", t.name, ok))
		}
		r.succeeded++
		if total == 0 {
			r.lost++
			r.problems = append(r.problems, fmt.Sprintf("%s answered Succeeded but never started; submissions %s", t.name, describeSubmissions(byTask[t.name])))
			continue
		}
		extra := total - 1
		explained := onVictims
		if allow.interrupted {
			explained += interrupted
		}
		if extra > explained {
			r.problems = append(r.problems, fmt.Sprintf("%s started %d times (runs %v), %d of them unexplained by a killed worker or an interruption; submissions %s",
				t.name, total, runs[t.name], extra-explained, describeSubmissions(byTask[t.name])))
		}
		r.extra += extra
	}
	r.auditRecords(s.ns, byID, allow.killed)
	r.auditCounters(s.ns, countersReset)
	return r
}

// auditRecords checks the namespace's Direct records: each one finished
// (a new leader fails, interrupted, what an earlier one left unfinished),
// and its end agrees with the answer its submitter got, unless the leader
// was killed (at killed, if not zero) after it answered and before it
// recorded the end.
func (r *directRow) auditRecords(ns string, byID map[string]directSubmission, killed time.Time) {
	GinkgoHelper()
	var records []agentlanev1alpha1.ExternalTask
	check := func(g Gomega) {
		list := &agentlanev1alpha1.ExternalTaskList{}
		g.Expect(k8sClient.List(suiteCtx, list, client.InNamespace(ns),
			client.MatchingLabels{agentlanev1alpha1.TargetLabel: string(agentlanev1alpha1.ExternalTargetDirect)})).To(Succeed())
		records = list.Items
		for _, t := range records {
			g.Expect(terminal(t.Status.Phase)).To(BeTrue(), "record %s is %s", t.Name, t.Status.Phase)
		}
	}
	if err := InterceptGomegaFailure(func() { Eventually(check, 30*time.Second).Should(Succeed()) }); err != nil {
		for _, t := range records {
			if !terminal(t.Status.Phase) {
				r.stuck++
				r.problems = append(r.problems, fmt.Sprintf("record %s is stuck in %s (attempt %d, worker %q)", t.Name, t.Status.Phase, t.Status.Attempt, t.Status.Worker))
			}
		}
	}
	r.recorded = len(records)
	for _, t := range records {
		sub, ok := byID[t.Name]
		if !ok || !terminal(t.Status.Phase) {
			continue
		}
		succeeded := t.Status.Phase == agentlanev1alpha1.ExternalTaskSucceeded
		c := meta.FindStatusCondition(t.Status.Conditions, agentlanev1alpha1.ExternalTaskFinishedCondition)
		if !succeeded && sub.outcome == outSucceeded && !killed.IsZero() && sub.end.Before(killed) &&
			t.Status.Phase == agentlanev1alpha1.ExternalTaskFailed && c != nil && strings.HasPrefix(c.Message, "interrupted:") {
			r.endUnrecorded++
			r.problems = append(r.problems, fmt.Sprintf("record %s ended Failed, interrupted, but its submitter was answered Succeeded before the kill", t.Name))
			continue
		}
		if succeeded != (sub.outcome == outSucceeded) {
			r.countedTwice++
			r.problems = append(r.problems, fmt.Sprintf("record %s ended %s, its submitter was answered %s", t.Name, t.Status.Phase, sub.outcome))
		}
	}
}

// auditCounters compares the lane's completed counter with the Succeeded
// answers: a completion counted twice shows as a counter above them.
// Without a manager takeover the counter must match them exactly.
func (r *directRow) auditCounters(ns string, countersReset bool) {
	GinkgoHelper()
	var lane agentlanev1alpha1.LaneStatus
	check := func(g Gomega) {
		lq := &agentlanev1alpha1.LaneQueue{}
		g.Expect(k8sClient.Get(suiteCtx, types.NamespacedName{Namespace: ns, Name: "q1"}, lq)).To(Succeed())
		g.Expect(lq.Status.Lanes).To(HaveLen(1))
		lane = lq.Status.Lanes[0]
		if countersReset {
			g.Expect(lane.Completed).To(BeNumerically("<=", r.succeeded))
			return
		}
		g.Expect(lane.Completed).To(BeEquivalentTo(r.succeeded))
	}
	if err := InterceptGomegaFailure(func() { Eventually(check, 20*time.Second).Should(Succeed()) }); err != nil {
		r.problems = append(r.problems, fmt.Sprintf("lane counters %+v against %d Succeeded answers", lane, r.succeeded))
	}
	r.countedTwice += max(0, int(lane.Completed)-r.succeeded)
}

// describeSubmissions lists a command's submissions and their outcomes.
func describeSubmissions(subs []directSubmission) string {
	var parts []string
	for _, s := range subs {
		p := fmt.Sprintf("%s %s at %s (%s)", s.id, s.outcome, s.end.Format(timeOfDay), s.end.Sub(s.start).Round(time.Millisecond))
		if s.detail != "" {
			p += ": " + s.detail
		}
		parts = append(parts, p)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// directReport adds the row to the Direct table and fails the spec on any
// violation.
func directReport(r directRow) {
	GinkgoHelper()
	directRows = append(directRows, r)
	var b strings.Builder
	printDirectTable(&b, []directRow{r})
	AddReportEntry(r.scenario, b.String(), ReportEntryVisibilityAlways)
	Expect(r.problems).To(BeEmpty(), "seed %d", seed)
	Expect(r.stuck + r.lost + r.untold + r.failed + r.countedTwice).To(BeZero())
}

// printDirectTable writes the rows as the Direct table.
func printDirectTable(out io.Writer, rs []directRow) {
	if len(rs) == 0 {
		return
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "Direct scenario (seed %d)\ttasks\tSucceeded\tsubmissions\tinterrupted+resubmitted (POST/GET)\trefused+resubmitted\texecutions\textra runs\tcounted twice\tstuck\tlost\tuntold\tfailed\trecorded\tend unrecorded at kill\tin flight at kill\tdone during outage\ttime\t\n", seed)
	for _, r := range rs {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d (%d/%d)\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n", r.scenario, r.tasks, r.succeeded, r.submissions,
			r.interruptedPost+r.interruptedGet, r.interruptedPost, r.interruptedGet, r.refused, r.executions, r.extra, r.countedTwice,
			r.stuck, r.lost, r.untold, r.failed, r.recorded, r.endUnrecorded, r.inFlight, r.duringOutage, r.elapsed.Round(100*time.Millisecond))
	}
	w.Flush()
}
