"""A handler of a lane whose externalTarget.type is Handler: it counts the
words of each wordcount command the session's runtime submits there.

    python3 handler.py LANE [--once]

It reads the same variables as a runtime (AGENTLANE_SESSION_API_URL,
_TOKEN_FILE, _CA_FILE, AGENTLANE_NAMESPACE, AGENTLANE_SESSION), but its token
must be a service account's allowed get and update on the session's
agentsessions/api. With --once it stops after the first poll that completed
a task.
"""

import sys
import time

import agentlane
from agentlane import ApiError, Completion, ExternalTask

# Refusals that mean the attempt is not this handler's to finish any more
# (another handler completed it, it timed out and was retried, or it waits
# for a retry): skip it; the next poll lists what is current.
SKIP = (agentlane.CODE_STALE_ATTEMPT, agentlane.CODE_ALREADY_COMPLETED, agentlane.CODE_NOT_RUNNING)


def count_words(task: ExternalTask) -> Completion:
    # The payload is whatever the runtime submitted: check it before use.
    text = task.payload.get("text") if isinstance(task.payload, dict) else None
    if not isinstance(text, str):
        return Completion(attempt=task.attempt, success=False, error="payload.text must be a string")
    return Completion(attempt=task.attempt, success=True, result={"words": len(text.split())})


def serve_once(session: agentlane.SessionClient, lane: str) -> int:
    """Completes the dispatched wordcount attempts of lane; returns how many."""
    completed = 0
    for task in session.list_external_tasks():
        if task.lane != lane or task.command_type != "wordcount" or not task.dispatched or task.timed_out:
            continue
        try:
            done = session.complete_external_task(task.id, count_words(task))
        except ApiError as err:
            if err.code in SKIP:
                continue
            raise
        print("completed", done.id, "attempt", done.attempt, done.phase, flush=True)
        completed += 1
    return completed


def main() -> None:
    lane, once = sys.argv[1], "--once" in sys.argv[2:]
    session = agentlane.Client.from_env().session_from_env()
    while True:
        if serve_once(session, lane) and once:
            return
        time.sleep(1)


if __name__ == "__main__":
    main()
