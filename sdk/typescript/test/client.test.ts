// The client against a scripted local server: what each call sends, how
// replies and errors are read, NotLeader retries, tokens, AbortSignal.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { after, afterEach, describe, test } from "node:test";
import { inspect } from "node:util";

import { ApiError, Client, Code, SessionClient, StaticToken, TokenFile, formatDuration, waitMs } from "../src/index.js";
import { ScriptedServer, errorBody } from "./support.js";

const command = (over: Record<string, unknown> = {}): string =>
  JSON.stringify({ id: "c1", session: "s", type: "read", lane: "query", mode: "Internal", state: "Queued", labels: {}, attempt: 0, ...over });

let servers: ScriptedServer[] = [];
afterEach(async () => {
  await Promise.all(servers.map((s) => s.close()));
  servers = [];
});

async function serve(...script: Parameters<typeof ScriptedServer.start>[0]): Promise<ScriptedServer> {
  const s = await ScriptedServer.start(script);
  servers.push(s);
  return s;
}

describe("base URL and options", () => {
  test("plain http is refused unless asked for", () => {
    assert.throws(() => new Client("http://127.0.0.1:1", { token: "t" }), /plain http/);
    assert.doesNotThrow(() => new Client("http://127.0.0.1:1", { token: "t", insecureHttp: true }));
  });
  test("malformed URLs, credentials and conflicting options are refused", () => {
    for (const url of ["ftp://h", "https://", "https://h/?q=1", "https://h/#f", "not a url"]) {
      assert.throws(() => new Client(url), /want http\(s\)/, url);
    }
    assert.throws(() => new Client("https://u:p@h"), /credentials/);
    assert.throws(() => new Client("https://h", { token: "a", tokenFile: "/x" }), /one of/);
    assert.throws(() => new Client("https://h", { notLeaderRetries: -1 }), /notLeaderRetries/);
    assert.throws(() => new Client("https://h", { token: " " }), /empty/);
    assert.throws(() => new Client("https://h", { token: "a\r\nX-Evil: 1" }), /line break/);
  });
  test("fromEnv reads the runtime pod's variables", () => {
    const c = Client.fromEnv({ AGENTLANE_SESSION_API_URL: "https://h:8443/base/" });
    assert.equal(c.baseUrl, "https://h:8443/base");
    assert.throws(() => Client.fromEnv({}), /AGENTLANE_SESSION_API_URL/);
    assert.throws(() => c.sessionFromEnv({ AGENTLANE_NAMESPACE: "ns" }), /AGENTLANE_SESSION/);
    assert.equal(c.sessionFromEnv({ AGENTLANE_NAMESPACE: "ns", AGENTLANE_SESSION: "s" }).name, "s");
  });
  test("the token never shows", () => {
    const c = new Client("https://h", { token: "sekret-token" });
    const s = c.session("ns", "s");
    for (const shown of [inspect(c), inspect(s), JSON.stringify({ c }), inspect(new StaticToken("sekret-token")),
      JSON.stringify(new StaticToken("sekret-token"))]) {
      assert.ok(!shown.includes("sekret"), shown);
    }
  });
  test("durations", () => {
    assert.equal(formatDuration(1.5), "1500ms");
    assert.equal(formatDuration(30), "30s");
    assert.equal(formatDuration("1m"), "1m");
    assert.throws(() => formatDuration(-1));
    assert.equal(waitMs("1m30s", 0), 90_000);
    assert.equal(waitMs("250ms", 0), 250);
    assert.equal(waitMs("junk", 7), 7);
    assert.equal(waitMs(2, 0), 2000);
  });
});

describe("calls", () => {
  test("each call sends its method, path, query and body, and decodes the reply", async () => {
    const srv = await serve({ status: 200, body: command({ state: "Running", grant: { attempt: 1, deadline: "2026-01-01T00:00:00Z" } }) });
    const c = new Client(srv.url + "/prefix/", { token: "tok", insecureHttp: true });
    const s = c.session("team a", "s/1");
    const cmd = await s.submitCommand({ type: "read", payload: { path: "x" }, wait: "2s" });
    assert.equal(cmd.grant?.attempt, 1);
    await s.getCommand("c/1", { wait: 1.5 });
    await s.clearLane("lane");
    const [submit, get, clear] = srv.requests;
    assert.equal(submit!.method, "POST");
    assert.equal(submit!.path, "/prefix/v1/namespaces/team%20a/sessions/s%2F1/commands");
    assert.deepEqual(JSON.parse(submit!.body), { type: "read", payload: { path: "x" }, wait: "2s" });
    assert.equal(submit!.headers["content-type"], "application/json");
    assert.equal(submit!.headers.authorization, "Bearer tok");
    assert.equal(get!.path, "/prefix/v1/namespaces/team%20a/sessions/s%2F1/commands/c%2F1?wait=1500ms");
    assert.equal(get!.method, "GET");
    assert.equal(clear!.path, "/prefix/v1/namespaces/team%20a/sessions/s%2F1/lanes/lane/clear");
    assert.equal(clear!.body, "");
    c.close();
  });

  test("an empty path parameter is refused before anything is sent", async () => {
    const c = new Client("http://127.0.0.1:1", { insecureHttp: true });
    await assert.rejects(c.session("ns", "s").getCommand(""), /id is empty/);
  });

  test("healthz and getOpenAPI send no token", async () => {
    const srv = await serve({ status: 200, body: "ok", headers: { "Content-Type": "text/plain" } });
    const c = new Client(srv.url, { token: "tok", insecureHttp: true });
    assert.equal(await c.healthz(), "ok");
    assert.equal(srv.requests[0]!.headers.authorization, undefined);
  });

  test("setLaneHandler puts the mode", async () => {
    const srv = await serve({ status: 200, body: JSON.stringify({ lane: "tools", mode: "External" }) });
    const s = new Client(srv.url, { insecureHttp: true }).session("ns", "s");
    assert.deepEqual(await s.setLaneHandler("tools", "External"), { lane: "tools", mode: "External" });
    assert.equal(srv.requests[0]!.method, "PUT");
    assert.match(srv.requests[0]!.path, /\/sessions\/s\/lanes\/tools\/handler$/);
    assert.deepEqual(JSON.parse(srv.requests[0]!.body), { mode: "External" });
  });

  test("heartbeats and extensions", async () => {
    const srv = await serve(
      { status: 200, body: JSON.stringify({ id: "c1", attempt: 2, recorded: true, heartbeatTimeoutSeconds: 30 }) },
      { status: 200, body: JSON.stringify({ id: "c1", attempt: 1, recorded: false, heartbeatTimeoutSeconds: 0 }) },
      { status: 200, body: JSON.stringify({ id: "c1", attempt: 1, deadline: "2026-01-01T00:05:00Z", extensions: 1 }) },
      { status: 409, body: errorBody("ExtendRefused") },
    );
    const s = new Client(srv.url, { insecureHttp: true }).session("ns", "s");
    assert.equal((await s.heartbeatExternalTask("c1", { attempt: 2, progress: "42/100 files" })).recorded, true);
    await s.heartbeatExternalTask("c1");
    assert.equal((await s.extendCommand("c1", 300)).extensions, 1);
    await assert.rejects(s.extendCommand("c1", "24h", { attempt: 1 }), { code: Code.ExtendRefused, status: 409 });
    assert.deepEqual(srv.requests.map((r) => [r.method, r.path.replace(/^.*sessions\/s/, ""), JSON.parse(r.body)]), [
      ["POST", "/external/c1/heartbeat", { attempt: 2, progress: "42/100 files" }],
      ["POST", "/external/c1/heartbeat", {}],
      ["POST", "/commands/c1/extend", { by: "300s" }],
      ["POST", "/commands/c1/extend", { attempt: 1, by: "24h" }],
    ]);
  });

  test("getAssignment waits as asked and tells a 204 from an assignment", async () => {
    const srv = await serve(
      { status: 204 },
      { status: 200, body: JSON.stringify({ namespace: "team a", session: "s1", resumeRunId: "r7" }) },
    );
    const c = new Client(srv.url, { token: "pod-token", insecureHttp: true });
    assert.equal(await c.getAssignment("team a", { wait: 60 }), undefined);
    assert.deepEqual(await c.getAssignment("team a"), { namespace: "team a", session: "s1", resumeRunId: "r7" });
    assert.equal(srv.requests[0]!.method, "GET");
    assert.equal(srv.requests[0]!.path, "/v1/namespaces/team%20a/runtime/assignment?wait=60s");
    assert.equal(srv.requests[0]!.headers.authorization, "Bearer pod-token");
    assert.equal(srv.requests[1]!.path, "/v1/namespaces/team%20a/runtime/assignment");
  });

  test("listDelegations reads every page", async () => {
    const srv = await serve(
      { status: 200, body: JSON.stringify({ items: [{ id: "a" }], continue: "next page" }) },
      { status: 200, body: JSON.stringify({ items: [{ id: "b" }] }) },
    );
    const s = new Client(srv.url, { insecureHttp: true }).session("ns", "s");
    const got = await s.listDelegations();
    assert.deepEqual(got.map((d) => d.id), ["a", "b"]);
    assert.match(srv.requests[1]!.path, /\/delegations\?continue=next\+page$/);
  });
});

describe("errors", () => {
  test("an error reply is an ApiError with its code, status and Retry-After", async () => {
    const srv = await serve({ status: 429, body: errorBody("RateLimited", "slow down"), headers: { "Retry-After": "3" } });
    const s = new Client(srv.url, { insecureHttp: true }).session("ns", "s");
    const err = await s.getStats().then(() => assert.fail("no error"), (e: unknown) => e);
    assert.ok(err instanceof ApiError);
    assert.equal(err.code, Code.RateLimited);
    assert.equal(err.status, 429);
    assert.equal(err.detail, "slow down");
    assert.equal(err.retryAfter, 3);
    assert.equal(err.message, "RateLimited (429): slow down");
  });

  test("a reply that is not an Error becomes an Internal one, bounded", async () => {
    const srv = await serve({ status: 502, body: "<html>bad gateway</html>" + "x".repeat(5000), headers: { "Content-Type": "text/html" } });
    const s = new Client(srv.url, { insecureHttp: true }).session("ns", "s");
    const err = (await s.getStats().catch((e: unknown) => e)) as ApiError;
    assert.equal(err.code, Code.Internal);
    assert.equal(err.status, 502);
    assert.ok(err.detail.startsWith("<html>bad gateway"));
    assert.equal(err.detail.length, 1024);
    assert.equal(err.retryAfter, undefined);
  });

  test("a reply over 64 MiB is refused", async () => {
    const srv = await serve({ status: 200, body: "{" + " ".repeat(64 << 20) + "}" });
    const s = new Client(srv.url, { insecureHttp: true }).session("ns", "s");
    await assert.rejects(s.getStats(), /getStats: the reply is over 67108864 bytes/);
  });

  test("an error body over 64 KiB is not read past it", async () => {
    const srv = await serve({ status: 500, body: errorBody("Internal", "y".repeat(200 << 10)) });
    const s = new Client(srv.url, { insecureHttp: true }).session("ns", "s");
    const err = (await s.getStats().catch((e: unknown) => e)) as ApiError;
    assert.equal(err.code, Code.Internal);
    assert.ok(err.detail.length <= 1024);
  });
});

describe("NotLeader", () => {
  const waits: number[] = [];
  const realSleep = Client.sleep;
  Client.sleep = (ms: number) => {
    waits.push(ms);
    return Promise.resolve();
  };
  after(() => {
    Client.sleep = realSleep;
  });
  afterEach(() => {
    waits.length = 0;
  });

  test("a call refused by a standby is sent again after Retry-After", async () => {
    const srv = await serve(
      { status: 503, body: errorBody("NotLeader"), headers: { "Retry-After": "3" } },
      { status: 503, body: errorBody("NotLeader") },
      { status: 503, body: errorBody("NotLeader"), headers: { "Retry-After": "600" } },
      { status: 200, body: command({ state: "Succeeded" }) },
    );
    const s = new Client(srv.url, { insecureHttp: true }).session("ns", "s");
    const cmd = await s.reportResult("c1", { attempt: 1, success: true });
    assert.equal(cmd.state, "Succeeded");
    assert.deepEqual(waits, [3000, 1000, 10_000]);
    assert.equal(srv.requests.length, 4);
    assert.ok(srv.requests.every((r) => r.body === '{"attempt":1,"success":true}'));
  });

  test("retries are bounded, and off with notLeaderRetries 0", async () => {
    const srv = await serve({ status: 503, body: errorBody("NotLeader"), headers: { "Retry-After": "1" } });
    const s = new Client(srv.url, { insecureHttp: true, notLeaderRetries: 2 }).session("ns", "s");
    await assert.rejects(s.getStats(), (e: unknown) => e instanceof ApiError && e.code === "NotLeader");
    assert.equal(srv.requests.length, 3);
    const off = new Client(srv.url, { insecureHttp: true, notLeaderRetries: 0 }).session("ns", "s");
    await assert.rejects(off.getStats(), (e: unknown) => e instanceof ApiError && e.code === "NotLeader");
    assert.equal(srv.requests.length, 4);
  });

  test("other 503s are the caller's to handle", async () => {
    const srv = await serve({ status: 503, body: errorBody("SessionNotReady"), headers: { "Retry-After": "1" } });
    const s = new Client(srv.url, { insecureHttp: true }).session("ns", "s");
    await assert.rejects(s.getStats(), (e: unknown) => e instanceof ApiError && e.code === "SessionNotReady");
    assert.equal(srv.requests.length, 1);
    assert.deepEqual(waits, []);
  });

  test("an abort ends the wait before a retry", async () => {
    const srv = await serve({ status: 503, body: errorBody("NotLeader"), headers: { "Retry-After": "5" } });
    Client.sleep = realSleep;
    try {
      const ctl = new AbortController();
      const s = new Client(srv.url, { insecureHttp: true }).session("ns", "s");
      const call = s.getStats({ signal: ctl.signal });
      await srv.until(() => srv.requests.length === 1);
      ctl.abort(new Error("stop"));
      await assert.rejects(call, /stop/);
      assert.equal(srv.requests.length, 1);
    } finally {
      Client.sleep = (ms: number) => {
        waits.push(ms);
        return Promise.resolve();
      };
    }
  });
});

describe("tokens", () => {
  const dir = mkdtempSync(path.join(tmpdir(), "agentlane-ts-"));
  after(() => rmSync(dir, { recursive: true, force: true }));

  test("a token file is read again when it changes, and its last token kept when it breaks", async () => {
    const file = path.join(dir, "token");
    const srv = await serve({ status: 200, body: "{}" });
    const s = new Client(srv.url, { tokenFile: file, insecureHttp: true }).session("ns", "s");
    await assert.rejects(s.getStats(), (e: Error) => e.message.includes(file) && !(e instanceof ApiError));
    assert.equal(srv.requests.length, 0);
    writeFileSync(file, "first\n");
    await s.getStats();
    writeFileSync(file, "second-token");
    await s.getStats();
    writeFileSync(file, "");
    await s.getStats();
    writeFileSync(file, "x".repeat(100 << 10));
    await s.getStats();
    rmSync(file);
    await s.getStats();
    assert.deepEqual(srv.requests.map((r) => r.headers.authorization), [
      "Bearer first", "Bearer second-token", "Bearer second-token", "Bearer second-token", "Bearer second-token",
    ]);
    writeFileSync(file, "x".repeat(100 << 10));
    const big = new Client(srv.url, { tokenFile: file, insecureHttp: true }).session("ns", "s");
    await assert.rejects(big.getStats(), /over 65536 bytes/);
  });

  test("concurrent calls share one read", async () => {
    const file = path.join(dir, "token2");
    writeFileSync(file, "shared");
    const tf = new TokenFile(file);
    const got = await Promise.all([tf.token(), tf.token(), tf.token()]);
    assert.deepEqual(got, ["shared", "shared", "shared"]);
    assert.ok(!inspect(tf).includes("shared"));
  });
});

describe("AbortSignal and timeouts", () => {
  test("an aborted call rejects with the signal's reason and closes its connection", async () => {
    const srv = await serve({ status: 200, noReply: true });
    const s = new Client(srv.url, { insecureHttp: true }).session("ns", "s");
    const ctl = new AbortController();
    const call = s.submitCommand({ type: "read", wait: "1m" }, { signal: ctl.signal });
    await srv.until(() => srv.requests.length === 1);
    ctl.abort();
    await assert.rejects(call, { name: "AbortError" });
    await srv.until(() => srv.requests[0]!.closed);
  });

  test("an aborted signal sends nothing", async () => {
    const srv = await serve({ status: 200, body: "{}" });
    const s = new Client(srv.url, { insecureHttp: true }).session("ns", "s");
    await assert.rejects(s.getStats({ signal: AbortSignal.abort(new Error("before")) }), /before/);
    assert.equal(srv.requests.length, 0);
  });

  test("a call without a reply times out", async () => {
    const srv = await serve({ status: 200, noReply: true });
    const s = new Client(srv.url, { insecureHttp: true, timeoutMs: 100 }).session("ns", "s");
    await assert.rejects(s.getStats(), { name: "TimeoutError" });
    await srv.until(() => srv.requests[0]!.closed);
  });
});

describe("runCommand", () => {
  const realSleep = SessionClient.sleep;
  SessionClient.sleep = () => Promise.resolve();
  after(() => {
    SessionClient.sleep = realSleep;
  });

  test("reports each new grant's result; a stale report waits for the retry's grant", async () => {
    const grant = (attempt: number) => ({ attempt, deadline: "2026-01-01T00:00:00Z" });
    const srv = await serve(
      { status: 200, body: command({ state: "Running", attempt: 1, grant: grant(1) }) }, // submit
      { status: 409, body: errorBody("StaleAttempt") }, // report 1
      { status: 200, body: command({ state: "Retrying", attempt: 1 }) }, // poll
      { status: 200, body: command({ state: "Running", attempt: 2, grant: grant(2) }) }, // poll
      { status: 200, body: command({ state: "Succeeded", attempt: 2, result: { success: true, output: 2 } }) }, // report 2
    );
    const s = new Client(srv.url, { insecureHttp: true }).session("ns", "s");
    const seen: number[] = [];
    const done = await s.runCommand({ type: "read" }, (cmd) => {
      seen.push(cmd.grant!.attempt);
      return { result: { success: true, output: cmd.grant!.attempt }, usage: { inputTokens: 3 } };
    });
    assert.equal(done.state, "Succeeded");
    assert.deepEqual(seen, [1, 2]);
    assert.deepEqual(srv.requests.map((r) => r.method + " " + r.path.replace(/^.*sessions\/s/, "")), [
      "POST /commands", "POST /commands/c1/result", "GET /commands/c1?wait=30s", "GET /commands/c1?wait=30s",
      "POST /commands/c1/result",
    ]);
    assert.deepEqual(JSON.parse(srv.requests[4]!.body), { attempt: 2, success: true, output: 2, usage: { inputTokens: 3 } });
  });

  test("commands submitted from fn name the command as their parent", async () => {
    const grant = { attempt: 1, deadline: "2026-01-01T00:00:00Z" };
    const srv = await serve(
      { status: 200, body: command({ id: "parent", state: "Running", attempt: 1, grant }) }, // submit
      { status: 200, body: command({ id: "child" }) }, // the child's submit
      { status: 200, body: command({ id: "other" }) }, // a child naming another parent
      { status: 200, body: command({ id: "parent", state: "Succeeded", attempt: 1 }) }, // report
      { status: 200, body: command({ id: "after" }) }, // a submit after runCommand
    );
    const s = new Client(srv.url, { insecureHttp: true }).session("ns", "s");
    await s.runCommand({ type: "plan" }, async () => {
      await new Promise((r) => setImmediate(r)); // the parent survives an await
      await s.submitCommand({ type: "read", wait: "1s" });
      await s.submitCommand({ type: "read", parentId: "explicit" });
      return { result: { success: true } };
    });
    await s.submitCommand({ type: "read" });
    const bodies = srv.requests.map((r) => JSON.parse(r.body || "{}") as Record<string, unknown>);
    assert.deepEqual(bodies.map((b) => b.parentId), [undefined, "parent", "explicit", undefined, undefined]);
  });

  test("other refusals of a report reject", async () => {
    const srv = await serve(
      { status: 200, body: command({ state: "Running", attempt: 1, grant: { attempt: 1, deadline: "2026-01-01T00:00:00Z" } }) },
      { status: 403, body: errorBody("Forbidden") },
    );
    const s = new Client(srv.url, { insecureHttp: true }).session("ns", "s");
    await assert.rejects(s.runCommand({ type: "read" }, () => ({ result: { success: true } })), { code: "Forbidden" });
  });
});
