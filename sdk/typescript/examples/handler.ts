// A handler of a lane whose externalTarget.type is Handler: it counts the
// words of each wordcount command the session's runtime submits there.
//
//     node dist/examples/handler.js LANE [--once]
//
// It reads the same variables as a runtime (AGENTLANE_SESSION_API_URL,
// _TOKEN_FILE, _CA_FILE, AGENTLANE_NAMESPACE, AGENTLANE_SESSION), but its
// token must be a service account's allowed get and update on the session's
// agentsessions/api. With --once it stops after the first poll that
// completed a task. In an application, import from "@agentlane/client"
// instead of ../src.

import { setTimeout as delay } from "node:timers/promises";
import { parseArgs } from "node:util";

import { ApiError, Client, Code, type Completion, type ExternalTask, type SessionClient } from "../src/index.js";

// Refusals that mean the attempt is not this handler's to finish any more
// (another handler completed it, it timed out and was retried, or it waits
// for a retry): skip it; the next poll lists what is current.
const SKIP = new Set<string>([Code.StaleAttempt, Code.AlreadyCompleted, Code.NotRunning]);

function countWords(task: ExternalTask): Completion {
  // The payload is whatever the runtime submitted: check it before use.
  const text = (task.payload as { text?: unknown } | null | undefined)?.text;
  if (typeof text !== "string") {
    return { attempt: task.attempt, success: false, error: "payload.text must be a string" };
  }
  return { attempt: task.attempt, success: true, result: { words: text.split(/\s+/).filter((w) => w !== "").length } };
}

/** Completes the dispatched wordcount attempts of lane; resolves to how many. */
async function serveOnce(session: SessionClient, lane: string, signal: AbortSignal): Promise<number> {
  let completed = 0;
  for (const task of await session.listExternalTasks({ signal })) {
    if (task.lane !== lane || task.commandType !== "wordcount" || !task.canComplete) {
      continue;
    }
    try {
      // A long task would post heartbeats while it works; this one is quick.
      await session.heartbeatExternalTask(task.id, { attempt: task.attempt, progress: "counting", signal });
      const done = await session.completeExternalTask(task.id, countWords(task), { signal });
      console.log(`completed ${done.id} attempt ${done.attempt} ${done.phase}`);
      completed++;
    } catch (err) {
      if (err instanceof ApiError && SKIP.has(err.code)) {
        continue;
      }
      throw err;
    }
  }
  return completed;
}

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({ options: { once: { type: "boolean" } }, allowPositionals: true });
  const lane = positionals[0];
  if (!lane) {
    throw new Error("usage: handler.js LANE [--once]");
  }
  const stop = new AbortController();
  for (const sig of ["SIGINT", "SIGTERM"] as const) {
    process.once(sig, () => stop.abort(new Error(sig)));
  }
  const client = Client.fromEnv();
  const session = client.sessionFromEnv();
  try {
    while (!stop.signal.aborted) {
      if ((await serveOnce(session, lane, stop.signal)) > 0 && values.once) {
        return;
      }
      await delay(1000, undefined, { signal: stop.signal });
    }
  } finally {
    client.close();
  }
}

main().catch((err: unknown) => {
  if (err instanceof Error && (err.message === "SIGINT" || err.message === "SIGTERM" || err.name === "AbortError")) {
    return;
  }
  console.error(err instanceof ApiError ? `agentlane: ${err.message}` : err);
  process.exitCode = 1;
});
