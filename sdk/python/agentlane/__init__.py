"""agentlane: a client of the agentlane Session API, standard library only.

    from agentlane import Client, SubmitRequest

    client = Client.from_env()  # AGENTLANE_SESSION_API_URL, _TOKEN_FILE, _CA_FILE
    session = client.session("team-a", "s1")
    cmd = session.submit_command(SubmitRequest(type="read", payload={"path": "README.md"}))

See sdk/python/README.md.
"""

from .auth import StaticToken, TokenFile, TokenSource
from .client import OPERATIONS, Client, SessionClient
from .errors import ERROR_CODES, ApiError, EventStreamError
from .errors import *  # noqa: F401,F403  the CODE_* constants
from .events import EventStream, Frame, FrameReader, History
from .types import *  # noqa: F401,F403  the dataclasses and their constants
from .wire import format_duration, format_time, from_wire, parse_time, to_wire

__version__ = "0.3.0"
