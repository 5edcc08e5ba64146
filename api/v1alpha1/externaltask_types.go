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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Condition types and reasons of an ExternalTask.
const (
	// ExternalTaskClaimedCondition is True once a worker has claimed the
	// task's current attempt; False, with the reason, while the attempt waits
	// for a slot, a worker or its Job's pod, and once the task failed or was
	// cancelled.
	ExternalTaskClaimedCondition = "Claimed"
	// ExternalTaskFinishedCondition is True once the task reached a terminal
	// phase; its reason is that phase (Succeeded, Failed, TimedOut,
	// DeadLettered or Cancelled). It lets `kubectl wait --for=condition=Finished`
	// wait for a task.
	ExternalTaskFinishedCondition = "Finished"

	// ExternalTaskWorkerClaimedReason (Claimed=True): a worker claimed the
	// current attempt and keeps its heartbeat.
	ExternalTaskWorkerClaimedReason = "WorkerClaimed"
	// ExternalTaskAwaitingWorkerReason (Claimed=False): the task waits for a
	// lane slot, a rate-limit token or a free worker.
	ExternalTaskAwaitingWorkerReason = "AwaitingWorker"
	// ExternalTaskJobPendingReason (Claimed=False): the task's Job was created
	// and its pod has not claimed the task yet.
	ExternalTaskJobPendingReason = "JobPending"
	// ExternalTaskAwaitingHandlerReason (Claimed=False): the lane's external
	// target is Handler; the attempt waits for a handler to complete it
	// through the Session API.
	ExternalTaskAwaitingHandlerReason = "AwaitingHandler"
	// ExternalTaskWorkerLostReason (Claimed=False): the heartbeat of the
	// worker that held the attempt expired; the attempt counts as failed and
	// goes through the retry policy (one the worker never reported starting
	// is retried without counting, at most three times per task).
	ExternalTaskWorkerLostReason = "WorkerLost"
	// ExternalTaskRetryBackoffReason (Claimed=False): the last attempt failed
	// and the task waits for its retry delay.
	ExternalTaskRetryBackoffReason = "RetryBackoff"
	// ExternalTaskInProgressReason (Finished=False): the task has not reached
	// a terminal phase.
	ExternalTaskInProgressReason = "InProgress"
)

// ExternalTaskSpec is the command an ExternalTask runs. It cannot be changed
// after the task is created; the operator records each try as a new attempt
// in status.
//
// Immutability is checked field by field, comparing durations and times by
// value, so that a client that reads the task and writes it back unchanged
// (for example "1m" returned as "1m0s") is not rejected.
//
// +kubebuilder:validation:XValidation:rule="has(self.sessionRef) || has(self.queueRef)",message="one of sessionRef or queueRef is required"
// +kubebuilder:validation:XValidation:rule="has(self.sessionRef) == has(oldSelf.sessionRef) && has(self.queueRef) == has(oldSelf.queueRef) && has(self.lane) == has(oldSelf.lane) && has(self.payload) == has(oldSelf.payload) && has(self.timeout) == has(oldSelf.timeout) && has(self.priority) == has(oldSelf.priority) && has(self.deadline) == has(oldSelf.deadline) && has(self.identity) == has(oldSelf.identity) && has(self.runId) == has(oldSelf.runId)",message="spec is immutable: fields cannot be added or removed after creation"
// +kubebuilder:validation:XValidation:rule="!has(self.payload) || !has(oldSelf.payload) || self.payload == oldSelf.payload",message="payload is immutable",fieldPath=".payload"
type ExternalTaskSpec struct {
	// sessionRef is the AgentSession, in the same namespace, that submitted
	// the command; the task is scheduled by that session's queue and owned by
	// the session. Tasks created directly may name only a queue.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="sessionRef is immutable"
	// +optional
	SessionRef *AgentSessionReference `json:"sessionRef,omitempty"`

	// queueRef is the LaneQueue, in the same namespace, whose lanes schedule
	// the task. It is required when sessionRef is not set; when both are set
	// it must be the session's queue.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="queueRef is immutable"
	// +optional
	QueueRef *LaneQueueReference `json:"queueRef,omitempty"`

	// lane is the lane that runs the task. When it is not set, the queue
	// routes the task by its commandType.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="lane is immutable"
	// +optional
	Lane LaneName `json:"lane,omitempty"`

	// commandType is the kind of command, such as bash; it selects both the
	// lane (when lane is not set) and the handler a worker runs.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="commandType is immutable"
	// +required
	CommandType CommandType `json:"commandType"`

	// payload is the command's input, a JSON object interpreted by the
	// handler of commandType. For bash: {"command": "...", "workingDir":
	// "...", "env": {"NAME": "value"}}. Keep it small; large inputs belong in
	// a volume or an object store.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +optional
	Payload *runtime.RawExtension `json:"payload,omitempty"`

	// timeout is how long one attempt may run, such as 2m, counted from its
	// dispatch to a worker (or its Job's creation); time spent waiting for
	// a worker does not count. When it is not set the lane's timeout
	// applies. An attempt that runs out of time fails and goes through the
	// retry policy. Between 100ms and 24h.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('100ms') && duration(self) <= duration('24h')",message="timeout must be a duration between 100ms and 24h, such as 2m"
	// +kubebuilder:validation:XValidation:rule="duration(self) == duration(oldSelf)",message="timeout is immutable"
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// priority replaces the lane's priority for this task: 0 is the highest.
	// When it is not set the lane's priority applies.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="priority is immutable"
	// +optional
	Priority *int32 `json:"priority,omitempty"`

	// deadline is when the task should be done, as an RFC 3339 time such as
	// 2026-05-21T14:30:00Z. As it approaches the task's priority is boosted
	// according to the queue's priorityBoost.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="deadline is immutable"
	// +optional
	Deadline *metav1.Time `json:"deadline,omitempty"`

	// identity holds the identity labels of the submitting session, copied
	// when the session creates the task.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="identity is immutable"
	// +optional
	Identity *Identity `json:"identity,omitempty"`

	// runId is the run of the session the command belongs to; cancelling a
	// run cancels its tasks that have not finished.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="runId is immutable"
	// +optional
	RunID string `json:"runId,omitempty"`
}

// ExternalTaskPhase is where a task is in its life cycle.
//
// +kubebuilder:validation:Enum=Queued;Dispatched;Running;Succeeded;Failed;TimedOut;DeadLettered;Cancelled
type ExternalTaskPhase string

const (
	// ExternalTaskQueued: waiting in its lane for a slot, or for the delay
	// before a retry.
	ExternalTaskQueued ExternalTaskPhase = "Queued"
	// ExternalTaskDispatched: granted a slot and offered to a worker (or a Job
	// was created), not yet started.
	ExternalTaskDispatched ExternalTaskPhase = "Dispatched"
	// ExternalTaskRunning: a worker runs the current attempt.
	ExternalTaskRunning ExternalTaskPhase = "Running"
	// ExternalTaskSucceeded: an attempt succeeded; status.result holds its
	// output. Terminal.
	ExternalTaskSucceeded ExternalTaskPhase = "Succeeded"
	// ExternalTaskFailed: an attempt failed and will not be retried, because
	// the failure cannot be retried or the retries ran out while the queue
	// keeps no dead letters. Terminal.
	ExternalTaskFailed ExternalTaskPhase = "Failed"
	// ExternalTaskTimedOut: the last attempt ran out of time and no retry is
	// left while the queue keeps no dead letters. Terminal.
	ExternalTaskTimedOut ExternalTaskPhase = "TimedOut"
	// ExternalTaskDeadLettered: the retries ran out and the task became a
	// dead letter of its queue. Terminal.
	ExternalTaskDeadLettered ExternalTaskPhase = "DeadLettered"
	// ExternalTaskCancelled: the task, its run or its session was cancelled
	// before it finished. Terminal.
	ExternalTaskCancelled ExternalTaskPhase = "Cancelled"
)

// IsTerminal reports whether a task in phase p is finished for good: its
// phase and result no longer change.
func (p ExternalTaskPhase) IsTerminal() bool {
	switch p {
	case ExternalTaskSucceeded, ExternalTaskFailed, ExternalTaskTimedOut, ExternalTaskDeadLettered, ExternalTaskCancelled:
		return true
	}
	return false
}

// HolderKind is who holds a task's current attempt: what kind of runner the
// manager handed it to. It is recorded when the attempt is dispatched and
// read wherever the holder matters, never inferred from other fields. New
// kinds of holder (a direct stream from the manager to a worker) add a
// value.
//
// +kubebuilder:validation:Enum=Workers;Job;Handler;Delegate;Direct
type HolderKind string

const (
	// HolderWorkers: a pool worker, named in status.worker, holds the
	// attempt.
	HolderWorkers HolderKind = "Workers"
	// HolderJob: the batch Job in status.jobName runs the attempt; its pod
	// names itself in status.worker once it claims it.
	HolderJob HolderKind = "Job"
	// HolderHandler: the attempt is offered to the Session API's handlers,
	// which complete it through the API; status.worker stays empty.
	HolderHandler HolderKind = "Handler"
	// HolderDelegate: a worker AgentSession, named in status.worker, runs
	// the delegated task; the delegation controller carries it.
	HolderDelegate HolderKind = "Delegate"
	// HolderDirect: a worker streaming from the leading manager, named in
	// status.worker, runs the attempt; the manager recorded the task
	// because it waited, ran long or failed (a Direct lane).
	HolderDirect HolderKind = "Direct"
)

// AttemptOutcome is how one attempt of a task ended.
//
// +kubebuilder:validation:Enum=Succeeded;Failed;TimedOut;WorkerLost;Cancelled
type AttemptOutcome string

const (
	// AttemptSucceeded: the worker reported success.
	AttemptSucceeded AttemptOutcome = "Succeeded"
	// AttemptFailed: the worker reported failure.
	AttemptFailed AttemptOutcome = "Failed"
	// AttemptTimedOut: the attempt ran longer than its timeout.
	AttemptTimedOut AttemptOutcome = "TimedOut"
	// AttemptWorkerLost: the worker's heartbeat expired while it held the
	// attempt. With notStarted, the worker had not reported starting it.
	AttemptWorkerLost AttemptOutcome = "WorkerLost"
	// AttemptCancelled: the task was cancelled during the attempt.
	AttemptCancelled AttemptOutcome = "Cancelled"
)

// TaskAttempt records one finished attempt of a task.
type TaskAttempt struct {
	// attempt is the number of the attempt, starting at 1.
	// +kubebuilder:validation:Minimum=1
	// +required
	Attempt int32 `json:"attempt"`

	// worker is the worker that held the attempt.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Worker string `json:"worker,omitempty"`

	// nodeName is the node the worker ran on.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	NodeName string `json:"nodeName,omitempty"`

	// startedAt is when the worker started the attempt.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`

	// finishedAt is when the attempt ended.
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`

	// outcome is Succeeded, Failed, TimedOut, WorkerLost or Cancelled.
	// +required
	Outcome AttemptOutcome `json:"outcome"`

	// error is the error of a failed attempt, shortened to 4096 characters.
	// +kubebuilder:validation:MaxLength=4096
	// +optional
	Error string `json:"error,omitempty"`

	// notStarted marks a WorkerLost attempt whose worker never reported
	// starting it (the task was still Dispatched): its command may or may
	// not have run. The first three such attempts of a task do not count
	// against its lane's maxRetries; further ones do.
	// +optional
	NotStarted bool `json:"notStarted,omitempty"`
}

// TaskResult is the outcome a worker reports for the current attempt.
type TaskResult struct {
	// success tells whether the command succeeded.
	// +required
	Success bool `json:"success"`

	// result is the command's output as JSON, interpreted by the submitter.
	// For bash: {"stdout": "...", "stderr": "...", "truncated": false}.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +optional
	Result *runtime.RawExtension `json:"result,omitempty"`

	// error describes why the command failed, shortened to 32768 characters.
	// +kubebuilder:validation:MaxLength=32768
	// +optional
	Error string `json:"error,omitempty"`

	// exitCode is the exit code of a process the command ran, when it ran one.
	// +optional
	ExitCode *int32 `json:"exitCode,omitempty"`
}

// ExternalTaskStatus is the observed state of an ExternalTask. The operator
// owns the phase and the attempt bookkeeping; the worker that holds the
// current attempt writes startedAt and result. Once the phase is terminal it
// cannot change, so a late completion from a worker that lost the task is
// rejected.
//
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.phase) || !(oldSelf.phase in ['Succeeded', 'Failed', 'TimedOut', 'DeadLettered', 'Cancelled']) || (has(self.phase) && self.phase == oldSelf.phase)",message="phase cannot change once the task has finished",fieldPath=".phase"
type ExternalTaskStatus struct {
	// observedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// phase is where the task is: Queued (waiting for a lane slot or a retry
	// delay), Dispatched (granted a slot, offered to a worker or Job),
	// Running (a worker runs the current attempt), or one of the terminal
	// phases Succeeded, Failed (not retryable, or retries ran out without dead
	// letters), TimedOut (the last attempt ran out of time, no retry left),
	// DeadLettered (retries ran out, kept as a dead letter) and Cancelled.
	// +optional
	Phase ExternalTaskPhase `json:"phase,omitempty"`

	// lane is the lane the task was routed to.
	// +optional
	Lane LaneName `json:"lane,omitempty"`

	// attempt is the number of the current attempt, starting at 1; 0 before
	// the first dispatch. A retry is a new attempt: the spec never changes.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Attempt int32 `json:"attempt,omitempty"`

	// attempts records the attempts that ended without success (failed,
	// timed out, lost with their worker, cancelled), oldest first; at most
	// the 16 most recent are kept. A successful attempt is the current one:
	// worker, startedAt, finishedAt and result describe it.
	// +listType=map
	// +listMapKey=attempt
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Attempts []TaskAttempt `json:"attempts,omitempty"`

	// worker is the worker that holds the current attempt: the name of its
	// heartbeat Lease, usually its pod name.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Worker string `json:"worker,omitempty"`

	// nodeName is the node the worker of the current attempt runs on.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	NodeName string `json:"nodeName,omitempty"`

	// workerIncarnation is the process of the worker the current attempt was
	// dispatched to: the incarnation its heartbeat Lease advertised when the
	// manager dispatched it. Only that process runs the attempt; when the
	// worker's Lease shows another incarnation (the worker restarted under
	// the same name), the attempt is lost with it. Empty for an attempt
	// dispatched to a worker that advertises no incarnation.
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[0-9A-Za-z]*$`
	// +optional
	WorkerIncarnation string `json:"workerIncarnation,omitempty"`

	// holder is the kind of runner the current attempt was dispatched to:
	// Workers (a pool worker), Job (a batch Job's pod), Handler (handlers
	// that complete it through the Session API) or Delegate (a worker
	// AgentSession). The manager records it at dispatch; a worker cannot
	// change it. Empty while no attempt is dispatched.
	// +optional
	Holder HolderKind `json:"holder,omitempty"`

	// jobName is the batch Job created for the current attempt, when the
	// lane's external target is Job.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	JobName string `json:"jobName,omitempty"`

	// queuedAt is when the task entered its lane.
	// +optional
	QueuedAt *metav1.Time `json:"queuedAt,omitempty"`

	// dispatchedAt is when the current attempt was granted a slot.
	// +optional
	DispatchedAt *metav1.Time `json:"dispatchedAt,omitempty"`

	// startedAt is when a worker started the current attempt.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`

	// finishedAt is when the current attempt finished running: the worker sets
	// it with the result, whether the run succeeded or not.
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`

	// result is the outcome of the current attempt, written by its worker.
	// +optional
	Result *TaskResult `json:"result,omitempty"`

	// heartbeatTimeout is the heartbeatTimeout of the lane when the current
	// attempt was dispatched: how long the attempt may go without a
	// heartbeat. The worker that runs it paces its heartbeats by it.
	// +optional
	HeartbeatTimeout *metav1.Duration `json:"heartbeatTimeout,omitempty"`

	// lastHeartbeatAt is when whatever runs the current attempt (a pool
	// worker, a handler) last reported that it is alive. Heartbeats are
	// coalesced: it moves at most once per quarter of heartbeatTimeout
	// (and at most twice a second). Microsecond precision, so that
	// heartbeats within one second tell apart. Cleared by a new attempt.
	// +optional
	LastHeartbeatAt *metav1.MicroTime `json:"lastHeartbeatAt,omitempty"`

	// progress is the last progress note of the current attempt's
	// heartbeats, such as "42/100 files", at most 256 characters.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Progress string `json:"progress,omitempty"`

	// deadline is when the current attempt times out, set once the
	// session's owner has extended it (POST .../commands/{id}/extend).
	// Cleared by a new attempt.
	// +optional
	Deadline *metav1.Time `json:"deadline,omitempty"`

	// extensions counts the deadline extensions of the current attempt;
	// at most 8 are allowed.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=8
	// +optional
	Extensions int32 `json:"extensions,omitempty"`

	// conditions are the latest observations of the task: Claimed and
	// Finished.
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
// +kubebuilder:resource:shortName=xt,categories=agentlane
// +kubebuilder:selectablefield:JSONPath=`.status.worker`
// +kubebuilder:selectablefield:JSONPath=`.status.phase`
// +kubebuilder:selectablefield:JSONPath=`.spec.sessionRef.name`
// +kubebuilder:selectablefield:JSONPath=`.spec.queueRef.name`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`,description="Life-cycle phase"
// +kubebuilder:printcolumn:name="Command",type=string,JSONPath=`.spec.commandType`,description="Command type"
// +kubebuilder:printcolumn:name="Lane",type=string,JSONPath=`.status.lane`,description="Lane the task was routed to"
// +kubebuilder:printcolumn:name="Holder",type=string,JSONPath=`.status.holder`,description="Kind of runner holding the current attempt: Workers, Job, Handler, Delegate or Direct"
// +kubebuilder:printcolumn:name="Worker",type=string,JSONPath=`.status.worker`,description="Worker holding the current attempt"
// +kubebuilder:printcolumn:name="Attempt",type=integer,JSONPath=`.status.attempt`,description="Current attempt, starting at 1"
// +kubebuilder:printcolumn:name="Exit",type=integer,JSONPath=`.status.result.exitCode`,description="Exit code of the attempt's process, once it reported"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Finished")].reason`,description="Why the task finished, or that it is in progress",priority=1
// +kubebuilder:printcolumn:name="Session",type=string,JSONPath=`.spec.sessionRef.name`,description="AgentSession that submitted the task",priority=1
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.status.nodeName`,description="Node of the worker",priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// ExternalTask is one command of an External lane made durable: the lane
// scheduler queues it, a worker on any node (or a batch Job) claims and runs
// it, and the worker records the result in its status. Sessions create them
// for their External-lane commands and own them; users may also create them
// directly, and the same lanes schedule them.
type ExternalTask struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the command to run. It cannot be changed after creation; the
	// operator runs retries as new attempts, recorded in status.
	// +required
	Spec ExternalTaskSpec `json:"spec"`

	// status is the observed state of the task, written by the operator and
	// the worker that holds the current attempt. Once the phase is terminal it
	// cannot change, so a late completion from a worker that lost the task is
	// rejected.
	// +optional
	Status ExternalTaskStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ExternalTaskList is a list of ExternalTasks.
type ExternalTaskList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ExternalTask `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ExternalTask{}, &ExternalTaskList{})
}
