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
	"container/list"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// taskKeys is a set of tasks that wait for something to appear in their
// namespace, oldest first. Waking the first n of a namespace costs O(n),
// however many tasks wait, so that a freed worker slot wakes the task that
// waited longest and nothing needs to look at every waiting task. A task
// added again (it was woken and still found nothing) goes to the back:
// one that no worker can take (its lane's workerSelector, its command type)
// does not hold the front forever, and the wakes go round to the others.
type taskKeys struct {
	mu sync.Mutex
	// byNamespace holds each namespace's waiting tasks, oldest first;
	// an empty namespace is removed.
	byNamespace map[string]*list.List
	// elems finds a task's element in its namespace's list.
	elems map[types.NamespacedName]*list.Element
}

func (k *taskKeys) add(key types.NamespacedName) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if e, ok := k.elems[key]; ok {
		k.byNamespace[key.Namespace].MoveToBack(e)
		return
	}
	if k.elems == nil {
		k.elems = make(map[types.NamespacedName]*list.Element)
		k.byNamespace = make(map[string]*list.List)
	}
	l := k.byNamespace[key.Namespace]
	if l == nil {
		l = list.New()
		k.byNamespace[key.Namespace] = l
	}
	k.elems[key] = l.PushBack(key)
}

func (k *taskKeys) remove(key types.NamespacedName) {
	k.mu.Lock()
	defer k.mu.Unlock()
	e, ok := k.elems[key]
	if !ok {
		return
	}
	delete(k.elems, key)
	l := k.byNamespace[key.Namespace]
	l.Remove(e)
	if l.Len() == 0 {
		delete(k.byNamespace, key.Namespace)
	}
}

// has tells whether the task waits.
func (k *taskKeys) has(key types.NamespacedName) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	_, ok := k.elems[key]
	return ok
}

// in returns the requests of every waiting task of namespace ns, oldest
// first.
func (k *taskKeys) in(ns string) []reconcile.Request { return k.first(ns, -1) }

// first returns the requests of the n tasks of namespace ns that have
// waited longest (all of them when n < 0).
func (k *taskKeys) first(ns string, n int) []reconcile.Request {
	k.mu.Lock()
	defer k.mu.Unlock()
	l := k.byNamespace[ns]
	if l == nil || n == 0 {
		return nil
	}
	if n < 0 || n > l.Len() {
		n = l.Len()
	}
	reqs := make([]reconcile.Request, 0, n)
	for e := l.Front(); e != nil && len(reqs) < n; e = e.Next() {
		reqs = append(reqs, reconcile.Request{NamespacedName: e.Value.(types.NamespacedName)})
	}
	return reqs
}
