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

package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The bounds of every timeout of the API (a lane's timeout and
// startTimeout, a queue's defaultTimeout, a session's lane override, an
// ExternalTask's timeout), which the API server enforces at admission; the
// Session API holds a command's requested timeout to the same bounds.
const (
	MinTimeout = 100 * time.Millisecond
	MaxTimeout = 24 * time.Hour
)

// Labels the operator puts on the objects it creates (ExternalTasks, Jobs,
// session pods) so that workers and users can select them. Their values are
// object and lane names, which is why LaneQueue and AgentSession names are
// limited to 63 characters.
const (
	// QueueLabel carries the name of the LaneQueue an object belongs to.
	QueueLabel = "agentlane.io/queue"
	// LaneLabel carries the name of the lane an ExternalTask was routed to.
	LaneLabel = "agentlane.io/lane"
	// SessionLabel carries the name of the AgentSession an object belongs to.
	SessionLabel = "agentlane.io/session"
)

// InternalErrorReason is the reason of a condition whose status is Unknown
// because the operator hit an error it did not expect; the message carries it.
// It is shared by all agentlane resources.
const InternalErrorReason = "InternalError"

// LaneName is the name of a lane of a LaneQueue. It is a DNS label: at most 63
// lower-case letters, digits and '-', starting and ending with a letter or digit.
//
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
type LaneName string

// CommandType is the kind of a command: the name of the tool an agent calls
// (read, grep, bash, write, ...) or llm for a model call. Types are opaque to
// the API; routing decides which lane runs them.
//
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=128
// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9_.:/-]*$`
type CommandType string

// HandlerMode says who runs the commands of a lane.
//
// +kubebuilder:validation:Enum=Internal;External;Hybrid
type HandlerMode string

const (
	// HandlerModeInternal: the submitter runs the command itself once the
	// scheduler grants it a slot, then reports the outcome.
	HandlerModeInternal HandlerMode = "Internal"
	// HandlerModeExternal: the command becomes an ExternalTask that a worker
	// (or a Job) completes; the submitter waits for the result or the timeout.
	HandlerModeExternal HandlerMode = "External"
	// HandlerModeHybrid: the command runs as in Internal mode and the
	// external-task events are emitted as well, for observers.
	HandlerModeHybrid HandlerMode = "Hybrid"
)

// FairnessPolicy decides which session's command a shared lane starts next
// when several sessions have commands waiting in it.
//
// +kubebuilder:validation:Enum=FIFO;RoundRobin;WeightedTenant
type FairnessPolicy string

const (
	// FairnessFIFO starts the command submitted first, whatever its session.
	FairnessFIFO FairnessPolicy = "FIFO"
	// FairnessRoundRobin lets the sessions with waiting commands take turns,
	// one command each.
	FairnessRoundRobin FairnessPolicy = "RoundRobin"
	// FairnessWeightedTenant shares the lane between tenants in proportion to
	// their weights, and between the sessions of a tenant by turns.
	FairnessWeightedTenant FairnessPolicy = "WeightedTenant"
)

// RetryStrategy is how the delay before a retry is computed.
//
// +kubebuilder:validation:Enum=Exponential;Fixed;None
type RetryStrategy string

const (
	// RetryExponential starts at initialDelay and doubles the delay after
	// each failed attempt, up to maxDelay.
	RetryExponential RetryStrategy = "Exponential"
	// RetryFixed waits fixedDelay before every retry.
	RetryFixed RetryStrategy = "Fixed"
	// RetryNone never retries: the first failure is final.
	RetryNone RetryStrategy = "None"
)

// RetryPolicy says whether and when a failed command runs again. A retried
// command re-enters its lane after the delay; failures that cannot succeed on
// a second try (budget denied, cancelled, invalid command) are never retried.
//
// +kubebuilder:validation:XValidation:rule="!has(self.strategy) || self.strategy != 'Fixed' || has(self.fixedDelay)",message="fixedDelay is required when strategy is Fixed",fieldPath=".fixedDelay"
// +kubebuilder:validation:XValidation:rule="!has(self.initialDelay) || !has(self.maxDelay) || duration(self.initialDelay) <= duration(self.maxDelay)",message="initialDelay must not exceed maxDelay",fieldPath=".initialDelay"
type RetryPolicy struct {
	// strategy is how the delay between attempts is computed: Exponential
	// (initialDelay, doubling each time, capped at maxDelay), Fixed (fixedDelay
	// every time) or None (no retries). Defaults to Exponential.
	// +kubebuilder:default=Exponential
	// +optional
	Strategy RetryStrategy `json:"strategy,omitempty"`

	// maxRetries is how many times a failed command is tried again after its
	// first attempt, so a command runs at most maxRetries+1 times. A command
	// that still fails becomes a dead letter. Failures that cannot succeed on
	// a second try (budget denied, cancelled, invalid command) are never
	// retried. Ignored when strategy is None. Defaults to 3; at most 100.
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	MaxRetries *int32 `json:"maxRetries,omitempty"`

	// initialDelay is the delay before the first retry with the Exponential
	// strategy, as a duration string such as 100ms or 2s. Between 10ms and
	// 1h; defaults to 100ms.
	// +kubebuilder:default="100ms"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10ms') && duration(self) <= duration('1h')",message="initialDelay must be a duration between 10ms and 1h, such as 100ms"
	// +optional
	InitialDelay *metav1.Duration `json:"initialDelay,omitempty"`

	// maxDelay caps the delay between retries with the Exponential strategy.
	// Between 10ms and 1h; defaults to 30s.
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10ms') && duration(self) <= duration('1h')",message="maxDelay must be a duration between 10ms and 1h, such as 30s"
	// +optional
	MaxDelay *metav1.Duration `json:"maxDelay,omitempty"`

	// fixedDelay is the delay before every retry with the Fixed strategy, and
	// is required with it. Ignored by the other strategies. Between 10ms and
	// 1h, so that a lane's retries cannot become a retry storm.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10ms') && duration(self) <= duration('1h')",message="fixedDelay must be a duration between 10ms and 1h, such as 1s"
	// +optional
	FixedDelay *metav1.Duration `json:"fixedDelay,omitempty"`
}

// RateLimitPeriod is the window a rate limit counts starts in.
//
// +kubebuilder:validation:Enum=Second;Minute;Hour
type RateLimitPeriod string

const (
	// RateLimitPerSecond counts starts per second.
	RateLimitPerSecond RateLimitPeriod = "Second"
	// RateLimitPerMinute counts starts per minute.
	RateLimitPerMinute RateLimitPeriod = "Minute"
	// RateLimitPerHour counts starts per hour.
	RateLimitPerHour RateLimitPeriod = "Hour"
)

// RateLimit caps how many commands may start per period. It is a token bucket
// that holds up to count tokens and refills count tokens per period; a token
// is spent only when a command actually starts, so waiting commands cost
// nothing. Leave the rate limit out for no limit.
type RateLimit struct {
	// count is how many commands may start per period. The limit is a token
	// bucket that holds up to count tokens and refills count tokens per
	// period; a token is spent only when a command actually starts, so
	// waiting costs nothing. Between 1 and 1000000.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	// +required
	Count int32 `json:"count"`

	// per is the period count applies to: Second, Minute or Hour.
	// +required
	Per RateLimitPeriod `json:"per"`
}

// BoostStrategy is how fast a command's priority improves as its deadline
// approaches.
//
// +kubebuilder:validation:Enum=Disabled;Standard;Aggressive
type BoostStrategy string

const (
	// BoostDisabled never changes a command's priority.
	BoostDisabled BoostStrategy = "Disabled"
	// BoostStandard raises the priority by one level when 75%, 50%, 25% and
	// 10% of the time to the deadline is left.
	BoostStandard BoostStrategy = "Standard"
	// BoostAggressive raises the priority by two levels when 80%, 60%, 40% and
	// 20% of the time to the deadline is left.
	BoostAggressive BoostStrategy = "Aggressive"
)

// PriorityBoost moves a waiting command ahead as its deadline approaches: its
// lane's priority number is lowered (improved) step by step, never below 0,
// and a command past its deadline gets the top priority.
type PriorityBoost struct {
	// strategy is how a waiting command moves ahead as its deadline
	// approaches: its lane's priority number is lowered (improved) step by
	// step, never below 0, and once the deadline has passed the command gets
	// the top priority. Disabled (never), Standard (one level at 75%, 50%, 25%
	// and 10% of the time left) or Aggressive (two levels at 80%, 60%, 40% and
	// 20%). Defaults to Standard.
	// +kubebuilder:default=Standard
	// +optional
	Strategy BoostStrategy `json:"strategy,omitempty"`

	// deadline is the deadline given to commands submitted without one,
	// counted from submission, such as 5m. When it is not set, only commands
	// that carry their own deadline are boosted. Between 100ms and 24h.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('100ms') && duration(self) <= duration('24h')",message="deadline must be a duration between 100ms and 24h, such as 5m"
	// +optional
	Deadline *metav1.Duration `json:"deadline,omitempty"`
}

// Identity holds the four identity labels of a session. They are opaque to
// agentlane: it never interprets them, it only carries them with every
// command, ExternalTask, event and checkpoint of the session, and restores
// them when the session resumes, so a platform can attribute work to a
// tenant, a principal, an agent template and a correlation chain.
type Identity struct {
	// tenantId is the tenant the session works for, such as acme-corp. With
	// the WeightedTenant fairness policy it selects the tenant's weight.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +optional
	TenantID string `json:"tenantId,omitempty"`

	// principal is who the session acts for, such as user:42.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Principal string `json:"principal,omitempty"`

	// agentTemplateId names the agent template the session was made from,
	// such as reviewer-v3.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +optional
	AgentTemplateID string `json:"agentTemplateId,omitempty"`

	// correlationId ties the session to a wider chain of requests, such as
	// the id of the request that started it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +optional
	CorrelationID string `json:"correlationId,omitempty"`
}

// LaneQueueReference names a LaneQueue in the namespace of the referring object.
type LaneQueueReference struct {
	// name is the name of the LaneQueue.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +required
	Name string `json:"name"`
}

// AgentSessionReference names an AgentSession in the namespace of the
// referring object.
type AgentSessionReference struct {
	// name is the name of the AgentSession.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +required
	Name string `json:"name"`
}

// TargetLabel is set to "Direct" on an ExternalTask the manager recorded for
// a command of a Direct lane: the manager's Direct dispatcher, not the
// ExternalTask controller, carries such a task while the manager leads.
const TargetLabel = "agentlane.io/target"
