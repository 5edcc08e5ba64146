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

// sweepFinished deletes the oldest finished ExternalTasks of lq beyond its
// maxFinished, and the oldest DeadLettered ones beyond its dead-letter
// size. Tasks that have not finished are never touched. It returns how many
// it deleted.
func sweepFinished(ctx context.Context, c client.Client, lq *agentlanev1alpha1.LaneQueue) (int, error) {
	list := &agentlanev1alpha1.ExternalTaskList{}
	if err := c.List(ctx, list, client.InNamespace(lq.Namespace),
		client.MatchingLabels{agentlanev1alpha1.QueueLabel: lq.Name}); err != nil {
		return 0, fmt.Errorf("list the queue's tasks: %w", err)
	}
	var finished, dead []*agentlanev1alpha1.ExternalTask
	for i := range list.Items {
		t := &list.Items[i]
		switch {
		case !t.DeletionTimestamp.IsZero() || !t.Status.Phase.IsTerminal():
		case t.Status.Phase == agentlanev1alpha1.ExternalTaskDeadLettered:
			dead = append(dead, t)
		default:
			finished = append(finished, t)
		}
	}
	r := retentionOf(lq)
	deleted := 0
	for _, group := range []struct {
		tasks []*agentlanev1alpha1.ExternalTask
		keep  int
	}{{finished, r.maxFinished}, {dead, r.deadLetters}} {
		extra := len(group.tasks) - group.keep
		if extra <= 0 {
			continue
		}
		slices.SortFunc(group.tasks, func(a, b *agentlanev1alpha1.ExternalTask) int {
			return cmp.Or(finishedAt(a).Compare(finishedAt(b)), cmp.Compare(a.Name, b.Name))
		})
		for _, t := range group.tasks[:extra] {
			if err := c.Delete(ctx, t, client.Preconditions{UID: &t.UID}); client.IgnoreNotFound(err) != nil {
				return deleted, fmt.Errorf("delete finished task %s: %w", t.Name, err)
			}
			deleted++
		}
	}
	if deleted > 0 {
		logf.FromContext(ctx).V(1).Info("Deleted the oldest finished tasks beyond the queue's retention", "deleted", deleted)
	}
	return deleted, nil
}
