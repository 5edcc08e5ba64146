"""Heartbeats of a handler and deadline extensions, against a scripted
server: the paths, the bodies and the decoded replies."""

import datetime
import json
import threading
import unittest
from typing import Any, List, Tuple

import agentlane
from agentlane import ApiError, Client

from .support import ScriptedServer


class HeartbeatAndExtendTest(unittest.TestCase):
    def serve(self, script: List[Any]) -> Tuple[ScriptedServer, Client]:
        server = ScriptedServer(script)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        return server, Client("http://127.0.0.1:%d" % server.server_address[1], token="tok", insecure_http=True)

    def test_heartbeat(self) -> None:
        reply = json.dumps({"id": "t1", "attempt": 2, "recorded": True, "heartbeatTimeoutSeconds": 5}).encode()
        server, client = self.serve([(200, reply)])
        res = client.session("ns", "s1").heartbeat_external_task("t1", attempt=2, progress="3/10")
        self.assertEqual(("t1", 2, True, 5.0), (res.id, res.attempt, res.recorded, res.heartbeat_timeout_seconds))
        req = server.requests[0]
        self.assertEqual(("POST", "/v1/namespaces/ns/sessions/s1/external/t1/heartbeat"), (req["method"], req["path"]))
        self.assertEqual({"attempt": 2, "progress": "3/10"}, json.loads(req["body"]))

    def test_heartbeat_of_the_current_attempt_sends_no_attempt(self) -> None:
        reply = json.dumps({"id": "t1", "attempt": 1, "recorded": False, "heartbeatTimeoutSeconds": 0}).encode()
        server, client = self.serve([(200, reply)])
        client.session("ns", "s1").heartbeat_external_task("t1")
        self.assertEqual({}, json.loads(server.requests[0]["body"]))

    def test_extend(self) -> None:
        reply = json.dumps({"id": "c1", "attempt": 1, "deadline": "2026-11-28T02:00:00Z", "extensions": 1}).encode()
        server, client = self.serve([(200, reply)])
        x = client.session("ns", "s1").extend_command("c1", 300)
        self.assertEqual(("c1", 1, 1), (x.id, x.attempt, x.extensions))
        self.assertEqual(datetime.datetime(2026, 11, 28, 2, 0, tzinfo=datetime.timezone.utc), x.deadline)
        req = server.requests[0]
        self.assertEqual("/v1/namespaces/ns/sessions/s1/commands/c1/extend", req["path"])
        self.assertEqual({"by": "300s"}, json.loads(req["body"]))

    def test_extend_refused(self) -> None:
        server, client = self.serve([(409, b'{"code":"ExtendRefused","message":"at most 8"}')])
        with self.assertRaises(ApiError) as ctx:
            client.session("ns", "s1").extend_command("c1", "1m", attempt=3)
        self.assertEqual(agentlane.CODE_EXTEND_REFUSED, ctx.exception.code)
        self.assertEqual({"by": "1m", "attempt": 3}, json.loads(server.requests[0]["body"]))
