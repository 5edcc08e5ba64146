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

// Package laneview shows the live state of agentlane's queues as text: a
// one-line strip (per queue: running/capacity, pending, succeeded, failed,
// dead letters, and the most recently started task) and a dashboard with
// the queues and their lanes, the sessions, the tasks in flight, the tasks
// waiting, the last ten finished and a detail pane for one task.
//
// A Snapshot is built from the objects of each kind (LaneQueue,
// ExternalTask, AgentSession) in a namespace or in all of them: read by one
// List each (Load), or from the informer cache of a Watcher, which lists
// once and then watches. The renderers are pure functions of a Snapshot and,
// for elapsed times, of a "now" passed in, so the same snapshot always
// renders the same text; the dashboard can be laid out to a height. Watch
// and Follow hand over snapshots or strip lines after each change;
// cmd/lanetop is the terminal front end.
//
// Commands of Internal (and Hybrid) lanes are not objects: the manager's
// scheduler grants them slots and their sessions run them. They appear only
// in the counts the LaneQueue status carries (per lane pending, active,
// completed, failed, dead-lettered, cancelled), and as "+ N internal" in the
// IN-FLIGHT and QUEUED headings; the task lists show ExternalTasks.
package laneview

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// Unlimited is the capacity of a queue or lane without a cap.
const Unlimited int32 = -1

// RecentLimit is how many finished tasks the dashboard lists.
const RecentLimit = 10

// Snapshot is the state of the queues of one namespace, or of all
// namespaces, at one moment.
type Snapshot struct {
	// Namespace is the namespace the snapshot shows; empty for all.
	Namespace string

	// Queues are sorted by namespace, then name.
	Queues []Queue
	// Sessions are sorted by namespace, then name.
	Sessions []Session

	// InFlight are the Dispatched and Running tasks, the most recently
	// started first.
	InFlight []*Task
	// Queued are the tasks waiting for a slot (Queued, or not yet seen by
	// the operator), the longest waiting first.
	Queued []*Task
	// Finished are the tasks in a terminal phase, the most recently finished
	// first.
	Finished []*Task

	// qualified is set when the objects span several namespaces: names are
	// then shown as namespace/name.
	qualified bool
}

// Queue is one LaneQueue: its caps from the spec and its counters from the
// status, which include the Internal lanes' commands.
type Queue struct {
	Namespace, Name string
	// Lanes are in priority order, ties in spec order.
	Lanes []Lane
	// MaxConcurrent is spec.maxConcurrent; 0 means unlimited.
	MaxConcurrent int32
	// Capacity is the most commands the queue can run at once: the lanes'
	// caps, bounded by maxConcurrent for the lanes that are not isolated.
	// Unlimited when there is no bound.
	Capacity int32

	Pending, Active                            int32
	Completed, Failed, DeadLettered, Cancelled int64
	// Sessions is the number of AgentSessions bound to the queue.
	Sessions int32

	// Ready is the status of the Ready condition ("" before the operator
	// wrote one), NotReadyReason its reason when it is not True.
	Ready          metav1.ConditionStatus
	NotReadyReason string
	// Pressure is the reason of the UnderPressure condition while it is
	// True, such as WarningDepthReached.
	Pressure string
}

// Lane is one lane of a queue.
type Lane struct {
	Name     string
	Priority int32
	Mode     agentlanev1alpha1.HandlerMode
	Isolated bool
	// MaxConcurrency and MaxConcurrencyPerSession are the lane's caps; 0
	// means unlimited.
	MaxConcurrency, MaxConcurrencyPerSession int32

	Pending, Active                            int32
	Completed, Failed, DeadLettered, Cancelled int64
}

// Session is one AgentSession.
type Session struct {
	Namespace, Name string
	Queue           string
	Phase           agentlanev1alpha1.SessionPhase
	Pod, Node       string
	RunID           string
	Identity        agentlanev1alpha1.Identity

	Pending, Active                 int32
	Completed, Failed, DeadLettered int64
	QueuedMessages                  int32
}

// Task is one ExternalTask.
type Task struct {
	Namespace, Name string
	// Queue, Lane and Session come from the spec, else from the labels the
	// operator sets; Session is empty for a task created without one.
	Queue, Lane, Session string
	CommandType          string
	RunID                string
	Identity             agentlanev1alpha1.Identity
	// Payload is the spec's payload as compact JSON; empty when there is
	// none.
	Payload string

	Phase agentlanev1alpha1.ExternalTaskPhase
	// Attempt is the current attempt, from 1; Attempts the earlier ones
	// that did not succeed.
	Attempt  int32
	Attempts []agentlanev1alpha1.TaskAttempt
	Worker   string
	Node     string
	Job      string

	Created, QueuedAt, DispatchedAt, StartedAt, FinishedAt time.Time
	// Ended is when the task reached its terminal phase: finishedAt, else
	// when the Finished condition turned True, else the end of the last
	// attempt. Zero while the task has not finished.
	Ended time.Time

	// Result is what the worker reported for the current attempt; nil
	// before it reported.
	Result *Result
}

// Result is the outcome of a task's current attempt.
type Result struct {
	Success  bool
	Error    string
	ExitCode *int32
	// Stdout and Stderr are set when the result has the shape the bash
	// handler writes ({"stdout": ..., "stderr": ..., "truncated": ...}).
	Stdout, Stderr string
	Truncated      bool
	// JSON is the compact result JSON when it has another shape.
	JSON string
}

// Key is namespace/name, unique within a snapshot.
func (t *Task) Key() string {
	return t.Namespace + "/" + t.Name
}

// since is when the task entered its current state: started (or
// dispatched) for a task in flight, queued for a waiting task.
func (t *Task) since() time.Time {
	for _, ts := range []time.Time{t.StartedAt, t.DispatchedAt, t.QueuedAt} {
		if !ts.IsZero() {
			return ts
		}
	}
	return t.Created
}

func (t *Task) inFlight() bool {
	return t.Phase == agentlanev1alpha1.ExternalTaskDispatched || t.Phase == agentlanev1alpha1.ExternalTaskRunning
}

// NewReader returns a client that reads agentlane's resources from the
// cluster of cfg, for Load, Watch and Follow.
func NewReader(cfg *rest.Config) (client.Reader, error) {
	scheme := runtime.NewScheme()
	if err := agentlanev1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}

// Load lists the LaneQueues, ExternalTasks and AgentSessions of namespace
// (all namespaces when it is empty) and builds a snapshot of them. The reader
// needs get/list on the three resources (config/rbac/queue_viewer_role.yaml).
func Load(ctx context.Context, r client.Reader, namespace string) (*Snapshot, error) {
	var opts []client.ListOption
	if namespace != "" {
		opts = append(opts, client.InNamespace(namespace))
	}
	queues := &agentlanev1alpha1.LaneQueueList{}
	if err := r.List(ctx, queues, opts...); err != nil {
		return nil, fmt.Errorf("list LaneQueues: %w", err)
	}
	tasks := &agentlanev1alpha1.ExternalTaskList{}
	if err := r.List(ctx, tasks, opts...); err != nil {
		return nil, fmt.Errorf("list ExternalTasks: %w", err)
	}
	sessions := &agentlanev1alpha1.AgentSessionList{}
	if err := r.List(ctx, sessions, opts...); err != nil {
		return nil, fmt.Errorf("list AgentSessions: %w", err)
	}
	return New(namespace, queues.Items, tasks.Items, sessions.Items), nil
}

// New builds a snapshot of the given objects; namespace is the namespace
// they were listed from, empty for all.
func New(namespace string, queues []agentlanev1alpha1.LaneQueue, tasks []agentlanev1alpha1.ExternalTask, sessions []agentlanev1alpha1.AgentSession) *Snapshot {
	s := &Snapshot{Namespace: namespace}
	namespaces := map[string]bool{}
	for i := range queues {
		s.Queues = append(s.Queues, newQueue(&queues[i]))
		namespaces[queues[i].Namespace] = true
	}
	sessionQueue := map[string]string{}
	for i := range sessions {
		ss := newSession(&sessions[i])
		s.Sessions = append(s.Sessions, ss)
		sessionQueue[ss.Namespace+"/"+ss.Name] = ss.Queue
		namespaces[ss.Namespace] = true
	}
	for i := range tasks {
		t := newTask(&tasks[i], sessionQueue)
		namespaces[t.Namespace] = true
		switch {
		case t.inFlight():
			s.InFlight = append(s.InFlight, t)
		case t.Phase.IsTerminal():
			s.Finished = append(s.Finished, t)
		default:
			s.Queued = append(s.Queued, t)
		}
	}
	s.qualified = len(namespaces) > 1
	slices.SortFunc(s.Queues, func(a, b Queue) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	slices.SortFunc(s.Sessions, func(a, b Session) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	// API times have a resolution of a second, so ties are common; they go
	// by name in the direction of the times, which for ULID names is the
	// order of creation.
	slices.SortFunc(s.InFlight, func(a, b *Task) int {
		return cmp.Or(b.since().Compare(a.since()), cmp.Compare(b.Key(), a.Key()))
	})
	slices.SortFunc(s.Queued, func(a, b *Task) int {
		return cmp.Or(a.since().Compare(b.since()), cmp.Compare(a.Key(), b.Key()))
	})
	slices.SortFunc(s.Finished, func(a, b *Task) int {
		return cmp.Or(b.Ended.Compare(a.Ended), cmp.Compare(b.Key(), a.Key()))
	})
	return s
}

func newQueue(q *agentlanev1alpha1.LaneQueue) Queue {
	out := Queue{
		Namespace:     q.Namespace,
		Name:          q.Name,
		MaxConcurrent: q.Spec.MaxConcurrent,
		Pending:       q.Status.Pending,
		Active:        q.Status.Active,
		Sessions:      q.Status.Sessions,
	}
	counts := map[agentlanev1alpha1.LaneName]agentlanev1alpha1.LaneStatus{}
	for _, ls := range q.Status.Lanes {
		counts[ls.Name] = ls
		out.Completed += ls.Completed
		out.Failed += ls.Failed
		out.DeadLettered += ls.DeadLettered
		out.Cancelled += ls.Cancelled
	}
	for _, l := range q.Spec.Lanes {
		c := counts[l.Name]
		out.Lanes = append(out.Lanes, Lane{
			Name:                     string(l.Name),
			Priority:                 l.Priority,
			Mode:                     cmp.Or(l.HandlerMode, agentlanev1alpha1.HandlerModeInternal),
			Isolated:                 l.Isolated,
			MaxConcurrency:           l.MaxConcurrency,
			MaxConcurrencyPerSession: l.MaxConcurrencyPerSession,
			Pending:                  c.Pending,
			Active:                   c.Active,
			Completed:                c.Completed,
			Failed:                   c.Failed,
			DeadLettered:             c.DeadLettered,
			Cancelled:                c.Cancelled,
		})
	}
	slices.SortStableFunc(out.Lanes, func(a, b Lane) int { return cmp.Compare(a.Priority, b.Priority) })
	out.Capacity = capacity(out.Lanes, out.MaxConcurrent)
	if c := meta.FindStatusCondition(q.Status.Conditions, agentlanev1alpha1.LaneQueueReadyCondition); c != nil {
		out.Ready = c.Status
		if c.Status != metav1.ConditionTrue {
			out.NotReadyReason = c.Reason
		}
	}
	if c := meta.FindStatusCondition(q.Status.Conditions, agentlanev1alpha1.LaneQueueUnderPressureCondition); c != nil && c.Status == metav1.ConditionTrue {
		out.Pressure = c.Reason
	}
	return out
}

// capacity is the most commands lanes can run at once: the sum of the
// shared lanes' caps bounded by maxConcurrent, plus the isolated lanes' caps,
// which maxConcurrent does not bound.
func capacity(lanes []Lane, maxConcurrent int32) int32 {
	shared, isolated := int32(0), int32(0)
	for _, l := range lanes {
		sum := &shared
		if l.Isolated {
			sum = &isolated
		}
		if *sum == Unlimited {
			continue
		}
		if l.MaxConcurrency == 0 {
			*sum = Unlimited
			continue
		}
		*sum += l.MaxConcurrency
	}
	if maxConcurrent > 0 && (shared == Unlimited || shared > maxConcurrent) {
		shared = maxConcurrent
	}
	if shared == Unlimited || isolated == Unlimited {
		return Unlimited
	}
	return shared + isolated
}

func newSession(s *agentlanev1alpha1.AgentSession) Session {
	out := Session{
		Namespace:      s.Namespace,
		Name:           s.Name,
		Queue:          s.Spec.QueueRef.Name,
		Phase:          s.Status.Phase,
		Pod:            s.Status.PodName,
		Node:           s.Status.NodeName,
		RunID:          s.Status.RunID,
		Pending:        s.Status.Queue.Pending,
		Active:         s.Status.Queue.Active,
		Completed:      s.Status.Queue.Completed,
		Failed:         s.Status.Queue.Failed,
		DeadLettered:   s.Status.Queue.DeadLettered,
		QueuedMessages: s.Status.Queue.QueuedMessages,
	}
	if s.Spec.Identity != nil {
		out.Identity = *s.Spec.Identity
	}
	return out
}

func newTask(x *agentlanev1alpha1.ExternalTask, sessionQueue map[string]string) *Task {
	t := &Task{
		Namespace:    x.Namespace,
		Name:         x.Name,
		Lane:         cmp.Or(string(x.Status.Lane), string(x.Spec.Lane), x.Labels[agentlanev1alpha1.LaneLabel]),
		CommandType:  string(x.Spec.CommandType),
		RunID:        x.Spec.RunID,
		Phase:        x.Status.Phase,
		Attempt:      x.Status.Attempt,
		Attempts:     x.Status.Attempts,
		Worker:       x.Status.Worker,
		Node:         x.Status.NodeName,
		Job:          x.Status.JobName,
		Created:      x.CreationTimestamp.Time,
		QueuedAt:     timeOf(x.Status.QueuedAt),
		DispatchedAt: timeOf(x.Status.DispatchedAt),
		StartedAt:    timeOf(x.Status.StartedAt),
		FinishedAt:   timeOf(x.Status.FinishedAt),
	}
	t.Session = x.Labels[agentlanev1alpha1.SessionLabel]
	if x.Spec.SessionRef != nil {
		t.Session = x.Spec.SessionRef.Name
	}
	t.Queue = x.Labels[agentlanev1alpha1.QueueLabel]
	if x.Spec.QueueRef != nil {
		t.Queue = x.Spec.QueueRef.Name
	}
	if t.Queue == "" && t.Session != "" {
		t.Queue = sessionQueue[t.Namespace+"/"+t.Session]
	}
	if x.Spec.Identity != nil {
		t.Identity = *x.Spec.Identity
	}
	if x.Spec.Payload != nil {
		t.Payload = compactJSON(x.Spec.Payload.Raw)
	}
	if r := x.Status.Result; r != nil {
		t.Result = newResult(r)
	}
	if t.Phase.IsTerminal() {
		t.Ended = t.FinishedAt
		if c := meta.FindStatusCondition(x.Status.Conditions, agentlanev1alpha1.ExternalTaskFinishedCondition); t.Ended.IsZero() && c != nil && c.Status == metav1.ConditionTrue {
			t.Ended = c.LastTransitionTime.Time
		}
		if n := len(t.Attempts); t.Ended.IsZero() && n > 0 {
			t.Ended = timeOf(t.Attempts[n-1].FinishedAt)
		}
		if t.Ended.IsZero() {
			t.Ended = t.Created
		}
	}
	return t
}

func newResult(r *agentlanev1alpha1.TaskResult) *Result {
	out := &Result{Success: r.Success, Error: r.Error, ExitCode: r.ExitCode}
	if r.Result == nil || len(r.Result.Raw) == 0 {
		return out
	}
	var shell struct {
		Stdout    *string `json:"stdout"`
		Stderr    *string `json:"stderr"`
		Truncated bool    `json:"truncated"`
	}
	if err := json.Unmarshal(r.Result.Raw, &shell); err == nil && (shell.Stdout != nil || shell.Stderr != nil) {
		if shell.Stdout != nil {
			out.Stdout = *shell.Stdout
		}
		if shell.Stderr != nil {
			out.Stderr = *shell.Stderr
		}
		out.Truncated = shell.Truncated
		return out
	}
	out.JSON = compactJSON(r.Result.Raw)
	return out
}

func compactJSON(raw []byte) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

func timeOf(t *metav1.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.Time
}

// Latest is the most recently started task in flight, or nil.
func (s *Snapshot) Latest() *Task {
	if len(s.InFlight) == 0 {
		return nil
	}
	return s.InFlight[0]
}

// Tasks are the tasks the dashboard lists, in its order: in flight, queued,
// then the RecentLimit most recently finished. The selection moves along
// this list.
func (s *Snapshot) Tasks() []*Task {
	out := make([]*Task, 0, len(s.InFlight)+len(s.Queued)+RecentLimit)
	out = append(out, s.InFlight...)
	out = append(out, s.Queued...)
	return append(out, s.recent()...)
}

func (s *Snapshot) recent() []*Task {
	return s.Finished[:min(len(s.Finished), RecentLimit)]
}

// DefaultTask is the task the detail pane shows when none is selected: the
// latest in flight, else the most recently finished, else the one waiting
// longest. Nil when there are no tasks.
func (s *Snapshot) DefaultTask() *Task {
	for _, list := range [][]*Task{s.InFlight, s.Finished, s.Queued} {
		if len(list) > 0 {
			return list[0]
		}
	}
	return nil
}

// Find returns the task named name, given as namespace/name or as a bare
// name that only one task has; nil when there is no such task.
func (s *Snapshot) Find(name string) *Task {
	var named []*Task
	for _, list := range [][]*Task{s.InFlight, s.Queued, s.Finished} {
		for _, t := range list {
			if t.Key() == name {
				return t
			}
			if t.Name == name {
				named = append(named, t)
			}
		}
	}
	if len(named) != 1 {
		return nil
	}
	return named[0]
}

// Step returns the key of the task delta places after the task with key
// (before it when delta is negative) in the order of Tasks, wrapping around.
// When key is not listed it starts from DefaultTask. Empty when there are no
// tasks.
func (s *Snapshot) Step(key string, delta int) string {
	tasks := s.Tasks()
	if len(tasks) == 0 {
		return ""
	}
	if key == "" {
		if t := s.DefaultTask(); t != nil {
			key = t.Key()
		}
	}
	i := slices.IndexFunc(tasks, func(t *Task) bool { return t.Key() == key })
	if i < 0 {
		// A selected task that left the list (deleted after its TTL, or
		// older than the last RecentLimit): start again from the default.
		i = slices.IndexFunc(tasks, func(t *Task) bool { return t == s.DefaultTask() })
		if i < 0 {
			i = 0
		}
	}
	n := len(tasks)
	return tasks[((i+delta)%n+n)%n].Key()
}

// name is how a renderer shows the object namespace/name: qualified when the
// snapshot spans several namespaces.
func (s *Snapshot) name(namespace, name string) string {
	if s.qualified {
		return namespace + "/" + name
	}
	return name
}

// session returns the session a task belongs to, or nil.
func (s *Snapshot) session(t *Task) *Session {
	for i := range s.Sessions {
		if s.Sessions[i].Namespace == t.Namespace && s.Sessions[i].Name == t.Session {
			return &s.Sessions[i]
		}
	}
	return nil
}
