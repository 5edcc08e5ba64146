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

// Package lanequeue is agentlane's lane scheduler: an in-process queue that
// decides when each command of each agent session may run.
//
// # Model
//
// A Command is one unit of work of a session (a tool call, a model call). It
// is routed to a lane by name or by its type (see DefaultRoutes). A lane has
// a priority (0 is highest), a handler mode, an attempt timeout and two caps:
// MaxConcurrency, shared by all sessions, and MaxConcurrencyPerSession. The
// queue adds MaxConcurrent across lanes. A command starts only when all three
// caps have room (0 means unlimited), its session is not paused, and the
// lane's and queue's rate limits each have a token. An Isolated lane (say, for
// cron jobs) stands outside the queue-wide cap and rate limit, so it never
// takes capacity another lane needs.
//
// # Ordering
//
// Whenever a slot may have opened (submit, finish, cancel, timer, resume,
// reconfigure) the queue starts commands until nothing more can start. Each
// start picks exactly one command by these rules, in order:
//
//  1. Lanes. Among lanes that have a startable command and room under their
//     cap and rate limit, the lane whose candidate has the lowest effective
//     priority number wins. So a Query command submitted after queued
//     Execute commands starts before them.
//  2. Sessions within a lane. Each session's commands in a lane start in
//     submission order (FIFO per session per lane; a command back from a
//     retry delay takes its original place). Across the sessions of a lane
//     the Fairness policy picks the candidate:
//     FIFO (default): lowest effective priority, then earliest submit;
//     RoundRobin: lowest effective priority, then the session whose last
//     turn is oldest;
//     WeightedTenant: lowest effective priority, then the smallest virtual
//     finish tag, where each command of tenant T costs 1/weight(T), so
//     tenants share starts in proportion to TenantWeights (default 1).
//  3. Effective priority is the command's Priority if set, else its lane's,
//     improved by the Boost policy as its deadline nears: Standard gives one
//     level at 75%, 50%, 25% and 10% of the submit-to-deadline span left,
//     Aggressive two levels at 80%, 60%, 40% and 20%. At or past the
//     deadline it is 0. It is never below 0.
//  4. Ties go to the earlier submit, by sequence number: unique and
//     monotonic per queue, so the order is total, replays exactly, and
//     stays in submit order when the wall clock steps back. Submit times
//     are used only for the boost's span, never to order.
//
// # Lifecycle
//
// A command is Queued, then Running (holding its slots), and ends in exactly
// one terminal state: Succeeded, Failed, TimedOut, DeadLettered or
// Cancelled. A failed or timed-out attempt is retried by the lane's (or
// queue's) RetryPolicy: it waits out the delay in state Retrying, then
// re-enters its lane at its original place. Errors marked Permanent, and
// cancellations, are never retried and never dead-lettered. A command that
// uses up its retries is dead-lettered (or ends Failed / TimedOut when the
// dead-letter list is disabled). A failure wrapping ErrNotStarted (the
// runner was lost before it reported a start) is retried without counting
// against MaxRetries, at most MaxUncountedNotStarted times per command.
//
// The queue considers an attempt running from the moment it is granted until
// it reports, times out or is cancelled. After a timeout or cancellation its
// slots are free again even if an Internal handler has not returned yet; its
// context is cancelled and its eventual result is ignored. External results
// for an attempt that is no longer running are rejected (ErrStaleAttempt).
//
// # Lane control
//
// A lane with LaneConfig.Paused (or paused by PauseLane) accepts and queues
// commands but starts none until it is resumed; its running commands
// finish. ClearLane cancels a lane's commands that have not started, of one
// session or of all, with ErrLaneCleared. Config.Drain drains the queue
// before a restart or an upgrade: submissions are refused with ErrDraining
// (Adopt still registers work already running elsewhere, and Submit a
// Durable command, one a restart does not lose), and queued,
// retrying and running commands go on; once DrainConfig.Timeout has passed
// since the drain began, what has not started ends Cancelled with
// ErrDrainDeadline and no retry starts. Stats.Drain says when the queue
// holds nothing more (Drained), as does EventQueueDrained.
//
// # Handler modes
//
// Internal attempts run the command's Handler on a queue-owned goroutine.
// External attempts become ExternalTasks: listed by PendingExternal, passed
// to Options.OnExternalTask, and finished by Complete, CompleteAttempt or
// FailAttempt, or by their timeout. The timeout of an External attempt runs
// from its grant, unless its command sets AwaitStart: then it runs from
// MarkStarted (the attempt reached whatever runs it), stops at MarkWaiting,
// and a granted attempt that nothing runs holds its slots without timing
// out, so waiting to start never counts as an attempt's run. Hybrid runs
// like Internal and also emits the external-task events. A command takes
// the mode of its lane (or its session's override, see SetSessionLaneMode)
// at the moment it starts, so a mode change affects commands that have not
// started yet and never those in flight.
//
// A running External attempt of a lane with a HeartbeatTimeout must show
// it is alive (Heartbeat; its start counts) at least that often, or it
// times out with ErrHeartbeatTimeout and is retried like any timeout. While
// an attempt runs, ExtendDeadline moves its deadline later, at most
// MaxExtensions times and never past MaxExtendedFactor times its timeout.
// Both are fenced by attempt number, like CompleteAttempt.
//
// # Time, IDs and replay
//
// Every timestamp, timeout, retry delay, boost step and rate-limit refill
// comes from Options.Clock, and a single timer on that clock serves them all.
// Tokens are taken only when a command starts, so an idle queue never spends
// them; a lane held back only by its rate limit wakes itself when its next
// token is due. With a fake clock and SequentialIDs the same calls replay to
// the same IDs, timestamps and events.
//
// # Events
//
// Subscribe delivers events in the order they happened, outside the queue
// lock, through a bounded buffer per subscriber: when a subscriber falls
// behind its events are dropped and counted (Subscription.Dropped), never
// waited for. With no subscriber no event is built at all. The
// OnExternalTask hook is called on the same delivery path, after the task's
// external_task_pending event has been delivered and in the order tasks
// became pending; it may call back into the queue (Complete, Submit, ...)
// but not Subscribe, Subscription.Close or Close.
//
// # Inbound messages and queue modes
//
// An Inbox decides when each session starts a run (one at a time) and with
// which inbound messages, following the session's mode. In every mode a
// message to a session with no run and nothing waiting starts its turn at
// once; the messages that arrive while a run is active (or while others
// wait) wait for it to end and for the debounce (1s) of quiet:
//
//   - followup: each message becomes its own turn, in order;
//   - collect (the default): every queued message of one channel and
//     thread is merged into a single turn; other channels and threads get
//     turns of their own;
//   - steer: the message is injected into the current run at its next tool
//     boundary (an InboxSteer event), and the run's commands that have not
//     started are cancelled (Queue.CancelRun); started ones finish. A
//     session whose runtime takes no steers, or that has no run, gets a
//     followup instead;
//   - steer-backlog: a steer, and the message is also kept as a followup;
//   - interrupt: the current run is aborted (InboxAbort, and its queued
//     commands cancelled) and the newest message runs at once; the messages
//     that waited are superseded.
//
// queue is the legacy name of steer, and steer+backlog of steer-backlog:
// both are accepted wherever a mode is named and are in force, and
// reported, as the mode they name (MessageMode.Canonical).
//
// A session queues at most cap (20) messages. Beyond it drop decides: old
// drops the oldest, new refuses the newcomer, summarize (the default) drops
// the oldest but delivers the dropped ones, each shortened to 160
// characters, as one synthetic turn before the others. A message that is
// only "/queue <mode> [debounce:2s] [cap:25] [drop:summarize]" changes the
// session's options instead, and "/queue default" or "/queue reset" returns
// to the session's configured ones. A turn whose first message waited more
// than 2s is flagged Slow, with its wait.
//
// A message whose ID is queued in the session, or among the last 128 IDs
// (InboxOptions.MaxRememberedIDs, IDs of at most 128 bytes) the session
// took, is a re-delivery: Post reports it Duplicate and changes nothing.
//
// Every message taken for a turn is reported at once (InboxQueued, before
// the turn it may start), so a channel can show a typing indicator, and a
// message that has waited more than 2s while a run is active is reported
// once (InboxWaiting, with the longest wait).
//
// # Cost
//
// One mutex guards a queue. Submit, start and finish are O(log s) in the
// number of sessions with startable work in the lane plus O(l) in the number
// of lanes, and O(log r) in the number of running or backing-off commands
// for the timer heap. Nothing allocates a goroutine or channel per queued
// command: a runner goroutine that finishes an attempt goes straight on to
// the next one it unblocked, and a Ticket's Done channel is made only if
// someone asks before the command ends. A queued command takes about 400
// bytes of heap.
package lanequeue
