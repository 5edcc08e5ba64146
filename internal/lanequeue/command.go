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

package lanequeue

import (
	"context"
	"time"
)

// Identity labels attribute work to a tenant, a principal, an agent template
// and a correlation chain. The queue never interprets them except TenantID
// under the WeightedTenant fairness policy; it copies them onto every
// attempt, external task, event and dead letter of the command.
type Identity struct {
	TenantID        string
	Principal       string
	AgentTemplateID string
	CorrelationID   string
}

// Command is one unit of work: usually one tool call or one model call of an
// agent session.
type Command struct {
	// ID names the command. Empty means the queue assigns one from its
	// IDGenerator. An ID must be unique among live commands.
	ID string
	// SessionKey groups the commands of one session. Per-session caps,
	// per-session FIFO order, pause and session cancellation use it.
	SessionKey string
	// Type is the command type (tool name such as "read" or "bash", or
	// "llm"); it picks the lane unless Lane is set.
	Type string
	// Lane, when set, names the lane directly and skips routing.
	Lane string
	// Payload is the command's input, usually JSON. The queue does not read
	// it and does not copy it: do not modify it after Submit.
	Payload []byte
	// Priority, when set, replaces the lane's priority for this command.
	Priority *int
	// Deadline, when set, drives priority boost. It does not cancel anything.
	Deadline time.Time
	// Timeout, when > 0, bounds each attempt and overrides the lane timeout.
	Timeout time.Duration
	// TimeoutSource names the setting Timeout came from in a timed-out
	// attempt's error, "(<TimeoutSource> timeout 2s)": "command" when
	// empty; a host that fills Timeout from its own configuration names it
	// (say, "session lane execute").
	TimeoutSource string
	// Labels are the identity labels carried with the command.
	Labels Identity
	// RunID groups the commands of one agent run, for CancelRun.
	RunID string
	// Handler runs the command in Internal and Hybrid modes. Nil means the
	// queue's default handler (Options.Handler).
	Handler Handler
	// PriorAttempts is the number of attempts already made, for a command
	// resubmitted after a restart: its next start is attempt
	// PriorAttempts+1 and they count against its retries, except the
	// PriorNotStarted of them that did not.
	PriorAttempts int
	// PriorNotStarted is how many of PriorAttempts failed with
	// ErrNotStarted without counting against the retries (at most
	// MaxUncountedNotStarted are taken into account).
	PriorNotStarted int
	// External makes every attempt of the command an external task, whatever
	// the handler mode of its lane and session: for work that exists only as
	// a durable task, such as one created directly as a Kubernetes object.
	External bool
	// InHandler runs every attempt of the command in its Handler, whatever
	// the handler mode of its lane and session: for a host that hands the
	// attempts of an External lane to runners of its own and waits for
	// their results in the Handler (a Direct lane's worker streams), with
	// the lane's caps, timeout, retries and dead letters as for any
	// attempt. It requires Handler and excludes External.
	InHandler bool
	// Durable marks a command recorded outside the queue, which a restart
	// does not lose (an ExternalTask the cluster keeps, registered again
	// after a restart): a draining queue still admits it (Config.Drain).
	Durable bool
	// AwaitStart, for an External command, holds each attempt's timeout
	// until MarkStarted reports that something runs it. A granted attempt
	// that waits for a runner holds its slots (the caps bound what is
	// granted, not what runs) but cannot time out, and a timeout never
	// counts time spent waiting to start. Adopted attempts have started.
	AwaitStart bool
}

// Attempt describes one run of a command, as handed to its Handler.
type Attempt struct {
	ID          string
	SessionKey  string
	CommandType string
	Lane        string
	RunID       string
	Payload     []byte
	Labels      Identity
	// Number is 1 for the first attempt and increases with each retry.
	Number int
	// Mode is the handler mode the attempt runs under.
	Mode HandlerMode
	// StartedAt is when the scheduler granted the attempt its slot.
	StartedAt time.Time
	// Deadline is when the attempt times out.
	Deadline time.Time
}

// Handler runs a command's attempt. The context is cancelled when the
// attempt times out, when the command is cancelled and when the queue
// closes; after that the attempt no longer holds its slot and whatever Run
// returns is ignored. Run is called on a queue-owned goroutine.
type Handler interface {
	Run(ctx context.Context, a Attempt) (Result, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, a Attempt) (Result, error)

// Run calls f.
func (f HandlerFunc) Run(ctx context.Context, a Attempt) (Result, error) { return f(ctx, a) }

// Result is what an attempt produced. An attempt succeeds when Success is
// true and no error was returned with it.
type Result struct {
	Success  bool
	Output   []byte
	Error    string
	ExitCode int
}

// State is where a command is in its life.
type State string

const (
	StateQueued   State = "Queued"   // waiting for a slot
	StateRunning  State = "Running"  // holds its slots
	StateRetrying State = "Retrying" // waiting out a retry delay
	// Terminal states: a command reaches exactly one of them, once.
	StateSucceeded    State = "Succeeded"
	StateFailed       State = "Failed"   // permanent failure, or retries used up with dead letters disabled
	StateTimedOut     State = "TimedOut" // last attempt timed out, retries used up, dead letters disabled
	StateDeadLettered State = "DeadLettered"
	StateCancelled    State = "Cancelled"
)

// Terminal reports whether s is a final state.
func (s State) Terminal() bool {
	switch s {
	case StateSucceeded, StateFailed, StateTimedOut, StateDeadLettered, StateCancelled:
		return true
	}
	return false
}

// Outcome is the final word on a command.
type Outcome struct {
	State State
	// Result is the last attempt's result, if it reported one.
	Result Result
	// Err explains a state other than Succeeded.
	Err error
	// Attempts counts attempts started, including PriorAttempts.
	Attempts int
}

// state is the compact form of State kept on each command.
type state uint8

const (
	stQueued state = iota
	stRunning
	stRetrying
	// stDetached marks a queued command taken out of its session queue by a
	// bulk cancellation, for the moment before it is finished off.
	stDetached
	stSucceeded
	stFailed
	stTimedOut
	stDeadLettered
	stCancelled
)

var stateNames = [...]State{StateQueued, StateRunning, StateRetrying, StateQueued, StateSucceeded, StateFailed, StateTimedOut, StateDeadLettered, StateCancelled}

func (s state) public() State  { return stateNames[s] }
func (s state) terminal() bool { return s >= stSucceeded }

// closedChan is returned by Done for commands that finished before anyone
// asked, so most tickets never allocate a channel.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Ticket is the handle of a submitted command and the queue's record of it.
// It is kept small on purpose: a million queued commands must fit in well
// under 512 bytes each. Fields are guarded by q.mu unless noted.
type Ticket struct {
	q *Queue

	// Immutable after Submit; safe to read without the lock.
	id      string
	typ     string
	runID   string
	payload []byte
	labels  Identity
	handler Handler
	ls      *laneSession // the command's lane and session; fixed for life
	prio    int32        // per-command priority override; -1 when none
	seq     uint64       // submit sequence number, unique per queue
	submit  int64        // submit time, unix nanos
	// deadline (unix nanos, 0 for none) drives priority boost.
	deadline int64
	// timeout is the per-command attempt timeout; 0 defers to the lane.
	// timeoutSource is Command.TimeoutSource, nil when empty (a pointer
	// keeps the ticket in a smaller size class).
	timeout       int64
	timeoutSource *string
	// tag orders commands under WeightedTenant fairness (virtual finish time).
	tag uint64

	state    state
	external bool // Command.External; fits in state's padding
	// awaitStart is Command.AwaitStart.
	awaitStart bool
	// inHandler is Command.InHandler.
	inHandler bool
	attempts  int32 // attempts started, including prior ones
	// notStarted is how many of attempts failed with ErrNotStarted without
	// counting against the retries; at most MaxUncountedNotStarted.
	notStarted int32
	dueIdx     int32       // position in q.due; -1 when absent
	ready      int64       // when it last became ready to start (submit or retry)
	started    int64       // start of the current or last attempt
	due        int64       // when q.due should act on it: boost change, retry or timeout
	run        *attemptCtx // the current attempt while running; nil otherwise
	done       chan struct{}
	fin        *finish // how it ended; nil while live and for a plain success
}

// finish holds the end of a command that has more to say than "succeeded".
type finish struct {
	result Result
	err    error
}

// ID returns the command's ID.
func (t *Ticket) ID() string { return t.id }

// Lane returns the name of the lane the command was routed to.
func (t *Ticket) Lane() string { return t.ls.lane.name }

// Done returns a channel closed when the command reaches a terminal state.
func (t *Ticket) Done() <-chan struct{} {
	q := t.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if t.state.terminal() {
		return closedChan
	}
	if t.done == nil {
		t.done = make(chan struct{})
	}
	return t.done
}

// State returns the command's current state.
func (t *Ticket) State() State {
	t.q.mu.Lock()
	defer t.q.mu.Unlock()
	return t.state.public()
}

// Outcome returns the command's outcome and whether it is final.
func (t *Ticket) Outcome() (Outcome, bool) {
	t.q.mu.Lock()
	defer t.q.mu.Unlock()
	return t.outcomeLocked(), t.state.terminal()
}

func (t *Ticket) outcomeLocked() Outcome {
	o := Outcome{State: t.state.public(), Attempts: int(t.attempts)}
	if t.fin != nil {
		o.Result, o.Err = t.fin.result, t.fin.err
	} else if t.state == stSucceeded {
		o.Result.Success = true
	}
	return o
}

// Wait blocks until the command finishes or ctx ends.
func (t *Ticket) Wait(ctx context.Context) (Outcome, error) {
	select {
	case <-t.Done():
		o, _ := t.Outcome()
		return o, nil
	case <-ctx.Done():
		return Outcome{}, ctx.Err()
	}
}
