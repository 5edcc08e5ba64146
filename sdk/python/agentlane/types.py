"""The Session API's request and response bodies, one dataclass per schema
of the OpenAPI document (pkg/sessionapi/openapi.yaml).

Fields the schema requires have a plain type; the others are Optional and
default to None, which leaves them out of a request. Times are timezone-aware
datetimes; durations are Go duration strings such as "30s"
(agentlane.wire.format_duration writes them from seconds). A field that holds
any JSON value (a payload, an output, a checkpoint's state) is typed Any.
tests/test_openapi.py checks every dataclass against its schema.
"""

import datetime
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from .wire import ZERO_TIME

# Who runs a command (schema Mode).
MODE_INTERNAL = "Internal"
MODE_EXTERNAL = "External"
MODE_HYBRID = "Hybrid"

# A command's states (schema State); the last five are final.
STATE_QUEUED = "Queued"
STATE_RUNNING = "Running"
STATE_RETRYING = "Retrying"
STATE_SUCCEEDED = "Succeeded"
STATE_FAILED = "Failed"
STATE_TIMED_OUT = "TimedOut"
STATE_DEAD_LETTERED = "DeadLettered"
STATE_CANCELLED = "Cancelled"
FINAL_STATES = frozenset(
    [STATE_SUCCEEDED, STATE_FAILED, STATE_TIMED_OUT, STATE_DEAD_LETTERED, STATE_CANCELLED]
)


def _time() -> Any:
    return field(default=ZERO_TIME)


@dataclass
class Identity:
    tenant_id: Optional[str] = None
    principal: Optional[str] = None
    agent_template_id: Optional[str] = None
    correlation_id: Optional[str] = None


@dataclass
class SubmitRequest:
    type: str = ""
    id: Optional[str] = None
    lane: Optional[str] = None
    payload: Any = None
    priority: Optional[int] = None
    timeout: Optional[str] = None
    deadline: Optional[datetime.datetime] = None
    run_id: Optional[str] = None
    wait: Optional[str] = None
    # The session's running command whose work submits this one; when it
    # runs on an isolated lane the command may go only to that lane.
    # run_command fills it for submits made from its fn.
    parent_id: Optional[str] = None


@dataclass
class Grant:
    attempt: int = 0
    deadline: datetime.datetime = _time()


@dataclass
class Result:
    success: bool = False
    output: Any = None
    error: Optional[str] = None
    exit_code: Optional[int] = None


@dataclass
class Command:
    id: str = ""
    session: str = ""
    type: str = ""
    lane: str = ""
    mode: str = ""
    state: str = ""
    labels: Identity = field(default_factory=Identity)
    attempt: int = 0
    run_id: Optional[str] = None
    grant: Optional[Grant] = None
    result: Optional[Result] = None
    error: Optional[str] = None
    task: Optional[str] = None
    started_at: Optional[datetime.datetime] = None

    @property
    def final(self) -> bool:
        """The command ended: it will not run again."""
        return self.state in FINAL_STATES


@dataclass
class Usage:
    input_tokens: Optional[int] = None
    output_tokens: Optional[int] = None
    cost: Optional[str] = None


@dataclass
class ReportRequest:
    attempt: int = 0
    success: bool = False
    output: Any = None
    error: Optional[str] = None
    exit_code: Optional[int] = None
    usage: Optional[Usage] = None


@dataclass
class SessionRef:
    namespace: str = ""
    name: str = ""


@dataclass
class Message:
    text: str = ""
    id: Optional[str] = None
    channel: Optional[str] = None
    thread: Optional[str] = None
    received_at: Optional[datetime.datetime] = None
    from_: Optional[SessionRef] = field(default=None, metadata={"json": "from"})


@dataclass
class QueueOptions:
    mode: str = ""
    debounce: str = ""
    cap: int = 0
    drop: str = ""
    by_channel: Optional[Dict[str, str]] = None


@dataclass
class PostResult:
    directive: Optional[bool] = None
    options: Optional[QueueOptions] = None
    queued: Optional[bool] = None
    steered: Optional[bool] = None
    dropped: Optional[bool] = None
    aborted: Optional[str] = None
    duplicate: Optional[bool] = None


@dataclass
class CancelRequest:
    command_id: Optional[str] = None
    run_id: Optional[str] = None
    session: Optional[bool] = None


@dataclass
class CancelResult:
    cancelled: int = 0


@dataclass
class Percentiles:
    count: int = 0
    p50: float = 0.0
    p90: float = 0.0
    p95: float = 0.0
    p99: float = 0.0


@dataclass
class LaneStats:
    name: str = ""
    priority: int = 0
    mode: str = ""
    pending: int = 0
    active: int = 0
    completed: int = 0
    failed: int = 0
    dead_lettered: int = 0
    cancelled: int = 0
    wait: Percentiles = field(default_factory=Percentiles)
    run: Percentiles = field(default_factory=Percentiles)
    paused: Optional[bool] = None


@dataclass
class SessionCounts:
    pending: int = 0
    active: int = 0
    completed: int = 0
    failed: int = 0
    dead_lettered: int = 0
    cancelled: int = 0
    queued_messages: int = 0
    active_run: Optional[str] = None
    lane_modes: Optional[Dict[str, str]] = None


@dataclass
class Stats:
    queue: str = ""
    session: SessionCounts = field(default_factory=SessionCounts)
    lanes: List[LaneStats] = field(default_factory=list)
    queue_mode: QueueOptions = field(default_factory=QueueOptions)
    draining: Optional[bool] = None


@dataclass
class ExternalTask:
    """A pending External attempt. deadline is zero, and remaining_seconds
    the whole timeout, until the attempt is dispatched."""

    id: str = ""
    attempt: int = 0
    lane: str = ""
    command_type: str = ""
    created_at: datetime.datetime = _time()
    deadline: datetime.datetime = _time()
    remaining_seconds: float = 0.0
    timed_out: bool = False
    run_id: Optional[str] = None
    payload: Any = None
    # The caller may complete this attempt now (update access, and a
    # Handler lane's attempt dispatched to handlers without a result).
    can_complete: bool = False

    @property
    def dispatched(self) -> bool:
        """The attempt was handed out and its timeout runs."""
        return self.deadline != ZERO_TIME


@dataclass
class ExternalTaskList:
    items: List[ExternalTask] = field(default_factory=list)


@dataclass
class Completion:
    """A handler's result for one attempt of an external task of a Handler
    lane, or of a lane the session handles itself; attempt is the attempt
    list_external_tasks gave, None for the current one (still fenced)."""

    attempt: Optional[int] = None
    success: bool = False
    result: Any = None
    error: Optional[str] = None
    exit_code: Optional[int] = None


LANE_HANDLER_EXTERNAL = "External"
LANE_HANDLER_INTERNAL = "Internal"
LANE_HANDLER_DEFAULT = "Default"


@dataclass
class LaneHandler:
    """Who handles a lane's new commands for the session: External (the
    session completes them itself), Internal (the runtime runs them on a
    grant) or Default (no switch)."""

    mode: str = ""
    lane: Optional[str] = None


@dataclass
class CompletionResult:
    """A recorded completion. phase is Succeeded, or Running for a failure
    until the manager applies the lane's retry policy."""

    id: str = ""
    attempt: int = 0
    phase: str = ""


@dataclass
class Heartbeat:
    """A handler's heartbeat for one attempt of an external task of a
    Handler lane: attempt is the attempt list_external_tasks gave, None for
    the current one (still fenced); progress a short note such as
    "42/100 files" (at most 1024 bytes, kept to 256 characters)."""

    attempt: Optional[int] = None
    progress: Optional[str] = None


@dataclass
class HeartbeatResult:
    """A heartbeat that was taken. recorded says whether it was written to
    the task's status: heartbeats are coalesced to one per quarter of the
    lane's heartbeatTimeout (heartbeat_timeout_seconds, 0 for none)."""

    id: str = ""
    attempt: int = 0
    recorded: bool = False
    heartbeat_timeout_seconds: float = 0.0


@dataclass
class Extend:
    """A deadline extension of a running command's attempt: by is a
    duration such as "5m" (1s to 24h); attempt None extends the one
    running."""

    by: str = ""
    attempt: Optional[int] = None


@dataclass
class Extension:
    """An attempt's deadline after an extension, and how many extensions it
    has had (at most 8)."""

    id: str = ""
    attempt: int = 0
    deadline: datetime.datetime = _time()
    extensions: int = 0


@dataclass
class DeadLetter:
    id: str = ""
    command_type: str = ""
    lane: str = ""
    error: str = ""
    attempts: int = 0
    failed_at: datetime.datetime = _time()
    labels: Identity = field(default_factory=Identity)
    run_id: Optional[str] = None


@dataclass
class DeadLetterList:
    items: List[DeadLetter] = field(default_factory=list)


@dataclass
class BudgetThreshold:
    resource: str = ""
    kind: str = ""
    consumed: str = ""
    message: str = ""
    limit: Optional[str] = None


@dataclass
class PassivationRequest:
    reason: str = ""
    deadline: datetime.datetime = _time()
    pod: Optional[str] = None


@dataclass
class PeerInvocation:
    from_namespace: str = ""
    from_session: str = ""
    from_tenant: Optional[str] = None
    correlation_id: Optional[str] = None


@dataclass
class RunOutcome:
    """How a run ended, sent with finish_run. For the worker session of a
    Delegate lane, the outcome of its first finished run is the delegated
    task's result: answer on success, error (answer then ignored) on
    failure."""

    answer: Optional[str] = None
    error: Optional[str] = None


@dataclass
class DelegationRequest:
    """Work for a Delegate lane: text is the worker session's first turn;
    id names the task (a ULID when None); callback False keeps the result
    out of the producer's inbox (the producer then polls get_delegation);
    timeout (a duration such as "10m") bounds each attempt, within the
    lane's timeout (the lane's applies when None)."""

    lane: str = ""
    text: str = ""
    id: Optional[str] = None
    callback: Optional[bool] = None
    timeout: Optional[str] = None


# A delegated task's phases (Delegation.phase); all but the first two are
# final.
DELEGATION_QUEUED = "Queued"
DELEGATION_RUNNING = "Running"
DELEGATION_SUCCEEDED = "Succeeded"
DELEGATION_FAILED = "Failed"
DELEGATION_TIMED_OUT = "TimedOut"
DELEGATION_DEAD_LETTERED = "DeadLettered"
DELEGATION_CANCELLED = "Cancelled"


@dataclass
class Delegation:
    """A delegated task. worker_session is the AgentSession working on it
    once it started; answer (Succeeded) or error (Failed) is its result;
    delivered says the result reached the producer's inbox."""

    id: str = ""
    lane: str = ""
    phase: str = ""
    producer: str = ""
    callback: bool = False
    worker_session: Optional[str] = None
    answer: Optional[str] = None
    error: Optional[str] = None
    delivered: Optional[bool] = None
    # timeout is the delegation's own timeout, as bounded by its lane's;
    # attempt the current or last attempt (each in a worker session of its
    # own; the lane's retry policy retries a timed-out or lost one).
    timeout: Optional[str] = None
    attempt: Optional[int] = None
    created_at: Optional[datetime.datetime] = None
    started_at: Optional[datetime.datetime] = None
    finished_at: Optional[datetime.datetime] = None

    @property
    def final(self) -> bool:
        """The task ended: Succeeded, Failed, TimedOut, DeadLettered or
        Cancelled."""
        return self.phase in (DELEGATION_SUCCEEDED, DELEGATION_FAILED, DELEGATION_TIMED_OUT,
                              DELEGATION_DEAD_LETTERED, DELEGATION_CANCELLED)


@dataclass
class DelegationList:
    items: List[Delegation] = field(default_factory=list)
    # Set when more delegations follow: the next page's continue.
    continue_: Optional[str] = field(default=None, metadata={"json": "continue"})


# Event types (Event.type). The scheduler's command events:
EVENT_SUBMITTED = "submitted"
EVENT_STARTED = "started"
EVENT_COMPLETED = "completed"
EVENT_FAILED = "failed"
EVENT_RETRY = "retry"
EVENT_TIMEOUT = "timeout"
EVENT_DEAD_LETTERED = "dead_lettered"
EVENT_CANCELLED = "cancelled"
EVENT_EXTERNAL_TASK_PENDING = "external_task_pending"
EVENT_EXTERNAL_TASK_COMPLETED = "external_task_completed"
# The inbox's events:
EVENT_TURN = "turn"
EVENT_STEER = "steer"
EVENT_ABORT = "abort"
EVENT_MESSAGE_DROPPED = "message_dropped"
EVENT_MESSAGE_QUEUED = "message_queued"
EVENT_MESSAGE_WAITING = "message_waiting"
EVENT_INBOX_RESTORED = "inbox_restored"
# The stream's own: events no longer retained (lost counts them), and a
# resume across a manager restart (after is the id resumed from).
EVENT_EVENTS_LOST = "events_lost"
EVENT_GAP = "gap"
# The last event of a stream the server ended because its caller lost
# access; its error is "<code>: <message>". EventStream raises it as an
# ApiError with that code (Forbidden, Unauthenticated) and ends.
EVENT_ERROR = "error"
# The cluster's:
EVENT_BUDGET_THRESHOLD_HIT = "BudgetThresholdHit"
EVENT_PASSIVATION_REQUESTED = "PassivationRequested"
EVENT_PEER_INVOCATION = "PeerInvocation"


@dataclass
class Event:
    id: int = 0
    type: str = ""
    time: datetime.datetime = _time()
    command_id: Optional[str] = None
    command_type: Optional[str] = None
    lane: Optional[str] = None
    run_id: Optional[str] = None
    attempt: Optional[int] = None
    error: Optional[str] = None
    terminal: Optional[bool] = None
    labels: Optional[Identity] = None
    delay: Optional[str] = None
    messages: Optional[List[Message]] = None
    text: Optional[str] = None
    summary: Optional[bool] = None
    # On message_dropped: an interrupt dropped the messages that waited
    # (superseded), and how many it dropped.
    superseded: Optional[bool] = None
    dropped_count: Optional[int] = None
    channel: Optional[str] = None
    thread: Optional[str] = None
    waited: Optional[str] = None
    lost: Optional[int] = None
    after: Optional[int] = None
    budget: Optional[BudgetThreshold] = None
    passivation: Optional[PassivationRequest] = None
    peer: Optional[PeerInvocation] = None


@dataclass
class Checkpoint:
    run_id: str = ""
    schema_version: Optional[int] = None
    turn: Optional[int] = None
    round: Optional[int] = None
    time: Optional[datetime.datetime] = None
    identity: Optional[Identity] = None
    state: Any = None


@dataclass
class Assignment:
    """The session that adopted a warm runtime pod (Client.get_assignment),
    with what a session's own runtime pod finds in its environment."""
    namespace: str = ""
    session: str = ""
    tenant_id: Optional[str] = None
    principal: Optional[str] = None
    agent_template_id: Optional[str] = None
    correlation_id: Optional[str] = None
    resume_run_id: Optional[str] = None
    checkpoint_location: Optional[str] = None


@dataclass
class CheckpointSaved:
    checkpoint: Checkpoint = field(default_factory=Checkpoint)
    location: str = ""
    evicted: Optional[List[str]] = None


@dataclass
class Consumed:
    tokens: int = 0
    cost: str = ""


@dataclass
class BudgetCheckRequest:
    lane: Optional[str] = None
    command_type: Optional[str] = None
    # What the command is expected to consume (checkBeforeLlm's
    # estimatedTokens); it consumes nothing.
    estimated_tokens: Optional[int] = None


# Budget decisions (BudgetCheck.decision).
BUDGET_ALLOW = "allow"
BUDGET_SOFT = "soft"
BUDGET_DENY = "deny"


@dataclass
class BudgetCheck:
    decision: str = ""
    checked: bool = False
    reason: str = ""
    consumed: Consumed = field(default_factory=Consumed)
    message: Optional[str] = None
    # On soft and deny: the limit the answer is about (tokens, cost, or the
    # guard's own resource), what was consumed of it, and the limit.
    resource: Optional[str] = None
    resource_consumed: Optional[str] = None
    limit: Optional[str] = None


@dataclass
class TokenLimits:
    soft: Optional[int] = None
    hard: Optional[int] = None


@dataclass
class CostLimits:
    currency: str = ""
    soft: Optional[str] = None
    hard: Optional[str] = None


@dataclass
class BudgetStatus:
    consumed: Consumed = field(default_factory=Consumed)
    exhausted: bool = False
    reason: str = ""
    tokens: Optional[TokenLimits] = None
    cost: Optional[CostLimits] = None
    guard: Optional[bool] = None
    check_every_tool: Optional[bool] = None
    message: Optional[str] = None


@dataclass
class Error:
    """The body of every error reply; ApiError carries it with the status."""

    code: str = ""
    message: str = ""


# What `from agentlane.types import *` exports: the dataclasses and the
# constants, not the names this module imports.
__all__ = sorted(
    name for name, value in list(globals().items())
    if not name.startswith("_") and (name.isupper() or getattr(value, "__module__", None) == __name__)
)
