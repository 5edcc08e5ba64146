"""Runs one tool call through an agentlane session and prints its events.

In a runtime pod the operator sets everything this reads:
AGENTLANE_SESSION_API_URL, AGENTLANE_SESSION_API_TOKEN_FILE and
AGENTLANE_SESSION_API_CA_FILE (the server and how to trust it), and
AGENTLANE_NAMESPACE and AGENTLANE_SESSION (the session).
"""

import agentlane
from agentlane import History, Result, SubmitRequest

client = agentlane.Client.from_env()
session = client.session_from_env()

# Follow what happens from now on; skip the scheduler's intermediate steps.
history = History(skip_types=frozenset(["submitted", "started"]))
with session.stream_events(from_now=True, history=history) as events:
    # An Internal command: this process runs it when the lane grants a slot.
    def read_file(cmd: agentlane.Command):
        return Result(success=True, output={"text": "contents of " + cmd.id}), None

    cmd = session.run_command(SubmitRequest(type="read", payload={"path": "README.md"}), read_file)
    print("command", cmd.id, cmd.state, cmd.result.output if cmd.result else None)

    for event in events:
        print("event", event.id, event.type, event.command_id or "")
        if event.command_id == cmd.id and event.terminal:
            break

stats = session.get_stats()
print("session", stats.queue, "completed:", stats.session.completed)
