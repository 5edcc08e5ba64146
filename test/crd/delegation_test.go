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
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("Admission of Delegate lanes", func() {
	DescribeTable("rejects a Delegate lane that cannot delegate, saying why",
		func(doc, fragment string) {
			expectInvalid(k8sClient.Create(ctx, object(doc)), fragment)
		},
		Entry("no agent template", `
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {generateName: bad-}
spec:
  defaultLane: review
  lanes:
  - {name: review, priority: 0, maxConcurrency: 2, externalTarget: {type: Delegate}}
`, "delegate (with its sessionTemplate) is required when type is Delegate"),
		Entry("a template without its spec", `
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {generateName: bad-}
spec:
  defaultLane: review
  lanes:
  - {name: review, priority: 0, maxConcurrency: 2, externalTarget: {type: Delegate, delegate: {sessionTemplate: {}}}}
`, "spec: Required value"),
		Entry("no cap (maxConcurrency 0 is unlimited)", `
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {generateName: bad-}
spec:
  defaultLane: review
  lanes:
  - {name: review, priority: 0, externalTarget: {type: Delegate, delegate: {sessionTemplate: {spec: {agentTemplateId: reviewer}}}}}
`, "a Delegate lane needs maxConcurrency of 1 or more"),
		Entry("a delegate on a Workers target", `
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {generateName: bad-}
spec:
  defaultLane: review
  lanes:
  - {name: review, priority: 0, maxConcurrency: 1, externalTarget: {type: Workers, delegate: {sessionTemplate: {spec: {}}}}}
`, "delegate may only be set when type is Delegate"),
	)

	It("accepts a Delegate lane with a template and a cap", func() {
		lq := object(`
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {generateName: good-}
spec:
  defaultLane: review
  lanes:
  - name: review
    priority: 0
    maxConcurrency: 2
    externalTarget:
      type: Delegate
      delegate:
        sessionTemplate:
          spec:
            agentTemplateId: reviewer
            queueMode: {mode: followup}
`)
		Expect(k8sClient.Create(ctx, lq)).To(Succeed())
	})
})
