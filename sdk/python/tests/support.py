"""What the tests share: the OpenAPI document and the live server's settings."""

import json
import os
import shutil
import subprocess
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List

# The repository's root, where `go run ./hack/openapi-json` runs.
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def require(reason: str) -> None:
    """Skips the calling test for want of reason, or fails it when
    AGENTLANE_SDK_REQUIRE_LIVE is set (as the Go test that runs these sets
    it), so that a missing setting cannot pass for a success."""
    if os.environ.get("AGENTLANE_SDK_REQUIRE_LIVE"):
        raise AssertionError("required but missing: " + reason)
    raise unittest.SkipTest(reason)


_openapi = None


class ScriptedServer(ThreadingHTTPServer):
    """A small local server that answers each connection with the next
    entry of script, (status, body) or (status, body, headers), the last
    one again once the script runs out, then closes it (a dropped event
    stream). requests records what the client sent: the path, the headers
    (lower-cased) and the body under "body"."""

    daemon_threads = True

    def __init__(self, script: List[Any]) -> None:
        super().__init__(("127.0.0.1", 0), _ScriptedHandler)
        self.script = script
        self.requests: List[Dict[str, str]] = []


class _ScriptedHandler(BaseHTTPRequestHandler):
    server: ScriptedServer

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        n = len(self.server.requests)
        length = int(self.headers.get("Content-Length") or 0)
        body_in = self.rfile.read(length).decode("utf-8") if length else ""
        self.server.requests.append({"method": self.command, "path": self.path, "body": body_in,
                                     **{k.lower(): v for k, v in self.headers.items()}})
        status, body, *rest = self.server.script[min(n, len(self.server.script) - 1)]
        headers = {"Content-Type": "text/event-stream" if status == 200 else "application/json"}
        headers.update(rest[0] if rest else {})
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET
    do_PUT = do_GET


def openapi() -> Dict[str, Any]:
    """The OpenAPI document as JSON: the file AGENTLANE_OPENAPI_JSON names,
    else what `go run ./hack/openapi-json` prints."""
    global _openapi
    if _openapi is None:
        path = os.environ.get("AGENTLANE_OPENAPI_JSON")
        if path:
            with open(path, encoding="utf-8") as f:
                _openapi = json.load(f)
        elif shutil.which("go"):
            out = subprocess.run(["go", "run", "./hack/openapi-json"], cwd=ROOT, check=True,
                                 stdout=subprocess.PIPE, timeout=600).stdout
            _openapi = json.loads(out)
        else:
            require("AGENTLANE_OPENAPI_JSON is not set and go is not installed")
    return _openapi


class Live:
    """The live manager's settings, from the environment the Go test
    (test/sdk) sets."""

    def __init__(self) -> None:
        env = os.environ
        names = ["URL", "CA_FILE", "TOKEN_FILE", "FORBIDDEN_TOKEN_FILE", "NAMESPACE", "SESSION",
                 "INTERNAL_LANE", "EXTERNAL_LANE", "HANDLER_LANE", "HANDLER_TOKEN_FILE", "DELEGATE_LANE"]
        missing = [n for n in names if not env.get("AGENTLANE_TEST_" + n)]
        if missing:
            require("no live manager: AGENTLANE_TEST_%s is not set (run `go test ./test/sdk/`)" % missing[0])
        self.url = env["AGENTLANE_TEST_URL"]
        self.ca_file = env["AGENTLANE_TEST_CA_FILE"]
        self.token_file = env["AGENTLANE_TEST_TOKEN_FILE"]
        self.forbidden_token_file = env["AGENTLANE_TEST_FORBIDDEN_TOKEN_FILE"]
        self.namespace = env["AGENTLANE_TEST_NAMESPACE"]
        self.session = env["AGENTLANE_TEST_SESSION"]
        self.internal_lane = env["AGENTLANE_TEST_INTERNAL_LANE"]
        self.external_lane = env["AGENTLANE_TEST_EXTERNAL_LANE"]
        # An External lane served by handlers, and the token of a handler
        # allowed to complete its tasks.
        self.handler_lane = env["AGENTLANE_TEST_HANDLER_LANE"]
        self.handler_token_file = env["AGENTLANE_TEST_HANDLER_TOKEN_FILE"]
        # A Delegate lane whose worker sessions no runtime serves.
        self.delegate_lane = env["AGENTLANE_TEST_DELEGATE_LANE"]
