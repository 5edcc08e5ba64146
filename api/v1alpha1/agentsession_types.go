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
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types and reasons of an AgentSession.
const (
	// AgentSessionReadyCondition is True while the session is Active: bound
	// to its queue and, when it has a runtime pod, that pod is running.
	AgentSessionReadyCondition = "Ready"
	// AgentSessionBudgetExhaustedCondition is True while the session's budget
	// denies Generate-lane commands. The session stays usable otherwise.
	AgentSessionBudgetExhaustedCondition = "BudgetExhausted"

	// AgentSessionActiveReason (Ready=True): the session runs commands.
	AgentSessionActiveReason = "Active"
	// AgentSessionQueueNotFoundReason (Ready=False): spec.queueRef names no
	// LaneQueue in the namespace.
	AgentSessionQueueNotFoundReason = "QueueNotFound"
	// AgentSessionInvalidLaneOverrideReason (Ready=False): spec.laneOverrides
	// names a lane the queue does not have; the message names it.
	AgentSessionInvalidLaneOverrideReason = "InvalidLaneOverride"
	// AgentSessionLaneOverrideRefusedReason (Ready=False, and a Warning
	// Event): spec.laneOverrides switch a lane to a mode its LaneQueue does
	// not let sessions choose (spec.lanes[].sessionOverrides); the lane
	// keeps its own mode and the message names each refused override.
	AgentSessionLaneOverrideRefusedReason = "LaneOverrideRefused"
	// AgentSessionPodPendingReason (Ready=False): the runtime pod has been
	// created and is not running yet.
	AgentSessionPodPendingReason = "PodPending"
	// AgentSessionPodFailedReason (Ready=False): the runtime pod failed and
	// could not be replaced; the phase is Failed.
	AgentSessionPodFailedReason = "PodFailed"
	// AgentSessionPassivatingReason (Ready=False): passivation was requested;
	// the session starts no new commands and waits for its checkpoint.
	AgentSessionPassivatingReason = "Passivating"
	// AgentSessionPassivatedReason (Ready=False): the session is checkpointed
	// and has no pod.
	AgentSessionPassivatedReason = "Passivated"
	// AgentSessionResumingReason (Ready=False): a new pod is being started to
	// resume the session from its last checkpoint.
	AgentSessionResumingReason = "Resuming"

	// AgentSessionHardLimitReason (BudgetExhausted=True): tokens or cost
	// consumed reached a hard limit of spec.budget.
	AgentSessionHardLimitReason = "HardLimitReached"
	// AgentSessionGuardDeniedReason (BudgetExhausted=True): the budget guard
	// denied the last check, or failed with failurePolicy Fail.
	AgentSessionGuardDeniedReason = "GuardDenied"
	// AgentSessionSoftLimitReason (BudgetExhausted=False): a soft limit was
	// reached; commands still run and BudgetThresholdHit events are emitted.
	AgentSessionSoftLimitReason = "SoftLimitReached"
	// AgentSessionWithinBudgetReason (BudgetExhausted=False): consumption is
	// below every limit.
	AgentSessionWithinBudgetReason = "WithinBudget"
)

// Reasons of the Kubernetes Events recorded on an AgentSession, besides
// the condition reasons above that are also recorded as Events
// (LaneOverrideRefused, PodFailed, Passivated, Resuming).
const (
	// AgentSessionRuntimePodCreatedReason (Normal): the controller created
	// the session's runtime pod; the message names it and the checkpoint it
	// resumes from, if any.
	AgentSessionRuntimePodCreatedReason = "RuntimePodCreated"
	// AgentSessionEvictedReason (Normal): the session's runtime pod was
	// evicted after its passivation was requested.
	AgentSessionEvictedReason = "Evicted"
	// AgentSessionPassivationDeadlineExceededReason (Warning): the runtime
	// did not checkpoint before its passivation deadline; the session is
	// passivated without a new checkpoint.
	AgentSessionPassivationDeadlineExceededReason = "PassivationDeadlineExceeded"
	// AgentSessionResumedReason (Normal): a passivated session runs again in
	// a new pod.
	AgentSessionResumedReason = "Resumed"
	// AgentSessionInboxRecordRefusedReason (Warning): the session's stored
	// inbox record does not verify (someone else wrote or altered it), and
	// the Session API did not apply it.
	AgentSessionInboxRecordRefusedReason = "InboxRecordRefused"
)

// QueueMode is how inbound messages for a session are handled while the
// session is busy with a run. In every mode a message to an idle session
// with nothing waiting starts its turn at once.
//
// +kubebuilder:validation:Enum=followup;collect;steer;steer-backlog;interrupt;queue;"steer+backlog"
type QueueMode string

const (
	// QueueModeFollowup runs each message as its own turn after the current
	// run ends, in arrival order.
	QueueModeFollowup QueueMode = "followup"
	// QueueModeCollect starts a turn at once for a message to an idle
	// session; messages that arrive while a run is active wait for it to end
	// and for debounce of quiet, then are merged into one followup turn;
	// messages for different channels or threads are delivered separately.
	QueueModeCollect QueueMode = "collect"
	// QueueModeSteer injects the message into the current run at its next
	// tool boundary and cancels the run's commands that have not started. A
	// runtime that cannot be steered gets the message as a followup.
	QueueModeSteer QueueMode = "steer"
	// QueueModeSteerBacklog steers now and also keeps the message for a
	// followup turn.
	QueueModeSteerBacklog QueueMode = "steer-backlog"
	// QueueModeInterrupt aborts the current run, then runs the newest message.
	QueueModeInterrupt QueueMode = "interrupt"
	// QueueModeQueue is the legacy name of steer: it behaves exactly as
	// steer, and the Session API reports it as steer.
	QueueModeQueue QueueMode = "queue"
	// QueueModeSteerPlusBacklog is the legacy name of steer-backlog, as the
	// /queue directive accepts it: it behaves exactly as steer-backlog, and
	// the Session API reports it as steer-backlog.
	QueueModeSteerPlusBacklog QueueMode = "steer+backlog"
)

// DropPolicy is what happens when a session's message queue is full.
//
// +kubebuilder:validation:Enum=old;new;summarize
type DropPolicy string

const (
	// DropOld drops the oldest queued message to make room.
	DropOld DropPolicy = "old"
	// DropNew drops the incoming message.
	DropNew DropPolicy = "new"
	// DropSummarize drops the oldest message but keeps a one-line summary of
	// it (at most 160 characters); the summaries are delivered together as
	// one synthetic followup turn.
	DropSummarize DropPolicy = "summarize"
)

// QueueModeOptions say how inbound messages queue for a session. A message
// "/queue <mode> [debounce:2s] [cap:25] [drop:summarize]" sent to the session
// overrides them until "/queue default" or "/queue reset".
type QueueModeOptions struct {
	// mode is followup, collect, steer, steer-backlog or interrupt; queue is
	// accepted as the legacy name of steer, steer+backlog of steer-backlog.
	// See the QueueMode values for what each does. When it is not set, the
	// LaneQueue's spec.sessionDefaults.queueMode applies, else collect.
	// +optional
	Mode QueueMode `json:"mode,omitempty"`

	// debounce is how long the session must be quiet before queued messages
	// start a followup turn, between 0s and 1h. Defaults to 1s.
	// +kubebuilder:default="1s"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('1h')",message="debounce must be a duration between 0s and 1h, such as 1s"
	// +optional
	Debounce *metav1.Duration `json:"debounce,omitempty"`

	// cap is how many messages may wait for the session at most; drop says
	// what happens to the next one. Defaults to 20; at most 1000.
	// +kubebuilder:default=20
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +optional
	Cap *int32 `json:"cap,omitempty"`

	// drop is what happens when cap messages are waiting: old (drop the
	// oldest), new (drop the incoming one) or summarize (drop the oldest and
	// deliver a short summary of dropped messages as one followup turn).
	// Defaults to summarize.
	// +kubebuilder:default=summarize
	// +optional
	Drop DropPolicy `json:"drop,omitempty"`

	// byChannel gives the channels whose messages take another mode than
	// mode, by channel name (the channel a message is posted with), such as
	// {"discord": "collect", "telegram": "steer"}. A /queue message that
	// names a mode sets that mode for every channel until "/queue reset".
	// When it is empty, the LaneQueue's spec.sessionDefaults.byChannel
	// applies. At most 64 channels; names are 1 to 63 characters.
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(ch, size(ch) >= 1 && size(ch) <= 63)",message="byChannel channel names must be 1 to 63 characters"
	// +optional
	ByChannel map[string]QueueMode `json:"byChannel,omitempty"`
}

// LaneOverride switches the handler mode of one lane for this session's new
// commands. Commands already queued or running keep the mode they started with.
type LaneOverride struct {
	// lane is the lane of the session's queue to override, such as execute.
	// It is checked against the queue when the session is reconciled.
	// +required
	Lane LaneName `json:"lane"`

	// handlerMode is Internal, External or Hybrid.
	// +required
	HandlerMode HandlerMode `json:"handlerMode"`

	// timeout replaces the lane's timeout for this session's commands, such
	// as 2m. Between 100ms and 24h, as the lane's own timeout.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('100ms') && duration(self) <= duration('24h')",message="timeout must be a duration between 100ms and 24h, such as 2m"
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// TokenBudget limits the LLM tokens a session may consume.
//
// +kubebuilder:validation:XValidation:rule="has(self.soft) || has(self.hard)",message="set soft, hard or both"
// +kubebuilder:validation:XValidation:rule="!has(self.soft) || !has(self.hard) || self.soft <= self.hard",message="soft limit must not exceed hard limit",fieldPath=".soft"
type TokenBudget struct {
	// soft is the number of tokens at which a BudgetThresholdHit event of kind
	// soft is emitted; commands keep running.
	// +kubebuilder:validation:Minimum=1
	// +optional
	Soft *int64 `json:"soft,omitempty"`

	// hard is the number of tokens at which Generate-lane commands are denied
	// and fail as BudgetExhausted, without retries.
	// +kubebuilder:validation:Minimum=1
	// +optional
	Hard *int64 `json:"hard,omitempty"`
}

// CostBudget limits the money a session may spend on LLM calls.
//
// +kubebuilder:validation:XValidation:rule="has(self.soft) || has(self.hard)",message="set soft, hard or both"
// +kubebuilder:validation:XValidation:rule="!has(self.soft) || !has(self.hard) || quantity(string(self.soft)).compareTo(quantity(string(self.hard))) <= 0",message="soft limit must not exceed hard limit",fieldPath=".soft"
type CostBudget struct {
	// currency is the ISO 4217 code the amounts are in, such as EUR. Defaults
	// to USD.
	// +kubebuilder:default=USD
	// +kubebuilder:validation:Pattern=`^[A-Z]{3}$`
	// +optional
	Currency string `json:"currency,omitempty"`

	// soft is the amount, such as "8" or "7.50", at which a BudgetThresholdHit
	// event of kind soft is emitted; commands keep running.
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="soft must be a positive amount, such as 7.50"
	// +optional
	Soft *resource.Quantity `json:"soft,omitempty"`

	// hard is the amount, such as "10", at which Generate-lane commands are
	// denied and fail as BudgetExhausted, without retries.
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="hard must be a positive amount, such as 10"
	// +optional
	Hard *resource.Quantity `json:"hard,omitempty"`
}

// GuardFailurePolicy is what the session does when the budget guard cannot be
// reached or answers with an error.
//
// +kubebuilder:validation:Enum=Ignore;Fail
type GuardFailurePolicy string

const (
	// GuardFailureIgnore allows the command, so a broken guard never halts a
	// session.
	GuardFailureIgnore GuardFailurePolicy = "Ignore"
	// GuardFailureFail denies the command.
	GuardFailureFail GuardFailurePolicy = "Fail"
)

// BudgetGuard is an HTTP service that decides, before a command runs, whether
// the session may spend more: allow, soft (emit BudgetThresholdHit and
// proceed) or deny.
type BudgetGuard struct {
	// url is the absolute http or https URL the operator posts each check to.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https']",message="url must be an absolute http or https URL"
	// +required
	URL string `json:"url"`

	// failurePolicy is what happens when the guard cannot be reached, times
	// out or returns an error: Ignore allows the command, Fail denies it.
	// Defaults to Ignore.
	// +kubebuilder:default=Ignore
	// +optional
	FailurePolicy GuardFailurePolicy `json:"failurePolicy,omitempty"`

	// timeout is how long one check may take, at most 30s. Defaults to 2s.
	// +kubebuilder:default="2s"
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s') && duration(self) <= duration('30s')",message="timeout must be a positive duration of at most 30s, such as 2s"
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// Budget bounds what a session may spend. It is checked before each
// Generate-lane command (and each tool command with checkEveryTool), and usage
// is recorded after each LLM call. A denied command fails as BudgetExhausted
// and is not retried; the session stays usable.
type Budget struct {
	// tokens limits the LLM tokens consumed.
	// +optional
	Tokens *TokenBudget `json:"tokens,omitempty"`

	// cost limits the money spent.
	// +optional
	Cost *CostBudget `json:"cost,omitempty"`

	// guard is an HTTP service consulted on every check, after the limits
	// above; it answers allow, soft (emit BudgetThresholdHit and proceed) or
	// deny. When it is not set only the limits apply.
	// +optional
	Guard *BudgetGuard `json:"guard,omitempty"`

	// checkEveryTool checks the budget before every command, not only before
	// Generate-lane commands. Defaults to false.
	// +kubebuilder:default=false
	// +optional
	CheckEveryTool bool `json:"checkEveryTool,omitempty"`
}

// SessionRetention caps the state a long-running session keeps in memory.
// When a cap is reached the oldest entries are evicted first; running work is
// never dropped.
type SessionRetention struct {
	// maxRuns is how many run records are kept. Defaults to 100; at most
	// 10000.
	// +kubebuilder:default=100
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	MaxRuns *int32 `json:"maxRuns,omitempty"`

	// maxEventsPerRun is how many events are kept for each run. Defaults to
	// 10000; at most 1000000.
	// +kubebuilder:default=10000
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	MaxEventsPerRun *int32 `json:"maxEventsPerRun,omitempty"`

	// maxEventBytesPerRun is how many bytes of events are kept for each run;
	// between 1024 and 1073741824 (1 GiB). Defaults to 16777216 (16 MiB).
	// +kubebuilder:default=16777216
	// +kubebuilder:validation:Minimum=1024
	// +kubebuilder:validation:Maximum=1073741824
	// +optional
	MaxEventBytesPerRun *int64 `json:"maxEventBytesPerRun,omitempty"`

	// maxTraceEvents is how many trace events are kept for the session.
	// Defaults to 10000; at most 1000000.
	// +kubebuilder:default=10000
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	MaxTraceEvents *int32 `json:"maxTraceEvents,omitempty"`

	// maxFinishedTasks is how many finished tasks of the session are kept:
	// in memory, and as ExternalTask objects (the queue's taskRetention also
	// applies). Defaults to 100; at most 10000.
	// +kubebuilder:default=100
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	// +optional
	MaxFinishedTasks *int32 `json:"maxFinishedTasks,omitempty"`
}

// SessionRuntime is the pod the operator runs the agent runtime in. A session
// without a runtime is driven by a runtime outside the cluster's control,
// through the Session API; it can still be passivated, but has no pod to move.
type SessionRuntime struct {
	// podTemplate is the pod that runs the session's agent runtime. The
	// operator creates one pod from it while the session is Active, evicts it
	// on passivation and creates a new one on resume. It adds the session's
	// identity and a reference to its last checkpoint. The API server checks
	// the template against the Pod schema at admission, so a template that
	// cannot be decoded is refused, not stored.
	// +required
	PodTemplate corev1.PodTemplateSpec `json:"podTemplate"`

	// idleTimeout passivates the session after it has had no run for this
	// long, such as 30m. When it is not set the session is never passivated
	// for being idle. Between 1s and 720h (30 days).
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('720h')",message="idleTimeout must be a duration between 1s and 720h, such as 30m"
	// +optional
	IdleTimeout *metav1.Duration `json:"idleTimeout,omitempty"`

	// passivationDeadline is how long the runtime has, after a passivation
	// request, to reach a checkpoint before its pod is evicted anyway.
	// Between 1s and 24h; defaults to 2m.
	// +kubebuilder:default="2m"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('24h')",message="passivationDeadline must be a duration between 1s and 24h, such as 2m"
	// +optional
	PassivationDeadline *metav1.Duration `json:"passivationDeadline,omitempty"`

	// UndecodablePodTemplate is set, and PodTemplate left empty, when the
	// stored podTemplate does not decode (see UndecodableTemplate). It is
	// not part of the API.
	UndecodablePodTemplate *UndecodableTemplate `json:"-"`
}

// DesiredState is the state a user wants a session in.
//
// +kubebuilder:validation:Enum=Active;Passivated
type DesiredState string

const (
	// DesiredStateActive: the session runs, resuming if it was passivated.
	DesiredStateActive DesiredState = "Active"
	// DesiredStatePassivated: the session checkpoints and releases its pod.
	DesiredStatePassivated DesiredState = "Passivated"
)

// AgentSessionSpec is the desired state of an AgentSession.
type AgentSessionSpec struct {
	// queueRef is the LaneQueue, in the same namespace, whose lanes run the
	// session's commands. It cannot be changed.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="queueRef is immutable"
	// +required
	QueueRef LaneQueueReference `json:"queueRef"`

	// identity holds the session's four identity labels. They are opaque:
	// agentlane never interprets them, it carries them with every command,
	// ExternalTask, event and checkpoint of the session and restores them on
	// resume, so a platform can attribute work to a tenant, principal, agent
	// template and request chain. They may be changed; new commands carry the
	// new values.
	// +optional
	Identity *Identity `json:"identity,omitempty"`

	// queueMode says how inbound messages queue while the session is busy
	// (by default the LaneQueue's sessionDefaults.queueMode, else collect,
	// with 1s debounce, cap 20 and summarize). A message
	// "/queue <mode> [debounce:2s] [cap:25] [drop:summarize]" sent to the
	// session overrides it until "/queue default" or "/queue reset".
	// +kubebuilder:default={}
	// +optional
	QueueMode *QueueModeOptions `json:"queueMode,omitempty"`

	// laneOverrides switch the handler mode (and optionally the timeout) of
	// lanes for this session's new commands, such as moving execute to
	// External once workers are available. Commands already queued or running
	// keep the mode they started with. At most 16, one per lane.
	// +listType=map
	// +listMapKey=lane
	// +kubebuilder:validation:MaxItems=16
	// +optional
	LaneOverrides []LaneOverride `json:"laneOverrides,omitempty"`

	// budget bounds what the session may spend on tokens and money. It is
	// checked before each Generate-lane command (before every command with
	// checkEveryTool) and usage is recorded after each LLM call. A denied
	// command fails as BudgetExhausted and is not retried; the session stays
	// usable. When it is not set the session has no budget.
	// +optional
	Budget *Budget `json:"budget,omitempty"`

	// retention caps the runs, events, trace events and finished tasks the
	// session keeps. When a cap is reached the oldest entries are evicted
	// first; running work is never dropped.
	// +kubebuilder:default={}
	// +optional
	Retention *SessionRetention `json:"retention,omitempty"`

	// runtime is the pod the operator runs the session in, and moves to
	// another node by passivation when its node is drained. When it is not
	// set the session's runtime runs elsewhere and uses the Session API; it
	// can still be passivated, but there is no pod to move.
	// +optional
	Runtime *SessionRuntime `json:"runtime,omitempty"`

	// desiredState is Active or Passivated. Setting Passivated checkpoints
	// the session and releases its pod; setting Active again resumes it.
	// Defaults to Active.
	// +kubebuilder:default=Active
	// +optional
	DesiredState DesiredState `json:"desiredState,omitempty"`
}

// SessionPhase is where a session is in its life cycle.
//
// +kubebuilder:validation:Enum=Pending;Active;Passivating;Passivated;Resuming;Failed
type SessionPhase string

const (
	// SessionPending: accepted, not yet bound to its queue or its pod not yet
	// running.
	SessionPending SessionPhase = "Pending"
	// SessionActive: the session runs commands.
	SessionActive SessionPhase = "Active"
	// SessionPassivating: passivation was requested; no new commands start
	// and the operator waits for a checkpoint before evicting the pod.
	SessionPassivating SessionPhase = "Passivating"
	// SessionPassivated: the session is checkpointed and has no pod.
	SessionPassivated SessionPhase = "Passivated"
	// SessionResuming: a new pod is resuming the session from its last
	// checkpoint.
	SessionResuming SessionPhase = "Resuming"
	// SessionFailed: the session cannot run; the Ready condition says why.
	SessionFailed SessionPhase = "Failed"
)

// MigrateAnnotation, set on an Active AgentSession (any value, such as the
// reason), asks the operator to move the session to another node: it
// passivates the session with reason migration, removes the annotation and
// resumes the session in a new runtime pod that may not run on the node the
// old one ran on. `kubectl annotate asn <name> agentlane.io/migrate=rebalance`.
const MigrateAnnotation = "agentlane.io/migrate"

// PassivationReason is why a session is being passivated.
//
// +kubebuilder:validation:Enum=idle_reaper;node_drain;migration;manual
type PassivationReason string

const (
	// PassivationIdleReaper: the session was idle longer than idleTimeout.
	PassivationIdleReaper PassivationReason = "idle_reaper"
	// PassivationNodeDrain: the session's node was cordoned or drained.
	PassivationNodeDrain PassivationReason = "node_drain"
	// PassivationMigration: the operator moves the session to another node,
	// because the session was annotated with MigrateAnnotation.
	PassivationMigration PassivationReason = "migration"
	// PassivationManual: desiredState was set to Passivated.
	PassivationManual PassivationReason = "manual"
)

// Checkpoint locates the last state a session saved. The runtime saves one
// after each completed tool round, never in the middle of a tool.
type Checkpoint struct {
	// runId is the run the checkpoint belongs to.
	// +kubebuilder:validation:MaxLength=128
	// +required
	RunID string `json:"runId"`

	// turn is the number of the last completed turn of the run.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Turn int32 `json:"turn,omitempty"`

	// time is when the checkpoint was saved.
	// +required
	Time metav1.Time `json:"time"`

	// location is where the checkpoint is stored in the shared session store,
	// such as a path or an object key.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Location string `json:"location,omitempty"`
}

// PassivationStatus describes a passivation in progress.
type PassivationStatus struct {
	// reason is why the session is passivated: idle_reaper, node_drain,
	// migration or manual.
	// +required
	Reason PassivationReason `json:"reason"`

	// requestedAt is when PassivationRequested was emitted.
	// +required
	RequestedAt metav1.Time `json:"requestedAt"`

	// deadline is when the pod is evicted even without a new checkpoint.
	// +optional
	Deadline *metav1.Time `json:"deadline,omitempty"`
}

// SessionQueueStatus counts the session's commands and messages.
type SessionQueueStatus struct {
	// pending is the number of the session's commands waiting to start.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Pending int32 `json:"pending"`

	// active is the number of the session's commands running now.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Active int32 `json:"active"`

	// completed is the number of the session's commands that succeeded.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Completed int64 `json:"completed"`

	// failed is the number of the session's commands that failed for good.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Failed int64 `json:"failed"`

	// deadLettered is the number of the session's commands that became dead
	// letters.
	// +kubebuilder:validation:Minimum=0
	// +optional
	DeadLettered int64 `json:"deadLettered"`

	// queuedMessages is the number of inbound messages waiting for a turn.
	// +kubebuilder:validation:Minimum=0
	// +optional
	QueuedMessages int32 `json:"queuedMessages"`
}

// BudgetUsage is what a session has consumed so far.
type BudgetUsage struct {
	// tokensConsumed is the number of LLM tokens consumed.
	// +kubebuilder:validation:Minimum=0
	// +optional
	TokensConsumed int64 `json:"tokensConsumed"`

	// costConsumed is the money spent, in the currency of spec.budget.cost.
	// +optional
	CostConsumed *resource.Quantity `json:"costConsumed,omitempty"`
}

// AgentSessionStatus is the observed state of an AgentSession.
type AgentSessionStatus struct {
	// observedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// phase is where the session is: Pending (not yet bound to its queue or
	// its pod not yet running), Active (running commands), Passivating
	// (no new commands; waiting for a checkpoint before the pod is evicted),
	// Passivated (checkpointed, no pod), Resuming (a new pod resumes from the
	// last checkpoint) or Failed (cannot run; the Ready condition says why).
	// +optional
	Phase SessionPhase `json:"phase,omitempty"`

	// podName is the runtime pod of the session, when it has one.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	PodName string `json:"podName,omitempty"`

	// nodeName is the node the runtime pod runs on.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	NodeName string `json:"nodeName,omitempty"`

	// runId is the run in progress, or the last run. A resumed run gets a new
	// id.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	RunID string `json:"runId,omitempty"`

	// lastCheckpoint is the last checkpoint the runtime saved. The runtime
	// saves one after each completed tool round, never in the middle of a
	// tool; a resumed session continues from it under a new run id.
	// +optional
	LastCheckpoint *Checkpoint `json:"lastCheckpoint,omitempty"`

	// passivation describes the passivation in progress, while the phase is
	// Passivating, and the last one while it is Passivated.
	// +optional
	Passivation *PassivationStatus `json:"passivation,omitempty"`

	// queue counts the session's commands and inbound messages.
	// +optional
	Queue SessionQueueStatus `json:"queue,omitempty"`

	// budget is what the session has consumed.
	// +optional
	Budget BudgetUsage `json:"budget,omitempty"`

	// conditions are the latest observations of the session: Ready and
	// BudgetExhausted.
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=asn,categories=agentlane
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`,description="Life-cycle phase"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Whether the session is Active and its runtime runs"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,description="Why the session is or is not ready"
// +kubebuilder:printcolumn:name="Queue",type=string,JSONPath=`.spec.queueRef.name`,description="LaneQueue the session uses"
// +kubebuilder:printcolumn:name="Tenant",type=string,JSONPath=`.spec.identity.tenantId`,description="Tenant identity label",priority=1
// +kubebuilder:printcolumn:name="Pending",type=integer,JSONPath=`.status.queue.pending`,description="Commands waiting to start",priority=1
// +kubebuilder:printcolumn:name="Pod",type=string,JSONPath=`.status.podName`,description="Runtime pod",priority=1
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.status.nodeName`,description="Node of the runtime pod"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="AgentSession name must be at most 63 characters, so that it fits in a label value"

// AgentSession is one long-lived agent session. Its commands are scheduled by
// the lanes of its LaneQueue; the operator binds it to the queue, runs its
// optional runtime pod, enforces its budget, and passivates and resumes it
// when its node is drained or it is idle.
type AgentSession struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata. The session key used by the
	// lane scheduler is the object's namespace and name.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the session.
	// +required
	Spec AgentSessionSpec `json:"spec"`

	// status is the observed state of the session, written by the operator.
	// +optional
	Status AgentSessionStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// AgentSessionList is a list of AgentSessions.
type AgentSessionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AgentSession `json:"items"`
}

func init() {
	SchemeBuilder.Register(&AgentSession{}, &AgentSessionList{})
}

// LaneTimeout returns the session's timeout override for lane, if any.
func (s *AgentSessionSpec) LaneTimeout(lane string) *metav1.Duration {
	for i := range s.LaneOverrides {
		if string(s.LaneOverrides[i].Lane) == lane {
			return s.LaneOverrides[i].Timeout
		}
	}
	return nil
}
