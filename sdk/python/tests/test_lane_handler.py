"""The A3S SDK flow of the client: a session switches a lane to External and
completes those tasks itself; submits made from run_command's fn name their
parent. Against a small local server."""

import json
import threading
import unittest
from typing import Any, List, Optional, Tuple

import agentlane
from agentlane import ApiError, Client

from .support import ScriptedServer


class LaneHandlerTest(unittest.TestCase):
    def serve(self, script: List[Any]) -> Tuple[ScriptedServer, Client]:
        server = ScriptedServer(script)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        client = Client("http://127.0.0.1:%d" % server.server_address[1], token="tok", insecure_http=True)
        client._sleep = lambda _: None  # type: ignore[method-assign]
        return server, client

    def test_set_lane_handler(self) -> None:
        server, client = self.serve([(200, b'{"lane":"execute","mode":"External"}')])
        got = client.session("ns", "s1").set_lane_handler("execute", agentlane.LANE_HANDLER_EXTERNAL)
        self.assertEqual(agentlane.LaneHandler(lane="execute", mode="External"), got)
        req = server.requests[0]
        self.assertEqual(("PUT", "/v1/namespaces/ns/sessions/s1/lanes/execute/handler"), (req["method"], req["path"]))
        self.assertEqual({"mode": "External"}, json.loads(req["body"]))

    def test_switch_refused(self) -> None:
        _, client = self.serve([(403, b'{"code":"LaneSwitchRefused","message":"no"}')])
        with self.assertRaises(ApiError) as ctx:
            client.session("ns", "s1").set_lane_handler("sandboxed", agentlane.LANE_HANDLER_EXTERNAL)
        self.assertEqual(agentlane.CODE_LANE_SWITCH_REFUSED, ctx.exception.code)

    def test_complete_with_the_result_alone(self) -> None:
        server, client = self.serve([(200, b'{"id":"b1","attempt":1,"phase":"Succeeded"}')])
        got = client.session("ns", "s1").complete_external_task("b1", {"exit": 0})
        self.assertEqual(1, got.attempt)
        self.assertEqual({"success": True, "result": {"exit": 0}}, json.loads(server.requests[0]["body"]),
                         "no attempt: the current one")

    def test_run_command_names_the_parent(self) -> None:
        grant = b'{"id":"c1","session":"s1","type":"cron-job","lane":"cron","mode":"Internal","state":"Running",' \
                b'"attempt":1,"grant":{"attempt":1,"deadline":"2030-01-01T00:00:00Z"}}'
        done = b'{"id":"c1","session":"s1","type":"cron-job","lane":"cron","mode":"Internal","state":"Succeeded","attempt":1}'
        refused = b'{"code":"IsolatedLane","message":"isolated"}'
        server, client = self.serve([(200, grant), (403, refused), (200, done)])
        s = client.session("ns", "s1")
        err: List[Optional[ApiError]] = [None]

        def fn(cmd: agentlane.Command) -> Tuple[agentlane.Result, None]:
            try:
                s.submit_command(agentlane.SubmitRequest(type="bash"))
            except ApiError as e:
                err[0] = e
            return agentlane.Result(success=True), None

        s.run_command(agentlane.SubmitRequest(type="cron-job", lane="cron"), fn)
        self.assertIsNotNone(err[0])
        self.assertEqual(agentlane.CODE_ISOLATED_LANE, err[0].code)  # type: ignore[union-attr]
        self.assertNotIn("parentId", json.loads(server.requests[0]["body"]))
        self.assertEqual("c1", json.loads(server.requests[1]["body"])["parentId"])


if __name__ == "__main__":
    unittest.main()
