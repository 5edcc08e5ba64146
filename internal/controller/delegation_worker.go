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
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/delegation"
)

// workerSession builds the worker AgentSession of a delegated task from its
// lane's template: in the task's namespace, controlled by the producer
// session (deleted with it), with the producer's identity (the template
// names only the agent, agentTemplateId), one more level of delegation
// depth than the producer, and budget b (carved from the producer's). Each
// attempt n of the task has a worker session of its own
// (attemptWorkerName).
func workerSession(t *agentlanev1alpha1.ExternalTask, producer *agentlanev1alpha1.AgentSession, dl *delegateLane, b *agentlanev1alpha1.Budget, scheme *runtime.Scheme, n int32) (*agentlanev1alpha1.AgentSession, error) {
	depth, err := delegation.Depth(producer)
	if err != nil {
		return nil, err
	}
	tmpl := dl.spec.ExternalTarget.Delegate.SessionTemplate.Spec.DeepCopy()
	id := &agentlanev1alpha1.Identity{}
	if producer.Spec.Identity != nil {
		id = producer.Spec.Identity.DeepCopy()
	}
	if tmpl.AgentTemplateID != "" {
		id.AgentTemplateID = tmpl.AgentTemplateID
	}
	if id.CorrelationID == "" {
		id.CorrelationID = t.Name
	}
	queue := dl.queue
	if tmpl.QueueRef != nil {
		queue = tmpl.QueueRef.Name
	}
	s := &agentlanev1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{
			Name:      attemptWorkerName(dl.name, t.Name, n),
			Namespace: t.Namespace,
			Labels: map[string]string{
				agentlanev1alpha1.DelegationTaskLabel: t.Name,
				agentlanev1alpha1.QueueLabel:          dl.queue,
				agentlanev1alpha1.LaneLabel:           dl.name,
				delegation.ProducerLabel:              string(producer.UID),
			},
			Annotations: map[string]string{
				agentlanev1alpha1.DelegationDepthAnnotation: strconv.Itoa(depth + 1),
			},
		},
		Spec: agentlanev1alpha1.AgentSessionSpec{
			QueueRef:  agentlanev1alpha1.LaneQueueReference{Name: queue},
			Identity:  id,
			QueueMode: tmpl.QueueMode,
			Budget:    b,
			Retention: tmpl.Retention,
			Runtime:   tmpl.Runtime,
		},
	}
	if err := controllerutil.SetControllerReference(producer, s, scheme); err != nil {
		return nil, err
	}
	return s, nil
}

// workerName names a task's worker session: the lane, then the task, within
// the 63 characters an AgentSession name may have.
func workerName(lane, task string) string {
	prefix := lane
	if room := 63 - len(task) - 1; len(prefix) > room {
		prefix = strings.TrimRight(prefix[:max(room, 0)], "-")
	}
	if prefix == "" {
		return task
	}
	return prefix + "-" + task
}

// attemptWorkerName names the worker session of attempt n of a task: the
// first attempt's is workerName's, a retry's ends "-a<n>", within the 63
// characters an AgentSession name may have.
func attemptWorkerName(lane, task string, n int32) string {
	name := workerName(lane, task)
	if n <= 1 {
		return name
	}
	suffix := "-a" + strconv.Itoa(int(n))
	if len(name)+len(suffix) > 63 {
		name = strings.TrimRight(name[:63-len(suffix)], "-")
	}
	return name + suffix
}

// controlledBySame reports whether a and b have the same controller.
func controlledBySame(a, b *agentlanev1alpha1.AgentSession) bool {
	ca, cb := metav1.GetControllerOf(a), metav1.GetControllerOf(b)
	return ca != nil && cb != nil && ca.UID == cb.UID
}

// firstTurn is the worker's first turn: the text of the task's payload
// ({"text": "..."}), or the payload itself.
func firstTurn(t *agentlanev1alpha1.ExternalTask) string {
	if t.Spec.Payload == nil {
		return ""
	}
	var v struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(t.Spec.Payload.Raw, &v) == nil && v.Text != "" {
		return v.Text
	}
	return string(t.Spec.Payload.Raw)
}

// resultMessage is the inbound message that brings a finished task's result
// to its producer: the header line, then the worker's answer or, for a
// failure, its reason.
func resultMessage(lane string, t *agentlanev1alpha1.ExternalTask) string {
	return resultHeader(lane, t) + "\n" + resultBody(t)
}

// resultHeader is the first line of a delegated task's result message:
// "from queue:<lane> · task#<id> · ok|error · <time>".
func resultHeader(lane string, t *agentlanev1alpha1.ExternalTask) string {
	outcome := "ok"
	if t.Status.Phase != agentlanev1alpha1.ExternalTaskSucceeded {
		outcome = "error"
	}
	at := t.CreationTimestamp.Time
	if t.Status.FinishedAt != nil {
		at = t.Status.FinishedAt.Time
	}
	return fmt.Sprintf("from queue:%s · task#%s · %s · %s", lane, t.Name, outcome, at.UTC().Format(time.RFC3339))
}

func resultBody(t *agentlanev1alpha1.ExternalTask) string {
	res := t.Status.Result
	switch {
	case res == nil:
		return string(t.Status.Phase)
	case t.Status.Phase != agentlanev1alpha1.ExternalTaskSucceeded:
		if res.Error == "" {
			return string(t.Status.Phase)
		}
		return res.Error
	case res.Result == nil:
		return ""
	}
	var v struct {
		Answer string `json:"answer"`
	}
	if json.Unmarshal(res.Result.Raw, &v) == nil {
		return v.Answer
	}
	return string(res.Result.Raw)
}
