"""Lane control calls of the client, against a small local server."""

import threading
import unittest
from typing import Any, List, Tuple

import agentlane
from agentlane import ApiError, Client

from .support import ScriptedServer


class LaneControlTest(unittest.TestCase):
    def serve(self, script: List[Any]) -> Tuple[ScriptedServer, Client]:
        server = ScriptedServer(script)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        client = Client("http://127.0.0.1:%d" % server.server_address[1], token="tok", insecure_http=True)
        client._sleep = lambda _: None  # type: ignore[method-assign]
        return server, client

    def test_clear_lane(self) -> None:
        server, client = self.serve([(200, b'{"cancelled":2}')])
        got = client.session("ns", "s1").clear_lane("execute")
        self.assertEqual(2, got.cancelled)
        self.assertEqual(("POST", "/v1/namespaces/ns/sessions/s1/lanes/execute/clear"),
                         (server.requests[0]["method"], server.requests[0]["path"]))

    def test_draining_is_not_retried(self) -> None:
        server, client = self.serve([(503, b'{"code":"Draining","message":"the queue is draining"}',
                                      {"Retry-After": "10"})])
        with self.assertRaises(ApiError) as ctx:
            client.session("ns", "s1").submit_command(agentlane.SubmitRequest(type="bash"))
        self.assertEqual((agentlane.CODE_DRAINING, 503, 10),
                         (ctx.exception.code, ctx.exception.status, ctx.exception.retry_after))
        self.assertEqual(1, len(server.requests))


if __name__ == "__main__":
    unittest.main()
