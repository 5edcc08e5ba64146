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
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types and reasons of a LaneQueue.
const (
	// LaneQueueReadyCondition is True while the operator runs a lane scheduler
	// built from the current spec and accepts commands for the queue.
	LaneQueueReadyCondition = "Ready"
	// LaneQueueUnderPressureCondition is True while at least one lane has as
	// many pending commands as pressureThreshold, or more; the message names
	// the lanes. It turns False when those lanes drain to zero.
	LaneQueueUnderPressureCondition = "UnderPressure"
	// LaneQueueDrainingCondition is True while spec.drain is set: the queue
	// refuses new commands and lets those it has finish. Its
	// lastTransitionTime is when the drain began.
	LaneQueueDrainingCondition = "Draining"

	// LaneQueueSchedulingReason (Ready=True): the scheduler runs the current
	// spec.
	LaneQueueSchedulingReason = "Scheduling"
	// LaneQueueInvalidSpecReason (Ready=False): the spec passed admission but
	// the scheduler cannot run it; the message says why. The previous
	// scheduler, if any, keeps running.
	LaneQueueInvalidSpecReason = "InvalidSpec"

	// LaneQueuePressureReason (UnderPressure=True): a lane's pending count
	// reached pressureThreshold.
	LaneQueuePressureReason = "PressureThresholdReached"
	// LaneQueueWarningDepthReason (UnderPressure=True): a lane's pending count
	// also reached alerts.warningDepth. It takes precedence over
	// PressureThresholdReached.
	LaneQueueWarningDepthReason = "WarningDepthReached"
	// LaneQueueCriticalDepthReason (UnderPressure=True): a lane's pending count
	// reached alerts.criticalDepth. It takes precedence over the other reasons.
	LaneQueueCriticalDepthReason = "CriticalDepthReached"
	// LaneQueueIdleReason (UnderPressure=False): no lane is under pressure.
	LaneQueueIdleReason = "Idle"

	// LaneQueueDrainingReason (Draining=True): commands are still queued,
	// waiting for a retry or running.
	LaneQueueDrainingReason = "Draining"
	// LaneQueueDrainedReason (Draining=True): no command is left; the queue
	// can be restarted or upgraded without losing work.
	LaneQueueDrainedReason = "Drained"
	// LaneQueueNotDrainingReason (Draining=False): the queue takes commands.
	LaneQueueNotDrainingReason = "NotDraining"
)

// Reasons of the Kubernetes Events the lane schedulers record on a
// LaneQueue; the message names the lane and its pending count.
const (
	// LaneQueueLanePressureReason (Warning): a lane's pending count reached
	// pressureThreshold.
	LaneQueueLanePressureReason = "LanePressure"
	// LaneQueueLaneIdleReason (Normal): a lane under pressure drained to no
	// pending command.
	LaneQueueLaneIdleReason = "LaneIdle"
	// LaneQueueDepthWarningReason (Warning): a lane's pending count reached
	// alerts.warningDepth.
	LaneQueueDepthWarningReason = "QueueDepthWarning"
	// LaneQueueDepthCriticalReason (Warning): a lane's pending count reached
	// alerts.criticalDepth.
	LaneQueueDepthCriticalReason = "QueueDepthCritical"
	// LaneQueueLanePausedReason (Normal): a lane was paused (spec.lanes[].paused).
	LaneQueueLanePausedReason = "LanePaused"
	// LaneQueueLaneResumedReason (Normal): a paused lane was resumed.
	LaneQueueLaneResumedReason = "LaneResumed"
	// LaneQueueDrainingEventReason (Normal): the queue began draining
	// (spec.drain was set).
	LaneQueueDrainingEventReason = "QueueDraining"
	// LaneQueueDrainedEventReason (Normal): a draining queue has no command
	// left.
	LaneQueueDrainedEventReason = "QueueDrained"
)

// Lane is one priority lane of a LaneQueue: a class of commands with its own
// priority, caps, handler mode and timeout. A command starts only when its
// lane's shared cap, its lane's per-session cap and the queue's maxConcurrent
// all have room.
//
// +kubebuilder:validation:XValidation:rule="!has(self.maxConcurrency) || !has(self.maxConcurrencyPerSession) || self.maxConcurrency <= 0 || self.maxConcurrencyPerSession <= self.maxConcurrency",message="maxConcurrencyPerSession must not exceed maxConcurrency (0 means unlimited)",fieldPath=".maxConcurrencyPerSession"
// +kubebuilder:validation:XValidation:rule="!has(self.externalTarget) || !has(self.externalTarget.type) || self.externalTarget.type != 'Delegate' || (has(self.maxConcurrency) && self.maxConcurrency >= 1)",message="a Delegate lane needs maxConcurrency of 1 or more: it is how many worker sessions may run at once",fieldPath=".maxConcurrency"
// +kubebuilder:validation:XValidation:rule="!has(self.heartbeatTimeout) || !has(self.timeout) || duration(self.heartbeatTimeout) < duration(self.timeout)",message="heartbeatTimeout must be shorter than the lane's timeout",fieldPath=".heartbeatTimeout"
// +kubebuilder:validation:XValidation:rule="!has(self.heartbeatTimeout) || !has(self.externalTarget) || !has(self.externalTarget.type) || !(self.externalTarget.type in ['Direct', 'Delegate'])",message="heartbeatTimeout applies to the lanes whose attempts report heartbeats (pool workers, Jobs, handlers): a Direct or Delegate lane's attempts send none",fieldPath=".heartbeatTimeout"
type Lane struct {
	// name identifies the lane in routing rules, ExternalTasks, session lane
	// overrides and status. It is a DNS label, such as query or execute, and
	// must be unique within the queue.
	// +required
	Name LaneName `json:"name"`

	// priority orders the lanes: 0 is the highest. When several lanes have a
	// command ready to start, the lane with the lowest number starts first,
	// even if its command was submitted later. Lanes may share a priority;
	// ties go to the command submitted first. Between 0 and 100.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +required
	Priority int32 `json:"priority"`

	// handlerMode says who runs the lane's commands: Internal (the submitting
	// session runs them once granted a slot), External (each command becomes
	// an ExternalTask that a worker or Job runs) or Hybrid (run as Internal and
	// also announced as external tasks, for observers). A session may switch
	// the mode for its own new commands with spec.laneOverrides. Defaults to
	// Internal.
	// +kubebuilder:default=Internal
	// +optional
	HandlerMode HandlerMode `json:"handlerMode,omitempty"`

	// maxConcurrency is how many of the lane's commands may run at once across
	// all sessions of the queue. 0, the default, means unlimited. On a
	// Delegate lane it is how many worker sessions run at once, at least 1.
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +optional
	MaxConcurrency int32 `json:"maxConcurrency,omitempty"`

	// maxConcurrencyPerSession is how many of the lane's commands one session
	// may run at once. 1 makes the lane serial per session: a session's
	// commands then run one at a time in submission order. 0, the default,
	// means unlimited. It may not exceed maxConcurrency when that is set.
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +optional
	MaxConcurrencyPerSession int32 `json:"maxConcurrencyPerSession,omitempty"`

	// isolated keeps the lane outside the queue-wide maxConcurrent cap and
	// rateLimit: its commands neither wait for nor take capacity that other
	// lanes need, which suits background work such as cron jobs. Its own caps
	// still apply. Defaults to false.
	// +optional
	Isolated bool `json:"isolated,omitempty"`

	// paused stops the lane from starting commands: sessions may still
	// submit to it and their commands wait, queued, and the lane's running
	// commands finish. Setting it back to false, or removing it, starts the
	// queued commands in their usual order. Defaults to false.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// timeout is how long one attempt of a command may run in this lane, such
	// as 30s or 2m. It replaces the queue's defaultTimeout. A command that
	// runs out of time fails and goes through the retry policy. In an
	// External lane it counts from when the attempt is dispatched to a
	// worker (or its Job is created), not while the attempt waits for a
	// worker with a free slot.
	// Between 100ms and 24h.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('100ms') && duration(self) <= duration('24h')",message="timeout must be a duration between 100ms and 24h, such as 30s"
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// startTimeout bounds how long an ExternalTask's attempt may wait to
	// start once the lane has granted it a slot: to be dispatched to a live
	// worker with a free slot (or to have its Job created), such as 10m. A
	// task whose attempt waits longer ends Failed with a message that says
	// so, without retries and without counting the attempt, which never
	// ran. A task handed back by a stopping worker waits again from the
	// hand-back. When it is not set, a task waits for a worker as long as
	// it takes. Commands a session runtime runs itself (Internal) are not
	// affected. Between 100ms and 24h.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('100ms') && duration(self) <= duration('24h')",message="startTimeout must be a duration between 100ms and 24h, such as 10m"
	// +optional
	StartTimeout *metav1.Duration `json:"startTimeout,omitempty"`

	// heartbeatTimeout is how long a running attempt of an External lane may
	// go without a heartbeat from whatever runs it, such as 10s: a pool
	// worker turns the command's touches of its heartbeat file
	// (AGENTLANE_HEARTBEAT_FILE) into heartbeats, and a handler posts them
	// to the Session API (POST .../external/{id}/heartbeat). An attempt
	// without a heartbeat for that long ends TimedOut, with an error that
	// names this budget, and goes through the retry policy, long before its
	// timeout would end it. The attempt's start counts as its first
	// heartbeat. When it is not set, only the timeout bounds a stuck
	// attempt. Between 2s and 1h, and below the lane's timeout when both
	// are set. Not on a lane whose externalTarget is Direct or Delegate:
	// their attempts send no heartbeats.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('2s') && duration(self) <= duration('1h')",message="heartbeatTimeout must be a duration between 2s and 1h, such as 10s"
	// +optional
	HeartbeatTimeout *metav1.Duration `json:"heartbeatTimeout,omitempty"`

	// retryPolicy replaces the queue's retryPolicy for this lane. It replaces
	// it as a whole: fields left out take their defaults, not the queue's
	// values.
	// +optional
	RetryPolicy *RetryPolicy `json:"retryPolicy,omitempty"`

	// rateLimit limits how many of the lane's commands start per period. It
	// applies in addition to the queue's rateLimit.
	// +optional
	RateLimit *RateLimit `json:"rateLimit,omitempty"`

	// externalTarget says where the lane's commands run in External mode,
	// including when a session switches the lane to External. When it is not
	// set, the worker pool runs them.
	// +optional
	ExternalTarget *ExternalTarget `json:"externalTarget,omitempty"`

	// commandTypes, when set, are the only command types the lane accepts.
	// A command of any other type that is routed or sent to the lane is
	// refused when it is submitted: the Session API answers 400
	// CommandTypeRefused, and an ExternalTask ends Failed saying why. Empty,
	// the default, accepts every type. Declare it on External lanes, whose
	// commands workers run: a lane that accepts only read and grep never
	// hands a worker a shell command. Commands already accepted keep
	// running when the list changes. At most 64 types.
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +optional
	CommandTypes []CommandType `json:"commandTypes,omitempty"`

	// sessionOverrides says which handler modes a session may switch the
	// lane to with its spec.laneOverrides. When it is not set, a session may
	// switch the lane to Internal or Hybrid (its own runtime runs the
	// commands) but not to External: switching an Internal lane to External
	// would hand the session's commands, of any type the lane accepts, to
	// the shared worker pool. An override to the lane's own handlerMode is
	// always allowed, since it changes nothing.
	// +optional
	SessionOverrides *LaneSessionOverrides `json:"sessionOverrides,omitempty"`
}

// LaneSessionOverrides is what the sessions of a queue may change about one
// lane.
type LaneSessionOverrides struct {
	// allowedModes are the handler modes a session may switch the lane to,
	// in addition to the lane's own handlerMode. Empty allows no switch at
	// all. List External only on a lane whose commandTypes are what the
	// lane's external target may run: the lane's commandTypes hold for
	// every session's commands whatever their mode.
	// +listType=set
	// +kubebuilder:validation:MaxItems=3
	// +required
	AllowedModes []HandlerMode `json:"allowedModes"`
}

// SessionModeAllowed reports whether a session may switch the lane to mode
// with a laneOverride: the lane's own mode always, otherwise the modes of
// sessionOverrides.allowedModes, or Internal and Hybrid when the lane sets
// no sessionOverrides.
func (l *Lane) SessionModeAllowed(mode HandlerMode) bool {
	own := l.HandlerMode
	if own == "" {
		own = HandlerModeInternal
	}
	if mode == own {
		return true
	}
	if l.SessionOverrides == nil {
		return mode == HandlerModeInternal || mode == HandlerModeHybrid
	}
	return slices.Contains(l.SessionOverrides.AllowedModes, mode)
}

// ExternalTargetType is where the ExternalTasks of a lane run.
//
// +kubebuilder:validation:Enum=Workers;Job;Handler;Delegate;Direct
type ExternalTargetType string

const (
	// ExternalTargetWorkers: long-running worker pods claim the tasks.
	ExternalTargetWorkers ExternalTargetType = "Workers"
	// ExternalTargetJob: the operator creates one batch Job per task whose pod
	// runs the worker in one-shot mode.
	ExternalTargetJob ExternalTargetType = "Job"
	// ExternalTargetHandler: no worker or Job runs the tasks. Handlers in any
	// language list them through the Session API (GET .../external, with
	// their payload) and complete them there (POST
	// .../external/{id}/complete); a task waits Dispatched until an
	// authorized handler completes its current attempt or the attempt times
	// out.
	ExternalTargetHandler ExternalTargetType = "Handler"
	// ExternalTargetDelegate: each command becomes a worker AgentSession made
	// from the lane's delegate.sessionTemplate; the command's payload is the
	// worker's first turn and its final answer is the result, delivered to
	// the producer's inbox (see DelegateTarget).
	ExternalTargetDelegate ExternalTargetType = "Delegate"
	// ExternalTargetDirect: workers that hold a stream to the leading
	// manager run the commands; the manager hands each granted attempt to a
	// worker with a free slot over that stream and takes its result back, and
	// writes nothing to the API server for a short task that succeeds. A
	// task is recorded as an ExternalTask only when it must be (see
	// DirectTarget).
	ExternalTargetDirect ExternalTargetType = "Direct"
)

// DirectRecords says when the tasks of a Direct lane are recorded as
// ExternalTasks.
//
// +kubebuilder:validation:Enum=OnNeed;Always
type DirectRecords string

const (
	// DirectRecordsOnNeed records a task only when it waits for a worker
	// or runs longer than materializeAfter, fails for good or is
	// dead-lettered.
	DirectRecordsOnNeed DirectRecords = "OnNeed"
	// DirectRecordsAlways records every task when it is granted, as the
	// Workers target does, at the same cost in API writes.
	DirectRecordsAlways DirectRecords = "Always"
)

// DefaultMaterializeAfter is how long a Direct task waits for a worker, or
// runs, before it is recorded, when the lane does not say.
const DefaultMaterializeAfter = 2 * time.Second

// DirectTarget tunes a Direct lane. Attempts are handed over the workers'
// streams whatever it says; it only decides which tasks are recorded as
// ExternalTasks, so that kubectl, retention and the audit see them.
type DirectTarget struct {
	// materializeAfter is how long a task may wait for a free worker, or
	// run on one, before it is recorded as an ExternalTask (Queued or
	// Running). Between 100ms and 1h; defaults to 2s.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('100ms') && duration(self) <= duration('1h')",message="materializeAfter must be a duration between 100ms and 1h, such as 2s"
	// +optional
	MaterializeAfter *metav1.Duration `json:"materializeAfter,omitempty"`

	// records is OnNeed (the default: a task is recorded only when it waits
	// or runs longer than materializeAfter, fails for good or is
	// dead-lettered) or Always (every task is recorded when it is granted).
	// +kubebuilder:default=OnNeed
	// +optional
	Records DirectRecords `json:"records,omitempty"`
}

// MaterializeAfterOrDefault returns materializeAfter, or its default.
func (d *DirectTarget) MaterializeAfterOrDefault() time.Duration {
	if d == nil || d.MaterializeAfter == nil {
		return DefaultMaterializeAfter
	}
	return d.MaterializeAfter.Duration
}

// RecordsAlways tells whether every task is recorded.
func (d *DirectTarget) RecordsAlways() bool {
	return d != nil && d.Records == DirectRecordsAlways
}

// ExternalTarget says where the ExternalTasks of a lane run. A worker or a
// Job's pod completes a task by writing the task's status; a Handler
// completes it through the Session API.
//
// +kubebuilder:validation:XValidation:rule="!has(self.type) || self.type != 'Job' || has(self.jobTemplate)",message="jobTemplate is required when type is Job",fieldPath=".jobTemplate"
// +kubebuilder:validation:XValidation:rule="!has(self.jobTemplate) || (has(self.type) && self.type == 'Job')",message="jobTemplate may only be set when type is Job",fieldPath=".jobTemplate"
// +kubebuilder:validation:XValidation:rule="!has(self.type) || self.type != 'Delegate' || has(self.delegate)",message="delegate (with its sessionTemplate) is required when type is Delegate",fieldPath=".delegate"
// +kubebuilder:validation:XValidation:rule="!has(self.delegate) || (has(self.type) && self.type == 'Delegate')",message="delegate may only be set when type is Delegate",fieldPath=".delegate"
// +kubebuilder:validation:XValidation:rule="!has(self.direct) || (has(self.type) && self.type == 'Direct')",message="direct may only be set when type is Direct",fieldPath=".direct"
type ExternalTarget struct {
	// type is Workers (the worker pool claims the tasks), Job (one batch Job
	// per task, created from jobTemplate), Handler (handlers complete the
	// tasks through the Session API), Delegate (one worker AgentSession
	// per command, created from delegate.sessionTemplate) or Direct
	// (workers streaming from the leading manager run the commands, most of
	// them without an ExternalTask). Defaults to Workers.
	// +kubebuilder:default=Workers
	// +optional
	Type ExternalTargetType `json:"type,omitempty"`

	// workerSelector restricts which workers may claim the lane's tasks. It is
	// matched against the labels each worker advertises with its heartbeat.
	// When it is not set, any worker serving the queue may claim them. Only
	// used when type is Workers. It is checked at admission as a Kubernetes
	// label selector is: known operators, values as each operator needs
	// them, label keys and values in label syntax. Used when type is
	// Workers or Direct.
	// +optional
	WorkerSelector *WorkerSelector `json:"workerSelector,omitempty"`

	// jobTemplate is the batch Job the operator creates for each task when
	// type is Job; it is required then and not allowed otherwise. It supplies
	// the image, resources and placement; the operator adds the task reference
	// the one-shot worker needs, and owner references. The API server checks
	// the template against the Job schema at admission, so a template that
	// cannot be decoded is refused, not stored.
	// +optional
	JobTemplate *batchv1.JobTemplateSpec `json:"jobTemplate,omitempty"`

	// delegate is the agent the lane delegates to when type is Delegate; it
	// is required then and not allowed otherwise.
	// +optional
	Delegate *DelegateTarget `json:"delegate,omitempty"`

	// direct tunes a Direct lane: when its tasks are recorded as
	// ExternalTasks. Only allowed when type is Direct; optional then.
	// +optional
	Direct *DirectTarget `json:"direct,omitempty"`

	// UndecodableJobTemplate is set, and JobTemplate left nil, when the
	// stored jobTemplate does not decode (see UndecodableTemplate). It is
	// not part of the API.
	UndecodableJobTemplate *UndecodableTemplate `json:"-"`
}

// RoutingRule sends every command of one type to one lane.
type RoutingRule struct {
	// commandType is the command type the rule matches, such as grep, bash or
	// llm. Each command type may appear in one rule only.
	// +required
	CommandType CommandType `json:"commandType"`

	// lane is the lane that runs commands of this type. It must be one of
	// spec.lanes.
	// +required
	Lane LaneName `json:"lane"`
}

// TenantWeight is the share of one tenant under the WeightedTenant fairness
// policy.
type TenantWeight struct {
	// tenantId is the tenant, as in the sessions' identity.tenantId.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	TenantID string `json:"tenantId"`

	// weight is the tenant's relative share of each shared lane: a tenant
	// with weight 2 starts twice as many commands as one with weight 1 when
	// both have work waiting. Tenants not listed have weight 1.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +required
	Weight int32 `json:"weight"`
}

// DepthAlerts are the queue-depth levels at which the queue raises alerts
// (events on the sessions' streams and Kubernetes Events), per lane.
//
// +kubebuilder:validation:XValidation:rule="!has(self.warningDepth) || !has(self.criticalDepth) || self.warningDepth == 0 || self.criticalDepth == 0 || self.warningDepth <= self.criticalDepth",message="warningDepth must not exceed criticalDepth",fieldPath=".warningDepth"
type DepthAlerts struct {
	// warningDepth is the number of pending commands in a lane at which a
	// warning alert is raised. 0 turns warnings off. Defaults to 50.
	// +kubebuilder:default=50
	// +kubebuilder:validation:Minimum=0
	// +optional
	WarningDepth *int32 `json:"warningDepth,omitempty"`

	// criticalDepth is the number of pending commands in a lane at which a
	// critical alert is raised. 0 turns critical alerts off. Defaults to 100.
	// +kubebuilder:default=100
	// +kubebuilder:validation:Minimum=0
	// +optional
	CriticalDepth *int32 `json:"criticalDepth,omitempty"`
}

// DeadLetterPolicy says whether commands that failed for good are kept for
// inspection, and how many.
type DeadLetterPolicy struct {
	// enabled keeps a dead letter for every command that exhausted its retries
	// or timed out for good. When false such commands are only reported as
	// failed. Defaults to true.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// maxSize is how many dead letters the queue keeps; when it is full the
	// oldest is dropped. It also bounds the DeadLettered ExternalTasks kept
	// in the cluster: the oldest are deleted first. Defaults to 1000; at most
	// 100000.
	// +kubebuilder:default=1000
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	// +optional
	MaxSize *int32 `json:"maxSize,omitempty"`
}

// TaskRetention bounds how long finished ExternalTask objects of the queue
// stay in the cluster. Tasks that have not finished are never removed.
type TaskRetention struct {
	// ttlAfterFinished is how long a finished ExternalTask is kept before the
	// operator deletes it, such as 1h. 0s deletes it as soon as its result has
	// been delivered. Defaults to 1h. DeadLettered tasks are not deleted by
	// age: they are the queue's dead letters, bounded by deadLetter.maxSize.
	// +kubebuilder:default="1h"
	// At most 8760h (a year).
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('8760h')",message="ttlAfterFinished must be a duration between 0s and 8760h, such as 1h"
	// +optional
	TTLAfterFinished *metav1.Duration `json:"ttlAfterFinished,omitempty"`

	// maxFinished is how many finished ExternalTasks of the queue, dead
	// letters aside, are kept at most; beyond it the oldest are deleted
	// first. Defaults to 1000; at most 100000.
	// +kubebuilder:default=1000
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100000
	// +optional
	MaxFinished *int32 `json:"maxFinished,omitempty"`
}

// SessionBounds lower, for the sessions of one LaneQueue, the per-session
// bounds the manager applies to every session (its flags and chart values
// under sessionAPI.bounds, sessionStore and delegation). A queue can only
// lower a bound: a field left out, or set above the manager's bound, takes
// the manager's. Past a bound a call gets the same answer as past the
// manager's (413 TooLarge or 429 with Retry-After), naming the LaneQueue.
type SessionBounds struct {
	// maxPendingCommands is how many of one session's commands may be
	// accepted and not yet ended at once.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	// +optional
	MaxPendingCommands *int32 `json:"maxPendingCommands,omitempty"`

	// maxPendingBytes is how many payload bytes one session's pending
	// commands may hold together.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1073741824
	// +optional
	MaxPendingBytes *int64 `json:"maxPendingBytes,omitempty"`

	// maxMessageBytes is the largest message text a session may be sent,
	// in bytes.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16777216
	// +optional
	MaxMessageBytes *int32 `json:"maxMessageBytes,omitempty"`

	// maxCheckpointBytes is the largest checkpoint a session may save, in
	// bytes.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16777216
	// +optional
	MaxCheckpointBytes *int32 `json:"maxCheckpointBytes,omitempty"`

	// maxPendingDelegations is how many delegations one session may have
	// that have not finished.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	MaxPendingDelegations *int32 `json:"maxPendingDelegations,omitempty"`

	// maxDelegations is how many delegations of one session the cluster
	// may keep, finished ones included until retention removes them.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	// +optional
	MaxDelegations *int32 `json:"maxDelegations,omitempty"`

	// maxEventStreams is how many event streams may be open on one session
	// at once, whoever opened them.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	MaxEventStreams *int32 `json:"maxEventStreams,omitempty"`

	// maxWaitingCalls is how many calls may wait at once for commands of
	// one session (a submission or a read that waits for its result).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	MaxWaitingCalls *int32 `json:"maxWaitingCalls,omitempty"`
}

// LaneQueueSpec is the scheduling policy of a LaneQueue. Rules that relate
// several fields (routing and defaultLane name existing lanes, tenant weights
// need the WeightedTenant policy) are checked at admission.
//
// +kubebuilder:validation:XValidation:rule="!has(self.routing) || self.routing.all(r, self.lanes.exists(l, l.name == r.lane))",message="every routing rule must name a lane defined in spec.lanes",fieldPath=".routing"
// +kubebuilder:validation:XValidation:rule="!has(self.routing) || self.routing.all(r, self.lanes.all(l, l.name != r.lane || !has(l.commandTypes) || r.commandType in l.commandTypes))",message="a routing rule may only send a command type to a lane whose commandTypes accept it",fieldPath=".routing"
// +kubebuilder:validation:XValidation:rule="!has(self.defaultLane) || self.lanes.exists(l, l.name == self.defaultLane)",message="defaultLane must name a lane defined in spec.lanes",fieldPath=".defaultLane"
// +kubebuilder:validation:XValidation:rule="has(self.defaultLane) || size(self.lanes) == 0 || self.lanes.exists(l, l.name == 'execute')",message="defaultLane is required when no lane is named execute, because command types without a route go to execute",fieldPath=".defaultLane"
// +kubebuilder:validation:XValidation:rule="!has(self.tenantWeights) || (has(self.fairness) && self.fairness == 'WeightedTenant')",message="tenantWeights may only be set when fairness is WeightedTenant",fieldPath=".tenantWeights"
type LaneQueueSpec struct {
	// lanes are the priority lanes of the queue, 1 to 16, each with a unique
	// name.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(l, self.exists_one(m, m.name == l.name))",message="lane names must be unique"
	// +required
	Lanes []Lane `json:"lanes"`

	// routing sends command types to lanes. A command runs in the lane it
	// names; otherwise in the lane of the rule for its command type;
	// otherwise in the lane the built-in table gives, when the queue has that
	// lane (read, glob, ls, grep, list_files, search, web_fetch and web_search
	// go to query; llm goes to generate; bash, write, edit, delete, move, copy
	// and execute go to execute); otherwise in defaultLane. At most 64 rules,
	// one per command type.
	// +listType=map
	// +listMapKey=commandType
	// +kubebuilder:validation:MaxItems=64
	// +optional
	Routing []RoutingRule `json:"routing,omitempty"`

	// defaultLane runs the commands that neither name a lane nor match a
	// routing rule or a built-in route to a lane of this queue. When it is not
	// set they go to the lane named execute, which must then exist.
	// +optional
	DefaultLane LaneName `json:"defaultLane,omitempty"`

	// maxConcurrent is how many commands of the whole queue may run at once,
	// across all lanes and sessions. 0, the default, means unlimited. Keep it
	// at 0, or large enough, when a lane must never wait for capacity used by
	// other lanes.
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +optional
	MaxConcurrent int32 `json:"maxConcurrent,omitempty"`

	// fairness decides which session's command a shared lane starts next:
	// FIFO (oldest submission first), RoundRobin (sessions take turns) or
	// WeightedTenant (tenants share in proportion to tenantWeights, their
	// sessions take turns). Within one session commands always start in
	// submission order. Defaults to FIFO.
	// +kubebuilder:default=FIFO
	// +optional
	Fairness FairnessPolicy `json:"fairness,omitempty"`

	// tenantWeights are the tenant shares for the WeightedTenant fairness
	// policy; tenants not listed have weight 1. At most 64 entries, one per
	// tenant. Only allowed with fairness WeightedTenant.
	// +listType=map
	// +listMapKey=tenantId
	// +kubebuilder:validation:MaxItems=64
	// +optional
	TenantWeights []TenantWeight `json:"tenantWeights,omitempty"`

	// retryPolicy applies to every lane that has no retryPolicy of its own.
	// By default failed commands are retried 3 times with exponential backoff
	// from 100ms up to 30s.
	// +kubebuilder:default={}
	// +optional
	RetryPolicy *RetryPolicy `json:"retryPolicy,omitempty"`

	// rateLimit limits how many commands of the whole queue start per period.
	// When it is not set the queue has no rate limit; lanes may still have
	// their own.
	// +optional
	RateLimit *RateLimit `json:"rateLimit,omitempty"`

	// priorityBoost moves waiting commands ahead as their deadlines approach.
	// By default the Standard strategy applies to commands that have a
	// deadline.
	// +kubebuilder:default={}
	// +optional
	PriorityBoost *PriorityBoost `json:"priorityBoost,omitempty"`

	// pressureThreshold is the number of pending commands in a lane at which
	// the lane is under pressure: the queue emits a pressure event once and
	// sets the UnderPressure condition, and emits an idle event when the lane
	// drains to zero. Useful to trigger scaling of workers. 0 turns pressure
	// events off. Defaults to 50.
	// +kubebuilder:default=50
	// +kubebuilder:validation:Minimum=0
	// +optional
	PressureThreshold *int32 `json:"pressureThreshold,omitempty"`

	// alerts are the lane depths at which warning and critical alerts are
	// raised (50 and 100 by default).
	// +kubebuilder:default={}
	// +optional
	Alerts *DepthAlerts `json:"alerts,omitempty"`

	// deadLetter keeps the commands that failed for good (by default enabled,
	// up to 1000).
	// +kubebuilder:default={}
	// +optional
	DeadLetter *DeadLetterPolicy `json:"deadLetter,omitempty"`

	// defaultTimeout is how long one attempt of a command may run in a lane
	// that sets no timeout of its own, such as 90s, counted as the lane's
	// timeout is. Between 100ms and 24h; defaults to 60s.
	// +kubebuilder:default="60s"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('100ms') && duration(self) <= duration('24h')",message="defaultTimeout must be a duration between 100ms and 24h, such as 60s"
	// +optional
	DefaultTimeout *metav1.Duration `json:"defaultTimeout,omitempty"`

	// taskRetention bounds how long finished ExternalTasks of this queue are
	// kept in the cluster (by default 1h, and at most 1000). Tasks that have
	// not finished are never removed.
	// +kubebuilder:default={}
	// +optional
	TaskRetention *TaskRetention `json:"taskRetention,omitempty"`

	// sessionBounds lower, for this queue's sessions, the per-session
	// bounds the manager applies to every session: pending commands and
	// their bytes, message and checkpoint size, delegations, event streams
	// and waiting calls. A queue can only lower them; what it leaves out, or
	// sets higher, is the manager's.
	// +optional
	SessionBounds *SessionBounds `json:"sessionBounds,omitempty"`

	// sessionDefaults are the inbound-message settings of this queue's
	// sessions that an AgentSession's spec.queueMode leaves out: a session
	// that sets mode (or byChannel) keeps its own. A /queue message still
	// overrides both until "/queue reset".
	// +optional
	SessionDefaults *SessionDefaults `json:"sessionDefaults,omitempty"`

	// drain drains the queue before a restart or an upgrade: while it is set
	// the queue refuses new commands (the Session API answers 503 Draining
	// with Retry-After) and lets the commands it has, queued, waiting for a
	// retry or running, finish. The Draining condition says when nothing is
	// left (reason Drained). Removing it takes commands again.
	// +optional
	Drain *QueueDrain `json:"drain,omitempty"`
}

// SessionDefaults are queue-wide defaults of the sessions' inbound-message
// settings.
type SessionDefaults struct {
	// queueMode is the mode of the queue's sessions whose spec.queueMode
	// sets none: followup, collect, steer, steer-backlog or interrupt
	// (queue and steer+backlog are accepted as their legacy names). When
	// it is not set either, sessions use collect.
	// +optional
	QueueMode QueueMode `json:"queueMode,omitempty"`

	// byChannel gives the channels whose messages take another mode, by
	// channel name, for the sessions whose spec.queueMode.byChannel is
	// empty: a session's own byChannel replaces this one as a whole. At
	// most 64 channels; names are 1 to 63 characters.
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(ch, size(ch) >= 1 && size(ch) <= 63)",message="byChannel channel names must be 1 to 63 characters"
	// +optional
	ByChannel map[string]QueueMode `json:"byChannel,omitempty"`
}

// QueueDrain is how a LaneQueue drains.
type QueueDrain struct {
	// timeout is how long, from when the drain began, queued commands may
	// still start, such as 5m. When it has passed, the commands still queued
	// or waiting for a retry end Cancelled with an error that says the drain
	// deadline passed, and no retry starts; running commands go on until
	// they end or reach their own timeout. When it is not set, the queue
	// waits for all its commands. Between 1s and 24h.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('24h')",message="drain timeout must be a duration between 1s and 24h, such as 5m"
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// LaneStatus holds the counters of one lane. Pending and active are current
// values; the others count since the lane scheduler started and restart from
// zero when the operator restarts.
type LaneStatus struct {
	// name is the lane.
	// +required
	Name LaneName `json:"name"`

	// pending is the number of commands waiting to start in the lane,
	// including those waiting for a retry.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Pending int32 `json:"pending"`

	// active is the number of the lane's commands running now.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Active int32 `json:"active"`

	// completed is the number of commands that succeeded.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Completed int64 `json:"completed"`

	// failed is the number of commands that failed for good, after their
	// retries.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Failed int64 `json:"failed"`

	// deadLettered is the number of commands that became dead letters.
	// +kubebuilder:validation:Minimum=0
	// +optional
	DeadLettered int64 `json:"deadLettered"`

	// cancelled is the number of commands cancelled before they finished.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Cancelled int64 `json:"cancelled"`

	// paused is set while the lane is paused (spec.lanes[].paused).
	// +optional
	Paused bool `json:"paused,omitempty"`
}

// LaneQueueStatus is the observed state of a LaneQueue.
type LaneQueueStatus struct {
	// observedGeneration is the spec generation the scheduler runs.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// laneNames lists the lanes the scheduler runs, in priority order and
	// separated by commas, for display.
	// +kubebuilder:validation:MaxLength=1100
	// +optional
	LaneNames string `json:"laneNames,omitempty"`

	// pending is the number of commands waiting to start, over all lanes.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Pending int32 `json:"pending"`

	// active is the number of commands running now, over all lanes.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Active int32 `json:"active"`

	// sessions is the number of AgentSessions bound to the queue.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Sessions int32 `json:"sessions"`

	// lanes holds the counters of each lane.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Lanes []LaneStatus `json:"lanes,omitempty"`

	// conditions are the latest observations of the queue: Ready,
	// UnderPressure and Draining.
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
// +kubebuilder:resource:shortName=lq,categories=agentlane
// +kubebuilder:printcolumn:name="Lanes",type=string,JSONPath=`.status.laneNames`,description="Lanes in priority order"
// +kubebuilder:printcolumn:name="Pending",type=integer,JSONPath=`.status.pending`,description="Commands waiting to start"
// +kubebuilder:printcolumn:name="Active",type=integer,JSONPath=`.status.active`,description="Commands running"
// +kubebuilder:printcolumn:name="Sessions",type=integer,JSONPath=`.status.sessions`,description="AgentSessions bound to the queue",priority=1
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Whether the scheduler runs the current spec"
// +kubebuilder:printcolumn:name="Pressure",type=string,JSONPath=`.status.conditions[?(@.type=="UnderPressure")].reason`,description="Why the queue is or is not under pressure",priority=1
// +kubebuilder:printcolumn:name="Drain",type=string,JSONPath=`.status.conditions[?(@.type=="Draining")].reason`,description="Whether the queue drains (Draining, Drained) or takes commands (NotDraining)",priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="LaneQueue name must be at most 63 characters, so that it fits in a label value"

// LaneQueue is a pool of priority lanes that agent sessions share: it decides
// which command of which session runs next, where it runs, and what happens
// when it fails.
type LaneQueue struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the scheduling policy of the queue.
	// +required
	Spec LaneQueueSpec `json:"spec"`

	// status is the observed state of the queue, written by the operator.
	// +optional
	Status LaneQueueStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// LaneQueueList is a list of LaneQueues.
type LaneQueueList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LaneQueue `json:"items"`
}

func init() {
	SchemeBuilder.Register(&LaneQueue{}, &LaneQueueList{})
}

// WorkerSelector selects workers by the labels they advertise. It has the
// shape of a Kubernetes label selector (matchLabels and matchExpressions,
// ANDed) and is validated as one at admission, with bounds on its size.
//
// +kubebuilder:validation:XValidation:rule="!has(self.matchLabels) || self.matchLabels.all(k, size(k) <= 317 && k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))",message="matchLabels keys must be label keys: an optional DNS subdomain prefix and '/', then a name of at most 63 characters of letters, digits, '-', '_' and '.', starting and ending with a letter or digit"
type WorkerSelector struct {
	// matchLabels are labels a worker must advertise with these values. At
	// most 32. Each value is a label value: at most 63 characters of
	// letters, digits, '-', '_' and '.', starting and ending with a letter
	// or digit, or empty.
	// +kubebuilder:validation:MaxProperties=32
	// +optional
	MatchLabels map[string]WorkerLabelValue `json:"matchLabels,omitempty"`

	// matchExpressions are requirements on the worker's labels. At most 16.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +optional
	MatchExpressions []WorkerSelectorRequirement `json:"matchExpressions,omitempty"`
}

// WorkerLabelValue is a Kubernetes label value.
//
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:XValidation:rule="self.matches('^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$')",message="a label value must be at most 63 characters of letters, digits, '-', '_' and '.', starting and ending with a letter or digit, or empty"
type WorkerLabelValue string

// WorkerSelectorOperator relates a worker's label to a requirement's values.
//
// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist
type WorkerSelectorOperator string

const (
	// WorkerSelectorIn: the label is set to one of the values.
	WorkerSelectorIn WorkerSelectorOperator = "In"
	// WorkerSelectorNotIn: the label is not set, or set to none of the values.
	WorkerSelectorNotIn WorkerSelectorOperator = "NotIn"
	// WorkerSelectorExists: the label is set, to any value.
	WorkerSelectorExists WorkerSelectorOperator = "Exists"
	// WorkerSelectorDoesNotExist: the label is not set.
	WorkerSelectorDoesNotExist WorkerSelectorOperator = "DoesNotExist"
)

// WorkerSelectorRequirement is one requirement on a worker's labels.
//
// +kubebuilder:validation:XValidation:rule="!(self.operator in ['In', 'NotIn']) || (has(self.values) && size(self.values) > 0)",message="values must not be empty when operator is In or NotIn",fieldPath=".values"
// +kubebuilder:validation:XValidation:rule="!(self.operator in ['Exists', 'DoesNotExist']) || !has(self.values) || size(self.values) == 0",message="values must be empty when operator is Exists or DoesNotExist",fieldPath=".values"
type WorkerSelectorRequirement struct {
	// key is the label key, such as topology.kubernetes.io/zone: an
	// optional DNS subdomain prefix and '/', then a name of at most 63
	// characters.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:XValidation:rule="self.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$')",message="key must be a label key: an optional DNS subdomain prefix and '/', then a name of at most 63 characters of letters, digits, '-', '_' and '.', starting and ending with a letter or digit"
	// +required
	Key string `json:"key"`

	// operator is In, NotIn, Exists or DoesNotExist.
	// +required
	Operator WorkerSelectorOperator `json:"operator"`

	// values are the label values for In and NotIn, where at least one is
	// required; Exists and DoesNotExist take none. At most 32.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Values []WorkerLabelValue `json:"values,omitempty"`
}

// LabelSelector returns the selector as a Kubernetes label selector.
func (s *WorkerSelector) LabelSelector() *metav1.LabelSelector {
	if s == nil {
		return nil
	}
	out := &metav1.LabelSelector{}
	if s.MatchLabels != nil {
		out.MatchLabels = make(map[string]string, len(s.MatchLabels))
		for k, v := range s.MatchLabels {
			out.MatchLabels[k] = string(v)
		}
	}
	for _, e := range s.MatchExpressions {
		r := metav1.LabelSelectorRequirement{Key: e.Key, Operator: metav1.LabelSelectorOperator(e.Operator)}
		for _, v := range e.Values {
			r.Values = append(r.Values, string(v))
		}
		out.MatchExpressions = append(out.MatchExpressions, r)
	}
	return out
}
