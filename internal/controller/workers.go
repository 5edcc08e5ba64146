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
	"slices"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/workerproto"
)

// workerInfo is a worker as its heartbeat Lease advertises it
// (docs/workers.md).
type workerInfo struct {
	name         string
	node         string
	labels       labels.Set
	capacity     int
	queues       []string // empty: every queue
	lanes        []string // empty: every lane
	commandTypes []string // empty: not advertised, so any
	draining     bool
	// incarnation is the worker process renewing the Lease; empty for a
	// worker that advertises none.
	incarnation string
	// expires is when the worker stops being live unless seen renewing:
	// the Lease's renewTime plus its duration as parsed, replaced by the
	// manager's own judgement (workerSightings) for a candidate worker.
	expires time.Time
}

// parseWorkerLease reads a worker Lease (workerproto.Parse); ok is false
// for a Lease that is not a worker's heartbeat.
func parseWorkerLease(l *coordinationv1.Lease) (workerInfo, bool) {
	wl, ok := workerproto.Parse(l)
	if !ok {
		return workerInfo{}, false
	}
	return workerInfo{
		name:         wl.Name,
		node:         wl.NodeName,
		labels:       labels.Set(wl.Labels),
		capacity:     wl.Capacity,
		queues:       wl.Queues,
		lanes:        wl.Lanes,
		commandTypes: wl.CommandTypes,
		draining:     wl.Draining,
		incarnation:  wl.Incarnation,
		expires:      wl.Expires,
	}, true
}

// serves tells whether the worker takes tasks of commandType from lane of
// queue, as selected by the lane's workerSelector (nil: any worker).
func (w workerInfo) serves(queue, lane, commandType string, selector labels.Selector) bool {
	return (len(w.queues) == 0 || slices.Contains(w.queues, queue)) &&
		(len(w.lanes) == 0 || slices.Contains(w.lanes, lane)) &&
		(len(w.commandTypes) == 0 || slices.Contains(w.commandTypes, commandType)) &&
		(selector == nil || selector.Matches(w.labels))
}

// workerKey names a worker within a namespace.
type workerKey struct {
	namespace, name string
}

// workerLedger counts the tasks assigned to each worker, so that no worker
// is given more tasks than its advertised capacity. The counts follow the
// tasks' status as the controller observes it, plus the assignments it has
// made and not observed yet, so back-to-back dispatches do not overfill a
// worker while the cache catches up.
type workerLedger struct {
	mu     sync.Mutex
	byTask map[types.NamespacedName]workerKey
	load   map[workerKey]int
	// handedBack remembers the worker that gave a task back, so that the
	// task goes to another worker when there is one: the worker is
	// stopping, even if its draining Lease has not reached the cache yet.
	handedBack map[types.NamespacedName]workerKey
}

func (l *workerLedger) assignLocked(task types.NamespacedName, w workerKey) {
	if cur, ok := l.byTask[task]; ok {
		if cur == w {
			return
		}
		l.releaseLocked(task)
	}
	if l.byTask == nil {
		l.byTask = make(map[types.NamespacedName]workerKey)
		l.load = make(map[workerKey]int)
	}
	l.byTask[task] = w
	l.load[w]++
}

func (l *workerLedger) releaseLocked(task types.NamespacedName) {
	w, ok := l.byTask[task]
	if !ok {
		return
	}
	delete(l.byTask, task)
	if l.load[w]--; l.load[w] <= 0 {
		delete(l.load, w)
	}
}

// observe brings the ledger in line with a task's status: a task that a
// pool worker holds counts against it, any other does not. It tells
// whether the task gave a worker's slot back (it ended or was handed back),
// so that a task waiting for a worker can be woken.
func (l *workerLedger) observe(task *agentlanev1alpha1.ExternalTask) (freed bool) {
	key := types.NamespacedName{Namespace: task.Namespace, Name: task.Name}
	st := task.Status
	l.mu.Lock()
	defer l.mu.Unlock()
	if st.Worker != "" && st.JobName == "" &&
		(st.Phase == agentlanev1alpha1.ExternalTaskDispatched || st.Phase == agentlanev1alpha1.ExternalTaskRunning) {
		l.assignLocked(key, workerKey{task.Namespace, st.Worker})
		return false
	}
	if w, ok := l.byTask[key]; ok && st.Phase == agentlanev1alpha1.ExternalTaskQueued && st.Worker == "" {
		if l.handedBack == nil {
			l.handedBack = make(map[types.NamespacedName]workerKey)
		}
		l.handedBack[key] = w
	}
	_, held := l.byTask[key]
	l.releaseLocked(key)
	return held
}

// release forgets the task's assignment and tells whether it had one.
func (l *workerLedger) release(task types.NamespacedName) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, held := l.byTask[task]
	l.releaseLocked(task)
	delete(l.handedBack, task)
	return held
}

// free is how many more tasks the worker of the given capacity can take.
func (l *workerLedger) free(w workerKey, capacity int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return max(capacity-l.load[w], 0)
}

// tasksOf returns the tasks assigned to a worker.
func (l *workerLedger) tasksOf(w workerKey) []types.NamespacedName {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []types.NamespacedName
	for t, held := range l.byTask {
		if held == w {
			out = append(out, t)
		}
	}
	return out
}

// pick assigns the task to the candidate with the most free capacity
// (relative to its size, then by name) and returns it; ok is false when
// every candidate is full.
func (l *workerLedger) pick(task types.NamespacedName, candidates []workerInfo) (workerInfo, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	// An earlier assignment of the task is void: the task is being
	// dispatched again.
	l.releaseLocked(task)
	avoid, avoiding := l.handedBack[task]
	if avoiding && !slices.ContainsFunc(candidates, func(c workerInfo) bool { return c.name != avoid.name }) {
		avoiding = false // the only worker there is
	}
	var best *workerInfo
	var bestLoad int
	for i := range candidates {
		c := &candidates[i]
		load := l.load[workerKey{task.Namespace, c.name}]
		if load >= c.capacity || (avoiding && c.name == avoid.name) {
			continue
		}
		// Compare free fractions without division: load/capacity.
		if best == nil || cmp.Or(cmp.Compare(load*best.capacity, bestLoad*c.capacity), strings.Compare(c.name, best.name)) < 0 {
			best, bestLoad = c, load
		}
	}
	if best == nil {
		return workerInfo{}, false
	}
	l.assignLocked(task, workerKey{task.Namespace, best.name})
	delete(l.handedBack, task)
	return *best, true
}
