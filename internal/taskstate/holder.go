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

package taskstate

import (
	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/delegation"
)

// HolderOf is the kind of holder of the task's current attempt, empty when
// no attempt is held (the task waits or has never been dispatched). A
// delegated task (delegation.IsDelegated: its immutable command type and
// its label) is always Delegate's, held or not: the delegation controller,
// not the ExternalTask controller, carries it from its creation.
func HolderOf(task *agentlanev1alpha1.ExternalTask) agentlanev1alpha1.HolderKind {
	if delegation.IsDelegated(task) {
		return agentlanev1alpha1.HolderDelegate
	}
	return heldBy(&task.Status)
}

// heldBy is the holder status records for a held (Dispatched or Running)
// attempt. For an attempt dispatched before status recorded its holder it
// is inferred: the Job in jobName, else the worker in worker, else (a
// Dispatched attempt held by nobody) the Session API's handlers.
func heldBy(st *Status) agentlanev1alpha1.HolderKind {
	if st.Phase != agentlanev1alpha1.ExternalTaskDispatched && st.Phase != agentlanev1alpha1.ExternalTaskRunning {
		return ""
	}
	switch {
	case st.Holder != "":
		return st.Holder
	case st.JobName != "":
		return agentlanev1alpha1.HolderJob
	case st.Worker != "":
		return agentlanev1alpha1.HolderWorkers
	case st.Phase == agentlanev1alpha1.ExternalTaskDispatched:
		return agentlanev1alpha1.HolderHandler
	}
	return ""
}

// RecordHolder records the holder of a held attempt dispatched before
// status recorded it, as HolderOf infers it, so that it is inferred once.
// It reports whether it changed the status.
func RecordHolder(task *agentlanev1alpha1.ExternalTask) bool {
	st := &task.Status
	if st.Holder != "" || st.Phase.IsTerminal() {
		return false
	}
	if st.Phase != agentlanev1alpha1.ExternalTaskDispatched && st.Phase != agentlanev1alpha1.ExternalTaskRunning {
		return false
	}
	h := HolderOf(task)
	st.Holder = h
	return h != ""
}
