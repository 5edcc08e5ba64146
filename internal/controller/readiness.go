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
	"net/http"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/scheduling"
)

// SchedulersReady is a readiness check that passes once every LaneQueue the
// reader holds, whose spec the scheduler takes, has a running scheduler
// (which Schedulers.Rebuild filled from the cluster's tasks before it
// started). A LaneQueue being deleted, or one the scheduler refuses (its
// status says why), does not hold readiness back.
func SchedulersReady(r client.Reader, schedulers *scheduling.Schedulers) healthz.Checker {
	return func(req *http.Request) error {
		list := &agentlanev1alpha1.LaneQueueList{}
		if err := r.List(req.Context(), list); err != nil {
			return fmt.Errorf("list the LaneQueues: %w", err)
		}
		missing := 0
		for i := range list.Items {
			lq := &list.Items[i]
			if !lq.DeletionTimestamp.IsZero() {
				continue
			}
			if _, err := QueueConfig(&lq.Spec); err != nil {
				continue
			}
			if _, ok := schedulers.Get(client.ObjectKeyFromObject(lq)); !ok {
				missing++
			}
		}
		if missing > 0 {
			return fmt.Errorf("%d of %d LaneQueues have no scheduler yet", missing, len(list.Items))
		}
		return nil
	}
}
