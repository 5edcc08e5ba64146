"""The client against a live manager (started by the Go test test/sdk):
commands of both handler modes, a handler completing external tasks, a
delegation carried through a worker session, a message and its turn, the
event stream with history filtering, stats, budget, checkpoints, and the
errors of callers that may not use the session."""

import datetime
import os
import ssl
import subprocess
import sys
import threading
import time
import unittest
import uuid
from typing import Callable, List

import agentlane
from agentlane import (ApiError, CancelRequest, Client, Completion, Delegation, DelegationRequest, Event,
                       ExternalTask, History, ReportRequest, RunOutcome, SubmitRequest)

from .support import Live

ROOT_OF_SDK = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


class LiveTest(unittest.TestCase):
    live: Live
    client: Client
    session: agentlane.SessionClient

    @classmethod
    def setUpClass(cls) -> None:
        cls.live = Live()
        cls.client = Client(cls.live.url, token_file=cls.live.token_file, ca_file=cls.live.ca_file)
        cls.session = cls.client.session(cls.live.namespace, cls.live.session)

    def next_event(self, stream: agentlane.EventStream, match: Callable[[Event], bool]) -> Event:
        """The stream's next event that match accepts; fails after 30s."""
        deadline = time.monotonic() + 30
        for ev in stream:
            if match(ev):
                return ev
            self.assertLess(time.monotonic(), deadline, "no matching event within 30s")
        self.fail("the stream ended")

    def run_internal(self, output: object) -> agentlane.Command:
        """Submits an Internal command and reports its success."""
        cmd = self.session.submit_command(SubmitRequest(type="read", lane=self.live.internal_lane,
                                                        payload={"path": "README.md"}, wait="30s"))
        self.assertEqual(agentlane.MODE_INTERNAL, cmd.mode)
        self.assertIsNotNone(cmd.grant, "an Internal command is answered with its grant")
        done = self.session.report_result(cmd.id, ReportRequest(attempt=cmd.grant.attempt, success=True,
                                                                output=output))
        self.assertEqual(agentlane.STATE_SUCCEEDED, done.state)
        return done

    def test_server_routes(self) -> None:
        self.assertEqual("ok", self.client.healthz())
        self.assertIn("operationId: submitCommand", self.client.get_openapi())

    def test_internal_command(self) -> None:
        done = self.run_internal({"stdout": "hello"})
        got = self.session.get_command(done.id)
        self.assertEqual(agentlane.STATE_SUCCEEDED, got.state)
        self.assertEqual({"stdout": "hello"}, got.result.output)
        self.assertEqual(self.live.namespace, got.labels.tenant_id)
        with self.assertRaises(ApiError) as ctx:
            self.session.report_result(done.id, ReportRequest(attempt=1, success=True))
        self.assertEqual(409, ctx.exception.status)

    def test_run_command(self) -> None:
        seen: List[int] = []

        def attempt(cmd: agentlane.Command):
            seen.append(cmd.grant.attempt)
            return agentlane.Result(success=True, output={"n": len(seen)}), agentlane.Usage(input_tokens=3)

        done = self.session.run_command(SubmitRequest(type="read", lane=self.live.internal_lane), attempt)
        self.assertEqual((agentlane.STATE_SUCCEEDED, [1], {"n": 1}), (done.state, seen, done.result.output))

    def test_external_command(self) -> None:
        # No worker serves the lane: the command waits as an ExternalTask
        # until it is cancelled.
        cmd = self.session.submit_command(SubmitRequest(type="bash", lane=self.live.external_lane,
                                                        payload={"command": "true"}, wait="1s"))
        self.assertEqual((agentlane.MODE_EXTERNAL, False), (cmd.mode, cmd.final))
        pending: List[str] = []
        for _ in range(300):
            pending = [task.id for task in self.session.list_external_tasks()]
            if cmd.id in pending:
                break
            time.sleep(0.1)
        self.assertIn(cmd.id, pending)
        self.assertEqual(1, self.session.cancel(CancelRequest(command_id=cmd.id)).cancelled)
        self.assertEqual(agentlane.STATE_CANCELLED, self.session.await_command(cmd.id, final=True).state)

    def dispatched_task(self, handler: agentlane.SessionClient, command_id: str, attempt: int) -> ExternalTask:
        """Attempt attempt of command_id as the handler lists it once it is
        dispatched; fails after 30s."""
        deadline = time.monotonic() + 30
        while True:
            for task in handler.list_external_tasks():
                if task.id == command_id and task.attempt == attempt and task.dispatched:
                    return task
            self.assertLess(time.monotonic(), deadline, "attempt %d of %s was not dispatched within 30s"
                            % (attempt, command_id))
            time.sleep(0.1)

    def test_handler_completes_external_task(self) -> None:
        # A command of the Handler lane is listed to a handler with its
        # payload; a failed completion is retried as attempt 2, after which
        # attempt 1 is stale, and only the first completion of attempt 2
        # counts.
        handler = Client(self.live.url, token_file=self.live.handler_token_file,
                         ca_file=self.live.ca_file).session(self.live.namespace, self.live.session)
        payload = {"text": "one two three", "id": uuid.uuid4().hex}
        cmd = self.session.submit_command(SubmitRequest(type="wordcount", lane=self.live.handler_lane,
                                                        payload=payload, wait="10ms"))
        self.assertEqual((agentlane.MODE_EXTERNAL, False), (cmd.mode, cmd.final))
        task = self.dispatched_task(handler, cmd.id, 1)
        self.assertEqual((self.live.handler_lane, "wordcount", payload, False),
                         (task.lane, task.command_type, task.payload, task.timed_out))
        self.assertTrue(0 < task.remaining_seconds <= 120, task.remaining_seconds)

        with self.assertRaises(ApiError) as ctx:
            self.session.complete_external_task(cmd.id, Completion(attempt=1, success=True))
        self.assertEqual((agentlane.CODE_FORBIDDEN, 403), (ctx.exception.code, ctx.exception.status),
                         "submitting commands does not grant completing them")

        failed = handler.complete_external_task(cmd.id, Completion(attempt=1, success=False, error="disk full",
                                                                   exit_code=2))
        self.assertEqual((cmd.id, 1, "Running"), (failed.id, failed.attempt, failed.phase))
        self.dispatched_task(handler, cmd.id, 2)
        with self.assertRaises(ApiError) as ctx:
            handler.complete_external_task(cmd.id, Completion(attempt=1, success=True, result={"words": 0}))
        self.assertEqual((agentlane.CODE_STALE_ATTEMPT, 409), (ctx.exception.code, ctx.exception.status))

        words = len(task.payload["text"].split())
        done = handler.complete_external_task(cmd.id, Completion(attempt=2, success=True, result={"words": words}))
        self.assertEqual((cmd.id, 2, "Succeeded"), (done.id, done.attempt, done.phase))
        with self.assertRaises(ApiError) as ctx:
            handler.complete_external_task(cmd.id, Completion(attempt=2, success=False, error="late"))
        self.assertEqual((agentlane.CODE_ALREADY_COMPLETED, 409), (ctx.exception.code, ctx.exception.status))

        final = self.session.await_command(cmd.id, final=True)
        self.assertEqual((agentlane.STATE_SUCCEEDED, 2, {"words": 3}),
                         (final.state, final.attempt, final.result.output))
        self.assertNotIn(cmd.id, [t.id for t in handler.list_external_tasks()])

    def await_delegation(self, task_id: str, done: Callable[[Delegation], bool], what: str) -> Delegation:
        """The delegated task task_id once done says so; fails after 60s."""
        deadline = time.monotonic() + 60
        while True:
            d = self.session.get_delegation(task_id)
            if done(d):
                return d
            self.assertFalse(d.final and not done(d), "%s ended as %s: %s" % (task_id, d.phase, d.error))
            self.assertLess(time.monotonic(), deadline, "%s: not %s within 60s (%s)" % (task_id, what, d))
            time.sleep(0.2)

    def test_delegation(self) -> None:
        # The session delegates to the Delegate lane; the test plays the
        # worker session's runtime: it takes the first turn and finishes
        # the run with an answer, which becomes the task's result. No
        # callback, so that no result message starts a turn of the session
        # the other tests use.
        text = "review change " + uuid.uuid4().hex
        d = self.session.delegate(DelegationRequest(lane=self.live.delegate_lane, text=text, callback=False))
        self.assertEqual((self.live.delegate_lane, self.live.session, False, False),
                         (d.lane, d.producer, d.callback, d.final))
        self.assertIn(d.phase, (agentlane.DELEGATION_QUEUED, agentlane.DELEGATION_RUNNING))
        self.assertIsNotNone(d.created_at)

        running = self.await_delegation(d.id, lambda x: bool(x.worker_session), "given a worker session")
        self.assertEqual(agentlane.DELEGATION_RUNNING, running.phase)
        worker = self.client.session(self.live.namespace, running.worker_session)
        with worker.stream_events(runtime=True, history=History(types=frozenset([agentlane.EVENT_TURN]))) as stream:
            turn = self.next_event(stream, lambda e: e.type == agentlane.EVENT_TURN)
        self.assertIn(text, turn.text)
        with self.assertRaises(ApiError) as ctx:
            worker.get_delegation(d.id)
        self.assertEqual((agentlane.CODE_COMMAND_NOT_FOUND, 404), (ctx.exception.code, ctx.exception.status),
                         "a task is shown only to the session that delegated it")
        worker.finish_run(turn.run_id, RunOutcome(answer="looks good"))

        done = self.await_delegation(d.id, lambda x: x.final, "finished")
        self.assertEqual((agentlane.DELEGATION_SUCCEEDED, "looks good", None, running.worker_session, False),
                         (done.phase, done.answer, done.error, done.worker_session, bool(done.delivered)))
        self.assertIsNotNone(done.finished_at)
        listed = {x.id: x for x in self.session.list_delegations()}
        self.assertEqual((agentlane.DELEGATION_SUCCEEDED, self.live.session), (listed[d.id].phase, listed[d.id].producer))

        bad = {
            "not a Delegate lane": (DelegationRequest(lane=self.live.internal_lane, text="x"),
                                    agentlane.CODE_INVALID_REQUEST, 400),
            "no text": (DelegationRequest(lane=self.live.delegate_lane, text="  "), agentlane.CODE_INVALID_REQUEST, 400),
            "unknown lane": (DelegationRequest(lane="no-such-lane", text="x"), agentlane.CODE_UNKNOWN_LANE, 400),
            "bad id": (DelegationRequest(lane=self.live.delegate_lane, text="x", id="Not_A/Name"),
                       agentlane.CODE_INVALID_REQUEST, 400),
            "id in use": (DelegationRequest(lane=self.live.delegate_lane, text="x", id=d.id),
                          agentlane.CODE_DUPLICATE_COMMAND, 409),
        }
        for name, (request, code, status) in bad.items():
            with self.subTest(name):
                with self.assertRaises(ApiError) as ctx:
                    self.session.delegate(request)
                self.assertEqual((code, status), (ctx.exception.code, ctx.exception.status))
        with self.assertRaises(ApiError) as ctx:
            self.session.get_delegation("no-such-task")
        self.assertEqual((agentlane.CODE_COMMAND_NOT_FOUND, 404), (ctx.exception.code, ctx.exception.status))

    def test_message_and_turn(self) -> None:
        text = "hello " + uuid.uuid4().hex
        with self.session.stream_events(from_now=True, history=History(types=frozenset(["message_queued", "turn"]))) as stream:
            posted = self.session.post_message(agentlane.Message(text=text, channel="test"))
            self.assertTrue(posted.queued or posted.steered, posted)
            queued = self.next_event(stream, lambda e: e.type == agentlane.EVENT_MESSAGE_QUEUED)
            self.assertEqual([text], [m.text for m in queued.messages])
            turn = self.next_event(stream, lambda e: e.type == agentlane.EVENT_TURN)
            self.assertIn(text, turn.text)
        self.session.finish_run(turn.run_id)

    def test_stream_history(self) -> None:
        with self.session.stream_events(from_now=True,
                                        history=History(types=frozenset([agentlane.EVENT_COMPLETED]))) as stream:
            first = self.run_internal("first")
            first_ev = self.next_event(stream, lambda e: e.command_id == first.id)
            second = self.run_internal("second")
            second_ev = self.next_event(stream, lambda e: e.command_id == second.id)
        self.assertLess(first_ev.id, second_ev.id)
        completed = frozenset([agentlane.EVENT_COMPLETED])
        # From the session's start, skipping what came up to the first.
        with self.session.stream_events(history=History(after_id=first_ev.id, types=completed)) as stream:
            self.assertEqual(second.id, next(stream).command_id)
        # From the session's start, skipping what is older than the second.
        with self.session.stream_events(history=History(since=second_ev.time, types=completed)) as stream:
            self.assertEqual(second.id, next(stream).command_id)
        # The server resumes after the first (Last-Event-ID).
        with self.session.stream_events(last_event_id=first_ev.id, history=History(types=completed)) as stream:
            self.assertEqual(second.id, next(stream).command_id)
        # An id from the future is refused.
        with self.assertRaises(ApiError) as ctx:
            self.session.stream_events(last_event_id=second_ev.id + 10**9)
        self.assertEqual((agentlane.CODE_FUTURE_EVENT_ID, 400), (ctx.exception.code, ctx.exception.status))

    def test_stream_reconnects_after_the_last_event(self) -> None:
        # A stream that takes 1s of silence for a dead connection reconnects
        # while nothing happens, resuming with Last-Event-ID: the command
        # completed after the reconnects arrives once, the one before it
        # does not come again.
        completed = History(types=frozenset([agentlane.EVENT_COMPLETED]))
        with self.session.stream_events(from_now=True, history=completed, idle_timeout=1.0,
                                        min_backoff=0.05, max_backoff=0.05) as stream:
            first = self.run_internal("before")
            self.assertEqual(first.id, self.next_event(stream, lambda e: True).command_id)
            timer = threading.Timer(3.0, lambda: seconds.append(self.run_internal("after")))
            seconds: List[agentlane.Command] = []
            timer.start()
            try:
                ev = self.next_event(stream, lambda e: True)
            finally:
                timer.join()
            self.assertEqual(seconds[0].id, ev.command_id)
            self.assertGreaterEqual(stream.connections, 2, "the silent connection was not replaced")

    def test_stats(self) -> None:
        self.run_internal(None)
        stats = self.session.get_stats()
        self.assertEqual("q", stats.queue)
        self.assertGreaterEqual(stats.session.completed, 1)
        lanes = {lane.name: lane for lane in stats.lanes}
        self.assertEqual(agentlane.MODE_EXTERNAL, lanes[self.live.external_lane].mode)
        self.assertGreaterEqual(lanes[self.live.internal_lane].completed, 1)
        self.assertTrue(stats.queue_mode.mode)
        self.assertIsInstance(self.session.list_dead_letters(), list)

    def test_budget(self) -> None:
        check = self.session.check_budget(agentlane.BudgetCheckRequest(lane=self.live.internal_lane))
        self.assertEqual((agentlane.BUDGET_ALLOW, False), (check.decision, check.checked))
        before = self.session.get_budget().consumed.tokens
        consumed = self.session.record_usage(agentlane.Usage(input_tokens=10, output_tokens=5, cost="0.01"))
        self.assertEqual(before + 15, consumed.tokens)
        self.assertFalse(self.session.get_budget().exhausted)

    def test_checkpoints(self) -> None:
        run_id = "run-" + uuid.uuid4().hex[:8]
        state = {"step": 2, "todo": ["a", "b"]}
        saved = self.session.save_checkpoint(agentlane.Checkpoint(run_id=run_id, turn=1, round=2, state=state))
        self.assertIn(run_id, saved.location)
        latest = self.session.load_latest_checkpoint()
        self.assertEqual((run_id, state), (latest.run_id, latest.state))
        self.assertEqual(self.live.namespace, latest.identity.tenant_id, "the session's identity fills the checkpoint's")
        self.assertIsInstance(latest.time, datetime.datetime)
        self.assertEqual(state, self.session.load_checkpoint(run_id).state)
        with self.assertRaises(ApiError) as ctx:
            self.session.load_checkpoint("no-such-run")
        self.assertEqual((agentlane.CODE_CHECKPOINT_NOT_FOUND, 404), (ctx.exception.code, ctx.exception.status))

    def test_errors(self) -> None:
        with self.assertRaises(ApiError) as ctx:
            self.session.submit_command(SubmitRequest(type="read", lane="no-such-lane", wait="1s"))
        self.assertEqual((agentlane.CODE_UNKNOWN_LANE, 400), (ctx.exception.code, ctx.exception.status))
        with self.assertRaises(ApiError) as ctx:
            self.client.session(self.live.namespace, "no-such-session").get_stats()
        self.assertEqual((agentlane.CODE_SESSION_NOT_FOUND, 404), (ctx.exception.code, ctx.exception.status))

    def test_forbidden(self) -> None:
        outsider = Client(self.live.url, token_file=self.live.forbidden_token_file, ca_file=self.live.ca_file)
        session = outsider.session(self.live.namespace, self.live.session)
        calls = {
            "submit": lambda: session.submit_command(SubmitRequest(type="read", lane=self.live.internal_lane)),
            "message": lambda: session.post_message("hi"),
            "stats": session.get_stats,
            "delegate": lambda: session.delegate(DelegationRequest(lane=self.live.delegate_lane, text="x")),
            "delegations": session.list_delegations,
            "events": session.stream_events,
        }
        for name, call in calls.items():
            with self.subTest(name):
                with self.assertRaises(ApiError) as ctx:
                    call()
                self.assertEqual((agentlane.CODE_FORBIDDEN, 403), (ctx.exception.code, ctx.exception.status))

    def test_unauthenticated(self) -> None:
        for client in (Client(self.live.url, ca_file=self.live.ca_file),
                       Client(self.live.url, token="not-a-token", ca_file=self.live.ca_file)):
            with self.assertRaises(ApiError) as ctx:
                client.session(self.live.namespace, self.live.session).get_stats()
            self.assertEqual((agentlane.CODE_UNAUTHENTICATED, 401), (ctx.exception.code, ctx.exception.status))

    def test_quickstart_example(self) -> None:
        # examples/quickstart.py, as a runtime pod would run it.
        env = dict(os.environ, AGENTLANE_SESSION_API_URL=self.live.url,
                   AGENTLANE_SESSION_API_TOKEN_FILE=self.live.token_file,
                   AGENTLANE_SESSION_API_CA_FILE=self.live.ca_file,
                   AGENTLANE_NAMESPACE=self.live.namespace, AGENTLANE_SESSION=self.live.session,
                   PYTHONPATH=ROOT_OF_SDK)
        out = subprocess.run([sys.executable, os.path.join(ROOT_OF_SDK, "examples", "quickstart.py")], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
        text = out.stdout.decode()
        self.assertEqual(0, out.returncode, text)
        self.assertRegex(text, r"command \S+ Succeeded")
        self.assertRegex(text, r"event \d+ completed \S+")

    def test_handler_example(self) -> None:
        # examples/handler.py, with the handler's token, completes a
        # wordcount command the runtime submitted.
        cmd = self.session.submit_command(SubmitRequest(type="wordcount", lane=self.live.handler_lane,
                                                        payload={"text": "a b c d"}, wait="10ms"))
        env = dict(os.environ, AGENTLANE_SESSION_API_URL=self.live.url,
                   AGENTLANE_SESSION_API_TOKEN_FILE=self.live.handler_token_file,
                   AGENTLANE_SESSION_API_CA_FILE=self.live.ca_file,
                   AGENTLANE_NAMESPACE=self.live.namespace, AGENTLANE_SESSION=self.live.session,
                   PYTHONPATH=ROOT_OF_SDK)
        out = subprocess.run([sys.executable, os.path.join(ROOT_OF_SDK, "examples", "handler.py"),
                              self.live.handler_lane, "--once"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
        text = out.stdout.decode()
        self.assertEqual(0, out.returncode, text)
        self.assertIn("completed %s attempt 1 Succeeded" % cmd.id, text)
        final = self.session.await_command(cmd.id, final=True)
        self.assertEqual((agentlane.STATE_SUCCEEDED, {"words": 4}), (final.state, final.result.output))

    def test_tls_is_verified(self) -> None:
        # Without the CA the server's certificate is not trusted.
        with self.assertRaises(ssl.SSLError):
            Client(self.live.url, token_file=self.live.token_file).healthz()


if __name__ == "__main__":
    unittest.main()
