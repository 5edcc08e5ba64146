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

package scheduling

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// DirectTasks is the set of ExternalTasks this manager run recorded for
// commands of Direct lanes and still carries: the Session API adds a task
// before it creates its object and removes it once the task's final status
// is written. The ExternalTask controller leaves the tasks in the set to
// the Session API; a Direct task that is not in it and has not finished
// belongs to an earlier manager run, which can no longer finish it.
type DirectTasks struct {
	mu   sync.Mutex
	held map[types.NamespacedName]struct{}
}

// Hold adds task to the set.
func (d *DirectTasks) Hold(task types.NamespacedName) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.held == nil {
		d.held = make(map[types.NamespacedName]struct{})
	}
	d.held[task] = struct{}{}
}

// Release removes task from the set.
func (d *DirectTasks) Release(task types.NamespacedName) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.held, task)
}

// Holds tells whether task is in the set.
func (d *DirectTasks) Holds(task types.NamespacedName) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.held[task]
	return ok
}

// Len is the number of tasks in the set.
func (d *DirectTasks) Len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.held)
}

// DirectTasks returns the Direct tasks this manager run carries.
func (s *Schedulers) DirectTasks() *DirectTasks { return &s.direct }
