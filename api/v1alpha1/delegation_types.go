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

// Labels, annotations and conditions of delegated work (Delegate lanes).
const (
	// DelegatedLabel, set to "true" on an ExternalTask, makes it a delegated
	// task: the delegation controller, not the ExternalTask controller,
	// carries it. The Session API sets it on the tasks it creates for a
	// Delegate lane, together with the queue, lane and session labels.
	DelegatedLabel = "agentlane.io/delegated"
	// DelegationTaskLabel, on a worker AgentSession, names the delegated
	// ExternalTask the session works on. The session's first finished run
	// completes that task.
	DelegationTaskLabel = "agentlane.io/delegation-task"
	// DelegationCallbackAnnotation, set to "false" on a delegated task,
	// keeps its result out of the producer's inbox: the producer reads the
	// task's status instead.
	DelegationCallbackAnnotation = "agentlane.io/delegation-callback"
	// DelegationDepthAnnotation, on a worker AgentSession, counts the
	// delegations that led to it: 1 for a worker of a session that was not
	// itself delegated to. A session at MaxDelegationDepth cannot delegate.
	DelegationDepthAnnotation = "agentlane.io/delegation-depth"

	// MaxDelegationDepth bounds chains of delegation (a worker that
	// delegates in turn), so that a template that delegates to itself
	// cannot multiply sessions without end.
	MaxDelegationDepth = 3

	// ExternalTaskDeliveredCondition, on a delegated task, is True once the
	// result has been posted to the producer's inbox; False with reason
	// CallbackOff when the producer asked for no callback.
	ExternalTaskDeliveredCondition = "Delivered"
	// ExternalTaskInboxReason (Delivered=True): the result is in the
	// producer's inbox.
	ExternalTaskInboxReason = "Inbox"
	// ExternalTaskCallbackOffReason (Delivered=False): the producer asked
	// for no callback.
	ExternalTaskCallbackOffReason = "CallbackOff"
	// ExternalTaskProducerGoneReason (Delivered=False): the producer
	// session no longer exists.
	ExternalTaskProducerGoneReason = "ProducerGone"
	// ExternalTaskWorkerSessionReason (Claimed=True): a worker session runs
	// the delegated task; status.worker names it.
	ExternalTaskWorkerSessionReason = "WorkerSession"
	// ExternalTaskAwaitingWorkerSlotReason (Claimed=False): the delegated
	// task waits for one of its lane's worker slots (the lane's
	// maxConcurrency or maxConcurrencyPerSession).
	ExternalTaskAwaitingWorkerSlotReason = "AwaitingWorkerSlot"
	// ExternalTaskAwaitingProducerSlotReason (Claimed=False): the producer
	// already has as many running workers as the manager allows one
	// producer (--delegation-max-children).
	ExternalTaskAwaitingProducerSlotReason = "AwaitingProducerSlot"
	// ExternalTaskFirstTurnPendingReason (Claimed=False): the worker
	// session exists; its first turn is not posted yet.
	ExternalTaskFirstTurnPendingReason = "FirstTurnPending"
	// ExternalTaskQueueGoneReason (Delivered=False): the task's LaneQueue
	// is gone, and with it the producer's inbox.
	ExternalTaskQueueGoneReason = "QueueGone"
)

// DelegateTarget is the agent a Delegate lane hands its commands to. Each
// command on the lane creates a worker AgentSession from sessionTemplate in
// the lane's namespace, owned by the session that submitted the command (the
// producer) and carrying the producer's identity labels. The command's
// payload is the worker's first turn; the outcome the worker's runtime
// reports when it finishes that turn is the task's result, posted to the
// producer's inbox headed "from queue:<lane> · task#<id> · ok|error ·
// <time>". The lane's maxConcurrency is how many workers run at once; the
// others wait in submission order.
type DelegateTarget struct {
	// sessionTemplate is the worker AgentSession each command creates.
	// +required
	SessionTemplate AgentSessionTemplate `json:"sessionTemplate"`
}

// AgentSessionTemplate describes the worker sessions of a Delegate lane.
type AgentSessionTemplate struct {
	// spec is the worker session's spec. The operator adds the producer's
	// identity labels; the namespace is always the lane's.
	// +required
	Spec AgentSessionTemplateSpec `json:"spec"`
}

// AgentSessionTemplateSpec is the part of an AgentSession's spec a Delegate
// lane sets for its workers. Identity is not part of it: a worker acts for
// the tenant and principal of the session that delegated to it.
type AgentSessionTemplateSpec struct {
	// queueRef is the LaneQueue, in the lane's namespace, that schedules the
	// worker's commands. Defaults to the lane's own queue.
	// +optional
	QueueRef *LaneQueueReference `json:"queueRef,omitempty"`

	// agentTemplateId names the agent the workers run, such as reviewer; it
	// becomes the workers' identity.agentTemplateId.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	AgentTemplateID string `json:"agentTemplateId,omitempty"`

	// queueMode sets how the workers take inbound messages.
	// +optional
	QueueMode *QueueModeOptions `json:"queueMode,omitempty"`

	// budget bounds the tokens each worker may spend.
	// +optional
	Budget *WorkerBudget `json:"budget,omitempty"`

	// retention bounds what each worker keeps.
	// +optional
	Retention *SessionRetention `json:"retention,omitempty"`

	// runtime is the pod that runs each worker's agent. Without it the
	// worker's runtime runs elsewhere and connects to the Session API.
	// +optional
	Runtime *SessionRuntime `json:"runtime,omitempty"`
}

// WorkerBudget is the budget of each worker session of a Delegate lane. It
// has the token limits, guard and checkEveryTool of a session's Budget; a
// cost limit is not part of a lane's template (its validation, repeated for
// every lane, would exceed the API server's validation cost budget): set one
// with the guard.
type WorkerBudget struct {
	// tokens limits the LLM tokens each worker consumes.
	// +optional
	Tokens *TokenBudget `json:"tokens,omitempty"`

	// guard is an HTTP service consulted on every check of a worker's
	// budget, after the token limits.
	// +optional
	Guard *BudgetGuard `json:"guard,omitempty"`

	// checkEveryTool checks the budget before every command of a worker.
	// +optional
	CheckEveryTool bool `json:"checkEveryTool,omitempty"`
}

// Budget returns the session Budget this worker budget stands for.
func (b *WorkerBudget) Budget() *Budget {
	if b == nil {
		return nil
	}
	return &Budget{Tokens: b.Tokens, Guard: b.Guard, CheckEveryTool: b.CheckEveryTool}
}
