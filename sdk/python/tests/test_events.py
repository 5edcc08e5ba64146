"""The event stream's framing, history filtering and reconnects. The
framing and filters are checked on bytes; reconnects against a small local
server that drops the connection and records what the client sends (the
live server's stream is checked by test_live)."""

import datetime
import io
import json
import threading
import unittest
from typing import Any, Dict, List

import agentlane
from agentlane import ApiError, Client, Event, EventStreamError, FrameReader, History
from agentlane.events import MAX_EVENT_DATA

from .support import ScriptedServer


def frames(raw: bytes) -> List[Any]:
    reader = FrameReader(io.BytesIO(raw).readline)
    out = []
    while True:
        f = reader.next()
        if f is None:
            return out
        out.append((f.id, f.event, f.data))


class FrameReaderTest(unittest.TestCase):
    def test_frames(self) -> None:
        raw = (b": keepalive\n\n"
               b"id: 1\nevent: turn\ndata: {\"a\":\ndata: 1}\n x: y\n\n"
               b"id: 2\r\nevent: x\r\ndata:no-space\r\n\r\n"
               b"id: 3\n\n"
               b"event: events_lost\ndata: {}\n\n"
               b"id: 4\ndata: unfinished")
        self.assertEqual([
            ("1", "turn", "{\"a\":\n1}"),
            ("2", "x", "no-space"),
            ("3", "", None),
            (None, "events_lost", "{}"),
        ], frames(raw))

    def test_multi_line_data_is_joined(self) -> None:
        self.assertEqual([("7", "", "a\nb\n")], frames(b"id: 7\ndata: a\ndata: b\ndata\n\n"))

    def test_oversized_line(self) -> None:
        with self.assertRaises(EventStreamError):
            frames(b"data: " + b"x" * (MAX_EVENT_DATA + 10) + b"\n\n")


class HistoryTest(unittest.TestCase):
    t0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)

    def ev(self, id: int, type: str = "completed", seconds: int = 0) -> Event:
        return Event(id=id, type=type, time=self.t0 + datetime.timedelta(seconds=seconds))

    def test_filters(self) -> None:
        cases: Dict[str, Any] = {
            "after id": (History(after_id=5), [self.ev(5), self.ev(6)], [6]),
            "since": (History(since=self.t0 + datetime.timedelta(seconds=1)),
                      [self.ev(1, seconds=0), self.ev(2, seconds=1)], [2]),
            "naive since is UTC": (History(since=datetime.datetime(2026, 1, 1, 0, 0, 1)),
                                   [self.ev(1, seconds=0), self.ev(2, seconds=2)], [2]),
            "types": (History(types=frozenset(["turn"])), [self.ev(1), self.ev(2, "turn")], [2]),
            "skip types": (History(skip_types=frozenset(["turn"])), [self.ev(1), self.ev(2, "turn")], [1]),
            "loss always passes": (History(after_id=10, types=frozenset(["turn"])),
                                   [self.ev(3, "gap"), self.ev(0, "events_lost"), self.ev(4)], [3, 0]),
        }
        for name, (history, events, want) in cases.items():
            with self.subTest(name):
                self.assertEqual(want, [e.id for e in events if history.keeps(e)])


def sse(*events: Dict[str, Any]) -> bytes:
    out = b""
    for e in events:
        if "id" in e:
            out += b"id: %d\n" % e["id"]
        out += b"event: %s\ndata: %s\n\n" % (e["type"].encode(), json.dumps(e).encode())
    return out


class ReconnectTest(unittest.TestCase):
    def serve(self, script: List[Any]) -> Any:
        server = ScriptedServer(script)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        client = Client("http://127.0.0.1:%d" % server.server_address[1], token="tok", insecure_http=True)
        return server, client.session("ns", "s1")

    def test_resumes_after_the_last_event(self) -> None:
        t = "2026-01-01T00:00:00Z"
        server, session = self.serve([
            (200, sse({"id": 1, "type": "submitted", "time": t}, {"id": 2, "type": "completed", "time": t})),
            (200, sse({"id": 9000, "type": "gap", "time": t, "after": 2}, {"id": 9001, "type": "turn", "time": t})),
            (200, b""),
        ])
        with session.stream_events(runtime=True, min_backoff=0, max_backoff=0) as stream:
            got = [(e.id, e.type) for e in (next(stream) for _ in range(4))]
            self.assertEqual([(1, "submitted"), (2, "completed"), (9000, "gap"), (9001, "turn")], got)
            self.assertEqual(9001, stream.last_event_id)
        first, second = server.requests[0], server.requests[1]
        self.assertEqual("/v1/namespaces/ns/sessions/s1/events?runtime=true", first["path"])
        self.assertNotIn("last-event-id", first)
        self.assertEqual("2", second["last-event-id"])
        self.assertEqual("Bearer tok", second["authorization"])

    def test_from_now_then_the_id_it_names(self) -> None:
        server, session = self.serve([(200, b"id: 41\n\n"), (200, sse({"id": 42, "type": "turn", "time": "2026-01-01T00:00:00Z"}))])
        with session.stream_events(from_now=True, min_backoff=0, max_backoff=0) as stream:
            self.assertEqual(42, next(stream).id)
        self.assertTrue(server.requests[0]["path"].endswith("/events?from=now"))
        self.assertEqual("41", server.requests[1]["last-event-id"])
        self.assertNotIn("from=now", server.requests[1]["path"])

    def test_history_filter_and_last_id(self) -> None:
        t = "2026-01-01T00:00:00Z"
        server, session = self.serve([(200, sse(*[{"id": i, "type": "completed" if i % 2 else "turn", "time": t}
                                                 for i in range(1, 7)]))])
        history = History(after_id=2, types=frozenset(["turn"]))
        with session.stream_events(reconnect=False, history=history) as stream:
            self.assertEqual([4, 6], [e.id for e in stream])
            self.assertEqual(6, stream.last_event_id)

    def test_a_refused_reconnect_ends_the_stream(self) -> None:
        _, session = self.serve([
            (200, sse({"id": 1, "type": "turn", "time": "2026-01-01T00:00:00Z"})),
            (403, b'{"code":"Forbidden","message":"no"}'),
        ])
        stream = session.stream_events(min_backoff=0, max_backoff=0)
        self.assertEqual(1, next(stream).id)
        with self.assertRaises(ApiError) as ctx:
            next(stream)
        self.assertEqual(("Forbidden", 403), (ctx.exception.code, ctx.exception.status))
        with self.assertRaises(StopIteration):
            next(stream)

    def test_an_error_event_raises_its_code_and_ends_the_stream(self) -> None:
        t = "2026-01-01T00:00:00Z"
        for code, status in [("Forbidden", 403), ("Unauthenticated", 401)]:
            for reconnect in (True, False):
                with self.subTest(code=code, reconnect=reconnect):
                    server, session = self.serve([
                        (200, sse({"id": 1, "type": "turn", "time": t},
                                  {"type": "error", "time": t, "error": code + ": user alice may not get: x"})),
                        (200, sse({"id": 2, "type": "turn", "time": t})),
                    ])
                    stream = session.stream_events(reconnect=reconnect, min_backoff=0, max_backoff=0)
                    self.assertEqual(1, next(stream).id)
                    with self.assertRaises(ApiError) as ctx:
                        next(stream)
                    self.assertEqual((code, status, "user alice may not get: x"),
                                     (ctx.exception.code, ctx.exception.status, ctx.exception.message))
                    with self.assertRaises(StopIteration):
                        next(stream)
                    self.assertEqual(1, len(server.requests), "no reconnect after the error event")

    def test_an_error_event_without_a_code_is_internal(self) -> None:
        err = agentlane.events.stream_error("something broke")
        self.assertEqual(("Internal", 500, "something broke"), (err.code, err.status, err.message))
        self.assertEqual("error", agentlane.EVENT_ERROR)

    def test_the_first_connection_is_not_retried(self) -> None:
        _, session = self.serve([(401, b'{"code":"Unauthenticated","message":"no token"}')])
        with self.assertRaises(ApiError) as ctx:
            session.stream_events()
        self.assertEqual(401, ctx.exception.status)

    def test_close_from_another_thread(self) -> None:
        _, session = self.serve([(200, b": keepalive\n\n")] * 1000)
        stream = session.stream_events(min_backoff=0.01, max_backoff=0.01)
        threading.Timer(0.2, stream.close).start()
        self.assertEqual([], list(stream))


if __name__ == "__main__":
    unittest.main()
