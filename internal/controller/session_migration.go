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

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// A migration moves an Active session to another node on request (the
// agentlane.io/migrate annotation): the session passivates with reason
// migration like a drained one (checkpoint, then eviction), and resumes at
// once in a new runtime pod kept off the node the old pod ran on. The
// request is taken (the annotation removed) when the passivation starts, so
// one request moves the session once.

// migrationRequested tells whether the session asks to be moved, and why.
func migrationRequested(s *agentlanev1alpha1.AgentSession) (string, bool) {
	v, ok := s.Annotations[agentlanev1alpha1.MigrateAnnotation]
	if !ok {
		return "", false
	}
	why := fmt.Sprintf("annotation %s asks to move the session", agentlanev1alpha1.MigrateAnnotation)
	if s.Status.NodeName != "" {
		why += " off node " + s.Status.NodeName
	}
	if v != "" {
		why += ": " + v
	}
	return why, true
}

// takeMigrationRequest removes the annotation from the session. The patch
// goes through a copy so that the status this reconcile has computed stays
// in s; s takes the new resourceVersion for its status write.
func (r *AgentSessionReconciler) takeMigrationRequest(ctx context.Context, s *agentlanev1alpha1.AgentSession) error {
	cur := s.DeepCopy()
	base := cur.DeepCopy()
	delete(cur.Annotations, agentlanev1alpha1.MigrateAnnotation)
	if err := r.Patch(ctx, cur, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("take the migration request: %w", err)
	}
	s.Annotations, s.ResourceVersion = cur.Annotations, cur.ResourceVersion
	return nil
}

// avoidNode keeps the pod of spec off node: every node selector term of its
// required node affinity (or a new one) also requires another node name.
func avoidNode(spec *corev1.PodSpec, node string) {
	notOld := corev1.NodeSelectorRequirement{Key: "metadata.name", Operator: corev1.NodeSelectorOpNotIn, Values: []string{node}}
	if spec.Affinity == nil {
		spec.Affinity = &corev1.Affinity{}
	}
	if spec.Affinity.NodeAffinity == nil {
		spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := spec.Affinity.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
	}
	req := na.RequiredDuringSchedulingIgnoredDuringExecution
	if len(req.NodeSelectorTerms) == 0 {
		req.NodeSelectorTerms = []corev1.NodeSelectorTerm{{}}
	}
	for i := range req.NodeSelectorTerms {
		req.NodeSelectorTerms[i].MatchFields = append(req.NodeSelectorTerms[i].MatchFields, notOld)
	}
}
