"""A client of the agentlane Session API (pkg/sessionapi/openapi.yaml).

Client holds the server's address, its TLS trust and the bearer token;
Client.session(namespace, name) gives a SessionClient, which has one method
per operation of the OpenAPI document, named after its operationId in
snake_case. Every call goes through OPERATIONS, which tests/test_openapi.py
checks against the document: methods, paths, request and response schemas.
"""

import contextvars
import dataclasses
import http.client
import json
import os
import ssl
import time
import urllib.parse
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

from . import types as t
from .auth import StaticToken, TokenFile, TokenSource
from .errors import CODE_NOT_LEADER, CODE_NOT_RUNNING, CODE_STALE_ATTEMPT, MAX_ERROR_BODY, ApiError
from .wire import format_duration, from_wire, to_wire

if TYPE_CHECKING:  # pragma: no cover
    from .events import EventStream

Seconds = Union[float, int, str]

_SESSION = "/v1/namespaces/{namespace}/sessions/{session}"

# operationId: (HTTP method, path, request schema, 2xx response schema,
# Python method). The client reads the method and path from here, and
# decodes the reply into the response type.
# _parent is the command whose fn run_command is calling, for the
# parent_id of the commands submitted from it.
_parent: "contextvars.ContextVar[Optional[str]]" = contextvars.ContextVar("agentlane_parent", default=None)

OPERATIONS: Dict[str, Tuple[str, str, Optional[type], Optional[type], str]] = {
    "healthz": ("GET", "/healthz", None, None, "healthz"),
    "getOpenAPI": ("GET", "/openapi.yaml", None, None, "get_openapi"),
    "submitCommand": ("POST", _SESSION + "/commands", t.SubmitRequest, t.Command, "submit_command"),
    "getCommand": ("GET", _SESSION + "/commands/{id}", None, t.Command, "get_command"),
    "reportResult": ("POST", _SESSION + "/commands/{id}/result", t.ReportRequest, t.Command, "report_result"),
    "postMessage": ("POST", _SESSION + "/messages", t.Message, t.PostResult, "post_message"),
    "finishRun": ("POST", _SESSION + "/runs/{runId}/finish", t.RunOutcome, None, "finish_run"),
    "cancel": ("POST", _SESSION + "/cancel", t.CancelRequest, t.CancelResult, "cancel"),
    "clearLane": ("POST", _SESSION + "/lanes/{lane}/clear", None, t.CancelResult, "clear_lane"),
    "setLaneHandler": ("PUT", _SESSION + "/lanes/{lane}/handler", t.LaneHandler, t.LaneHandler, "set_lane_handler"),
    "streamEvents": ("GET", _SESSION + "/events", None, t.Event, "stream_events"),
    "getStats": ("GET", _SESSION + "/stats", None, t.Stats, "get_stats"),
    "listExternalTasks": ("GET", _SESSION + "/external", None, t.ExternalTaskList, "list_external_tasks"),
    "completeExternalTask": ("POST", _SESSION + "/external/{id}/complete", t.Completion, t.CompletionResult,
                             "complete_external_task"),
    "heartbeatExternalTask": ("POST", _SESSION + "/external/{id}/heartbeat", t.Heartbeat, t.HeartbeatResult,
                              "heartbeat_external_task"),
    "extendCommand": ("POST", _SESSION + "/commands/{id}/extend", t.Extend, t.Extension, "extend_command"),
    "listDeadLetters": ("GET", _SESSION + "/deadletters", None, t.DeadLetterList, "list_dead_letters"),
    "saveCheckpoint": ("PUT", _SESSION + "/checkpoints", t.Checkpoint, t.CheckpointSaved, "save_checkpoint"),
    "loadLatestCheckpoint": ("GET", _SESSION + "/checkpoints/latest", None, t.Checkpoint, "load_latest_checkpoint"),
    "loadCheckpoint": ("GET", _SESSION + "/checkpoints/{runId}", None, t.Checkpoint, "load_checkpoint"),
    "delegate": ("POST", _SESSION + "/delegations", t.DelegationRequest, t.Delegation, "delegate"),
    "listDelegations": ("GET", _SESSION + "/delegations", None, t.DelegationList, "list_delegations"),
    "getDelegation": ("GET", _SESSION + "/delegations/{id}", None, t.Delegation, "get_delegation"),
    "getBudget": ("GET", _SESSION + "/budget", None, t.BudgetStatus, "get_budget"),
    "checkBudget": ("POST", _SESSION + "/budget/check", t.BudgetCheckRequest, t.BudgetCheck, "check_budget"),
    "recordUsage": ("POST", _SESSION + "/budget/record", t.Usage, t.Consumed, "record_usage"),
    "getAssignment": ("GET", "/v1/namespaces/{namespace}/runtime/assignment", None, t.Assignment, "get_assignment"),
}

# Environment variables the operator sets in runtime pods.
ENV_URL = "AGENTLANE_SESSION_API_URL"
ENV_TOKEN_FILE = "AGENTLANE_SESSION_API_TOKEN_FILE"
ENV_CA_FILE = "AGENTLANE_SESSION_API_CA_FILE"
ENV_NAMESPACE = "AGENTLANE_NAMESPACE"
ENV_SESSION = "AGENTLANE_SESSION"
# Set instead of ENV_SESSION in a warm runtime pod: the name of its
# RuntimePool. Such a pod learns its session from Client.get_assignment.
ENV_WARM_POOL = "AGENTLANE_WARM_POOL"

# The wait of each long poll of await_command and run_command, in seconds.
POLL_WAIT = 30.0
# Added to a call's own wait to time out its socket.
_WAIT_SLACK = 30.0

# How many times a call refused with NotLeader is sent again, by default,
# and the most it waits before each (whatever Retry-After asks).
NOT_LEADER_RETRIES = 5
MAX_NOT_LEADER_WAIT = 10.0


class Client:
    """Talks to one Session API server. Safe to share between threads: each
    call opens its own connection.

    base_url is https://host[:port][/path]. The token is a string (token) or
    a file read again when it changes (token_file). TLS is verified, against
    ca_file (or ca_data, PEM) when given, else the system's roots. A plain
    http:// base_url is refused unless insecure_http is True, since it would
    send the token in clear text; use it only on loopback.

    A call that reaches a standby manager replica (503 NotLeader, as during
    a leader failover) is sent again after the reply's Retry-After (1s when
    absent, at most MAX_NOT_LEADER_WAIT), up to not_leader_retries times;
    then the last NotLeader ApiError is raised. A standby refuses every call
    before reading it, so this is safe for writes too: the refused call did
    nothing. not_leader_retries=0 turns it off.
    """

    # Waits before a call refused with NotLeader is sent again.
    _sleep = staticmethod(time.sleep)

    def __init__(
        self,
        base_url: str,
        *,
        token: Optional[str] = None,
        token_file: Optional[str] = None,
        ca_file: Optional[str] = None,
        ca_data: Optional[str] = None,
        insecure_http: bool = False,
        timeout: float = 30.0,
        not_leader_retries: int = NOT_LEADER_RETRIES,
    ):
        u = urllib.parse.urlsplit(base_url)
        if u.scheme not in ("http", "https") or not u.hostname or u.query or u.fragment:
            raise ValueError("agentlane: base URL %r: want http(s)://host[:port][/path]" % base_url)
        if u.username or u.password:
            raise ValueError("agentlane: base URL: credentials in the URL are not allowed")
        if u.scheme == "http" and not insecure_http:
            raise ValueError(
                "agentlane: %s is plain http, which sends the bearer token in clear text; "
                "use https, or pass insecure_http=True on a loopback address" % base_url
            )
        if token is not None and token_file is not None:
            raise ValueError("agentlane: give token or token_file, not both")
        self._scheme = u.scheme
        self._host = u.hostname
        self._port = u.port
        self._prefix = u.path.rstrip("/")
        self._tokens: Optional[TokenSource] = None
        if token is not None:
            self._tokens = StaticToken(token)
        elif token_file is not None:
            self._tokens = TokenFile(token_file)
        self.timeout = timeout
        if not_leader_retries < 0:
            raise ValueError("agentlane: not_leader_retries is negative")
        self.not_leader_retries = not_leader_retries
        self._tls: Optional[ssl.SSLContext] = None
        if u.scheme == "https":
            self._tls = ssl.create_default_context(cafile=ca_file, cadata=ca_data)
            self._tls.minimum_version = ssl.TLSVersion.TLSv1_2

    @classmethod
    def from_env(cls, environ: Optional[Mapping[str, str]] = None, **kwargs: Any) -> "Client":
        """A client from the variables the operator sets in runtime pods:
        AGENTLANE_SESSION_API_URL, _TOKEN_FILE and _CA_FILE."""
        env = os.environ if environ is None else environ
        url = env.get(ENV_URL)
        if not url:
            raise ValueError("agentlane: %s is not set" % ENV_URL)
        if env.get(ENV_TOKEN_FILE) and "token" not in kwargs:
            kwargs.setdefault("token_file", env[ENV_TOKEN_FILE])
        if env.get(ENV_CA_FILE):
            kwargs.setdefault("ca_file", env[ENV_CA_FILE])
        return cls(url, **kwargs)

    def __repr__(self) -> str:
        return "<agentlane.Client %s://%s%s>" % (self._scheme, self._netloc(), self._prefix)

    def session(self, namespace: str, name: str) -> "SessionClient":
        """A client of one AgentSession's routes."""
        return SessionClient(self, namespace, name)

    def session_from_env(self, environ: Optional[Mapping[str, str]] = None) -> "SessionClient":
        """The session named by AGENTLANE_NAMESPACE and AGENTLANE_SESSION."""
        env = os.environ if environ is None else environ
        return self.session(env[ENV_NAMESPACE], env[ENV_SESSION])

    def healthz(self) -> str:
        """The server's liveness: "ok"."""
        return self.call("healthz", {}, auth=False).decode("utf-8")

    def get_openapi(self) -> str:
        """The OpenAPI document the server was built with, as YAML."""
        return self.call("getOpenAPI", {}, auth=False).decode("utf-8")

    def get_assignment(self, namespace: str, wait: Optional[Seconds] = None) -> Optional[t.Assignment]:
        """Asks which session adopted the calling pod, a warm runtime pod of
        namespace (ENV_WARM_POOL is set), with the pod's own projected token.
        With wait (at most 60s) the server holds the call until the pod is
        adopted or wait runs out. Returns the assignment, or None while no
        session adopted the pod: ask again. A runtime attaches to the
        assigned session only then."""
        query = {"wait": format_duration(wait)} if wait else None
        raw = self.call("getAssignment", {"namespace": namespace}, query, timeout=_seconds(wait, 0) + _WAIT_SLACK)
        if not raw:
            return None
        return from_wire(t.Assignment, json.loads(raw.decode("utf-8")))

    def call(
        self,
        operation: str,
        params: Mapping[str, str],
        query: Optional[Mapping[str, str]] = None,
        body: Any = None,
        timeout: Optional[float] = None,
        auth: bool = True,
    ) -> bytes:
        """Calls an operation of OPERATIONS and returns the body of its 2xx
        reply; a non-2xx reply raises ApiError."""
        conn, resp = self.open(operation, params, query, body, timeout, auth)
        try:
            return resp.read()
        finally:
            conn.close()

    def open(
        self,
        operation: str,
        params: Mapping[str, str],
        query: Optional[Mapping[str, str]] = None,
        body: Any = None,
        timeout: Optional[float] = None,
        auth: bool = True,
        headers: Optional[Mapping[str, str]] = None,
    ) -> Tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Sends a request and returns its connection and 2xx response, for
        the caller to read and close. A non-2xx reply raises ApiError; one
        that is NotLeader is first retried (see Client)."""
        retries = self.not_leader_retries
        while True:
            try:
                return self._open_once(operation, params, query, body, timeout, auth, headers)
            except ApiError as err:
                if err.code != CODE_NOT_LEADER or err.status != 503 or retries <= 0:
                    raise
                retries -= 1
                self._sleep(min(float(err.retry_after or 1), MAX_NOT_LEADER_WAIT))

    def _open_once(
        self,
        operation: str,
        params: Mapping[str, str],
        query: Optional[Mapping[str, str]],
        body: Any,
        timeout: Optional[float],
        auth: bool,
        headers: Optional[Mapping[str, str]],
    ) -> Tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        method, template, _, _, _ = OPERATIONS[operation]
        path = self._prefix + _expand(template, params)
        if query:
            path += "?" + urllib.parse.urlencode(query)
        send = {"Accept": "application/json", "User-Agent": "agentlane-python"}
        data = None
        if body is not None:
            data = json.dumps(to_wire(body), separators=(",", ":")).encode("utf-8")
            send["Content-Type"] = "application/json"
        if headers:
            send.update(headers)
        if auth and self._tokens is not None:
            send["Authorization"] = "Bearer " + self._tokens.token()
        conn = self._connect(self.timeout if timeout is None else timeout)
        try:
            conn.request(method, path, body=data, headers=send)
            resp = conn.getresponse()
            if not 200 <= resp.status <= 299:
                raise ApiError.from_reply(resp.status, resp.read(MAX_ERROR_BODY), resp.getheader("Retry-After"))
        except BaseException:
            conn.close()
            raise
        return conn, resp

    def _connect(self, timeout: float) -> http.client.HTTPConnection:
        if self._tls is not None:
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout, context=self._tls)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _netloc(self) -> str:
        host = "[%s]" % self._host if ":" in str(self._host) else str(self._host)
        return host if self._port is None else "%s:%d" % (host, self._port)


def _expand(template: str, params: Mapping[str, str]) -> str:
    """Fills the {placeholders} of a path template, each escaped as one
    path segment."""
    out = template
    for name, value in params.items():
        if not value:
            raise ValueError("agentlane: %s is empty" % name)
        out = out.replace("{%s}" % name, urllib.parse.quote(str(value), safe=""))
    if "{" in out:
        raise ValueError("agentlane: %s: a path parameter is missing" % template)
    return out


class SessionClient:
    """Calls the routes of one AgentSession. Safe to share between threads."""

    # Waits between polls of a command that holds a grant.
    _sleep = staticmethod(time.sleep)

    def __init__(self, client: Client, namespace: str, name: str):
        self.client = client
        self.namespace = namespace
        self.name = name

    def __repr__(self) -> str:
        return "<agentlane.SessionClient %s/%s>" % (self.namespace, self.name)

    def _call(self, operation: str, body: Any = None, timeout: Optional[float] = None,
              query: Optional[Mapping[str, str]] = None, **params: str) -> Any:
        params = dict(params, namespace=self.namespace, session=self.name)
        raw = self.client.call(operation, params, query, body, timeout)
        response = OPERATIONS[operation][3]
        if response is None:
            return None
        return from_wire(response, json.loads(raw.decode("utf-8")))

    def submit_command(self, request: t.SubmitRequest, timeout: Optional[float] = None) -> t.Command:
        """Submits a command. Returns once an Internal or Hybrid command holds a
        grant, an External command is final, or request.wait ran out (the
        command as it stands: neither granted nor final).

        A call abandoned while the server holds it (timeout shorter than
        request.wait, or the thread interrupted) closes the connection: the
        server then cancels the command if no attempt of it was granted yet;
        a granted or dispatched one goes on under its lane's rules, and
        cancel() ends it."""
        if timeout is None:
            timeout = _seconds(request.wait, 300.0) + _WAIT_SLACK
        if request.parent_id is None and _parent.get() is not None:
            request = dataclasses.replace(request, parent_id=_parent.get())
        return self._call("submitCommand", request, timeout)

    def get_command(self, command_id: str, wait: Optional[Seconds] = None) -> t.Command:
        """Reads a command; with wait, the server holds the call until the
        command holds a grant or is final, or wait runs out."""
        query = {"wait": format_duration(wait)} if wait else None
        return self._call("getCommand", timeout=_seconds(wait, 0) + _WAIT_SLACK, query=query, id=command_id)

    def report_result(self, command_id: str, report: t.ReportRequest) -> t.Command:
        """Reports the result of the attempt report.attempt of an Internal or
        Hybrid command. An attempt that lost its slot raises ApiError with
        code StaleAttempt or NotRunning: drop its result."""
        return self._call("reportResult", report, id=command_id)

    def post_message(self, message: Union[t.Message, str]) -> t.PostResult:
        """Posts an inbound user message (or a /queue directive)."""
        if isinstance(message, str):
            message = t.Message(text=message)
        return self._call("postMessage", message)

    def finish_run(self, run_id: str, outcome: Optional[t.RunOutcome] = None) -> None:
        """Ends a run, so that the session's next turn may start. outcome
        says how it ended; a worker session of a Delegate lane reports its
        answer (or error) this way, which becomes the delegated task's
        result."""
        self._call("finishRun", outcome, runId=run_id)

    def cancel(self, request: t.CancelRequest) -> t.CancelResult:
        """Cancels one command, a run's queued commands or the session's."""
        return self._call("cancel", request)

    def clear_lane(self, lane: str) -> t.CancelResult:
        """Cancels the session's commands in one lane that have not started
        (queued or waiting for a retry); its running commands keep running.
        Returns how many were cancelled."""
        return self._call("clearLane", lane=lane)

    def set_lane_handler(self, lane: str, mode: str) -> t.LaneHandler:
        """Switches who handles the lane's new commands for this session, as
        A3S's SDK sets a lane's handler: External (the session completes
        them itself: list_external_tasks, then complete_external_task),
        Internal (the runtime runs them on a grant) or Default. Raises
        ApiError LaneSwitchRefused on a lane the LaneQueue keeps on its own
        runners."""
        return self._call("setLaneHandler", t.LaneHandler(mode=mode), lane=lane)

    def stream_events(self, **options: Any) -> "EventStream":
        """Follows the session's events; see agentlane.events.EventStream for
        the options (last_event_id, from_now, runtime, reconnect, history)."""
        from .events import EventStream

        return EventStream(self, **options)

    def get_stats(self) -> t.Stats:
        return self._call("getStats")

    def list_external_tasks(self) -> List[t.ExternalTask]:
        """The session's External attempts waiting for a result, oldest
        first, with their payloads and the time they have left."""
        return self._call("listExternalTasks").items

    def complete_external_task(self, task_id: str, completion: Any) -> t.CompletionResult:
        """Reports a handler's result for attempt completion.attempt of the
        external task task_id (a command of a lane whose externalTarget.type
        is Handler); needs the update verb on the session's
        agentsessions/api. Only the first completion of the current attempt
        counts: a refused one raises ApiError with code StaleAttempt (not
        the current attempt), AlreadyCompleted (it has a completion, or the
        task finished), NotHandlerTask or NotRunning, and changes nothing.

        completion may also be the result itself (any JSON value), as in
        A3S's complete_external_task(id, result): a success of the current
        attempt. For a lane the session handles itself (set_lane_handler
        External) the access that submits is enough."""
        if not isinstance(completion, t.Completion):
            completion = t.Completion(success=True, result=completion)
        return self._call("completeExternalTask", completion, id=task_id)

    def heartbeat_external_task(self, task_id: str, attempt: Optional[int] = None,
                                progress: Optional[str] = None) -> t.HeartbeatResult:
        """Shows that the handler still runs attempt (None: the current one)
        of the external task task_id, with an optional progress note. A lane
        with a heartbeatTimeout times out an attempt that goes that long
        without one. Fenced and authorized as a completion: a refused one
        raises ApiError (StaleAttempt, AlreadyCompleted, NotHandlerTask,
        NotRunning). Post as often as convenient: the task's status records
        at most one per quarter of the heartbeatTimeout."""
        return self._call("heartbeatExternalTask", t.Heartbeat(attempt=attempt, progress=progress), id=task_id)

    def extend_command(self, command_id: str, by: Seconds, attempt: Optional[int] = None) -> t.Extension:
        """Moves the deadline of the running attempt (or of attempt) of the
        session's command later by by (seconds, or a duration such as "5m";
        1s to 24h). An attempt may be extended at most 8 times and never
        past 10 times its timeout: beyond, ApiError ExtendRefused."""
        return self._call("extendCommand", t.Extend(by=format_duration(by), attempt=attempt), id=command_id)

    def list_dead_letters(self) -> List[t.DeadLetter]:
        """The session's commands that failed for good, oldest first."""
        return self._call("listDeadLetters").items

    def save_checkpoint(self, checkpoint: t.Checkpoint) -> t.CheckpointSaved:
        return self._call("saveCheckpoint", checkpoint)

    def load_latest_checkpoint(self) -> t.Checkpoint:
        return self._call("loadLatestCheckpoint")

    def load_checkpoint(self, run_id: str) -> t.Checkpoint:
        return self._call("loadCheckpoint", runId=run_id)

    def delegate(self, request: t.DelegationRequest) -> t.Delegation:
        """Hands work to a Delegate lane and returns the queued task at once
        (phase Queued). A worker session made from the lane's template takes
        request.text as its first turn; its answer comes to this session's
        inbox as a message, unless request.callback is False. A lane that
        does not delegate, or empty text, raises ApiError InvalidRequest; an
        unknown lane, UnknownLane; an id in use, DuplicateCommand."""
        return self._call("delegate", request)

    def list_delegations(self) -> List[t.Delegation]:
        """The session's delegated tasks that the cluster keeps, oldest
        first: every page of them (the server sends at most 100 a page)."""
        items: List[t.Delegation] = []
        query: Optional[Dict[str, str]] = None
        while True:
            page = self._call("listDelegations", query=query)
            items.extend(page.items)
            if not page.continue_:
                return items
            query = {"continue": page.continue_}

    def get_delegation(self, task_id: str) -> t.Delegation:
        """One delegated task of this session; another's, or none, raises
        ApiError CommandNotFound."""
        return self._call("getDelegation", id=task_id)

    def get_budget(self) -> t.BudgetStatus:
        return self._call("getBudget")

    def check_budget(self, request: t.BudgetCheckRequest) -> t.BudgetCheck:
        return self._call("checkBudget", request)

    def record_usage(self, usage: t.Usage) -> t.Consumed:
        return self._call("recordUsage", usage)

    def await_command(self, command_id: str, final: bool = False) -> t.Command:
        """Long-polls a command until it holds a grant or is final (only
        final, with final=True)."""
        if final:
            return self._poll(command_id, lambda cmd: cmd.final)
        return self._poll(command_id, lambda cmd: cmd.final or cmd.grant is not None)

    def _poll(self, command_id: str, done: Callable[[t.Command], bool]) -> t.Command:
        """Long-polls a command until done says it is. While an attempt
        holds a grant the server answers at once, so those polls are spaced
        by a backoff from 0.1s doubling to 5s."""
        backoff = 0.0
        while True:
            cmd = self.get_command(command_id, wait=POLL_WAIT)
            if done(cmd):
                return cmd
            if cmd.grant is None:
                backoff = 0.0
                continue
            backoff = min(max(0.1, 2 * backoff), 5.0)
            self._sleep(backoff)

    def run_command(self, request: t.SubmitRequest,
                    fn: Callable[[t.Command], Tuple[t.Result, Optional[t.Usage]]]) -> t.Command:
        """Submits a command and carries it to its end: for every new grant
        (Internal and Hybrid commands, once per retry) calls fn with the
        command and reports the Result (and Usage) fn returns. A report
        refused with StaleAttempt or NotRunning means the attempt lost its
        slot; the command is then awaited for a retry's grant or its end.
        An External command is awaited until it is final."""
        cmd = self.submit_command(request)
        handled = 0  # the last attempt passed to fn; attempts count from 1
        while not cmd.final:
            grant = cmd.grant
            if grant is not None and grant.attempt > handled:
                handled = grant.attempt
                token = _parent.set(cmd.id)
                try:
                    result, usage = fn(cmd)
                finally:
                    _parent.reset(token)
                report = t.ReportRequest(attempt=grant.attempt, success=result.success, output=result.output,
                                         error=result.error, exit_code=result.exit_code, usage=usage)
                try:
                    cmd = self.report_result(cmd.id, report)
                    continue
                except ApiError as err:
                    if err.code not in (CODE_STALE_ATTEMPT, CODE_NOT_RUNNING):
                        raise
            last = handled
            cmd = self._poll(cmd.id, lambda c: c.final or (c.grant is not None and c.grant.attempt > last))
        return cmd


def _seconds(value: Optional[Seconds], default: float) -> float:
    """A wait in seconds, from a number or a Go duration string."""
    if value is None or value == "":
        return default
    if isinstance(value, (int, float)):
        return float(value)
    total, number = 0.0, ""
    units = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    rest = value
    while rest:
        i = 0
        while i < len(rest) and (rest[i].isdigit() or rest[i] == "."):
            i += 1
        number, rest = rest[:i], rest[i:]
        unit = next((u for u in sorted(units, key=len, reverse=True) if rest.startswith(u)), None)
        if not number or unit is None:
            return default
        total += float(number) * units[unit]
        rest = rest[len(unit):]
    return total


