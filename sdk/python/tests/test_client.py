"""The client's own rules, without the manager: no token over plain http,
the token file read again when it changes, the token kept out of reprs and
errors, the JSON codec, and calls refused by a standby replica sent again
(against a small local server)."""

import datetime
import json
import os
import tempfile
import threading
import unittest
from typing import Any, Dict, List, Tuple

import agentlane
from agentlane import ApiError, Client, TokenFile
from agentlane.client import MAX_NOT_LEADER_WAIT
from agentlane.wire import format_duration, format_time, from_wire, parse_time, to_wire

from .support import ScriptedServer

SECRET = "not-a-real-token-5f1c"


class TransportRulesTest(unittest.TestCase):
    def test_plain_http_is_refused_without_the_insecure_option(self) -> None:
        for kwargs in ({"token": SECRET}, {"token_file": "/nonexistent"}, {}):
            with self.subTest(kwargs=list(kwargs)):
                with self.assertRaises(ValueError) as ctx:
                    Client("http://127.0.0.1:8443", **kwargs)
                self.assertIn("insecure_http", str(ctx.exception))
                self.assertNotIn(SECRET, str(ctx.exception))

    def test_plain_http_with_the_insecure_option(self) -> None:
        Client("http://127.0.0.1:8443", token=SECRET, insecure_http=True)

    def test_bad_base_urls(self) -> None:
        for url in ("ftp://h", "https://", "https://h/?q=1", "https://user:pw@h:1", "h:8443"):
            with self.subTest(url):
                with self.assertRaises(ValueError):
                    Client(url, token=SECRET)

    def test_token_and_token_file_together_are_refused(self) -> None:
        with self.assertRaises(ValueError):
            Client("https://h", token=SECRET, token_file="/t")

    def test_reprs_hide_the_token(self) -> None:
        c = Client("https://h:8443/prefix", token=SECRET)
        for text in (repr(c), repr(c.session("ns", "s")), repr(vars(c))):
            self.assertNotIn(SECRET, text)

    def test_path_parameters_are_escaped(self) -> None:
        from agentlane.client import _expand

        got = _expand("/c/{id}/result", {"id": "../x y"})
        self.assertEqual("/c/..%2Fx%20y/result", got)
        with self.assertRaises(ValueError):
            _expand("/c/{id}", {"id": ""})

    def test_from_env(self) -> None:
        env = {"AGENTLANE_SESSION_API_URL": "https://h:8443", "AGENTLANE_SESSION_API_TOKEN_FILE": "/t",
               "AGENTLANE_NAMESPACE": "ns", "AGENTLANE_SESSION": "s"}
        c = Client.from_env(env)
        self.assertEqual("<TokenFile /t>", repr(c._tokens))
        self.assertEqual(("ns", "s"), (c.session_from_env(env).namespace, c.session_from_env(env).name))
        with self.assertRaises(ValueError):
            Client.from_env({})


class TokenFileTest(unittest.TestCase):
    def setUp(self) -> None:
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "token")

    def tearDown(self) -> None:
        self.dir.cleanup()

    def write(self, text: str) -> None:
        # As the kubelet does: a new file renamed into place.
        tmp = self.path + ".new"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, self.path)

    def test_reads_again_when_the_file_changes(self) -> None:
        self.write("first\n")
        tokens = TokenFile(self.path)
        self.assertEqual("first", tokens.token())
        self.write("second")
        self.assertEqual("second", tokens.token())

    def test_keeps_the_last_token_when_the_file_goes(self) -> None:
        self.write("first")
        tokens = TokenFile(self.path)
        tokens.token()
        os.remove(self.path)
        self.assertEqual("first", tokens.token())
        self.write("")
        self.assertEqual("first", tokens.token())

    def test_fails_without_any_token(self) -> None:
        with self.assertRaises(OSError):
            TokenFile(self.path).token()
        self.write("  \n")
        with self.assertRaises(OSError):
            TokenFile(self.path).token()


class WireTest(unittest.TestCase):
    def test_times(self) -> None:
        utc = datetime.timezone.utc
        cases = {
            "2026-11-24T01:02:03Z": datetime.datetime(2026, 11, 24, 1, 2, 3, tzinfo=utc),
            "2026-11-24T01:02:03.123456789Z": datetime.datetime(2026, 11, 24, 1, 2, 3, 123456, tzinfo=utc),
            "2026-11-24T03:02:03.5+02:00": datetime.datetime(2026, 11, 24, 1, 2, 3, 500000, tzinfo=utc),
            "0001-01-01T00:00:00Z": agentlane.wire.ZERO_TIME,
        }
        for text, want in cases.items():
            with self.subTest(text):
                self.assertEqual(want, parse_time(text))
        with self.assertRaises(ValueError):
            parse_time("yesterday")
        self.assertEqual("2026-11-24T01:02:03.500000Z", format_time(cases["2026-11-24T03:02:03.5+02:00"]))
        self.assertEqual("2026-11-24T01:02:03Z", format_time(datetime.datetime(2026, 11, 24, 1, 2, 3)))

    def test_durations(self) -> None:
        self.assertEqual("30s", format_duration(30))
        self.assertEqual("1500ms", format_duration(1.5))
        self.assertEqual("2s", format_duration(datetime.timedelta(seconds=2)))
        self.assertEqual("1m30s", format_duration("1m30s"))
        with self.assertRaises(ValueError):
            format_duration(-1)

    def test_none_fields_are_left_out(self) -> None:
        req = agentlane.SubmitRequest(type="read", payload={"path": "a"}, run_id="r1")
        self.assertEqual({"type": "read", "payload": {"path": "a"}, "runId": "r1"}, to_wire(req))
        msg = agentlane.Message(text="hi", from_=agentlane.SessionRef(namespace="n", name="s"))
        self.assertEqual({"text": "hi", "from": {"namespace": "n", "name": "s"}}, to_wire(msg))

    def test_decoding(self) -> None:
        cmd = from_wire(agentlane.Command, {
            "id": "c1", "state": "Succeeded", "labels": {"tenantId": "t"}, "attempt": 1,
            "result": {"success": True, "output": {"stdout": "x"}, "exitCode": 0},
            "aFieldOfANewerServer": 1,
        })
        self.assertTrue(cmd.final)
        self.assertEqual("t", cmd.labels.tenant_id)
        self.assertEqual({"stdout": "x"}, cmd.result.output)
        stats = from_wire(agentlane.Stats, {"queue": "q", "lanes": None, "session": {"laneModes": {"a": "External"}}})
        self.assertEqual([], stats.lanes)
        self.assertEqual({"a": "External"}, stats.session.lane_modes)
        with self.assertRaises(TypeError):
            from_wire(agentlane.Command, {"attempt": "one"})

    def test_external_tasks_and_completions(self) -> None:
        # remainingSeconds may come as an integer; a payload is kept as it
        # is; a task not dispatched has the zero deadline.
        tasks = from_wire(agentlane.ExternalTaskList, {"items": [
            {"id": "t1", "attempt": 1, "lane": "h", "commandType": "wc", "createdAt": "2026-11-24T02:00:00Z",
             "deadline": "2026-11-24T02:02:00Z", "payload": {"text": "a b"}, "remainingSeconds": 117.4,
             "timedOut": False},
            {"id": "t2", "attempt": 1, "lane": "h", "commandType": "wc", "createdAt": "2026-11-24T02:00:00Z",
             "deadline": "0001-01-01T00:00:00Z", "payload": [1, 2], "remainingSeconds": 120, "timedOut": False},
        ]}).items
        # canComplete says which tasks the caller may complete; an older
        # server leaves it out.
        listed = from_wire(agentlane.ExternalTaskList, {"items": [
            {"id": "t1", "attempt": 1, "lane": "h", "commandType": "wc", "createdAt": "2026-11-24T02:00:00Z",
             "deadline": "2026-11-24T02:02:00Z", "remainingSeconds": 1, "timedOut": False, "canComplete": True},
        ]}).items
        self.assertTrue(listed[0].can_complete)
        self.assertFalse(tasks[0].can_complete)
        self.assertEqual(({"text": "a b"}, 117.4, True), (tasks[0].payload, tasks[0].remaining_seconds,
                                                          tasks[0].dispatched))
        self.assertEqual(([1, 2], 120.0, False), (tasks[1].payload, tasks[1].remaining_seconds, tasks[1].dispatched))
        self.assertIsInstance(tasks[1].remaining_seconds, float)
        # A result that is falsy but not None is sent; a missing one is not.
        self.assertEqual({"attempt": 2, "success": True, "result": 0},
                         to_wire(agentlane.Completion(attempt=2, success=True, result=0)))
        self.assertEqual({"attempt": 1, "success": False, "error": "e", "exitCode": 2},
                         to_wire(agentlane.Completion(attempt=1, error="e", exit_code=2)))


    def test_superseded_messages_event(self) -> None:
        ev = from_wire(agentlane.Event, {
            "id": 7, "type": "message_dropped", "time": "2026-11-24T01:02:03Z", "runId": "r1",
            "superseded": True, "droppedCount": 3, "messages": [{"id": "m1", "text": "a"}, {"id": "m4", "text": "b"}],
        })
        self.assertEqual((True, 3, ["m1", "m4"]), (ev.superseded, ev.dropped_count, [m.id for m in ev.messages]))

    def test_budget_check_estimate_and_figures(self) -> None:
        req = agentlane.BudgetCheckRequest(command_type="llm", estimated_tokens=300)
        self.assertEqual({"commandType": "llm", "estimatedTokens": 300}, to_wire(req))
        check = from_wire(agentlane.BudgetCheck, {
            "decision": "deny", "checked": True, "reason": "WithinBudget",
            "consumed": {"tokens": 700, "cost": "0.5"},
            "resource": "tokens", "resourceConsumed": "700", "limit": "1000",
        })
        self.assertEqual(("tokens", "700", "1000"), (check.resource, check.resource_consumed, check.limit))
        allow = from_wire(agentlane.BudgetCheck, {"decision": "allow", "checked": True, "reason": "WithinBudget",
                                                  "consumed": {"tokens": 0, "cost": "0"}})
        self.assertIsNone(allow.resource)

class ApiErrorTest(unittest.TestCase):
    def test_error_body(self) -> None:
        err = ApiError.from_reply(429, b'{"code":"RateLimited","message":"slow down"}', "3")
        self.assertEqual(("RateLimited", "slow down", 429, 3), (err.code, err.message, err.status, err.retry_after))

    def test_other_body(self) -> None:
        err = ApiError.from_reply(502, b"<html>bad gateway</html>", None)
        self.assertEqual(("Internal", 502, None), (err.code, err.status, err.retry_after))
        self.assertIn("bad gateway", err.message)


NOT_LEADER = b'{"code":"NotLeader","message":"this manager replica is a standby"}'
DELEGATION = json.dumps({"id": "t1", "lane": "review", "phase": "Queued", "producer": "s1", "callback": True,
                         "createdAt": "2026-11-24T02:00:00Z"}).encode()


class NotLeaderRetryTest(unittest.TestCase):
    def serve(self, script: List[Any], **kwargs: Any) -> Tuple[ScriptedServer, Client, List[float]]:
        server = ScriptedServer(script)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        client = Client("http://127.0.0.1:%d" % server.server_address[1], token="tok", insecure_http=True, **kwargs)
        sleeps: List[float] = []
        client._sleep = sleeps.append  # type: ignore[method-assign]
        return server, client, sleeps

    def test_a_write_is_sent_again_after_retry_after(self) -> None:
        server, client, sleeps = self.serve([
            (503, NOT_LEADER, {"Retry-After": "2"}),
            (503, NOT_LEADER),
            (202, DELEGATION),
        ])
        d = client.session("ns", "s1").delegate(agentlane.DelegationRequest(lane="review", text="look"))
        self.assertEqual(("t1", agentlane.DELEGATION_QUEUED, "s1", False), (d.id, d.phase, d.producer, d.final))
        self.assertEqual([2.0, 1.0], sleeps, "Retry-After, then 1s when the reply has none")
        self.assertEqual(3, len(server.requests))
        for req in server.requests:
            self.assertEqual(("POST", "/v1/namespaces/ns/sessions/s1/delegations", "Bearer tok"),
                             (req["method"], req["path"], req["authorization"]))
            self.assertEqual({"lane": "review", "text": "look"}, json.loads(req["body"]))

    def test_a_delegation_carries_its_timeout_and_attempt(self) -> None:
        reply = json.dumps({"id": "t2", "lane": "review", "phase": "DeadLettered", "producer": "s1", "callback": True,
                            "timeout": "10m0s", "attempt": 3}).encode()
        server, client, _ = self.serve([(202, reply)])
        d = client.session("ns", "s1").delegate(agentlane.DelegationRequest(lane="review", text="look", timeout="10m"))
        self.assertEqual({"lane": "review", "text": "look", "timeout": "10m"}, json.loads(server.requests[0]["body"]))
        self.assertEqual(("10m0s", 3, True), (d.timeout, d.attempt, d.final), "a dead-lettered delegation is final")

    def test_retries_are_bounded(self) -> None:
        server, client, sleeps = self.serve([(503, NOT_LEADER, {"Retry-After": "3600"})], not_leader_retries=2)
        with self.assertRaises(ApiError) as ctx:
            client.session("ns", "s1").get_stats()
        self.assertEqual((agentlane.CODE_NOT_LEADER, 503, 3600),
                         (ctx.exception.code, ctx.exception.status, ctx.exception.retry_after))
        self.assertEqual(3, len(server.requests), "the call and two retries")
        self.assertEqual([MAX_NOT_LEADER_WAIT] * 2, sleeps, "a long Retry-After is capped")

    def test_off_and_other_errors(self) -> None:
        cases = {
            "retries off": ([(503, NOT_LEADER)], {"not_leader_retries": 0}, agentlane.CODE_NOT_LEADER),
            "SessionNotReady": ([(503, b'{"code":"SessionNotReady","message":"later"}', {"Retry-After": "1"})], {},
                                agentlane.CODE_SESSION_NOT_READY),
            "RateLimited": ([(429, b'{"code":"RateLimited","message":"slow"}', {"Retry-After": "1"})], {},
                            agentlane.CODE_RATE_LIMITED),
        }
        for name, (script, kwargs, code) in cases.items():
            with self.subTest(name):
                server, client, sleeps = self.serve(script, **kwargs)
                with self.assertRaises(ApiError) as ctx:
                    client.session("ns", "s1").finish_run("r1", agentlane.RunOutcome(answer="done"))
                self.assertEqual(code, ctx.exception.code)
                self.assertEqual((1, []), (len(server.requests), sleeps))
                self.assertEqual({"answer": "done"}, json.loads(server.requests[0]["body"]))

    def test_list_delegations_follows_every_page(self) -> None:
        def page(ids: List[str], cont: str = "") -> bytes:
            body: Dict[str, Any] = {"items": [dict(json.loads(DELEGATION), id=i) for i in ids]}
            if cont:
                body["continue"] = cont
            return json.dumps(body).encode()
        server, client, _ = self.serve([(200, page(["t1", "t2"], "100.t2")), (200, page(["t3"]))])
        got = client.session("ns", "s1").list_delegations()
        self.assertEqual(["t1", "t2", "t3"], [d.id for d in got])
        self.assertEqual(["/v1/namespaces/ns/sessions/s1/delegations",
                          "/v1/namespaces/ns/sessions/s1/delegations?continue=100.t2"],
                         [req["path"] for req in server.requests])

    def test_get_assignment_waits_and_tells_204_from_an_assignment(self) -> None:
        reply = json.dumps({"namespace": "ns", "session": "s1", "tenantId": "t", "resumeRunId": "r7"}).encode()
        server, client, _ = self.serve([(204, b""), (200, reply)])
        self.assertIsNone(client.get_assignment("ns", wait=60))
        got = client.get_assignment("ns")
        self.assertEqual(agentlane.Assignment(namespace="ns", session="s1", tenant_id="t", resume_run_id="r7"), got)
        self.assertEqual([("GET", "/v1/namespaces/ns/runtime/assignment?wait=60s", "Bearer tok"),
                          ("GET", "/v1/namespaces/ns/runtime/assignment", "Bearer tok")],
                         [(r["method"], r["path"], r["authorization"]) for r in server.requests])

    def test_negative_retries_are_refused(self) -> None:
        with self.assertRaises(ValueError):
            Client("https://h", not_leader_retries=-1)


if __name__ == "__main__":
    unittest.main()
