// The SSE frame reader, and the event stream against a scripted server:
// reconnects with Last-Event-ID, from=now, the error event, history
// filters, idle connections, close and abort.

import assert from "node:assert/strict";
import { getEventListeners } from "node:events";
import { afterEach, describe, test } from "node:test";

import { ApiError, Client, EventStreamError, FrameReader, type Event, type EventStream, type Frame } from "../src/index.js";
import { ScriptedServer, errorBody, frames } from "./support.js";

async function* chunked(text: string | Uint8Array, size: number): AsyncGenerator<Uint8Array> {
  const bytes = typeof text === "string" ? new TextEncoder().encode(text) : text;
  for (let i = 0; i < bytes.length; i += size) {
    yield bytes.subarray(i, i + size);
  }
}

async function readAll(text: string, size: number, max?: number): Promise<Frame[]> {
  const r = new FrameReader(chunked(text, size), max);
  const out: Frame[] = [];
  for (let f = await r.next(); f !== undefined; f = await r.next()) {
    out.push(f);
  }
  return out;
}

describe("FrameReader", () => {
  const stream =
    ": keepalive\r\n\r\n" +
    "id: 1\r\nevent: turn\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\n" +
    "id:2\revent:x\rdata:é ü\r\r" + // CR line ends, no space after the colon
    "id: 3\n\n" + // an id-only frame
    "event: lonely\n\n" + // neither id nor data: nothing, and the name does not carry over
    "data\n\n" + // a field without a colon: empty data
    "id: 4\ndata: unfinished";
  const want: Frame[] = [
    { id: "1", event: "turn", data: '{"a":\n1}' },
    { id: "2", event: "x", data: "é ü" },
    { id: "3", event: "", data: undefined },
    { id: undefined, event: "", data: "" },
  ];

  for (const size of [1, 2, 3, 7, 1000]) {
    test(`splits frames in chunks of ${size} bytes`, async () => {
      assert.deepEqual(await readAll(stream, size), want);
    });
  }

  test("a line or an event over the bound ends the stream", async () => {
    await assert.rejects(readAll("data: " + "x".repeat(100) + "\n\n", 10, 64), EventStreamError);
    await assert.rejects(readAll("data: " + "x".repeat(100), 1000, 64), EventStreamError);
    await assert.rejects(readAll("data: 0123456789\n".repeat(10) + "\n", 5, 64), EventStreamError);
    assert.equal((await readAll("data: " + "x".repeat(50) + "\n\n", 7, 64)).length, 1);
  });
});

describe("EventStream", () => {
  let servers: ScriptedServer[] = [];
  const streams: EventStream[] = [];
  afterEach(async () => {
    streams.splice(0).forEach((s) => s.close());
    await Promise.all(servers.map((s) => s.close()));
    servers = [];
  });

  async function open(script: Parameters<typeof ScriptedServer.start>[0], options: Parameters<ReturnType<Client["session"]>["streamEvents"]>[0] = {}) {
    const srv = await ScriptedServer.start(script);
    servers.push(srv);
    const session = new Client(srv.url, { insecureHttp: true, token: "tok" }).session("ns", "s");
    const stream = await session.streamEvents({ minBackoffMs: 1, maxBackoffMs: 5, ...options });
    streams.push(stream);
    return { srv, stream };
  }

  async function take(stream: EventStream, n: number): Promise<Event[]> {
    const out: Event[] = [];
    while (out.length < n) {
      const r = await stream.next();
      if (r.done) {
        break;
      }
      out.push(r.value);
    }
    return out;
  }

  test("reconnects after a dropped connection with Last-Event-ID; a refused reconnect rejects", async () => {
    const { srv, stream } = await open([
      { status: 200, body: frames({ id: 1, type: "submitted" }, { id: 2, type: "started" }) },
      { status: 200, body: frames({ id: 3, type: "completed", commandId: "c1" }) },
      { status: 401, body: errorBody("Unauthenticated") },
    ]);
    const got = await take(stream, 3);
    assert.deepEqual(got.map((e) => [e.id, e.type]), [[1, "submitted"], [2, "started"], [3, "completed"]]);
    await assert.rejects(stream.next(), (e: unknown) => e instanceof ApiError && e.status === 401);
    assert.equal(stream.closed, true);
    assert.deepEqual((await stream.next()).done, true);
    assert.deepEqual(srv.requests.map((r) => r.headers["last-event-id"]), [undefined, "2", "3"]);
    assert.ok(srv.requests.every((r) => r.headers.accept === "text/event-stream" && r.headers.authorization === "Bearer tok"));
    assert.equal(stream.connections, 2);
    assert.equal(stream.lastEventId, 3);
  });

  test("from=now, and the id-only frame moves the cursor", async () => {
    const { srv, stream } = await open(
      [
        { status: 200, body: "id: 7\n\n" },
        { status: 200, body: frames({ id: 8, type: "turn", runId: "r1" }) },
        { status: 404, body: errorBody("SessionNotFound") },
      ],
      { fromNow: true, runtime: true },
    );
    const [ev] = await take(stream, 1);
    assert.equal(ev!.id, 8);
    assert.match(srv.requests[0]!.path, /\/events\?runtime=true&from=now$/);
    assert.equal(srv.requests[0]!.headers["last-event-id"], undefined);
    assert.match(srv.requests[1]!.path, /\/events\?runtime=true$/);
    assert.equal(srv.requests[1]!.headers["last-event-id"], "7");
  });

  test("from=now: a connection dropped before the first next() resumes, never from now again", async () => {
    const { srv, stream } = await open(
      [
        { status: 200, body: "id: 7\n\n" + frames({ id: 8, type: "turn" }), hold: true },
        { status: 200, body: frames({ id: 9, type: "turn" }), hold: true },
      ],
      { fromNow: true, idleTimeoutMs: 100 },
    );
    assert.equal(stream.lastEventId, 7, "the id-only frame is read by streamEvents");
    await srv.until(() => srv.requests[0]!.closed); // silent past idleTimeoutMs, nobody reading
    let ev: Event;
    do {
      ev = (await take(stream, 1))[0]!;
    } while (ev.id !== 9);
    assert.ok(["7", "8"].includes(String(srv.requests[1]!.headers["last-event-id"])), JSON.stringify(srv.requests[1]!.headers));
    assert.doesNotMatch(srv.requests[1]!.path, /from=now/);
  });

  test("an error event rejects with its code and ends the stream without reconnecting", async () => {
    const { srv, stream } = await open([
      { status: 200, body: frames({ id: 1, type: "turn" }) + frames({ type: "error", error: "Forbidden: access revoked" }) },
      { status: 200, body: frames({ id: 2, type: "turn" }) },
    ]);
    assert.equal((await take(stream, 1))[0]!.id, 1);
    await assert.rejects(stream.next(), (e: unknown) => e instanceof ApiError && e.code === "Forbidden" && e.status === 403 && e.detail === "access revoked");
    assert.equal((await stream.next()).done, true);
    assert.equal(srv.requests.length, 1);
  });

  test("without reconnect the stream ends with the connection", async () => {
    const { srv, stream } = await open([{ status: 200, body: frames({ id: 1, type: "turn" }) }], { reconnect: false });
    const all: Event[] = [];
    for await (const ev of stream) {
      all.push(ev);
    }
    assert.deepEqual(all.map((e) => e.id), [1]);
    assert.equal(srv.requests.length, 1);
  });

  test("history filters, and loss events always pass", async () => {
    const body = frames(
      { id: 1, type: "completed", time: "2026-01-01T00:00:00Z" },
      { id: 2, type: "completed", time: "2026-01-01T00:00:02.5Z" },
      { id: 3, type: "started", time: "2026-01-01T00:00:03Z" },
      { type: "events_lost", lost: 4, time: "2026-01-01T00:00:00Z" },
      { id: 10, type: "gap", after: 9, time: "2026-01-01T00:00:00Z" },
      { id: 11, type: "submitted", time: "2026-01-01T00:00:04Z" },
      { id: 12, type: "completed", time: "2026-01-01T00:00:05Z" },
    );
    const cases: Array<[Parameters<ReturnType<Client["session"]>["streamEvents"]>[0], Array<number | string>]> = [
      [{ history: { afterId: 1 } }, [2, 3, "events_lost", 10, 11, 12]],
      [{ history: { since: "2026-01-01T00:00:02Z" } }, [2, 3, "events_lost", 10, 11, 12]],
      [{ history: { since: new Date("2026-01-01T00:00:04Z"), types: ["completed"] } }, ["events_lost", 10, 12]],
      [{ history: { skipTypes: ["started", "submitted"] } }, [1, 2, "events_lost", 10, 12]],
    ];
    for (const [options, want] of cases) {
      const { stream } = await open([{ status: 200, body }], { ...options, reconnect: false });
      const got: Array<number | string> = [];
      for await (const ev of stream) {
        got.push(ev.id || ev.type);
      }
      assert.deepEqual(got, want, JSON.stringify(options));
    }
  });

  test("a reply that is not an event stream is refused", async () => {
    const srv = await ScriptedServer.start([{ status: 200, body: "{}" }]);
    servers.push(srv);
    const session = new Client(srv.url, { insecureHttp: true }).session("ns", "s");
    await assert.rejects(session.streamEvents(), EventStreamError);
  });

  test("the first connection's refusal rejects streamEvents", async () => {
    const srv = await ScriptedServer.start([{ status: 400, body: errorBody("FutureEventID") }]);
    servers.push(srv);
    const session = new Client(srv.url, { insecureHttp: true }).session("ns", "s");
    await assert.rejects(session.streamEvents({ lastEventId: 99 }), { code: "FutureEventID", status: 400 });
    assert.equal(srv.requests.length, 1);
  });

  test("an event that is not JSON ends the stream", async () => {
    const { stream } = await open([{ status: 200, body: "id: 1\ndata: {nope\n\n" }]);
    await assert.rejects(stream.next(), EventStreamError);
    assert.equal(stream.closed, true);
  });

  test("a silent connection is replaced", async () => {
    const { srv, stream } = await open(
      [
        { status: 200, body: frames({ id: 5, type: "turn" }), hold: true },
        { status: 200, body: frames({ id: 6, type: "turn" }), hold: true },
      ],
      { idleTimeoutMs: 200 },
    );
    const got = await take(stream, 2);
    assert.deepEqual(got.map((e) => e.id), [5, 6]);
    assert.equal(srv.requests[1]!.headers["last-event-id"], "5");
    await srv.until(() => srv.requests[0]!.closed);
  });

  test("close ends a pending iteration; an abort rejects it with the reason", async () => {
    const { srv, stream } = await open([{ status: 200, body: ": hi\n\n", hold: true }]);
    const pending = stream.next();
    stream.close();
    assert.deepEqual(await pending, { done: true, value: undefined });
    await srv.until(() => srv.requests[0]!.closed);

    const ctl = new AbortController();
    const { srv: srv2, stream: s2 } = await open([{ status: 200, body: ": hi\n\n", hold: true }], { signal: ctl.signal });
    const waiting = s2.next();
    ctl.abort(new Error("shutting down"));
    await assert.rejects(waiting, /shutting down/);
    await srv2.until(() => srv2.requests[0]!.closed);
  });

  test("a closed stream lets go of the caller's signal", async () => {
    const ctl = new AbortController();
    const { stream } = await open([{ status: 200, body: ": hi\n\n", hold: true }], { signal: ctl.signal });
    assert.equal(getEventListeners(ctl.signal, "abort").length, 1);
    stream.close();
    assert.equal(getEventListeners(ctl.signal, "abort").length, 0);
  });

  test("breaking out of for await closes the connection", async () => {
    const { srv, stream } = await open([{ status: 200, body: frames({ id: 1, type: "turn" }), hold: true }]);
    for await (const ev of stream) {
      assert.equal(ev.id, 1);
      break;
    }
    await srv.until(() => srv.requests[0]!.closed);
    assert.equal(stream.closed, true);
  });
});
