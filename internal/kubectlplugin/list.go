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

package kubectlplugin

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// listFlags are the flags every listing verb has besides -o.
type listFlags struct {
	all      bool
	selector string
}

func (f *listFlags) add(cmd *cobra.Command) {
	cmd.Flags().BoolVarP(&f.all, "all-namespaces", "A", false, "List the objects of every namespace.")
	cmd.Flags().StringVarP(&f.selector, "selector", "l", "", "Label selector to filter on, as in kubectl (-l key=value).")
}

// listOptions are the options of a list call for f in namespace.
func (f *listFlags) listOptions(namespace string) ([]client.ListOption, error) {
	opts := []client.ListOption{client.Limit(listPageSize)}
	if namespace != "" {
		opts = append(opts, client.InNamespace(namespace))
	}
	if f.selector != "" {
		sel, err := labels.Parse(f.selector)
		if err != nil {
			return nil, fmt.Errorf("--selector: %w", err)
		}
		opts = append(opts, client.MatchingLabelsSelector{Selector: sel})
	}
	return opts, nil
}

// listAll lists into list page by page (each page at most listPageSize
// objects) and appends each page's items with add.
func listAll(ctx context.Context, c client.Client, list client.ObjectList, opts []client.ListOption, add func()) error {
	cont := ""
	for {
		if err := c.List(ctx, list, append(opts, client.Continue(cont))...); err != nil {
			return err
		}
		add()
		cont = list.GetContinue()
		if cont == "" {
			return nil
		}
	}
}

// queuesCommand is `queues [NAME...]`.
func (r *root) queuesCommand() *cobra.Command {
	var lf listFlags
	var out *output
	cmd := &cobra.Command{
		Use:     "queues [NAME...]",
		Aliases: []string{"queue", "lq"},
		Short:   "List LaneQueues with their counters; -o wide adds a row per lane",
		Example: `  kubectl agentlane queues
  kubectl agentlane queues agents -o wide
  kubectl agentlane queues -A -o yaml`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, err := r.scope(lf.all)
			if err != nil {
				return err
			}
			opts, err := lf.listOptions(ns)
			if err != nil {
				return err
			}
			c, err := r.newClient()
			if err != nil {
				return err
			}
			all := &agentlanev1alpha1.LaneQueueList{}
			page := &agentlanev1alpha1.LaneQueueList{}
			if err := listAll(cmd.Context(), c, page, opts, func() {
				for _, q := range page.Items {
					if named(q.Name, args) {
						all.Items = append(all.Items, q)
					}
				}
			}); err != nil {
				return err
			}
			if err := missing("lanequeues", args, all.Items); err != nil {
				return err
			}
			if !out.table() {
				return out.print(all, r.streams.Out)
			}
			return r.queueTable(all.Items, lf.all, out.wide()).write(r.streams.Out, r.streams.ErrOut, "LaneQueues", ns)
		},
	}
	lf.add(cmd)
	out = addOutput(cmd, "")
	return cmd
}

// queueTable is the table of queues; wide adds a row per lane under each
// queue, its name shown as queue/lane.
func (r *root) queueTable(queues []agentlanev1alpha1.LaneQueue, withNamespace, wide bool) *table {
	t := newTable(withNamespace, "NAME", "READY", "LANES", "PENDING", "ACTIVE", "SUCCEEDED", "FAILED", "DEAD", "PAUSED", "DRAIN", "AGE")
	for _, q := range queues {
		var ok, failed, dead int64
		paused := 0
		for _, l := range q.Status.Lanes {
			ok, failed, dead = ok+l.Completed, failed+l.Failed, dead+l.DeadLettered
			if l.Paused {
				paused++
			}
		}
		if paused == 0 { // before the manager's first status, the spec says
			for _, l := range q.Spec.Lanes {
				if l.Paused {
					paused++
				}
			}
		}
		t.add(q.Namespace, q.Name, conditionStatus(q.Status.Conditions, "Ready"), strconv.Itoa(len(q.Spec.Lanes)),
			itoa(int64(q.Status.Pending)), itoa(int64(q.Status.Active)), itoa(ok), itoa(failed), itoa(dead),
			itoa(int64(paused)), drainOf(&q), r.age(q.CreationTimestamp.Time))
		if !wide {
			continue
		}
		status := map[agentlanev1alpha1.LaneName]agentlanev1alpha1.LaneStatus{}
		for _, l := range q.Status.Lanes {
			status[l.Name] = l
		}
		for _, l := range q.Spec.Lanes {
			s := status[l.Name]
			t.add(q.Namespace, q.Name+"/"+string(l.Name), "-", string(l.HandlerMode),
				itoa(int64(s.Pending)), itoa(int64(s.Active)), itoa(s.Completed), itoa(s.Failed), itoa(s.DeadLettered),
				strconv.FormatBool(l.Paused), "-", "-")
		}
	}
	return t
}

// drainOf is the DRAIN column: the Draining condition's reason, or
// Requested while spec.drain is set and the manager has not answered yet.
func drainOf(q *agentlanev1alpha1.LaneQueue) string {
	c := apimeta.FindStatusCondition(q.Status.Conditions, "Draining")
	switch {
	case c != nil && (q.Spec.Drain != nil) == (c.Status == metav1.ConditionTrue):
		return c.Reason
	case q.Spec.Drain != nil:
		return "Requested"
	}
	return "No"
}

// sessionsCommand is `sessions [NAME...]`.
func (r *root) sessionsCommand() *cobra.Command {
	var lf listFlags
	var queue string
	var out *output
	cmd := &cobra.Command{
		Use:     "sessions [NAME...]",
		Aliases: []string{"session-list", "asn"},
		Short:   "List AgentSessions: phase, queue, node and their commands",
		Example: `  kubectl agentlane sessions
  kubectl agentlane sessions --queue agents -A
  kubectl agentlane sessions reviewer-42 -o json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, err := r.scope(lf.all)
			if err != nil {
				return err
			}
			opts, err := lf.listOptions(ns)
			if err != nil {
				return err
			}
			c, err := r.newClient()
			if err != nil {
				return err
			}
			all := &agentlanev1alpha1.AgentSessionList{}
			page := &agentlanev1alpha1.AgentSessionList{}
			if err := listAll(cmd.Context(), c, page, opts, func() {
				for _, s := range page.Items {
					if named(s.Name, args) && (queue == "" || s.Spec.QueueRef.Name == queue) {
						all.Items = append(all.Items, s)
					}
				}
			}); err != nil {
				return err
			}
			if err := missing("agentsessions", args, all.Items); err != nil {
				return err
			}
			if !out.table() {
				return out.print(all, r.streams.Out)
			}
			t := newTable(lf.all, "NAME", "QUEUE", "PHASE", "DESIRED", "NODE", "TENANT", "PENDING", "ACTIVE", "SUCCEEDED", "FAILED", "DEAD", "AGE")
			for _, s := range all.Items {
				q := s.Status.Queue
				desired := string(s.Spec.DesiredState)
				if desired == "" {
					desired = string(agentlanev1alpha1.DesiredStateActive)
				}
				tenant := ""
				if s.Spec.Identity != nil {
					tenant = s.Spec.Identity.TenantID
				}
				t.add(s.Namespace, s.Name, s.Spec.QueueRef.Name, string(s.Status.Phase), desired, s.Status.NodeName, tenant,
					itoa(int64(q.Pending)), itoa(int64(q.Active)), itoa(q.Completed), itoa(q.Failed), itoa(q.DeadLettered),
					r.age(s.CreationTimestamp.Time))
			}
			return t.write(r.streams.Out, r.streams.ErrOut, "AgentSessions", ns)
		},
	}
	lf.add(cmd)
	cmd.Flags().StringVar(&queue, "queue", "", "Only the sessions of this LaneQueue.")
	out = addOutput(cmd, "")
	return cmd
}

// taskFilter selects ExternalTasks by session, lane, queue and phase.
type taskFilter struct {
	session, lane, queue string
	phases               []string
}

func (f *taskFilter) add(cmd *cobra.Command, withPhase bool) {
	cmd.Flags().StringVar(&f.session, "session", "", "Only the tasks of this AgentSession.")
	cmd.Flags().StringVar(&f.lane, "lane", "", "Only the tasks of this lane.")
	cmd.Flags().StringVar(&f.queue, "queue", "", "Only the tasks of this LaneQueue.")
	if withPhase {
		cmd.Flags().StringSliceVar(&f.phases, "phase", nil, "Only the tasks in these phases (Queued, Dispatched, Running, Succeeded, Failed, TimedOut, DeadLettered, Cancelled; comma-separated or repeated).")
	}
}

// validate refuses a phase that no task can be in.
func (f *taskFilter) validate(cmd *cobra.Command) error {
	for i, p := range f.phases {
		known := false
		for _, k := range taskPhases {
			if strings.EqualFold(p, string(k)) {
				f.phases[i], known = string(k), true
			}
		}
		if !known {
			return usageError(cmd, "--phase %q is not a task phase (%s)", p, phaseNames())
		}
	}
	return nil
}

// taskPhases are the phases of ExternalTaskPhase's enum; a task shows no
// phase until the manager writes one.
var taskPhases = []agentlanev1alpha1.ExternalTaskPhase{
	agentlanev1alpha1.ExternalTaskQueued, agentlanev1alpha1.ExternalTaskDispatched, agentlanev1alpha1.ExternalTaskRunning,
	agentlanev1alpha1.ExternalTaskSucceeded, agentlanev1alpha1.ExternalTaskFailed, agentlanev1alpha1.ExternalTaskTimedOut,
	agentlanev1alpha1.ExternalTaskDeadLettered, agentlanev1alpha1.ExternalTaskCancelled,
}

func phaseNames() string {
	names := make([]string, len(taskPhases))
	for i, p := range taskPhases {
		names[i] = string(p)
	}
	return strings.Join(names, ", ")
}

// matches tells whether t passes the filter.
func (f *taskFilter) matches(t *agentlanev1alpha1.ExternalTask) bool {
	if f.session != "" && sessionOf(t) != f.session {
		return false
	}
	if f.lane != "" && laneOf(t) != f.lane {
		return false
	}
	if f.queue != "" && queueOf(t) != f.queue {
		return false
	}
	if len(f.phases) == 0 {
		return true
	}
	for _, p := range f.phases {
		if string(t.Status.Phase) == p {
			return true
		}
	}
	return false
}

// sessionOf is the session that submitted t.
func sessionOf(t *agentlanev1alpha1.ExternalTask) string {
	if t.Spec.SessionRef != nil {
		return t.Spec.SessionRef.Name
	}
	return ""
}

// laneOf is the lane t was routed to, else the lane its spec names.
func laneOf(t *agentlanev1alpha1.ExternalTask) string {
	if t.Status.Lane != "" {
		return string(t.Status.Lane)
	}
	if t.Spec.Lane != "" {
		return string(t.Spec.Lane)
	}
	return t.Labels[agentlanev1alpha1.LaneLabel]
}

// queueOf is t's LaneQueue: the spec's, else the label the manager sets
// from the session's queue.
func queueOf(t *agentlanev1alpha1.ExternalTask) string {
	if t.Spec.QueueRef != nil {
		return t.Spec.QueueRef.Name
	}
	return t.Labels[agentlanev1alpha1.QueueLabel]
}

// listTasks lists the ExternalTasks of namespace ("" for all) that f
// selects, oldest first.
func (r *root) listTasks(ctx context.Context, lf *listFlags, f *taskFilter, namespace string) (*agentlanev1alpha1.ExternalTaskList, error) {
	opts, err := lf.listOptions(namespace)
	if err != nil {
		return nil, err
	}
	c, err := r.newClient()
	if err != nil {
		return nil, err
	}
	all := &agentlanev1alpha1.ExternalTaskList{}
	page := &agentlanev1alpha1.ExternalTaskList{}
	if err := listAll(ctx, c, page, opts, func() {
		for i := range page.Items {
			if f.matches(&page.Items[i]) {
				all.Items = append(all.Items, page.Items[i])
			}
		}
	}); err != nil {
		return nil, err
	}
	sort.SliceStable(all.Items, func(i, j int) bool {
		a, b := &all.Items[i], &all.Items[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return all, nil
}

// tasksCommand is `tasks`.
func (r *root) tasksCommand() *cobra.Command {
	var lf listFlags
	var f taskFilter
	var out *output
	cmd := &cobra.Command{
		Use:     "tasks",
		Aliases: []string{"task", "et"},
		Short:   "List ExternalTasks, oldest first, by session, lane, queue or phase",
		Example: `  kubectl agentlane tasks --session reviewer-42
  kubectl agentlane tasks --lane execute --phase Queued,Running
  kubectl agentlane tasks -A --phase Failed -o name`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validate(cmd); err != nil {
				return err
			}
			ns, err := r.scope(lf.all)
			if err != nil {
				return err
			}
			all, err := r.listTasks(cmd.Context(), &lf, &f, ns)
			if err != nil {
				return err
			}
			if !out.table() {
				return out.print(all, r.streams.Out)
			}
			headers := []string{"NAME", "SESSION", "LANE", "COMMAND", "PHASE", "ATTEMPT", "WORKER", "AGE"}
			if out.wide() {
				headers = append(headers, "NODE", "ERROR")
			}
			t := newTable(lf.all, headers...)
			for i := range all.Items {
				et := &all.Items[i]
				cells := []string{et.Name, sessionOf(et), laneOf(et), string(et.Spec.CommandType), string(et.Status.Phase),
					attemptOf(et), et.Status.Worker, r.age(et.CreationTimestamp.Time)}
				if out.wide() {
					cells = append(cells, et.Status.NodeName, errorOf(et))
				}
				t.add(et.Namespace, cells...)
			}
			return t.write(r.streams.Out, r.streams.ErrOut, "ExternalTasks", ns)
		},
	}
	lf.add(cmd)
	f.add(cmd, true)
	out = addOutput(cmd, "")
	return cmd
}

// attemptOf is the ATTEMPT column: the current attempt, empty before the
// first dispatch.
func attemptOf(t *agentlanev1alpha1.ExternalTask) string {
	if t.Status.Attempt == 0 {
		return ""
	}
	return itoa(int64(t.Status.Attempt))
}

// errorOf is the error of t's last attempt: its result's, else the last
// recorded attempt's, else the Finished condition's message when it failed.
func errorOf(t *agentlanev1alpha1.ExternalTask) string {
	if t.Status.Result != nil && t.Status.Result.Error != "" {
		return t.Status.Result.Error
	}
	if n := len(t.Status.Attempts); n > 0 && t.Status.Attempts[n-1].Error != "" {
		return t.Status.Attempts[n-1].Error
	}
	if c := apimeta.FindStatusCondition(t.Status.Conditions, "Finished"); c != nil && c.Status == metav1.ConditionTrue &&
		t.Status.Phase != agentlanev1alpha1.ExternalTaskSucceeded {
		return c.Message
	}
	return ""
}

// missing is a NotFound error naming each of names that no item has, as
// kubectl get reports a named object that does not exist; nil when every
// name was found.
func missing[T any, PT interface {
	*T
	client.Object
}](resource string, names []string, items []T) error {
	found := map[string]bool{}
	for i := range items {
		found[PT(&items[i]).GetName()] = true
	}
	var errs []error
	for _, n := range names {
		if !found[n] {
			errs = append(errs, apierrors.NewNotFound(agentlanev1alpha1.GroupVersion.WithResource(resource).GroupResource(), n))
			found[n] = true
		}
	}
	return errors.Join(errs...)
}

// named tells whether name is among names, or names is empty.
func named(name string, names []string) bool {
	if len(names) == 0 {
		return true
	}
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

// conditionStatus is the status of the condition of type t, or "Unknown".
func conditionStatus(conds []metav1.Condition, t string) string {
	if c := apimeta.FindStatusCondition(conds, t); c != nil {
		return string(c.Status)
	}
	return string(metav1.ConditionUnknown)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
