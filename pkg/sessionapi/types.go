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

package sessionapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Version is the path prefix of every route: /v1/namespaces/{ns}/sessions/{name}/...
const Version = "v1"

// Handler modes a command runs under (Command.Mode).
const (
	ModeInternal = "Internal"
	ModeExternal = "External"
	ModeHybrid   = "Hybrid"
)

// Command states (Command.State). The last five are final.
const (
	StateQueued       = "Queued"
	StateRunning      = "Running"
	StateRetrying     = "Retrying"
	StateSucceeded    = "Succeeded"
	StateFailed       = "Failed"
	StateTimedOut     = "TimedOut"
	StateDeadLettered = "DeadLettered"
	StateCancelled    = "Cancelled"
)

// Final reports whether state is one a command ends in.
func Final(state string) bool {
	switch state {
	case StateSucceeded, StateFailed, StateTimedOut, StateDeadLettered, StateCancelled:
		return true
	}
	return false
}

// Identity holds the session's identity labels, as carried by its commands
// and events.
type Identity struct {
	TenantID        string `json:"tenantId,omitempty"`
	Principal       string `json:"principal,omitempty"`
	AgentTemplateID string `json:"agentTemplateId,omitempty"`
	CorrelationID   string `json:"correlationId,omitempty"`
}

// SubmitRequest submits one command (a tool call or an LLM call) into the
// session's lanes: POST .../commands.
type SubmitRequest struct {
	// ID names the command: a lowercase ULID or another name valid as a
	// Kubernetes object name. Empty means the server assigns a ULID.
	ID string `json:"id,omitempty"`
	// Type is the command type (tool name such as read or bash, or llm); it
	// picks the lane unless Lane is set.
	Type string `json:"type"`
	// Lane names the lane directly.
	Lane string `json:"lane,omitempty"`
	// Payload is the command's input, any JSON value.
	Payload json.RawMessage `json:"payload,omitempty"`
	// Priority replaces the lane's priority for this command (0 is highest).
	Priority *int `json:"priority,omitempty"`
	// Timeout bounds each attempt; it overrides the session's lane override
	// and the lane's timeout.
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// Deadline drives priority boost as it approaches.
	Deadline *time.Time `json:"deadline,omitempty"`
	// RunID groups the commands of one agent run, for cancellation and steer.
	RunID string `json:"runId,omitempty"`
	// Wait is how long the call waits: for the grant of an Internal or
	// Hybrid command, for the result of an External one. The server caps it
	// (5m by default); 0 means that cap. When it runs out the reply is 202
	// with the command as it stands.
	Wait *metav1.Duration `json:"wait,omitempty"`
	// ParentID is the id of the session's running command whose work
	// submits this one. When the parent runs on an isolated lane, the
	// command may go only to that lane (403 IsolatedLane otherwise).
	// Submit fills it from a context of Run's handler (ParentFrom).
	ParentID string `json:"parentId,omitempty"`
}

// Grant is the slot an Internal or Hybrid command holds: the runtime runs
// the command and reports the attempt's result before Deadline.
type Grant struct {
	Attempt  int       `json:"attempt"`
	Deadline time.Time `json:"deadline"`
}

// Result is what an attempt produced.
type Result struct {
	Success bool `json:"success"`
	// Output is the attempt's output: any JSON value.
	Output   json.RawMessage `json:"output,omitempty"`
	Error    string          `json:"error,omitempty"`
	ExitCode int             `json:"exitCode,omitempty"`
}

// Command is a command as the server sees it.
type Command struct {
	ID      string   `json:"id"`
	Session string   `json:"session"`
	Type    string   `json:"type"`
	Lane    string   `json:"lane"`
	RunID   string   `json:"runId,omitempty"`
	Mode    string   `json:"mode"`
	State   string   `json:"state"`
	Labels  Identity `json:"labels,omitempty"`
	// Attempt is the number of the current or last attempt (0 before the
	// first starts).
	Attempt int `json:"attempt"`
	// Grant is set while an Internal or Hybrid attempt waits for the
	// runtime's report.
	Grant *Grant `json:"grant,omitempty"`
	// Result is the last attempt's result, once the command is final.
	Result *Result `json:"result,omitempty"`
	// Error explains a final state other than Succeeded.
	Error string `json:"error,omitempty"`
	// Task is the ExternalTask object of an External command.
	Task string `json:"task,omitempty"`
	// StartedAt is when the last attempt of a Direct command started on
	// its worker, once the worker answered it: as the worker reports it,
	// bounded by when the manager sent the attempt and received its
	// result. A measurement on the worker's clock, nothing more.
	StartedAt time.Time `json:"startedAt,omitzero"`
}

// Final reports whether the command has ended.
func (c *Command) Final() bool { return Final(c.State) }

// ReportRequest reports the result of an Internal or Hybrid attempt:
// POST .../commands/{id}/result.
type ReportRequest struct {
	// Attempt is the grant's attempt; a report for any other attempt is
	// refused with StaleAttempt.
	Attempt int `json:"attempt"`
	Result
	// Usage is what the attempt consumed (an LLM call's tokens and cost); it
	// is recorded against the session's budget when the report is taken,
	// whether the attempt succeeded or failed.
	Usage *Usage `json:"usage,omitempty"`
}

// Message is an inbound message (a user turn) for the session:
// POST .../messages. A message whose text is "/queue ..." changes the
// session's queue mode instead.
type Message struct {
	ID      string `json:"id,omitempty"`
	Text    string `json:"text"`
	Channel string `json:"channel,omitempty"`
	Thread  string `json:"thread,omitempty"`
	// ReceivedAt is set by the server.
	ReceivedAt time.Time `json:"receivedAt,omitzero"`
	// From, when set, names the session on whose behalf the message is
	// sent (a peer invocation). The caller must be allowed to use that
	// session too; the receiving session sees a PeerInvocation event.
	From *SessionRef `json:"from,omitempty"`
}

// SessionRef names an AgentSession.
type SessionRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// QueueOptions are a session's queue-mode options in force.
type QueueOptions struct {
	Mode     string          `json:"mode"`
	Debounce metav1.Duration `json:"debounce"`
	Cap      int             `json:"cap"`
	Drop     string          `json:"drop"`
	// ByChannel gives the channels whose messages take another mode.
	ByChannel map[string]string `json:"byChannel,omitempty"`
}

// PostResult says what the session did with a message.
type PostResult struct {
	// Directive is set for a /queue message; Options are then the options
	// after it.
	Directive bool          `json:"directive,omitempty"`
	Options   *QueueOptions `json:"options,omitempty"`
	Queued    bool          `json:"queued,omitempty"`
	Steered   bool          `json:"steered,omitempty"`
	Dropped   bool          `json:"dropped,omitempty"`
	// Aborted names the run an interrupt aborted.
	Aborted string `json:"aborted,omitempty"`
	// Duplicate: a message of the same id is queued in the session or was
	// among the last 128 it took (ids of at most 128 bytes); this one was
	// ignored, as a re-delivery.
	Duplicate bool `json:"duplicate,omitempty"`
}

// CancelRequest cancels one command, the queued commands of a run, or all of
// the session's commands: POST .../cancel. Exactly one field is set.
type CancelRequest struct {
	CommandID string `json:"commandId,omitempty"`
	RunID     string `json:"runId,omitempty"`
	Session   bool   `json:"session,omitempty"`
}

// CancelResult counts the commands cancelled.
type CancelResult struct {
	Cancelled int `json:"cancelled"`
}

// Percentiles of a latency, in seconds.
type Percentiles struct {
	Count uint64  `json:"count"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
}

// LaneStats are one lane's counts, over every session of the queue.
type LaneStats struct {
	Name         string      `json:"name"`
	Priority     int         `json:"priority"`
	Mode         string      `json:"mode"`
	Pending      int         `json:"pending"`
	Active       int         `json:"active"`
	Completed    uint64      `json:"completed"`
	Failed       uint64      `json:"failed"`
	DeadLettered uint64      `json:"deadLettered"`
	Cancelled    uint64      `json:"cancelled"`
	Wait         Percentiles `json:"wait"`
	Run          Percentiles `json:"run"`
	// Paused is set while the lane starts no command (spec.lanes[].paused
	// of the LaneQueue): the session's commands in it wait.
	Paused bool `json:"paused,omitempty"`
}

// SessionCounts are the session's own counts.
type SessionCounts struct {
	Pending      int    `json:"pending"`
	Active       int    `json:"active"`
	Completed    uint64 `json:"completed"`
	Failed       uint64 `json:"failed"`
	DeadLettered uint64 `json:"deadLettered"`
	Cancelled    uint64 `json:"cancelled"`
	// QueuedMessages waiting for a turn; ActiveRun is the run in progress.
	QueuedMessages int               `json:"queuedMessages"`
	ActiveRun      string            `json:"activeRun,omitempty"`
	LaneModes      map[string]string `json:"laneModes,omitempty"`
}

// Stats are GET .../stats: the session's counts and its queue's lanes.
type Stats struct {
	Queue   string        `json:"queue"`
	Session SessionCounts `json:"session"`
	Lanes   []LaneStats   `json:"lanes"`
	Options QueueOptions  `json:"queueMode"`
	// Draining is set while the session's LaneQueue drains (spec.drain):
	// submissions are refused with 503 Draining.
	Draining bool `json:"draining,omitempty"`
}

// ExternalTask is a pending External attempt of the session: GET .../external.
type ExternalTask struct {
	ID          string    `json:"id"`
	Attempt     int       `json:"attempt"`
	Lane        string    `json:"lane"`
	CommandType string    `json:"commandType"`
	RunID       string    `json:"runId,omitempty"`
	CreatedAt   time.Time `json:"createdAt"`
	// Deadline is when the attempt times out; zero until a worker has it,
	// since an attempt's timeout runs from its dispatch (docs/workers.md).
	Deadline time.Time `json:"deadline"`
	// Payload is the command's input, as it was submitted.
	Payload json.RawMessage `json:"payload,omitempty"`
	// RemainingSeconds is how long the attempt has left before it times
	// out; its whole timeout while it has not been dispatched.
	RemainingSeconds float64 `json:"remainingSeconds"`
	// TimedOut is true once the attempt's deadline has passed.
	TimedOut bool `json:"timedOut"`
	// CanComplete is true when the caller may complete this attempt with
	// POST .../external/{id}/complete: it holds the access the call needs
	// (update on agentsessions/api) and the attempt is one the call would
	// take now (a Handler lane's task dispatched to handlers, without a
	// result). False for a task held by a worker or a Job, or not yet
	// dispatched.
	CanComplete bool `json:"canComplete"`
}

// DeadLetter is a command of the session that failed for good:
// GET .../deadletters.
type DeadLetter struct {
	ID          string    `json:"id"`
	CommandType string    `json:"commandType"`
	Lane        string    `json:"lane"`
	RunID       string    `json:"runId,omitempty"`
	Error       string    `json:"error"`
	Attempts    int       `json:"attempts"`
	FailedAt    time.Time `json:"failedAt"`
	Labels      Identity  `json:"labels,omitempty"`
}

// Event types of the session's stream, besides the scheduler's command
// events (submitted, started, completed, failed, retry, timeout,
// dead_lettered, cancelled, external_task_pending, external_task_completed).
const (
	// EventTurn: start a run with the turn's messages.
	EventTurn = "turn"
	// EventSteer: inject the message into the run at its next tool boundary.
	EventSteer = "steer"
	// EventAbort: stop the run now.
	EventAbort = "abort"
	// EventMessageDropped: a message did not fit in the session's queue,
	// or (Superseded) an interrupt dropped the messages that waited for a
	// turn: Messages lists those whose text was kept, with their ids,
	// DroppedCount all of them, RunID the run the interrupt aborted.
	EventMessageDropped = "message_dropped"
	// EventMessageQueued: a message was taken for a turn, reported at once
	// and before the turn it may start, so that its channel can show a
	// typing indicator; RunID is the run it waits for, if any.
	EventMessageQueued = "message_queued"
	// EventMessageWaiting: messages have waited more than 2s for a turn
	// while run RunID is active; each message is reported once, Waited is
	// the longest wait among them.
	EventMessageWaiting = "message_waiting"
	// EventEventsLost: events the session no longer retains come here, in
	// a stream that resumed or fell behind; Lost counts them. It has no ID.
	EventEventsLost = "events_lost"
	// EventGap: the stream resumed after an id of an earlier manager run
	// (After), and what came between it and the manager's restart is
	// gone, in a number nobody knows. It comes first, with the ID every
	// later event is above: resuming after it misses nothing more.
	EventGap = "gap"
	// EventInboxRestored: a restarted manager put back the messages the
	// session's inbox held (Messages: those dropped for a summary first,
	// then the queued ones) and its /queue override; Lost counts the
	// oldest messages that were not kept. They wait for their turn again.
	EventInboxRestored = "inbox_restored"
)

// Event is one entry of a session's event stream: GET .../events (Server-Sent
// Events; the SSE id is ID and the SSE event name is Type).
type Event struct {
	// ID orders the session's events: it only grows, also across manager
	// restarts. Within one manager run a session's ids are consecutive
	// from the run's base (its start in Unix milliseconds times 1000)
	// plus 1; reconnecting with Last-Event-ID resumes after it.
	ID   uint64    `json:"id"`
	Type string    `json:"type"`
	Time time.Time `json:"time"`
	// Command events.
	CommandID   string   `json:"commandId,omitempty"`
	CommandType string   `json:"commandType,omitempty"`
	Lane        string   `json:"lane,omitempty"`
	RunID       string   `json:"runId,omitempty"`
	Attempt     int      `json:"attempt,omitempty"`
	Error       string   `json:"error,omitempty"`
	Terminal    bool     `json:"terminal,omitempty"`
	Labels      Identity `json:"labels,omitzero"`
	// Delay is the wait before a retry.
	Delay *metav1.Duration `json:"delay,omitempty"`
	// Inbox events: the turn's, steer's or dropped messages and the turn's
	// prompt.
	Messages []Message `json:"messages,omitempty"`
	Text     string    `json:"text,omitempty"`
	Summary  bool      `json:"summary,omitempty"`
	// Superseded marks the message_dropped event of an interrupt, and
	// DroppedCount counts the messages it dropped: those listed in
	// Messages and those only counted past the summary's lines.
	Superseded   bool             `json:"superseded,omitempty"`
	DroppedCount int              `json:"droppedCount,omitempty"`
	Channel      string           `json:"channel,omitempty"`
	Thread       string           `json:"thread,omitempty"`
	Waited       *metav1.Duration `json:"waited,omitempty"`
	// Lost counts the events an events_lost event stands for.
	Lost uint64 `json:"lost,omitempty"`
	// After is the Last-Event-ID a gap event's stream resumed from.
	After uint64 `json:"after,omitempty"`
	// Cluster events: one of these is set on a BudgetThresholdHit,
	// PassivationRequested or PeerInvocation event.
	Budget      *BudgetThreshold    `json:"budget,omitempty"`
	Passivation *PassivationRequest `json:"passivation,omitempty"`
	Peer        *PeerInvocation     `json:"peer,omitempty"`
}

// Cluster event types of the session's stream; the operator also records
// them as Kubernetes Events on the AgentSession.
const (
	// EventBudgetThresholdHit: consumption crossed a soft or hard limit of
	// the session's budget, or the budget guard said soft or deny.
	EventBudgetThresholdHit = "BudgetThresholdHit"
	// EventPassivationRequested: the session must reach a checkpoint before
	// Deadline; its pod is then evicted.
	EventPassivationRequested = "PassivationRequested"
	// EventPeerInvocation: another session submitted work to this one.
	EventPeerInvocation = "PeerInvocation"
)

// BudgetThreshold is the body of a BudgetThresholdHit event.
type BudgetThreshold struct {
	// Resource is tokens, cost or guard (the budget guard's answer).
	Resource string `json:"resource"`
	// Kind is soft or hard.
	Kind     string `json:"kind"`
	Consumed string `json:"consumed"`
	Limit    string `json:"limit,omitempty"`
	Message  string `json:"message"`
}

// PassivationRequest is the body of a PassivationRequested event.
type PassivationRequest struct {
	// Reason is idle_reaper, node_drain, migration or manual.
	Reason   string    `json:"reason"`
	Deadline time.Time `json:"deadline"`
	// Pod is the runtime pod the request is for, when the session has one.
	// A runtime in another pod (AGENTLANE_POD_NAME) reads an earlier
	// request, one that moved the session off its previous pod.
	Pod string `json:"pod,omitempty"`
}

// PeerInvocation is the body of a PeerInvocation event.
type PeerInvocation struct {
	FromNamespace string `json:"fromNamespace"`
	FromSession   string `json:"fromSession"`
	FromTenant    string `json:"fromTenant,omitempty"`
	CorrelationID string `json:"correlationId,omitempty"`
}

// Error codes. Every error reply is an Error with one of them.
const (
	CodeUnauthenticated    = "Unauthenticated"    // 401: no bearer token, or not a valid one
	CodeForbidden          = "Forbidden"          // 403: the caller may not use this session
	CodeSessionNotFound    = "SessionNotFound"    // 404
	CodeCommandNotFound    = "CommandNotFound"    // 404
	CodeNotFound           = "NotFound"           // 404: no such route
	CodeMethodNotAllowed   = "MethodNotAllowed"   // 405
	CodeInvalidRequest     = "InvalidRequest"     // 400: a malformed body or a bad value
	CodeUnknownLane        = "UnknownLane"        // 400: no lane by that name
	CodeCommandTypeRefused = "CommandTypeRefused" // 400: the command's lane does not accept its type
	CodeInvalidDirective   = "InvalidDirective"   // 400: a /queue message the session cannot apply
	CodeDuplicateCommand   = "DuplicateCommand"   // 409: a live command has that ID
	CodeStaleAttempt       = "StaleAttempt"       // 409: the report is for an attempt that no longer holds the slot
	CodeNotRunning         = "NotRunning"         // 409: the command has no attempt waiting for a report
	CodeInterrupted        = "Interrupted"        // 410: the command was issued before the manager restarted, which lost it: it failed, interrupted
	CodeFutureEventID      = "FutureEventID"      // 400: Last-Event-ID is past every event the session has had
	CodeBudgetExhausted    = "BudgetExhausted"    // 409: the session's budget denied an External command
	CodeTooLarge           = "TooLarge"           // 413: the body, or a command's payload, is over the limit
	CodeRateLimited        = "RateLimited"        // 429: the caller, or its address, is over its request rate; see Retry-After
	CodeQueueFull          = "QueueFull"          // 429: the session's, or the server's, pending commands are at a bound; see Retry-After
	CodeSessionNotReady    = "SessionNotReady"    // 503: the session's queue has no running scheduler
	CodeNotLeader          = "NotLeader"          // 503: this manager replica is a standby; the leader serves the API (see Retry-After)
	CodeInternal           = "Internal"           // 500
	CodeIsolatedLane       = "IsolatedLane"       // 403: the command's parent runs on an isolated lane, and the command goes to another lane
)

// Error is the body of every error reply.
type Error struct {
	// Status is the HTTP status; it is not part of the body.
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	// RetryAfter is the reply's Retry-After header, on 429s: how long to
	// wait before trying again. It is not part of the body.
	RetryAfter time.Duration `json:"-"`
}

func (e *Error) Error() string { return fmt.Sprintf("%s (%d): %s", e.Code, e.Status, e.Message) }

// IsCode reports whether err is an *Error with code.
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// ExternalTaskList is the reply of GET .../external, oldest grant first.
type ExternalTaskList struct {
	Items []ExternalTask `json:"items"`
}

// DeadLetterList is the reply of GET .../deadletters, oldest first.
type DeadLetterList struct {
	Items []DeadLetter `json:"items"`
}

// Usage is what an LLM call (or any metered command) consumed:
// POST .../budget/record, or ReportRequest.Usage.
type Usage struct {
	InputTokens  int64 `json:"inputTokens,omitempty"`
	OutputTokens int64 `json:"outputTokens,omitempty"`
	// Cost is the money spent, a decimal such as "0.0125", in the currency
	// of the session's budget.
	Cost string `json:"cost,omitempty"`
}

// Budget decisions (BudgetCheck.Decision).
const (
	// BudgetAllow: the command may run.
	BudgetAllow = "allow"
	// BudgetSoft: a soft limit is reached; the command may run.
	BudgetSoft = "soft"
	// BudgetDeny: the command must not run; it fails as BudgetExhausted.
	BudgetDeny = "deny"
)

// Consumed is what a session has consumed so far.
type Consumed struct {
	Tokens int64 `json:"tokens"`
	// Cost is a decimal such as "1.25"; "0" before anything was spent.
	Cost string `json:"cost"`
}

// BudgetCheckRequest asks whether the session may run a command:
// POST .../budget/check. The lane is the one named, else the route of
// CommandType.
type BudgetCheckRequest struct {
	Lane        string `json:"lane,omitempty"`
	CommandType string `json:"commandType,omitempty"`
	// EstimatedTokens is what the command is expected to consume (the
	// A3S guard's checkBeforeLlm(sessionId, estimatedTokens)): the guard is
	// told it, and a hard token limit consumption plus the estimate would
	// overrun denies, a soft one it would reach answers soft. It consumes
	// nothing. Zero: no estimate.
	EstimatedTokens int64 `json:"estimatedTokens,omitempty"`
}

// BudgetCheck is the answer to a budget check.
type BudgetCheck struct {
	// Decision is allow, soft or deny.
	Decision string `json:"decision"`
	// Checked is false when the budget does not cover the command (no
	// budget, or a tool command without checkEveryTool): Decision is then
	// allow.
	Checked bool `json:"checked"`
	// Reason is the reason of the session's BudgetExhausted condition after
	// the check: WithinBudget, SoftLimitReached, HardLimitReached or
	// GuardDenied.
	Reason   string   `json:"reason"`
	Message  string   `json:"message,omitempty"`
	Consumed Consumed `json:"consumed"`
	// Resource, ResourceConsumed and Limit name the limit a soft or deny
	// answer is about (the seed's resource, consumed and limit): tokens or
	// cost with what the session consumed of it and the limit, or the
	// resource and figures the budget guard answered with (resource guard
	// when it named none). Empty on allow.
	Resource         string `json:"resource,omitempty"`
	ResourceConsumed string `json:"resourceConsumed,omitempty"`
	Limit            string `json:"limit,omitempty"`
}

// TokenLimits are the token limits of a session's budget.
type TokenLimits struct {
	Soft *int64 `json:"soft,omitempty"`
	Hard *int64 `json:"hard,omitempty"`
}

// CostLimits are the cost limits of a session's budget, as decimals.
type CostLimits struct {
	Currency string `json:"currency"`
	Soft     string `json:"soft,omitempty"`
	Hard     string `json:"hard,omitempty"`
}

// BudgetStatus is the session's budget and what it consumed: GET .../budget.
type BudgetStatus struct {
	Consumed Consumed     `json:"consumed"`
	Tokens   *TokenLimits `json:"tokens,omitempty"`
	Cost     *CostLimits  `json:"cost,omitempty"`
	// Guard is set when an HTTP budget guard is consulted on every check.
	Guard          bool `json:"guard,omitempty"`
	CheckEveryTool bool `json:"checkEveryTool,omitempty"`
	// Exhausted is true while covered commands are denied; Reason says why
	// (HardLimitReached or GuardDenied), or WithinBudget or
	// SoftLimitReached while they run.
	Exhausted bool   `json:"exhausted"`
	Reason    string `json:"reason"`
	Message   string `json:"message,omitempty"`
}

// Error codes of the checkpoint routes.
const (
	CodeNoStore            = "NoStore"            // 503: the manager runs without a session store
	CodeCheckpointNotFound = "CheckpointNotFound" // 404: nothing saved for the session, or for the run named
	CodeSchemaTooNew       = "SchemaTooNew"       // 400 on save, 409 on load: the checkpoint's schema is newer than the server's
)

// Checkpoint is a state the session's runtime saved after a completed tool
// round, never while a tool runs: PUT .../checkpoints saves one,
// GET .../checkpoints/latest and GET .../checkpoints/{runId} read one. A
// resumed runtime continues from it under a new run ID.
type Checkpoint struct {
	// SchemaVersion is the version of the checkpoint's format; 0 on save
	// means the server's. A newer one than the server's is refused.
	SchemaVersion int `json:"schemaVersion,omitempty"`
	// RunID is the run the checkpoint belongs to: letters, digits, '-',
	// '_' and '.', at most 128, not "latest".
	RunID string `json:"runId"`
	// Turn is the runtime's turn the checkpoint was saved in.
	Turn int `json:"turn,omitempty"`
	// Round counts the turn's completed tool rounds.
	Round int `json:"round,omitempty"`
	// Time is when it was saved; set by the server when left out.
	Time time.Time `json:"time,omitzero"`
	// Identity is the session's identity labels. On save, the fields left
	// empty are the session's spec.identity; the caller's values win.
	Identity Identity `json:"identity,omitzero"`
	// State is the runtime's own state, any JSON value; the server does not
	// read it.
	State json.RawMessage `json:"state,omitempty"`
}

// CheckpointSaved is the reply of PUT .../checkpoints: the checkpoint as
// stored and where.
type CheckpointSaved struct {
	Checkpoint Checkpoint `json:"checkpoint"`
	// Location names the stored checkpoint, such as
	// configmap/agentlane-checkpoint-s1#<runId>; the session's
	// status.lastCheckpoint shows it.
	Location string `json:"location"`
	// Evicted are the runs whose checkpoints were dropped to make room,
	// least recently saved first.
	Evicted []string `json:"evicted,omitempty"`
}
