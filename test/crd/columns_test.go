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

package crd

import (
	"encoding/json"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// table reads the API server's table of one object, as kubectl get -o wide
// shows it, as column name -> cell.
func table(resource, ns, name string) map[string]any {
	GinkgoHelper()
	cs, err := kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	raw, err := cs.RESTClient().Get().
		AbsPath(fmt.Sprintf("/apis/%s/namespaces/%s/%s/%s", agentlanev1alpha1.GroupVersion, ns, resource, name)).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").
		DoRaw(ctx)
	Expect(err).NotTo(HaveOccurred())
	t := &metav1.Table{}
	Expect(json.Unmarshal(raw, t)).To(Succeed())
	Expect(t.Rows).To(HaveLen(1))
	cells := map[string]any{}
	for i, c := range t.ColumnDefinitions {
		cells[c.Name] = t.Rows[0].Cells[i]
	}
	return cells
}

var _ = Describe("kubectl columns", func() {
	It("show a session's readiness and why, and a task's exit code and finish reason", func() {
		s := &agentlanev1alpha1.AgentSession{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", GenerateName: "cols-"},
			Spec:       agentlanev1alpha1.AgentSessionSpec{QueueRef: agentlanev1alpha1.LaneQueueReference{Name: "missing"}},
		}
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		s.Status.Phase = agentlanev1alpha1.SessionPending
		s.Status.Conditions = []metav1.Condition{{Type: agentlanev1alpha1.AgentSessionReadyCondition, Status: metav1.ConditionFalse,
			Reason: agentlanev1alpha1.AgentSessionQueueNotFoundReason, Message: "no queue", LastTransitionTime: metav1.Now()}}
		Expect(k8sClient.Status().Update(ctx, s)).To(Succeed())
		cells := table("agentsessions", s.Namespace, s.Name)
		Expect(cells).To(HaveKeyWithValue("Ready", "False"))
		Expect(cells).To(HaveKeyWithValue("Reason", "QueueNotFound"))

		t := &agentlanev1alpha1.ExternalTask{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", GenerateName: "cols-"},
			Spec: agentlanev1alpha1.ExternalTaskSpec{QueueRef: &agentlanev1alpha1.LaneQueueReference{Name: "q"},
				CommandType: "bash"},
		}
		Expect(k8sClient.Create(ctx, t)).To(Succeed())
		t.Status.Phase = agentlanev1alpha1.ExternalTaskFailed
		t.Status.Attempt = 1
		t.Status.Result = &agentlanev1alpha1.TaskResult{Success: false, ExitCode: ptr.To[int32](2), Error: "exit code 2"}
		t.Status.Conditions = []metav1.Condition{{Type: agentlanev1alpha1.ExternalTaskFinishedCondition, Status: metav1.ConditionTrue,
			Reason: "DeadLettered", Message: "out of retries", LastTransitionTime: metav1.Now()}}
		Expect(k8sClient.Status().Update(ctx, t)).To(Succeed())
		cells = table("externaltasks", t.Namespace, t.Name)
		Expect(cells).To(HaveKeyWithValue("Exit", BeNumerically("==", 2)))
		Expect(cells).To(HaveKeyWithValue("Reason", "DeadLettered"))
	})
})
