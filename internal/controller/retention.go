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

package controller

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/scheduling"
)

// Defaults of a LaneQueue's taskRetention.
const (
	DefaultTaskTTL     = time.Hour
	DefaultMaxFinished = 1000
)

// retention is how many finished ExternalTasks a queue keeps, and how long.
type retention struct {
	ttl         time.Duration
	maxFinished int
	// deadLetters is how many DeadLettered tasks are kept; they are not
	// subject to ttl or maxFinished.
	deadLetters int
}

// retentionOf reads a queue's retention, with defaults; a nil queue gets
// the defaults.
func retentionOf(lq *agentlanev1alpha1.LaneQueue) retention {
	r := retention{ttl: DefaultTaskTTL, maxFinished: DefaultMaxFinished, deadLetters: lanequeue.DefaultDeadLetterSize}
	if lq == nil {
		return r
	}
	if tr := lq.Spec.TaskRetention; tr != nil {
		r.ttl = duration(tr.TTLAfterFinished, r.ttl)
		r.maxFinished = int(int32Or(tr.MaxFinished, int32(r.maxFinished)))
	}
	if d := lq.Spec.DeadLetter; d != nil {
		r.deadLetters = int(int32Or(d.MaxSize, int32(r.deadLetters)))
	}
	return r
}

// sweepFinished deletes lq's finished ExternalTasks beyond what is kept
// (see beyondRetention), given the sessions that use lq. It returns how many
// it deleted.
func sweepFinished(ctx context.Context, c client.Client, lq *agentlanev1alpha1.LaneQueue, sessions []agentlanev1alpha1.AgentSession) (int, error) {
	// Only the finished tasks, through their index, and without copying
	// them out of the cache: a queue may hold thousands of queued tasks,
	// and this runs at each of its status refreshes. Nothing here modifies
	// what it read.
	list := &agentlanev1alpha1.ExternalTaskList{}
	if err := c.List(ctx, list, client.InNamespace(lq.Namespace),
		client.MatchingFields{FinishedQueueField: lq.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return 0, fmt.Errorf("list the queue's finished tasks: %w", err)
	}
	keep := make(map[string]int, len(sessions))
	for i := range sessions {
		keep[sessions[i].Name] = scheduling.RetentionLimitsOf(sessions[i].Spec.Retention).MaxFinishedTasks
	}
	deleted := 0
	for _, t := range beyondRetention(list.Items, retentionOf(lq), keep) {
		if err := c.Delete(ctx, t, client.Preconditions{UID: &t.UID}); client.IgnoreNotFound(err) != nil {
			return deleted, fmt.Errorf("delete finished task %s: %w", t.Name, err)
		}
		deleted++
	}
	if deleted > 0 {
		logf.FromContext(ctx).V(1).Info("Deleted the oldest finished tasks beyond the retention of their sessions and queue", "deleted", deleted)
	}
	return deleted, nil
}

// beyondRetention returns the finished tasks of one queue that are not
// kept, oldest finished first within each cap:
//   - of each session in sessionKeep, the oldest beyond the number it keeps
//     (its maxFinishedTasks);
//   - of what is left, the oldest beyond the queue's maxFinished;
//   - the oldest DeadLettered ones beyond the queue's dead-letter size. Dead
//     letters are the queue's record of work that failed for good: only that
//     size bounds them, not the sessions' caps nor maxFinished.
//
// Tasks that have not finished, or are being deleted, are never returned.
func beyondRetention(tasks []agentlanev1alpha1.ExternalTask, r retention, sessionKeep map[string]int) []*agentlanev1alpha1.ExternalTask {
	var finished, dead []*agentlanev1alpha1.ExternalTask
	for i := range tasks {
		t := &tasks[i]
		switch {
		case !t.DeletionTimestamp.IsZero() || !t.Status.Phase.IsTerminal():
		case t.Status.Phase == agentlanev1alpha1.ExternalTaskDeadLettered:
			dead = append(dead, t)
		default:
			finished = append(finished, t)
		}
	}
	oldestFirst := func(a, b *agentlanev1alpha1.ExternalTask) int {
		return cmp.Or(finishedAt(a).Compare(finishedAt(b)), cmp.Compare(a.Name, b.Name))
	}
	slices.SortFunc(finished, oldestFirst)
	slices.SortFunc(dead, oldestFirst)

	// extra counts, per session, the finished tasks beyond its cap.
	extra := map[string]int{}
	for _, t := range finished {
		if s, ok := sessionOf(t, sessionKeep); ok {
			extra[s]++
		}
	}
	for s, n := range extra {
		extra[s] = n - sessionKeep[s]
	}
	var out, kept []*agentlanev1alpha1.ExternalTask
	for _, t := range finished {
		if s, ok := sessionOf(t, sessionKeep); ok && extra[s] > 0 {
			extra[s]--
			out = append(out, t)
			continue
		}
		kept = append(kept, t)
	}
	if n := len(kept) - r.maxFinished; n > 0 {
		out = append(out, kept[:n]...)
	}
	if n := len(dead) - r.deadLetters; n > 0 {
		out = append(out, dead[:n]...)
	}
	return out
}

// sessionOf returns the session of t, if it is one of sessions.
func sessionOf(t *agentlanev1alpha1.ExternalTask, sessions map[string]int) (string, bool) {
	if t.Spec.SessionRef == nil {
		return "", false
	}
	_, ok := sessions[t.Spec.SessionRef.Name]
	return t.Spec.SessionRef.Name, ok
}
