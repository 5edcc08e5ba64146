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
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

var _ = Describe("A lane's heartbeatTimeout", func() {
	DescribeTable("is refused outside its bounds",
		func(doc, fragment string) {
			expectInvalid(k8sClient.Create(ctx, object(doc)), fragment)
		},
		Entry("below 2s", `
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {generateName: bad-}
spec:
  lanes:
  - {name: execute, priority: 0, handlerMode: External, heartbeatTimeout: 1s}
`, "heartbeatTimeout must be a duration between 2s and 1h, such as 10s"),
		Entry("above 1h", `
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {generateName: bad-}
spec:
  lanes:
  - {name: execute, priority: 0, handlerMode: External, heartbeatTimeout: 2h, timeout: 3h}
`, "heartbeatTimeout must be a duration between 2s and 1h, such as 10s"),
		Entry("not below the lane's timeout", `
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {generateName: bad-}
spec:
  lanes:
  - {name: execute, priority: 0, handlerMode: External, heartbeatTimeout: 30s, timeout: 30s}
`, "heartbeatTimeout must be shorter than the lane's timeout"),
		Entry("on a Direct lane, whose attempts send no heartbeats", `
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {generateName: bad-}
spec:
  lanes:
  - {name: execute, priority: 0, handlerMode: External, heartbeatTimeout: 10s, externalTarget: {type: Direct}}
`, "a Direct or Delegate lane's attempts send none"),
		Entry("on a Delegate lane", `
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {generateName: bad-}
spec:
  lanes:
  - {name: execute, priority: 0, handlerMode: External, maxConcurrency: 2, heartbeatTimeout: 10s, externalTarget: {type: Delegate}}
`, "a Direct or Delegate lane's attempts send none"),
	)

	It("is accepted within its bounds", func() {
		Expect(k8sClient.Create(ctx, object(`
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {generateName: good-}
spec:
  lanes:
  - {name: execute, priority: 0, handlerMode: External, heartbeatTimeout: 10s, timeout: 10m}
`))).To(Succeed())
	})
})

var _ = Describe("An ExternalTask's progress note", func() {
	It("is bounded to 256 characters", func() {
		task := &agentlanev1alpha1.ExternalTask{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "hb-", Namespace: "default"},
			Spec:       agentlanev1alpha1.ExternalTaskSpec{CommandType: "bash", QueueRef: &agentlanev1alpha1.LaneQueueReference{Name: "q"}},
		}
		Expect(k8sClient.Create(ctx, task)).To(Succeed())
		task.Status.Phase = agentlanev1alpha1.ExternalTaskRunning
		task.Status.Progress = strings.Repeat("x", 257)
		expectInvalid(k8sClient.Status().Update(ctx, task), "status.progress")
		task.Status.Progress = strings.Repeat("é", 256)
		Expect(k8sClient.Status().Update(ctx, task)).To(Succeed())
	})
})
