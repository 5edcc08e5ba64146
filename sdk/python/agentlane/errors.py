"""The Session API's errors: every error reply is JSON {code, message} with a
stable code (the Error schema's enum), whatever its HTTP status."""

import json
from typing import Optional

CODE_UNAUTHENTICATED = "Unauthenticated"  # 401
CODE_FORBIDDEN = "Forbidden"  # 403
CODE_SESSION_NOT_FOUND = "SessionNotFound"  # 404
CODE_COMMAND_NOT_FOUND = "CommandNotFound"  # 404
CODE_NOT_FOUND = "NotFound"  # 404: no such route
CODE_METHOD_NOT_ALLOWED = "MethodNotAllowed"  # 405
CODE_INVALID_REQUEST = "InvalidRequest"  # 400
CODE_UNKNOWN_LANE = "UnknownLane"  # 400
CODE_COMMAND_TYPE_REFUSED = "CommandTypeRefused"  # 400
CODE_INVALID_DIRECTIVE = "InvalidDirective"  # 400
CODE_DUPLICATE_COMMAND = "DuplicateCommand"  # 409
CODE_STALE_ATTEMPT = "StaleAttempt"  # 409
CODE_NOT_RUNNING = "NotRunning"  # 409
CODE_ALREADY_COMPLETED = "AlreadyCompleted"  # 409: the attempt already has a completion, or the task finished
CODE_NOT_HANDLER_TASK = "NotHandlerTask"  # 409: a worker or a Job holds the attempt, not a handler
CODE_INTERRUPTED = "Interrupted"  # 410
CODE_FUTURE_EVENT_ID = "FutureEventID"  # 400
CODE_BUDGET_EXHAUSTED = "BudgetExhausted"  # 409
CODE_TOO_LARGE = "TooLarge"  # 413
CODE_RATE_LIMITED = "RateLimited"  # 429, with retry_after
CODE_QUEUE_FULL = "QueueFull"  # 429, with retry_after
CODE_SESSION_NOT_READY = "SessionNotReady"  # 503
CODE_NOT_LEADER = "NotLeader"  # 503 from a standby manager replica, with retry_after; the client retries it
CODE_DRAINING = "Draining"  # 503 on submissions while the session's LaneQueue drains, with retry_after
CODE_INTERNAL = "Internal"  # 500
CODE_NO_STORE = "NoStore"  # 503
CODE_CHECKPOINT_NOT_FOUND = "CheckpointNotFound"  # 404
CODE_SCHEMA_TOO_NEW = "SchemaTooNew"  # 400 on save, 409 on load
CODE_ISOLATED_LANE = "IsolatedLane"  # 403: the command's parent runs on an isolated lane, and the command goes to another lane
CODE_LANE_SWITCH_REFUSED = "LaneSwitchRefused"  # 403: the LaneQueue does not let the session handle the lane itself
CODE_EXTEND_REFUSED = "ExtendRefused"  # 409: a deadline extension past its bounds (8 per attempt, 10 times the timeout)

ERROR_CODES = frozenset(v for k, v in dict(globals()).items() if k.startswith("CODE_"))

# How much of an error reply is read.
MAX_ERROR_BODY = 64 << 10


class ApiError(Exception):
    """An error reply of the Session API.

    code is the stable code (one of the CODE_* constants), message the
    server's explanation, status the HTTP status, and retry_after, on a 429
    or a NotLeader 503, the seconds the Retry-After header asks to wait.
    """

    def __init__(self, status: int, code: str, message: str, retry_after: Optional[int] = None):
        super().__init__("%s (%d): %s" % (code, status, message))
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after

    @classmethod
    def from_reply(cls, status: int, body: bytes, retry_after: Optional[str]) -> "ApiError":
        """Builds the error of a non-2xx reply. A body that is not an Error
        (a proxy's page, say) becomes the message of an Internal error."""
        seconds = None
        if retry_after and retry_after.strip().isdigit() and int(retry_after) > 0:
            seconds = int(retry_after)
        try:
            data = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            data = None
        if isinstance(data, dict) and isinstance(data.get("code"), str) and data["code"]:
            return cls(status, data["code"], str(data.get("message", "")), seconds)
        text = body.decode("utf-8", "replace").strip() or "HTTP %d" % status
        return cls(status, CODE_INTERNAL, text[:1024], seconds)


class EventStreamError(Exception):
    """The event stream broke in a way a reconnect would not mend, such as
    a frame over the size bound, or a reply that is not an event stream."""

__all__ = sorted([name for name in list(globals()) if name.startswith("CODE_")]
                 + ["ERROR_CODES", "ApiError", "EventStreamError"])
