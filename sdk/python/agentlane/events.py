"""The session's event stream (Server-Sent Events), as an iterator of Event.

The stream reconnects when the connection drops, sending the id of the last
event seen as Last-Event-ID, so that nothing retained is missed or repeated.
A History filter skips what a runtime has no use for: events up to an id,
events before a time, events of some types. The stream's own reports of
loss, ``gap`` (it resumed across a manager restart: what came between is
lost) and ``events_lost`` (events no longer retained), always pass.
"""

import datetime
import http.client
import json
import socket
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, FrozenSet, Iterator, List, Optional

from . import types as t
from .errors import (CODE_FORBIDDEN, CODE_INTERNAL, CODE_SESSION_NOT_FOUND, CODE_UNAUTHENTICATED, ApiError,
                     EventStreamError)
from .wire import from_wire

if TYPE_CHECKING:  # pragma: no cover
    from .client import SessionClient

# Bounds one line of the stream, and the data of one event.
MAX_EVENT_DATA = 1 << 20
# The server sends a keepalive every 15s; a connection silent for this long
# is taken for dead and reconnected.
IDLE_TIMEOUT = 45.0
# Statuses that end a stream instead of being retried on reconnect: the
# token or its permission is gone, the session is gone, or the cursor is
# refused (FutureEventID).
_FINAL_STATUSES = frozenset([400, 401, 403, 404])
# Events that report loss; no History filter drops them.
_LOSS_EVENTS = frozenset([t.EVENT_GAP, t.EVENT_EVENTS_LOST])


# The status of a call refused with the code an error event carries.
_ERROR_STATUSES = {CODE_FORBIDDEN: 403, CODE_UNAUTHENTICATED: 401, CODE_SESSION_NOT_FOUND: 404}


def stream_error(text: str) -> ApiError:
    """The ApiError an error event's text, "<code>: <message>", stands for,
    with the status a call refused alike gets; a text without a code is an
    Internal error's message."""
    code, sep, message = text.partition(": ")
    if not sep or not code or " " in code or "\t" in code:
        code, message = CODE_INTERNAL, text
    return ApiError(_ERROR_STATUSES.get(code, 500), code, message)


@dataclass
class History:
    """Which events a stream skips. after_id skips events with an id up to
    it; since skips events older than that time; types, when set, keeps
    only events of those types; skip_types drops events of those types.
    gap and events_lost events always pass."""

    after_id: Optional[int] = None
    since: Optional[datetime.datetime] = None
    types: Optional[FrozenSet[str]] = None
    skip_types: FrozenSet[str] = field(default_factory=frozenset)

    def keeps(self, ev: t.Event) -> bool:
        if ev.type in _LOSS_EVENTS:
            return True
        if self.after_id is not None and ev.id and ev.id <= self.after_id:
            return False
        if self.since is not None and ev.time < _aware(self.since):
            return False
        if self.types is not None and ev.type not in self.types:
            return False
        return ev.type not in self.skip_types


def _aware(when: datetime.datetime) -> datetime.datetime:
    if when.tzinfo is None:
        return when.replace(tzinfo=datetime.timezone.utc)
    return when


@dataclass
class Frame:
    """One dispatched SSE frame: its id (None without an id line), its
    event name and its data lines joined by newlines."""

    id: Optional[str]
    event: str
    data: Optional[str]


class FrameReader:
    """Splits a Server-Sent Events byte stream into frames. Lines end in
    \\n, \\r\\n or \\r; comments (lines starting with ':') are skipped; data
    lines of one frame are joined with newlines."""

    def __init__(self, readline: Any):
        self._readline = readline

    def next(self) -> Optional[Frame]:
        """The next frame with an id or data; None at the end of the stream
        (an unfinished frame is dropped)."""
        frame_id: Optional[str] = None
        event = ""
        data: List[str] = []
        size = 0
        while True:
            raw = self._readline(MAX_EVENT_DATA + 2)
            if not raw:
                return None
            if len(raw) > MAX_EVENT_DATA and not raw.endswith(b"\n"):
                raise EventStreamError("agentlane: event stream: a line is over %d bytes" % MAX_EVENT_DATA)
            line = raw.decode("utf-8", "replace").rstrip("\n").rstrip("\r")
            if line == "":
                if frame_id is not None or data:
                    return Frame(frame_id, event, "\n".join(data) if data else None)
                event = ""
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            if value.startswith(" "):
                value = value[1:]
            if name == "id" and "\x00" not in value:
                frame_id = value
            elif name == "event":
                event = value
            elif name == "data":
                data.append(value)
                size += len(value) + 1
                if size > MAX_EVENT_DATA:
                    raise EventStreamError("agentlane: event stream: an event is over %d bytes" % MAX_EVENT_DATA)


class EventStream:
    """Iterates over a session's events; use it as a context manager, or
    call close(). Iteration ends when the stream is closed or, without
    reconnect, when the server ends it.

    last_event_id resumes after that event; from_now starts after the
    session's newest event (unless last_event_id is set); runtime marks the
    stream as the session's runtime, which takes steers while connected;
    history skips events (see History). With reconnect (the default) a
    dropped connection, or one silent for idle_timeout seconds, is opened
    again after a backoff from min_backoff doubling to max_backoff, resuming
    after the last event seen; a reply of 400, 401, 403 or 404 to a
    reconnect raises ApiError, and so does an error event (the server ended
    the stream because its caller lost access), with its code (Forbidden,
    Unauthenticated), with or without reconnect; the stream then ends. The
    first connection is made at once and is not retried: its error is raised
    by the constructor.

    Not for concurrent iteration; close() may be called from any thread.
    """

    def __init__(
        self,
        session: "SessionClient",
        *,
        last_event_id: Optional[int] = None,
        from_now: bool = False,
        runtime: bool = False,
        reconnect: bool = True,
        history: Optional[History] = None,
        idle_timeout: float = IDLE_TIMEOUT,
        min_backoff: float = 0.1,
        max_backoff: float = 5.0,
    ):
        self._session = session
        self._last_id = last_event_id or 0
        self._from_now = from_now
        self._runtime = runtime
        self._reconnect = reconnect
        self.history = history or History()
        self._idle_timeout = idle_timeout
        self._min_backoff, self._max_backoff = min_backoff, max_backoff
        self._backoff = 0.0
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._conn: Optional[http.client.HTTPConnection] = None
        self._reader: Optional[FrameReader] = None
        # connections counts the connections made, the first included.
        self.connections = 0
        self._connect()

    @property
    def last_event_id(self) -> int:
        """The id of the last event received (filtered ones included), or
        the one the stream started after; 0 if none."""
        return self._last_id

    def __iter__(self) -> Iterator[t.Event]:
        return self

    def __enter__(self) -> "EventStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Ends the stream; an iteration blocked in another thread stops."""
        self._closed.set()
        self._disconnect()

    def __next__(self) -> t.Event:
        while True:
            if self._closed.is_set():
                raise StopIteration
            if self._reader is None:
                self._wait_and_reconnect()
                continue
            try:
                frame = self._reader.next()
            except (OSError, http.client.HTTPException, ValueError) as err:
                if isinstance(err, EventStreamError):
                    self.close()
                    raise
                frame = None
            if frame is None:
                self._disconnect()
                if not self._reconnect:
                    self.close()
                continue
            self._backoff = 0.0
            ev = self._decode(frame)
            if ev is not None and ev.type == t.EVENT_ERROR:
                # The server ended the stream, its caller refused: a
                # reconnect would be refused too.
                self.close()
                raise stream_error(ev.error or "")
            if ev is not None and self.history.keeps(ev):
                return ev

    def _decode(self, frame: Frame) -> Optional[t.Event]:
        """The frame's Event; None for a frame without data (the id-only
        frame of from=now), which only moves the cursor."""
        frame_id = None
        if frame.id is not None and frame.id.isdigit():
            frame_id = int(frame.id)
            self._last_id = frame_id
        if frame.data is None:
            return None
        try:
            ev = from_wire(t.Event, json.loads(frame.data))
        except (ValueError, TypeError) as err:
            raise EventStreamError("agentlane: event stream: event %r: %s" % (frame.id, err)) from None
        if not ev.id and frame_id:
            ev.id = frame_id
        if not ev.type:
            ev.type = frame.event
        return ev

    def _wait_and_reconnect(self) -> None:
        self._backoff = min(max(self._min_backoff, 2 * self._backoff), self._max_backoff)
        if self._closed.wait(self._backoff):
            return
        try:
            self._connect()
        except ApiError as err:
            if err.status in _FINAL_STATUSES:
                self.close()
                raise
            if err.retry_after:
                self._closed.wait(min(err.retry_after, 60))
        except (OSError, http.client.HTTPException, EventStreamError):
            pass  # tried again after the backoff

    def _connect(self) -> None:
        query: Dict[str, str] = {}
        headers: Dict[str, str] = {"Accept": "text/event-stream"}
        if self._runtime:
            query["runtime"] = "true"
        if self._last_id:
            headers["Last-Event-ID"] = str(self._last_id)
        elif self._from_now:
            query["from"] = "now"
        s = self._session
        conn, resp = s.client.open("streamEvents", {"namespace": s.namespace, "session": s.name},
                                   query or None, timeout=self._idle_timeout, headers=headers)
        content_type = (resp.getheader("Content-Type") or "").split(";")[0].strip()
        if content_type != "text/event-stream":
            conn.close()
            raise EventStreamError("agentlane: event stream: the reply is %r, not text/event-stream" % content_type)
        with self._lock:
            if self._closed.is_set():
                conn.close()
                return
            self._conn, self._reader = conn, FrameReader(resp.readline)
            self.connections += 1

    def _disconnect(self) -> None:
        with self._lock:
            conn, self._conn, self._reader = self._conn, None, None
        if conn is None:
            return
        sock: Optional[socket.socket] = conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)  # unblocks a read in another thread
            except OSError:
                pass
        conn.close()
