// An agent runtime that serves its session's turns.
//
//     node dist/examples/runtime.js [--turns N] [--lane LANE]
//
// It follows the session's events as the session's runtime (from now on),
// and for each turn runs one tool call through the session's lanes (an
// Internal command it executes itself: counting the words of the turn's
// prompt), saves a checkpoint, and ends the run with its answer. With
// --turns it stops after N turns; SIGINT or SIGTERM stop it at once.
//
// In a runtime pod the operator sets everything it reads:
// AGENTLANE_SESSION_API_URL, AGENTLANE_SESSION_API_TOKEN_FILE and
// AGENTLANE_SESSION_API_CA_FILE (the server and how to trust it), and
// AGENTLANE_NAMESPACE and AGENTLANE_SESSION (the session). In an
// application, import from "@agentlane/client" instead of ../src.

import { parseArgs } from "node:util";

import { ApiError, Client, type Event } from "../src/index.js";

const { values } = parseArgs({
  options: { turns: { type: "string" }, lane: { type: "string" } },
});
const maxTurns = values.turns ? Number.parseInt(values.turns, 10) : Infinity;

const stop = new AbortController();
for (const sig of ["SIGINT", "SIGTERM"] as const) {
  process.once(sig, () => stop.abort(new Error(sig)));
}

const client = Client.fromEnv();
const session = client.sessionFromEnv();

async function serveTurn(ev: Event): Promise<void> {
  const runId = ev.runId ?? "";
  const text = ev.text ?? "";
  console.log(`turn ${runId}`);
  let words = 0;
  // One tool call, scheduled by the session's lanes: this process runs it
  // once its lane grants a slot, and reports the result.
  const cmd = await session.runCommand(
    { type: "wordcount", lane: values.lane, runId, payload: { chars: text.length }, wait: "30s" },
    () => {
      // The tool: counts the words of the turn's prompt, which a user
      // wrote: it is only measured, never run.
      words = text.split(/\s+/).filter((w) => w !== "").length;
      return { result: { success: true, output: { words } } };
    },
    { signal: stop.signal },
  );
  console.log(`command ${cmd.id} ${cmd.state}`);
  // What a resumed runtime would continue from.
  await session.saveCheckpoint({ runId, turn: 1, round: 1, state: { words } }, { signal: stop.signal });
  const answer = cmd.state === "Succeeded" ? `${words} words` : undefined;
  await session.finishRun(runId, answer ? { answer } : { error: `the tool call ended ${cmd.state}` }, { signal: stop.signal });
  console.log(`finished ${runId} ${answer ?? cmd.state}`);
}

async function main(): Promise<void> {
  const events = await session.streamEvents({
    fromNow: true,
    runtime: true,
    history: { types: ["turn", "steer", "abort"] },
    signal: stop.signal,
  });
  console.log(`ready ${events.lastEventId}`);
  let turns = 0;
  try {
    for await (const ev of events) {
      if (ev.type === "steer") {
        // A real runtime injects these messages into the run under way.
        console.log(`steer ${ev.runId ?? ""} ${ev.messages?.length ?? 0}`);
        continue;
      }
      if (ev.type === "abort") {
        console.log(`abort ${ev.runId ?? ""}`);
        continue;
      }
      await serveTurn(ev);
      if (++turns >= maxTurns) {
        break;
      }
    }
  } finally {
    events.close();
    client.close();
  }
}

main().catch((err: unknown) => {
  if (stop.signal.aborted) {
    return;
  }
  console.error(err instanceof ApiError ? `agentlane: ${err.message}` : err);
  process.exitCode = 1;
});
