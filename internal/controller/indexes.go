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
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// Field indexes, named after the field path they index.
const (
	// QueueRefNameField indexes AgentSessions by spec.queueRef.name.
	QueueRefNameField = "spec.queueRef.name"
	// SessionRefNameField indexes ExternalTasks by spec.sessionRef.name.
	SessionRefNameField = "spec.sessionRef.name"
	// NodeNameField indexes AgentSessions by status.nodeName, the node of
	// their runtime pod.
	NodeNameField = "status.nodeName"
	// FinishedQueueField indexes the ExternalTasks that reached a final
	// phase by the LaneQueue they belong to (their queue label), so that
	// the retention sweep reads the finished tasks only, not every queued
	// one.
	FinishedQueueField = "status.phase.finished.queue"
)

// SetupIndexes registers the field indexes the controllers use, once per
// manager.
func SetupIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	err := indexer.IndexField(ctx, &agentlanev1alpha1.AgentSession{}, QueueRefNameField, func(o client.Object) []string {
		s := o.(*agentlanev1alpha1.AgentSession)
		if s.Spec.QueueRef.Name == "" {
			return nil
		}
		return []string{s.Spec.QueueRef.Name}
	})
	if err != nil {
		return fmt.Errorf("index AgentSession %s: %w", QueueRefNameField, err)
	}
	err = indexer.IndexField(ctx, &agentlanev1alpha1.ExternalTask{}, SessionRefNameField, func(o client.Object) []string {
		t := o.(*agentlanev1alpha1.ExternalTask)
		if t.Spec.SessionRef == nil {
			return nil
		}
		return []string{t.Spec.SessionRef.Name}
	})
	if err != nil {
		return fmt.Errorf("index ExternalTask %s: %w", SessionRefNameField, err)
	}
	err = indexer.IndexField(ctx, &agentlanev1alpha1.ExternalTask{}, FinishedQueueField, func(o client.Object) []string {
		t := o.(*agentlanev1alpha1.ExternalTask)
		if q := t.Labels[agentlanev1alpha1.QueueLabel]; q != "" && t.Status.Phase.IsTerminal() {
			return []string{q}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("index ExternalTask %s: %w", FinishedQueueField, err)
	}
	err = indexer.IndexField(ctx, &agentlanev1alpha1.AgentSession{}, NodeNameField, func(o client.Object) []string {
		s := o.(*agentlanev1alpha1.AgentSession)
		if s.Status.NodeName == "" {
			return nil
		}
		return []string{s.Status.NodeName}
	})
	if err != nil {
		return fmt.Errorf("index AgentSession %s: %w", NodeNameField, err)
	}
	return nil
}
