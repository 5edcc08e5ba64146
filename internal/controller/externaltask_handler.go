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
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// A lane whose external target is Handler has no worker and no Job: its
// granted attempt waits Dispatched, held by nobody, until a handler
// completes it through the Session API (which writes status.result, fenced
// by the attempt and the task's resourceVersion) or its timeout ends it.

// offerToHandlers writes that attempt n is dispatched to the Session API's
// handlers.
func offerToHandlers(st *agentlanev1alpha1.ExternalTaskStatus, generation int64, n int32, now metav1.Time) {
	st.Phase = agentlanev1alpha1.ExternalTaskDispatched
	st.Worker, st.WorkerIncarnation, st.NodeName, st.JobName = "", "", "", ""
	st.DispatchedAt = &now
	setCondition(st, generation, now, agentlanev1alpha1.ExternalTaskClaimedCondition, metav1.ConditionFalse,
		agentlanev1alpha1.ExternalTaskAwaitingHandlerReason,
		fmt.Sprintf("attempt %d waits for a handler to complete it through the Session API", n))
}

// handlerHeld tells whether the current attempt is offered to handlers:
// dispatched to neither a worker nor a Job.
func handlerHeld(st *agentlanev1alpha1.ExternalTaskStatus) bool {
	return st.Phase == agentlanev1alpha1.ExternalTaskDispatched && st.Worker == "" && st.JobName == ""
}
