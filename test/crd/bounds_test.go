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
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// queueWithLane is a LaneQueue whose only lane, execute, carries the given
// YAML flow fields.
func queueWithLane(fields string) string {
	return fmt.Sprintf(`
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {generateName: bounds-}
spec:
  lanes:
  - {name: execute, priority: 0, %s}
`, fields)
}

// queueWithSpec is a LaneQueue with one plain lane and the given spec
// fields (YAML flow mapping entries).
func queueWithSpec(fields string) string {
	return fmt.Sprintf(`
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {generateName: bounds-}
spec: {lanes: [{name: execute, priority: 0}], %s}
`, fields)
}

// workerLane is a LaneQueue whose execute lane is External on workers
// picked by selector (a YAML flow mapping).
func workerLane(selector string) string {
	return queueWithLane("handlerMode: External, externalTarget: {type: Workers, workerSelector: " + selector + "}")
}

func taskWithTimeout(timeout string) string {
	return fmt.Sprintf(`
apiVersion: agentlane.io/v1alpha1
kind: ExternalTask
metadata: {generateName: bounds-}
spec:
  queueRef: {name: a3s}
  commandType: bash
  timeout: %s
`, timeout)
}

func sessionWith(fields string) string {
	return fmt.Sprintf(`
apiVersion: agentlane.io/v1alpha1
kind: AgentSession
metadata: {generateName: bounds-}
spec: {queueRef: {name: a3s}, %s}
`, fields)
}

var _ = Describe("Duration and selector bounds", func() {
	DescribeTable("refuses a duration out of its bounds or a malformed selector, saying which",
		func(doc, fragment string) {
			expectInvalid(k8sClient.Create(ctx, object(doc)), fragment)
		},
		Entry("a 1ns lane timeout", queueWithLane("timeout: 1ns"),
			"timeout must be a duration between 100ms and 24h"),
		Entry("a lane timeout just under 100ms", queueWithLane("timeout: 99ms"),
			"timeout must be a duration between 100ms and 24h"),
		Entry("a 100-year lane timeout", queueWithLane("timeout: 876000h"),
			"timeout must be a duration between 100ms and 24h"),
		Entry("a lane timeout just over 24h", queueWithLane("timeout: 24h0m1s"),
			"timeout must be a duration between 100ms and 24h"),
		Entry("an 11-year defaultTimeout", queueWithSpec("defaultTimeout: 96360h"),
			"defaultTimeout must be a duration between 100ms and 24h"),
		Entry("a startTimeout over 24h", queueWithLane("startTimeout: 25h"),
			"startTimeout must be a duration between 100ms and 24h"),
		Entry("a 1ns fixedDelay with 100 retries",
			queueWithSpec("retryPolicy: {strategy: Fixed, fixedDelay: 1ns, maxRetries: 100}"),
			"fixedDelay must be a duration between 10ms and 1h"),
		Entry("a fixedDelay just under 10ms on a lane",
			queueWithLane("retryPolicy: {strategy: Fixed, fixedDelay: 9ms}"),
			"fixedDelay must be a duration between 10ms and 1h"),
		Entry("a 1ns initialDelay", queueWithSpec("retryPolicy: {initialDelay: 1ns}"),
			"initialDelay must be a duration between 10ms and 1h"),
		Entry("a maxDelay over 1h", queueWithSpec("retryPolicy: {maxDelay: 2h}"),
			"maxDelay must be a duration between 10ms and 1h"),
		Entry("more than 100 retries", queueWithSpec("retryPolicy: {maxRetries: 101}"),
			"should be less than or equal to 100"),
		Entry("a priorityBoost deadline over 24h", queueWithSpec("priorityBoost: {deadline: 48h}"),
			"deadline must be a duration between 100ms and 24h"),
		Entry("a ttlAfterFinished over a year", queueWithSpec("taskRetention: {ttlAfterFinished: 8761h}"),
			"ttlAfterFinished must be a duration between 0s and 8760h"),
		Entry("a 100-year task timeout", taskWithTimeout("876000h"),
			"timeout must be a duration between 100ms and 24h"),
		Entry("a session lane override timeout of 1ns",
			sessionWith("laneOverrides: [{lane: execute, handlerMode: Internal, timeout: 1ns}]"),
			"timeout must be a duration between 100ms and 24h"),
		Entry("a session idleTimeout over 30 days", sessionWith("runtime: {idleTimeout: 721h, podTemplate: {spec: {containers: [{name: a, image: a}]}}}"),
			"idleTimeout must be a duration between 1s and 720h"),

		Entry("an unknown workerSelector operator",
			workerLane("{matchExpressions: [{key: zone, operator: Near, values: [a]}]}"),
			`Unsupported value: "Near"`),
		Entry("In without values",
			workerLane("{matchExpressions: [{key: zone, operator: In}]}"),
			"values must not be empty when operator is In or NotIn"),
		Entry("NotIn with an empty list",
			workerLane("{matchExpressions: [{key: zone, operator: NotIn, values: []}]}"),
			"values must not be empty when operator is In or NotIn"),
		Entry("Exists with values",
			workerLane("{matchExpressions: [{key: zone, operator: Exists, values: [a]}]}"),
			"values must be empty when operator is Exists or DoesNotExist"),
		Entry("a requirement key that is no label key",
			workerLane(`{matchExpressions: [{key: "bad key!", operator: Exists}]}`),
			"key must be a label key"),
		Entry("a requirement value that is no label value",
			workerLane(`{matchExpressions: [{key: zone, operator: In, values: ["a b"]}]}`),
			"a label value must be at most 63 characters"),
		Entry("a requirement value over 63 characters",
			workerLane(fmt.Sprintf(`{matchExpressions: [{key: zone, operator: In, values: [%s]}]}`, strings.Repeat("a", 64))),
			"Too long"),
		Entry("a matchLabels key that is no label key",
			workerLane(`{matchLabels: {"-zone": a}}`),
			"matchLabels keys must be label keys"),
		Entry("a matchLabels key with a 64-character name",
			workerLane(fmt.Sprintf(`{matchLabels: {"example.com/%s": a}}`, strings.Repeat("n", 64))),
			"matchLabels keys must be label keys"),
		Entry("a matchLabels value that is no label value",
			workerLane(`{matchLabels: {zone: "-a"}}`),
			"a label value must be at most 63 characters"),
		Entry("a sessionOverrides mode that does not exist",
			queueWithLane("sessionOverrides: {allowedModes: [Remote]}"),
			`Unsupported value: "Remote"`),
		Entry("a sessionBounds of 0 pending commands",
			queueWithSpec("sessionBounds: {maxPendingCommands: 0}"),
			"spec.sessionBounds.maxPendingCommands: Invalid value"),
		Entry("a sessionBounds message size over 16 MiB",
			queueWithSpec("sessionBounds: {maxMessageBytes: 16777217}"),
			"spec.sessionBounds.maxMessageBytes: Invalid value"),
		Entry("negative sessionBounds pending bytes",
			queueWithSpec("sessionBounds: {maxPendingBytes: -1}"),
			"spec.sessionBounds.maxPendingBytes: Invalid value"),
	)

	It("admits every bound itself and a selector as Kubernetes writes one", func() {
		for _, doc := range []string{
			queueWithLane("timeout: 100ms, startTimeout: 24h"),
			queueWithLane("timeout: 24h, startTimeout: 100ms"),
			queueWithSpec("defaultTimeout: 24h, retryPolicy: {strategy: Fixed, fixedDelay: 10ms, maxRetries: 100}"),
			queueWithSpec("defaultTimeout: 100ms, retryPolicy: {initialDelay: 10ms, maxDelay: 1h}"),
			queueWithSpec("retryPolicy: {strategy: Fixed, fixedDelay: 1h}, priorityBoost: {deadline: 24h}, taskRetention: {ttlAfterFinished: 8760h}"),
			taskWithTimeout("24h"),
			taskWithTimeout("100ms"),
			sessionWith("laneOverrides: [{lane: execute, handlerMode: Internal, timeout: 24h}]"),
			workerLane(fmt.Sprintf(`{matchLabels: {"topology.kubernetes.io/zone": eu-1a, "example.com/%s": %s, empty: ""},
  matchExpressions: [{key: zone, operator: In, values: [a, b.c, d_e]}, {key: gpu, operator: NotIn, values: ["x"]},
  {key: agentlane.io/pool, operator: Exists}, {key: spot, operator: DoesNotExist, values: []}]}`,
				strings.Repeat("n", 63), strings.Repeat("v", 63))),
			queueWithLane("sessionOverrides: {allowedModes: [External, Hybrid]}"),
			queueWithLane("sessionOverrides: {allowedModes: []}"),
			queueWithSpec("sessionBounds: {maxPendingCommands: 1, maxPendingBytes: 1073741824, maxMessageBytes: 16777216, maxCheckpointBytes: 1, maxPendingDelegations: 10000, maxDelegations: 100000, maxEventStreams: 1, maxWaitingCalls: 10000}"),
		} {
			Expect(k8sClient.Create(ctx, object(doc))).To(Succeed(), doc)
		}
	})
})
