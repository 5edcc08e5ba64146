// The client against a live manager (started by the Go test test/sdk, over
// TLS with the manager's CA, as non-admin service accounts): commands of
// both handler modes, a handler completing external tasks, a delegation
// carried through a worker session, a message and its turn, the event
// stream, stats, budget, checkpoints, token rotation, the errors of callers
// that may not use the session, and the example runtime serving a turn.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { after, before, describe, test } from "node:test";

import { ApiError, Client, Code, type Command, type Event, type EventStream, type SessionClient } from "../src/index.js";
import { REQUIRE_LIVE, SDK } from "./support.js";

const NAMES = ["URL", "CA_FILE", "TOKEN_FILE", "FORBIDDEN_TOKEN_FILE", "NAMESPACE", "SESSION", "INTERNAL_LANE",
  "EXTERNAL_LANE", "HANDLER_LANE", "HANDLER_TOKEN_FILE", "DELEGATE_LANE"] as const;
const env = process.env;
const missing = NAMES.filter((n) => !env[`AGENTLANE_TEST_${n}`]);
const live = Object.fromEntries(NAMES.map((n) => [n, env[`AGENTLANE_TEST_${n}`] ?? ""])) as Record<(typeof NAMES)[number], string>;

if (missing.length > 0 && REQUIRE_LIVE) {
  test("the live manager's settings", () => {
    assert.fail(`required but missing: AGENTLANE_TEST_${missing[0]} (run \`go test ./test/sdk/\`)`);
  });
}

/** The stream's next event that match accepts; fails after 30s. */
async function nextEvent(stream: EventStream, match: (e: Event) => boolean): Promise<Event> {
  const timer = setTimeout(() => stream.close(), 30_000);
  try {
    for (;;) {
      const r = await stream.next();
      assert.ok(!r.done, "no matching event within 30s, or the stream ended");
      if (match(r.value)) {
        return r.value;
      }
    }
  } finally {
    clearTimeout(timer);
  }
}

/** Polls until check returns a value; fails after limitMs. */
async function eventually<T>(what: string, check: () => Promise<T | undefined>, limitMs = 60_000): Promise<T> {
  const deadline = Date.now() + limitMs;
  for (;;) {
    const got = await check();
    if (got !== undefined) {
      return got;
    }
    assert.ok(Date.now() < deadline, `not ${what} within ${limitMs / 1000}s`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe("live manager", { skip: missing.length > 0 ? `no live manager: AGENTLANE_TEST_${missing[0]} is not set` : false }, () => {
  let client: Client;
  let session: SessionClient;
  const others: Client[] = [];
  const dir = mkdtempSync(path.join(tmpdir(), "agentlane-live-"));

  before(() => {
    client = new Client(live.URL, { tokenFile: live.TOKEN_FILE, caFile: live.CA_FILE });
    session = client.session(live.NAMESPACE, live.SESSION);
  });
  after(() => {
    client.close();
    others.forEach((c) => c.close());
    rmSync(dir, { recursive: true, force: true });
  });

  function other(options: ConstructorParameters<typeof Client>[1]): Client {
    const c = new Client(live.URL, options);
    others.push(c);
    return c;
  }

  async function runInternal(output: unknown): Promise<Command> {
    const cmd = await session.submitCommand({ type: "read", lane: live.INTERNAL_LANE, payload: { path: "README.md" }, wait: "30s" });
    assert.equal(cmd.mode, "Internal");
    assert.ok(cmd.grant, "an Internal command is answered with its grant");
    const done = await session.reportResult(cmd.id, { attempt: cmd.grant.attempt, success: true, output });
    assert.equal(done.state, "Succeeded");
    return done;
  }

  test("server routes", async () => {
    assert.equal(await client.healthz(), "ok");
    assert.match(await client.getOpenAPI(), /operationId: submitCommand/);
  });

  test("an Internal command", async () => {
    const done = await runInternal({ stdout: "hello" });
    const got = await session.getCommand(done.id);
    assert.equal(got.state, "Succeeded");
    assert.deepEqual(got.result?.output, { stdout: "hello" });
    assert.equal(got.labels.tenantId, live.NAMESPACE);
    await assert.rejects(session.reportResult(done.id, { attempt: 1, success: true }), { status: 409 });
  });

  test("runCommand", async () => {
    const seen: number[] = [];
    const done = await session.runCommand({ type: "read", lane: live.INTERNAL_LANE }, (cmd) => {
      seen.push(cmd.grant!.attempt);
      return { result: { success: true, output: { n: seen.length } }, usage: { inputTokens: 3 } };
    });
    assert.deepEqual([done.state, seen, done.result?.output], ["Succeeded", [1], { n: 1 }]);
  });

  test("an External command, a long poll aborted, a cancel", async () => {
    // No worker serves the lane: the command waits until it is cancelled.
    const cmd = await session.submitCommand({ type: "bash", lane: live.EXTERNAL_LANE, payload: { command: "true" }, wait: "1s" });
    assert.equal(cmd.mode, "External");
    await eventually("listed", async () => ((await session.listExternalTasks()).some((t) => t.id === cmd.id) ? true : undefined));
    const ctl = new AbortController();
    const poll = session.getCommand(cmd.id, { wait: "1m", signal: ctl.signal });
    setTimeout(() => ctl.abort(), 200);
    await assert.rejects(poll, { name: "AbortError" });
    assert.equal((await session.cancel({ commandId: cmd.id })).cancelled, 1);
    assert.equal((await session.awaitCommand(cmd.id, { final: true })).state, "Cancelled");
  });

  test("a handler completes an external task", async () => {
    const handler = other({ tokenFile: live.HANDLER_TOKEN_FILE, caFile: live.CA_FILE }).session(live.NAMESPACE, live.SESSION);
    const payload = { text: "one two three", id: randomUUID() };
    const cmd = await session.submitCommand({ type: "wordcount", lane: live.HANDLER_LANE, payload, wait: "10ms" });
    const task = await eventually("dispatched", async () =>
      (await handler.listExternalTasks()).find((t) => t.id === cmd.id && t.attempt === 1 && t.canComplete));
    assert.deepEqual(task.payload, payload);
    await assert.rejects(session.completeExternalTask(cmd.id, { attempt: 1, success: true }), { code: Code.Forbidden, status: 403 },
      "submitting commands does not grant completing them");
    const words = (task.payload as { text: string }).text.split(" ").length;
    const done = await handler.completeExternalTask(cmd.id, { attempt: 1, success: true, result: { words } });
    assert.deepEqual([done.id, done.attempt, done.phase], [cmd.id, 1, "Succeeded"]);
    await assert.rejects(handler.completeExternalTask(cmd.id, { attempt: 1, success: false, error: "late" }),
      { code: Code.AlreadyCompleted, status: 409 });
    const final = await session.awaitCommand(cmd.id, { final: true });
    assert.deepEqual([final.state, final.result?.output], ["Succeeded", { words: 3 }]);
  });

  test("a lane the session handles itself", async () => {
    await assert.rejects(session.setLaneHandler(live.DELEGATE_LANE, "External"), { code: Code.LaneSwitchRefused, status: 403 });
    assert.equal((await session.setLaneHandler(live.INTERNAL_LANE, "External")).mode, "External");
    try {
      const cmd = await session.submitCommand({ type: "read", lane: live.INTERNAL_LANE, payload: { n: 1 }, wait: "10ms" });
      await eventually("completable", async () =>
        (await session.listExternalTasks()).find((t) => t.id === cmd.id && t.canComplete));
      await session.completeExternalTask(cmd.id, { success: true, result: { done: cmd.id } });
      const final = await session.awaitCommand(cmd.id, { final: true });
      assert.deepEqual([final.state, final.result?.output], ["Succeeded", { done: cmd.id }]);
    } finally {
      await session.setLaneHandler(live.INTERNAL_LANE, "Default");
    }
  });

  test("a deadline extension and a handler's heartbeat", async () => {
    const cmd = await session.submitCommand({ type: "read", lane: live.INTERNAL_LANE, wait: "30s" });
    assert.ok(cmd.grant);
    const ext = await session.extendCommand(cmd.id, "1m");
    assert.deepEqual([ext.id, ext.attempt, ext.extensions], [cmd.id, cmd.grant.attempt, 1]);
    assert.ok(Date.parse(ext.deadline) > Date.parse(cmd.grant.deadline), `${ext.deadline} after ${cmd.grant.deadline}`);
    await assert.rejects(session.extendCommand(cmd.id, "1m", { attempt: cmd.grant.attempt + 1 }), { status: 409 });
    await session.reportResult(cmd.id, { attempt: cmd.grant.attempt, success: true });

    const handler = other({ tokenFile: live.HANDLER_TOKEN_FILE, caFile: live.CA_FILE }).session(live.NAMESPACE, live.SESSION);
    const task = await session.submitCommand({ type: "wordcount", lane: live.HANDLER_LANE, payload: { text: "a b" }, wait: "10ms" });
    await eventually("dispatched", async () =>
      (await handler.listExternalTasks()).find((t) => t.id === task.id && t.canComplete));
    const beat = await handler.heartbeatExternalTask(task.id, { progress: "1/2 words" });
    assert.deepEqual([beat.id, beat.attempt, beat.heartbeatTimeoutSeconds], [task.id, 1, 0]);
    await assert.rejects(session.heartbeatExternalTask(task.id), { code: Code.Forbidden, status: 403 });
    await handler.completeExternalTask(task.id, { attempt: 1, success: true, result: { words: 2 } });
    assert.equal((await session.awaitCommand(task.id, { final: true })).state, "Succeeded");
  });

  test("a delegation carried through its worker session", async () => {
    const text = "review change " + randomUUID();
    const d = await session.delegate({ lane: live.DELEGATE_LANE, text, callback: false });
    assert.deepEqual([d.lane, d.producer, d.callback], [live.DELEGATE_LANE, live.SESSION, false]);
    const running = await eventually("given a worker session", async () => {
      const x = await session.getDelegation(d.id);
      return x.workerSession ? x : undefined;
    });
    const worker = client.session(live.NAMESPACE, running.workerSession!);
    const stream = await worker.streamEvents({ runtime: true, history: { types: ["turn"] } });
    let turn: Event;
    try {
      turn = await nextEvent(stream, (e) => e.type === "turn");
    } finally {
      stream.close();
    }
    assert.ok(turn.text?.includes(text));
    await assert.rejects(worker.getDelegation(d.id), { code: Code.CommandNotFound, status: 404 });
    await worker.finishRun(turn.runId!, { answer: "looks good" });
    const done = await eventually("finished", async () => {
      const x = await session.getDelegation(d.id);
      return x.phase === "Succeeded" || x.phase === "Failed" ? x : undefined;
    });
    assert.deepEqual([done.phase, done.answer], ["Succeeded", "looks good"]);
    assert.ok((await session.listDelegations()).some((x) => x.id === d.id));
    await assert.rejects(session.delegate({ lane: live.INTERNAL_LANE, text: "x" }), { code: Code.InvalidRequest, status: 400 });
    await assert.rejects(session.delegate({ lane: live.DELEGATE_LANE, text: "x", id: d.id }), { code: Code.DuplicateCommand, status: 409 });
  });

  test("a message and its turn", async () => {
    const text = "hello " + randomUUID();
    const stream = await session.streamEvents({ fromNow: true, history: { types: ["message_queued", "turn"] } });
    let turn: Event;
    try {
      const posted = await session.postMessage({ text, channel: "test" });
      assert.ok(posted.queued || posted.steered, JSON.stringify(posted));
      const queued = await nextEvent(stream, (e) => e.type === "message_queued");
      assert.deepEqual(queued.messages?.map((m) => m.text), [text]);
      turn = await nextEvent(stream, (e) => e.type === "turn");
      assert.ok(turn.text?.includes(text));
    } finally {
      stream.close();
    }
    await session.finishRun(turn.runId!);
  });

  test("the stream's history, Last-Event-ID and FutureEventID", async () => {
    const completed = { types: ["completed"] };
    const stream = await session.streamEvents({ fromNow: true, history: completed });
    let first: Command, second: Command, firstEv: Event, secondEv: Event;
    try {
      first = await runInternal("first");
      firstEv = await nextEvent(stream, (e) => e.commandId === first.id);
      second = await runInternal("second");
      secondEv = await nextEvent(stream, (e) => e.commandId === second.id);
    } finally {
      stream.close();
    }
    assert.ok(firstEv.id < secondEv.id);
    for (const options of [
      { history: { afterId: firstEv.id, ...completed } },
      { history: { since: secondEv.time, ...completed } },
      { lastEventId: firstEv.id, history: completed },
    ]) {
      const s = await session.streamEvents(options);
      try {
        // The first is skipped; events of other commands (a delegated
        // task's completion lands late) are passed over.
        const ours = (e: Event): boolean => e.commandId === first.id || e.commandId === second.id;
        assert.equal((await nextEvent(s, ours)).commandId, second.id, JSON.stringify(options));
      } finally {
        s.close();
      }
    }
    await assert.rejects(session.streamEvents({ lastEventId: secondEv.id + 1e9 }), { code: Code.FutureEventID, status: 400 });
  });

  test("a silent stream reconnects after the last event", async (t) => {
    // A stream that takes 1s of silence for a dead connection reconnects
    // while nothing happens, resuming with Last-Event-ID: no event comes
    // twice, and the command completed after the reconnects arrives.
    // (Events of other commands, which the server may still be writing
    // for the previous tests, are passed over and shown.)
    const stream = await session.streamEvents({ fromNow: true, history: { types: ["completed"] }, idleTimeoutMs: 1000, minBackoffMs: 50, maxBackoffMs: 50 });
    const seen = new Map<number, string>();
    const see = (e: Event): void => {
      assert.ok(!seen.has(e.id), `event ${e.id} came twice: ${seen.get(e.id)} and ${JSON.stringify(e)}`);
      seen.set(e.id, JSON.stringify(e));
    };
    try {
      const first = await runInternal("before");
      let ev = await nextEvent(stream, (e) => (see(e), e.commandId === first.id));
      const later = new Promise<Command>((resolve, reject) => setTimeout(() => runInternal("after").then(resolve, reject), 3000));
      const after = await later;
      ev = await nextEvent(stream, (e) => (see(e), e.commandId === after.id));
      assert.equal(ev.commandId, after.id);
      assert.ok(stream.connections >= 2, "the silent connection was not replaced");
      if (seen.size > 2) {
        t.diagnostic(`other events: ${[...seen.values()].join(" ")}`);
      }
    } finally {
      stream.close();
    }
  });

  test("stats, dead letters, budget", async () => {
    await runInternal(null);
    const stats = await session.getStats();
    assert.equal(stats.queue, "q");
    assert.ok(stats.session.completed >= 1);
    const lanes = new Map(stats.lanes.map((l) => [l.name, l]));
    assert.equal(lanes.get(live.EXTERNAL_LANE)?.mode, "External");
    assert.ok(Array.isArray(await session.listDeadLetters()));
    const check = await session.checkBudget({ lane: live.INTERNAL_LANE });
    assert.deepEqual([check.decision, check.checked], ["allow", false]);
    const before = (await session.getBudget()).consumed.tokens;
    const consumed = await session.recordUsage({ inputTokens: 10, outputTokens: 5, cost: "0.01" });
    assert.equal(consumed.tokens, before + 15);
  });

  test("checkpoints", async () => {
    const runId = "run-" + randomUUID().slice(0, 8);
    const state = { step: 2, todo: ["a", "b"] };
    const saved = await session.saveCheckpoint({ runId, turn: 1, round: 2, state });
    assert.ok(saved.location.includes(runId));
    const latest = await session.loadLatestCheckpoint();
    assert.deepEqual([latest.runId, latest.state, latest.identity?.tenantId], [runId, state, live.NAMESPACE]);
    assert.deepEqual((await session.loadCheckpoint(runId)).state, state);
    await assert.rejects(session.loadCheckpoint("no-such-run"), { code: Code.CheckpointNotFound, status: 404 });
  });

  test("errors", async () => {
    await assert.rejects(session.submitCommand({ type: "read", lane: "no-such-lane", wait: "1s" }), { code: Code.UnknownLane, status: 400 });
    await assert.rejects(client.session(live.NAMESPACE, "no-such-session").getStats(), { code: Code.SessionNotFound, status: 404 });
  });

  test("a caller that may not use the session is refused everything", async () => {
    const s = other({ tokenFile: live.FORBIDDEN_TOKEN_FILE, caFile: live.CA_FILE }).session(live.NAMESPACE, live.SESSION);
    const calls: Record<string, () => Promise<unknown>> = {
      submit: () => s.submitCommand({ type: "read", lane: live.INTERNAL_LANE }),
      message: () => s.postMessage("hi"),
      stats: () => s.getStats(),
      delegate: () => s.delegate({ lane: live.DELEGATE_LANE, text: "x" }),
      delegations: () => s.listDelegations(),
      events: () => s.streamEvents(),
    };
    for (const [name, call] of Object.entries(calls)) {
      await assert.rejects(call(), (e: unknown) => e instanceof ApiError && e.code === Code.Forbidden && e.status === 403, name);
    }
  });

  test("no token, or a bad one, is Unauthenticated", async () => {
    for (const c of [other({ caFile: live.CA_FILE }), other({ token: "not-a-token", caFile: live.CA_FILE })]) {
      await assert.rejects(c.session(live.NAMESPACE, live.SESSION).getStats(), { code: Code.Unauthenticated, status: 401 });
    }
  });

  test("a rotated token file is read again", async () => {
    const file = path.join(dir, "rotating-token");
    copyFileSync(live.TOKEN_FILE, file);
    const s = other({ tokenFile: file, caFile: live.CA_FILE }).session(live.NAMESPACE, live.SESSION);
    assert.equal((await s.getStats()).queue, "q");
    copyFileSync(live.FORBIDDEN_TOKEN_FILE, file);
    await assert.rejects(s.getStats(), { code: Code.Forbidden });
    copyFileSync(live.TOKEN_FILE, file);
    assert.equal((await s.getStats()).queue, "q");
  });

  test("TLS is verified", async () => {
    // Without the CA the manager's certificate is not trusted; with another
    // CA neither.
    const c = other({ tokenFile: live.TOKEN_FILE });
    await assert.rejects(c.healthz(), (e: NodeJS.ErrnoException) => /CERT|SIGNATURE|ISSUER/.test(e.code ?? ""));
    const pem = readFileSync(live.CA_FILE, "utf8");
    assert.match(pem, /BEGIN CERTIFICATE/);
    assert.equal(await other({ ca: pem }).healthz(), "ok");
  });

  /** Runs examples/<name>.js as a pod of the session would, with tokenFile. */
  function example(name: string, args: string[], tokenFile: string) {
    return spawn(process.execPath, [path.join(SDK, "dist", "examples", `${name}.js`), ...args], {
      env: {
        ...process.env,
        AGENTLANE_SESSION_API_URL: live.URL,
        AGENTLANE_SESSION_API_TOKEN_FILE: tokenFile,
        AGENTLANE_SESSION_API_CA_FILE: live.CA_FILE,
        AGENTLANE_NAMESPACE: live.NAMESPACE,
        AGENTLANE_SESSION: live.SESSION,
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
  }

  test("the example handler completes a task", async () => {
    const cmd = await session.submitCommand({ type: "wordcount", lane: live.HANDLER_LANE, payload: { text: "a b c d" }, wait: "10ms" });
    const child = example("handler", [live.HANDLER_LANE, "--once"], live.HANDLER_TOKEN_FILE);
    let out = "";
    child.stdout.on("data", (b: Buffer) => (out += b.toString()));
    child.stderr.on("data", (b: Buffer) => (out += b.toString()));
    const timer = setTimeout(() => child.kill(), 90_000);
    try {
      const code = await new Promise<number | null>((resolve) => child.on("exit", (c) => resolve(c)));
      assert.equal(code, 0, out);
    } finally {
      clearTimeout(timer);
    }
    assert.match(out, new RegExp(`^completed ${cmd.id} attempt 1 Succeeded$`, "m"), out);
    const final = await session.awaitCommand(cmd.id, { final: true });
    assert.deepEqual([final.state, final.result?.output], ["Succeeded", { words: 4 }]);
  });

  test("the example runtime serves a turn", async () => {
    const child = example("runtime", ["--turns", "1", "--lane", live.INTERNAL_LANE], live.TOKEN_FILE);
    let out = "";
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    const ready = new Promise<void>((resolve) => {
      const onData = (b: Buffer): void => {
        out += b.toString();
        if (/^ready \d+$/m.test(out)) {
          resolve();
        }
      };
      child.stdout.on("data", onData);
      child.stderr.on("data", onData);
    });
    const timer = setTimeout(() => child.kill(), 90_000);
    try {
      await Promise.race([ready, exited]);
      assert.match(out, /^ready \d+$/m, out);
      await session.postMessage({ text: "count these four words", channel: "test" });
      const code = await exited;
      assert.equal(code, 0, out);
    } finally {
      clearTimeout(timer);
      child.kill();
    }
    const m = /^finished (\S+) 4 words$/m.exec(out);
    assert.ok(m, out);
    assert.match(out, /^command \S+ Succeeded$/m);
    assert.deepEqual((await session.loadCheckpoint(m[1]!)).state, { words: 4 });
  });
});
