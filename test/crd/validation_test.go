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

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// object decodes one YAML document into an unstructured object in the
// default namespace.
func object(doc string) *unstructured.Unstructured {
	GinkgoHelper()
	u := &unstructured.Unstructured{}
	Expect(yaml.Unmarshal([]byte(doc), &u.Object)).To(Succeed())
	if u.GetNamespace() == "" {
		u.SetNamespace("default")
	}
	return u
}

// expectInvalid checks that err is an Invalid error carrying fragment.
func expectInvalid(err error, fragment string) {
	GinkgoHelper()
	Expect(err).To(HaveOccurred(), "the apiserver accepted the object; want an error containing %q", fragment)
	Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
	Expect(err.Error()).To(ContainSubstring(fragment))
}

var _ = Describe("Admission of invalid objects", func() {
	DescribeTable("rejects a bad object on create with a clear message",
		func(doc, fragment string) {
			expectInvalid(k8sClient.Create(ctx, object(doc)), fragment)
		},
		// LaneQueue
		Entry("duplicate lane names", `
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {generateName: bad-}
spec:
  lanes:
  - {name: execute, priority: 0}
  - {name: execute, priority: 1}
`, "lane names must be unique"),
		Entry("negative maxConcurrency", `
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {generateName: bad-}
spec:
  lanes:
  - {name: execute, priority: 0, maxConcurrency: -1}
`, "should be greater than or equal to 0"),
		Entry("negative maxConcurrent", `
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {generateName: bad-}
spec:
  maxConcurrent: -3
  lanes:
  - {name: execute, priority: 0}
`, "spec.maxConcurrent in body should be greater than or equal to 0"),
		Entry("unknown handlerMode", `
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {generateName: bad-}
spec:
  lanes:
  - {name: execute, priority: 0, handlerMode: Remote}
`, `Unsupported value: "Remote"`),
		Entry("unknown fairness", `
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {generateName: bad-}
spec:
  fairness: Random
  lanes:
  - {name: execute, priority: 0}
`, `Unsupported value: "Random"`),
		Entry("Fixed retry without fixedDelay", `
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {generateName: bad-}
spec:
  retryPolicy: {strategy: Fixed, maxRetries: 2}
  lanes:
  - {name: execute, priority: 0}
`, "fixedDelay is required when strategy is Fixed"),
		Entry("Fixed retry without fixedDelay on a lane", `
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {generateName: bad-}
spec:
  lanes:
  - {name: execute, priority: 0, retryPolicy: {strategy: Fixed}}
`, "fixedDelay is required when strategy is Fixed"),
		Entry("initialDelay above maxDelay", `
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {generateName: bad-}
spec:
  retryPolicy: {initialDelay: 1m, maxDelay: 30s}
  lanes:
  - {name: execute, priority: 0}
`, "initialDelay must not exceed maxDelay"),
		Entry("maxRetries above 100", `
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {generateName: bad-}
spec:
  retryPolicy: {maxRetries: 101}
  lanes:
  - {name: execute, priority: 0}
`, "should be less than or equal to 100"),
		Entry("routing rule names missing lane", `
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {generateName: bad-}
spec:
  lanes:
  - {name: execute, priority: 0}
  routing:
  - {commandType: grep, lane: query}
`, "every routing rule must name a lane defined in spec.lanes"),
		Entry("duplicate routing command type", `
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {generateName: bad-}
spec:
  lanes:
  - {name: execute, priority: 0}
  routing:
  - {commandType: grep, lane: execute}
  - {commandType: grep, lane: execute}
`, "Duplicate value"),
		Entry("routing rule sends a type to a lane that refuses it", `
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {generateName: bad-}
spec:
  lanes:
  - {name: execute, priority: 0}
  - {name: tools, priority: 1, handlerMode: External, commandTypes: [read, grep]}
  routing:
  - {commandType: bash, lane: tools}
`, "a routing rule may only send a command type to a lane whose commandTypes accept it"),
		Entry("duplicate lane command type", `
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {generateName: bad-}
spec:
  lanes:
  - {name: execute, priority: 0, commandTypes: [bash, bash]}
`, "Duplicate value"),
		Entry("defaultLane names missing lane", `
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {generateName: bad-}
spec:
  defaultLane: main
  lanes:
  - {name: execute, priority: 0}
`, "defaultLane must name a lane defined in spec.lanes"),
		Entry("no execute lane and no defaultLane", `
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {generateName: bad-}
spec:
  lanes:
  - {name: main, priority: 0}
`, "defaultLane is required when no lane is named execute"),
		Entry("per-session cap above shared cap", `
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {generateName: bad-}
spec:
  lanes:
  - {name: execute, priority: 0, maxConcurrency: 2, maxConcurrencyPerSession: 4}
`, "maxConcurrencyPerSession must not exceed maxConcurrency"),
		Entry("rate limit with zero count", `
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {generateName: bad-}
spec:
  rateLimit: {count: 0, per: Second}
  lanes:
  - {name: execute, priority: 0}
`, "spec.rateLimit.count in body should be greater than or equal to 1"),
		Entry("rate limit with unknown period", `
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {generateName: bad-}
spec:
  lanes:
  - {name: execute, priority: 0, rateLimit: {count: 5, per: Day}}
`, `Unsupported value: "Day"`),
		Entry("warning depth above critical depth", `
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {generateName: bad-}
spec:
  alerts: {warningDepth: 200}
  lanes:
  - {name: execute, priority: 0}
`, "warningDepth must not exceed criticalDepth"),
		Entry("negative default timeout", `
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {generateName: bad-}
spec:
  defaultTimeout: -5s
  lanes:
  - {name: execute, priority: 0}
`, "defaultTimeout must be a duration between 100ms and 24h"),
		Entry("malformed lane timeout", `
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {generateName: bad-}
spec:
  lanes:
  - {name: execute, priority: 0, timeout: soon}
`, "timeout must be a duration between 100ms and 24h, such as 30s"),
		Entry("zero lane startTimeout", `
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {generateName: bad-}
spec:
  lanes:
  - {name: execute, priority: 0, handlerMode: External, startTimeout: 0s}
`, "startTimeout must be a duration between 100ms and 24h, such as 10m"),
		Entry("malformed lane startTimeout", `
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {generateName: bad-}
spec:
  lanes:
  - {name: execute, priority: 0, handlerMode: External, startTimeout: later}
`, "startTimeout must be a duration between 100ms and 24h, such as 10m"),
		Entry("Job target without jobTemplate", `
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {generateName: bad-}
spec:
  lanes:
  - {name: execute, priority: 0, handlerMode: External, externalTarget: {type: Job}}
`, "jobTemplate is required when type is Job"),
		Entry("jobTemplate on a Workers target", `
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {generateName: bad-}
spec:
  lanes:
  - name: execute
    priority: 0
    handlerMode: External
    externalTarget: {type: Workers, jobTemplate: {spec: {template: {spec: {containers: [{name: w, image: w}]}}}}}
`, "jobTemplate may only be set when type is Job"),
		Entry("tenantWeights without WeightedTenant", `
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {generateName: bad-}
spec:
  tenantWeights: [{tenantId: acme, weight: 2}]
  lanes:
  - {name: execute, priority: 0}
`, "tenantWeights may only be set when fairness is WeightedTenant"),
		Entry("lane name not a DNS label", `
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {generateName: bad-}
spec:
  lanes:
  - {name: Execute_Lane, priority: 0}
  defaultLane: Execute_Lane
`, "spec.lanes[0].name in body should match"),
		Entry("no lanes", `
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {generateName: bad-}
spec:
  lanes: []
`, "should have at least 1 items"),
		Entry("negative priority", `
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {generateName: bad-}
spec:
  lanes:
  - {name: execute, priority: -1}
`, "spec.lanes[0].priority in body should be greater than or equal to 0"),
		// AgentSession
		Entry("session without queueRef", `
apiVersion: agentlane.io/v1alpha1
kind: AgentSession
metadata: {generateName: bad-}
spec:
  identity: {tenantId: acme}
`, "spec.queueRef: Required value"),
		Entry("unknown queue mode", `
apiVersion: agentlane.io/v1alpha1
kind: AgentSession
metadata: {generateName: bad-}
spec:
  queueRef: {name: a3s}
  queueMode: {mode: queued}
`, `Unsupported value: "queued"`),
		Entry("unknown drop policy", `
apiVersion: agentlane.io/v1alpha1
kind: AgentSession
metadata: {generateName: bad-}
spec:
  queueRef: {name: a3s}
  queueMode: {drop: oldest}
`, `Unsupported value: "oldest"`),
		Entry("queue cap zero", `
apiVersion: agentlane.io/v1alpha1
kind: AgentSession
metadata: {generateName: bad-}
spec:
  queueRef: {name: a3s}
  queueMode: {cap: 0}
`, "spec.queueMode.cap in body should be greater than or equal to 1"),
		Entry("token soft above hard", `
apiVersion: agentlane.io/v1alpha1
kind: AgentSession
metadata: {generateName: bad-}
spec:
  queueRef: {name: a3s}
  budget: {tokens: {soft: 2000, hard: 1000}}
`, "soft limit must not exceed hard limit"),
		Entry("cost soft above hard", `
apiVersion: agentlane.io/v1alpha1
kind: AgentSession
metadata: {generateName: bad-}
spec:
  queueRef: {name: a3s}
  budget: {cost: {soft: "12.5", hard: 10}}
`, "soft limit must not exceed hard limit"),
		Entry("negative cost", `
apiVersion: agentlane.io/v1alpha1
kind: AgentSession
metadata: {generateName: bad-}
spec:
  queueRef: {name: a3s}
  budget: {cost: {hard: "-1"}}
`, "hard must be a positive amount"),
		Entry("token budget with no limit", `
apiVersion: agentlane.io/v1alpha1
kind: AgentSession
metadata: {generateName: bad-}
spec:
  queueRef: {name: a3s}
  budget: {tokens: {}}
`, "set soft, hard or both"),
		Entry("guard URL not http", `
apiVersion: agentlane.io/v1alpha1
kind: AgentSession
metadata: {generateName: bad-}
spec:
  queueRef: {name: a3s}
  budget: {guard: {url: "ftp://guard.example.com/check"}}
`, "url must be an absolute http or https URL"),
		Entry("guard timeout too long", `
apiVersion: agentlane.io/v1alpha1
kind: AgentSession
metadata: {generateName: bad-}
spec:
  queueRef: {name: a3s}
  budget: {guard: {url: "https://guard.example.com/check", timeout: 1m}}
`, "timeout must be a positive duration of at most 30s"),
		Entry("unknown guard failure policy", `
apiVersion: agentlane.io/v1alpha1
kind: AgentSession
metadata: {generateName: bad-}
spec:
  queueRef: {name: a3s}
  budget: {guard: {url: "https://guard.example.com/check", failurePolicy: Retry}}
`, `Unsupported value: "Retry"`),
		Entry("lane override with bad lane name", `
apiVersion: agentlane.io/v1alpha1
kind: AgentSession
metadata: {generateName: bad-}
spec:
  queueRef: {name: a3s}
  laneOverrides: [{lane: "Execute!", handlerMode: External}]
`, "spec.laneOverrides[0].lane in body should match"),
		Entry("duplicate lane overrides", `
apiVersion: agentlane.io/v1alpha1
kind: AgentSession
metadata: {generateName: bad-}
spec:
  queueRef: {name: a3s}
  laneOverrides: [{lane: execute, handlerMode: External}, {lane: execute, handlerMode: Internal}]
`, "Duplicate value"),
		Entry("unknown desired state", `
apiVersion: agentlane.io/v1alpha1
kind: AgentSession
metadata: {generateName: bad-}
spec:
  queueRef: {name: a3s}
  desiredState: Stopped
`, `Unsupported value: "Stopped"`),
		Entry("retention maxRuns zero", `
apiVersion: agentlane.io/v1alpha1
kind: AgentSession
metadata: {generateName: bad-}
spec:
  queueRef: {name: a3s}
  retention: {maxRuns: 0}
`, "spec.retention.maxRuns in body should be greater than or equal to 1"),
		Entry("runtime without podTemplate", `
apiVersion: agentlane.io/v1alpha1
kind: AgentSession
metadata: {generateName: bad-}
spec:
  queueRef: {name: a3s}
  runtime: {idleTimeout: 30m}
`, "spec.runtime.podTemplate: Required value"),
		Entry("session name longer than 63 characters", `
apiVersion: agentlane.io/v1alpha1
kind: AgentSession
metadata: {name: a123456789012345678901234567890123456789012345678901234567890123}
spec:
  queueRef: {name: a3s}
`, "AgentSession name must be at most 63 characters"),
		Entry("queue name longer than 63 characters", `
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {name: q123456789012345678901234567890123456789012345678901234567890123}
spec:
  lanes:
  - {name: execute, priority: 0}
`, "LaneQueue name must be at most 63 characters"),
		// ExternalTask
		Entry("task without session or queue", `
apiVersion: agentlane.io/v1alpha1
kind: ExternalTask
metadata: {generateName: bad-}
spec:
  commandType: bash
`, "one of sessionRef or queueRef is required"),
		Entry("task without commandType", `
apiVersion: agentlane.io/v1alpha1
kind: ExternalTask
metadata: {generateName: bad-}
spec:
  queueRef: {name: a3s}
`, "spec.commandType: Required value"),
		Entry("task with zero timeout", `
apiVersion: agentlane.io/v1alpha1
kind: ExternalTask
metadata: {generateName: bad-}
spec:
  queueRef: {name: a3s}
  commandType: bash
  timeout: 0s
`, "timeout must be a duration between 100ms and 24h"),
		// Templates that do not decode into a Pod or a Job: stored, they
		// would break every cache that lists the kind.
		Entry("session podTemplate with a number for its containers", `
apiVersion: agentlane.io/v1alpha1
kind: AgentSession
metadata: {generateName: bad-}
spec:
  queueRef: {name: a3s}
  runtime:
    podTemplate:
      spec: {containers: 5}
`, "spec.runtime.podTemplate.spec.containers: Invalid value: \"integer\": spec.runtime.podTemplate.spec.containers in body must be of type array"),
		Entry("session podTemplate with a string for a container's ports", `
apiVersion: agentlane.io/v1alpha1
kind: AgentSession
metadata: {generateName: bad-}
spec:
  queueRef: {name: a3s}
  runtime:
    podTemplate:
      spec:
        containers: [{name: agent, image: agent:v1, ports: "8080"}]
`, "spec.runtime.podTemplate.spec.containers[0].ports: Invalid value: \"string\""),
		Entry("lane jobTemplate with a string for its backoffLimit", `
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {generateName: bad-}
spec:
  lanes:
  - name: build
    handlerMode: External
    externalTarget:
      type: Job
      jobTemplate:
        spec:
          backoffLimit: "none"
          template:
            spec:
              containers: [{name: worker, image: agentlane:dev}]
`, "spec.lanes[0].externalTarget.jobTemplate.spec.backoffLimit: Invalid value: \"string\""),
		Entry("task with negative priority", `
apiVersion: agentlane.io/v1alpha1
kind: ExternalTask
metadata: {generateName: bad-}
spec:
  queueRef: {name: a3s}
  commandType: bash
  priority: -1
`, "spec.priority in body should be greater than or equal to 0"),
		Entry("task with bad command type", `
apiVersion: agentlane.io/v1alpha1
kind: ExternalTask
metadata: {generateName: bad-}
spec:
  queueRef: {name: a3s}
  commandType: "rm -rf"
`, "spec.commandType in body should match"),
	)
})

const (
	sessionBase = `
apiVersion: agentlane.io/v1alpha1
kind: AgentSession
metadata: {generateName: upd-}
spec:
  queueRef: {name: a3s}
`
	taskBase = `
apiVersion: agentlane.io/v1alpha1
kind: ExternalTask
metadata: {generateName: upd-}
spec:
  queueRef: {name: a3s}
  commandType: bash
  payload: {command: "echo 1"}
  timeout: 1m
  identity: {tenantId: acme}
`
)

func set(value any, path ...string) func(*unstructured.Unstructured) {
	return func(u *unstructured.Unstructured) {
		Expect(unstructured.SetNestedField(u.Object, value, path...)).To(Succeed())
	}
}

var _ = Describe("Admission of updates", func() {
	DescribeTable("rejects a change to an immutable field",
		func(base string, mutate func(*unstructured.Unstructured), fragment string) {
			u := object(base)
			Expect(k8sClient.Create(ctx, u)).To(Succeed())
			mutate(u)
			expectInvalid(k8sClient.Update(ctx, u), fragment)
		},
		Entry("session queueRef", sessionBase, set("openclaw", "spec", "queueRef", "name"), "queueRef is immutable"),
		Entry("task commandType", taskBase, set("write", "spec", "commandType"), "commandType is immutable"),
		Entry("task payload", taskBase, set("echo 2", "spec", "payload", "command"), "payload is immutable"),
		Entry("task lane added", taskBase, set("execute", "spec", "lane"), "spec is immutable: fields cannot be added or removed"),
		Entry("task timeout", taskBase, set("2m", "spec", "timeout"), "timeout is immutable"),
		Entry("task identity", taskBase, set("other", "spec", "identity", "tenantId"), "identity is immutable"),
		Entry("task queueRef", taskBase, set("openclaw", "spec", "queueRef", "name"), "queueRef is immutable"),
	)

	It("rejects an unknown task phase", func() {
		u := object(taskBase)
		Expect(k8sClient.Create(ctx, u)).To(Succeed())
		set("Done", "status", "phase")(u)
		expectInvalid(k8sClient.Status().Update(ctx, u), `Unsupported value: "Done"`)
	})

	It("keeps a finished task finished, so a late completion is refused", func() {
		u := object(taskBase)
		Expect(k8sClient.Create(ctx, u)).To(Succeed())
		set("Succeeded", "status", "phase")(u)
		Expect(k8sClient.Status().Update(ctx, u)).To(Succeed())
		// Writing the same terminal phase again is fine.
		set(int64(1), "status", "attempt")(u)
		Expect(k8sClient.Status().Update(ctx, u)).To(Succeed())
		set("Running", "status", "phase")(u)
		expectInvalid(k8sClient.Status().Update(ctx, u), "phase cannot change once the task has finished")
	})

	It("accepts queue, the legacy name of steer, as a session's queue mode and keeps it as written", func() {
		s := object(`
apiVersion: agentlane.io/v1alpha1
kind: AgentSession
metadata: {generateName: legacy-}
spec:
  queueRef: {name: a3s}
  queueMode: {mode: queue}
`)
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		got := &agentlanev1alpha1.AgentSession{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(s), got)).To(Succeed())
		Expect(got.Spec.QueueMode).NotTo(BeNil())
		Expect(got.Spec.QueueMode.Mode).To(Equal(agentlanev1alpha1.QueueModeQueue))
	})

	It("allows the changes a user or the operator makes", func() {
		s := object(sessionBase)
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		set("Passivated", "spec", "desiredState")(s)
		set("other", "spec", "identity", "tenantId")(s)
		Expect(k8sClient.Update(ctx, s)).To(Succeed())

		x := object(taskBase)
		Expect(k8sClient.Create(ctx, x)).To(Succeed())
		x.SetLabels(map[string]string{agentlanev1alpha1.LaneLabel: "execute"})
		Expect(k8sClient.Update(ctx, x)).To(Succeed())
		set("Running", "status", "phase")(x)
		Expect(k8sClient.Status().Update(ctx, x)).To(Succeed())
	})

	It("round-trips a typed task through Get and Update without tripping immutability", func() {
		u := object(`
apiVersion: agentlane.io/v1alpha1
kind: ExternalTask
metadata: {generateName: roundtrip-}
spec:
  queueRef: {name: a3s}
  commandType: bash
  payload: {command: "echo 1", env: {B: "2", A: "1"}}
  timeout: 1m
  deadline: "2030-01-01T02:00:00+02:00"
  priority: 0
`)
		Expect(k8sClient.Create(ctx, u)).To(Succeed())
		var x agentlanev1alpha1.ExternalTask
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(u), &x)).To(Succeed())
		x.Labels = map[string]string{agentlanev1alpha1.LaneLabel: "execute"}
		x.Finalizers = []string{"agentlane.io/cleanup"}
		Expect(k8sClient.Update(ctx, &x)).To(Succeed())

		x.Spec.Timeout.Duration *= 2
		expectInvalid(k8sClient.Update(ctx, &x), "timeout is immutable")

		var y agentlanev1alpha1.ExternalTask
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(u), &y)).To(Succeed())
		y.Spec.Deadline.Time = y.Spec.Deadline.Add(3600e9)
		expectInvalid(k8sClient.Update(ctx, &y), "deadline is immutable")
		Expect(strings.Contains(string(y.Spec.Payload.Raw), `"command"`)).To(BeTrue())
	})
})

var _ = Describe("Pod and Job templates", func() {
	It("keep the labels and annotations of their metadata, under strict field validation as kubectl applies", func() {
		session := object(`
apiVersion: agentlane.io/v1alpha1
kind: AgentSession
metadata: {generateName: tmpl-}
spec:
  queueRef: {name: a3s}
  runtime:
    podTemplate:
      metadata:
        labels: {app: reviewer}
        annotations: {team: review}
      spec:
        containers: [{name: agent, image: agent:v1}]
`)
		Expect(k8sClient.Create(ctx, session, client.FieldValidation("Strict"))).To(Succeed())
		labels, _, _ := unstructured.NestedStringMap(session.Object, "spec", "runtime", "podTemplate", "metadata", "labels")
		annotations, _, _ := unstructured.NestedStringMap(session.Object, "spec", "runtime", "podTemplate", "metadata", "annotations")
		Expect(labels).To(Equal(map[string]string{"app": "reviewer"}))
		Expect(annotations).To(Equal(map[string]string{"team": "review"}))

		queue := object(`
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {generateName: tmpl-}
spec:
  defaultLane: build
  lanes:
  - name: build
    priority: 0
    handlerMode: External
    externalTarget:
      type: Job
      jobTemplate:
        metadata:
          labels: {app: build}
        spec:
          template:
            metadata:
              labels: {app: build-pod}
            spec:
              containers: [{name: worker, image: agentlane:dev}]
`)
		Expect(k8sClient.Create(ctx, queue, client.FieldValidation("Strict"))).To(Succeed())
		lanes, _, _ := unstructured.NestedSlice(queue.Object, "spec", "lanes")
		Expect(lanes).To(HaveLen(1))
		lane := lanes[0].(map[string]any)
		jobLabels, _, _ := unstructured.NestedStringMap(lane, "externalTarget", "jobTemplate", "metadata", "labels")
		podLabels, _, _ := unstructured.NestedStringMap(lane, "externalTarget", "jobTemplate", "spec", "template", "metadata", "labels")
		Expect(jobLabels).To(Equal(map[string]string{"app": "build"}))
		Expect(podLabels).To(Equal(map[string]string{"app": "build-pod"}))
	})
})
