/**
 * The session's event stream (Server-Sent Events), as an async iterator of
 * Event.
 *
 * The stream reconnects when the connection drops, sending the id of the
 * last event seen as Last-Event-ID, so that nothing retained is missed or
 * repeated. A History filter skips what a runtime has no use for: events up
 * to an id, events before a time, events of some types. The stream's own
 * reports of loss, `gap` (it resumed across a manager restart: what came
 * between is lost) and `events_lost` (events no longer retained), always
 * pass.
 */

import type { IncomingMessage } from "node:http";

import type { SessionClient } from "./client.js";
import { ApiError, Code, EventStreamError, isRecord } from "./errors.js";
import type { Event } from "./openapi.js";
import { FrameReader, type Frame } from "./sse.js";

/** The server sends a keepalive every 15s; a connection silent for this
 * long is taken for dead and reconnected. */
export const IDLE_TIMEOUT_MS = 45_000;

/** Statuses that end a stream instead of being retried on reconnect: the
 * token or its permission is gone, the session is gone, or the cursor is
 * refused (FutureEventID). */
const FINAL_STATUSES = new Set([400, 401, 403, 404]);

/** Events that report loss; no History filter drops them. */
const LOSS_EVENTS = new Set(["gap", "events_lost"]);

/** The status of a call refused with the code an error event carries. */
const ERROR_STATUSES: Record<string, number> = {
  [Code.Forbidden]: 403,
  [Code.Unauthenticated]: 401,
  [Code.SessionNotFound]: 404,
};

/** The ApiError an error event's text, "<code>: <message>", stands for,
 * with the status a call refused alike gets; a text without a code is an
 * Internal error's message. */
export function streamError(text: string): ApiError {
  const at = text.indexOf(": ");
  let code = at > 0 ? text.slice(0, at) : "";
  let message = at > 0 ? text.slice(at + 2) : text;
  if (code === "" || /\s/.test(code)) {
    code = Code.Internal;
    message = text;
  }
  return new ApiError(ERROR_STATUSES[code] ?? 500, code, message);
}

/** Which events a stream skips. gap and events_lost events always pass. */
export interface History {
  /** Skips events with an id up to this one. */
  afterId?: number;
  /** Skips events older than this time. */
  since?: Date | string;
  /** When set, keeps only events of these types. */
  types?: Iterable<string>;
  /** Drops events of these types. */
  skipTypes?: Iterable<string>;
}

export interface EventStreamOptions {
  /** Resumes after this event (the server refuses an id it never had: 400 FutureEventID). */
  lastEventId?: number;
  /** Starts after the session's newest event (unless lastEventId is set). */
  fromNow?: boolean;
  /** Marks the stream as the session's runtime, which takes steers while connected (needs create). */
  runtime?: boolean;
  /** Reconnects a dropped or silent connection (true by default). */
  reconnect?: boolean;
  history?: History;
  /** A connection silent this long (ms) is dropped and, with reconnect, opened again. */
  idleTimeoutMs?: number;
  /** The backoff before a reconnect starts here (ms) and doubles up to maxBackoffMs. */
  minBackoffMs?: number;
  maxBackoffMs?: number;
  /** Aborts the first connection, and later ends the stream: the iteration
   * rejects with the signal's reason. */
  signal?: AbortSignal;
}

/**
 * Iterates over a session's events: `for await (const ev of stream)`.
 * Breaking out of the loop, or close(), ends it. Without reconnect it also
 * ends when the server ends it.
 *
 * With reconnect (the default) a dropped connection, or one silent for
 * idleTimeoutMs, is opened again after a backoff from minBackoffMs doubling
 * to maxBackoffMs, resuming after the last event seen; a reply of 400, 401,
 * 403 or 404 to a reconnect rejects with ApiError, and so does an error
 * event (the server ended the stream because its caller lost access), with
 * its code (Forbidden, Unauthenticated), with or without reconnect; the
 * stream then ends. The first connection is not retried: its error rejects
 * SessionClient.streamEvents.
 *
 * Not for concurrent iteration.
 */
export class EventStream implements AsyncIterableIterator<Event> {
  readonly #session: SessionClient;
  #lastId: number;
  readonly #fromNow: boolean;
  readonly #runtime: boolean;
  readonly #reconnect: boolean;
  readonly #afterId: number | undefined;
  readonly #sinceMs: number | undefined;
  readonly #types: Set<string> | undefined;
  readonly #skipTypes: Set<string>;
  readonly #idleTimeoutMs: number;
  readonly #minBackoffMs: number;
  readonly #maxBackoffMs: number;
  readonly #userSignal: AbortSignal | undefined;
  readonly #stop = new AbortController();
  #backoffMs = 0;
  #closed = false;
  #unlisten: () => void = () => {};
  #res: IncomingMessage | undefined;
  #reader: FrameReader | undefined;
  /** A frame read by #connect, for next() to take first. */
  #pending: Frame | undefined;
  /** How many connections were made, the first included. */
  connections = 0;

  private constructor(session: SessionClient, o: EventStreamOptions) {
    this.#session = session;
    this.#lastId = o.lastEventId ?? 0;
    this.#fromNow = o.fromNow ?? false;
    this.#runtime = o.runtime ?? false;
    this.#reconnect = o.reconnect ?? true;
    const h = o.history ?? {};
    this.#afterId = h.afterId;
    if (h.since !== undefined) {
      this.#sinceMs = h.since instanceof Date ? h.since.getTime() : Date.parse(h.since);
      if (Number.isNaN(this.#sinceMs)) {
        throw new Error(`agentlane: history.since: not a time: ${String(h.since)}`);
      }
    }
    this.#types = h.types !== undefined ? new Set(h.types) : undefined;
    this.#skipTypes = new Set(h.skipTypes ?? []);
    this.#idleTimeoutMs = o.idleTimeoutMs ?? IDLE_TIMEOUT_MS;
    this.#minBackoffMs = o.minBackoffMs ?? 100;
    this.#maxBackoffMs = o.maxBackoffMs ?? 5000;
    this.#userSignal = o.signal;
  }

  /** Opens a stream; the first connection's refusal rejects. */
  static async open(session: SessionClient, options: EventStreamOptions = {}): Promise<EventStream> {
    const s = new EventStream(session, options);
    const signal = options.signal;
    signal?.throwIfAborted();
    const onAbort = (): void => s.close();
    signal?.addEventListener("abort", onAbort, { once: true });
    s.#unlisten = () => signal?.removeEventListener("abort", onAbort);
    try {
      await s.#connect();
    } catch (err) {
      s.close();
      if (signal?.aborted) {
        throw signal.reason;
      }
      throw err;
    }
    return s;
  }

  /** The id of the last event received (filtered ones included), or the
   * one the stream started after; 0 if none. */
  get lastEventId(): number {
    return this.#lastId;
  }

  /** Whether the stream has ended. */
  get closed(): boolean {
    return this.#closed;
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  /** Ends the stream; a pending next() resolves done. */
  close(): void {
    this.#unlisten();
    this.#closed = true;
    this.#stop.abort();
    this.#disconnect();
  }

  async return(): Promise<IteratorResult<Event>> {
    this.close();
    return { done: true, value: undefined };
  }

  async next(): Promise<IteratorResult<Event>> {
    for (;;) {
      if (this.#closed) {
        if (this.#userSignal?.aborted) {
          throw this.#userSignal.reason;
        }
        return { done: true, value: undefined };
      }
      const reader = this.#reader;
      if (reader === undefined) {
        await this.#waitAndReconnect();
        continue;
      }
      let frame: Frame | undefined = this.#pending;
      this.#pending = undefined;
      try {
        frame ??= await reader.next();
      } catch (err) {
        if (err instanceof EventStreamError) {
          this.close();
          throw err;
        }
        frame = undefined; // the connection broke
      }
      if (frame === undefined) {
        this.#disconnect();
        if (!this.#reconnect) {
          this.close();
        }
        continue;
      }
      this.#backoffMs = 0;
      const ev = this.#decode(frame);
      if (ev !== undefined && ev.type === "error") {
        // The server ended the stream, its caller refused: a reconnect
        // would be refused too.
        this.close();
        throw streamError(ev.error ?? "");
      }
      if (ev !== undefined && this.#keeps(ev)) {
        return { done: false, value: ev };
      }
    }
  }

  #keeps(ev: Event): boolean {
    if (LOSS_EVENTS.has(ev.type)) {
      return true;
    }
    if (this.#afterId !== undefined && ev.id && ev.id <= this.#afterId) {
      return false;
    }
    if (this.#sinceMs !== undefined && Date.parse(ev.time) < this.#sinceMs) {
      return false;
    }
    if (this.#types !== undefined && !this.#types.has(ev.type)) {
      return false;
    }
    return !this.#skipTypes.has(ev.type);
  }

  /** The frame's Event; undefined for a frame without data (the id-only
   * frame of from=now), which only moves the cursor. */
  #decode(frame: Frame): Event | undefined {
    let frameId: number | undefined;
    if (frame.id !== undefined && /^\d+$/.test(frame.id)) {
      frameId = Number(frame.id);
      this.#lastId = frameId;
    }
    if (frame.data === undefined) {
      return undefined;
    }
    let value: unknown;
    try {
      value = JSON.parse(frame.data);
    } catch (err) {
      this.close();
      throw new EventStreamError(`agentlane: event stream: event ${String(frame.id)}: ${(err as Error).message}`);
    }
    if (!isRecord(value)) {
      this.close();
      throw new EventStreamError(`agentlane: event stream: event ${String(frame.id)} is not an object`);
    }
    const ev = value as unknown as Event;
    if (!ev.id && frameId) {
      ev.id = frameId;
    }
    if (!ev.type) {
      ev.type = frame.event;
    }
    return ev;
  }

  async #waitAndReconnect(): Promise<void> {
    this.#backoffMs = Math.min(Math.max(this.#minBackoffMs, 2 * this.#backoffMs), this.#maxBackoffMs);
    if (!(await this.#pause(this.#backoffMs))) {
      return;
    }
    try {
      await this.#connect();
    } catch (err) {
      if (this.#closed) {
        return;
      }
      if (err instanceof ApiError) {
        if (FINAL_STATUSES.has(err.status)) {
          this.close();
          throw err;
        }
        if (err.retryAfter) {
          await this.#pause(Math.min(err.retryAfter, 60) * 1000);
        }
      }
      // Anything else is tried again after the backoff.
    }
  }

  /** Waits ms; false if the stream was closed meanwhile. */
  #pause(ms: number): Promise<boolean> {
    const signal = this.#stop.signal;
    return new Promise((resolve) => {
      if (signal.aborted) {
        resolve(false);
        return;
      }
      const timer = setTimeout(() => {
        signal.removeEventListener("abort", onAbort);
        resolve(true);
      }, ms);
      const onAbort = (): void => {
        clearTimeout(timer);
        resolve(false);
      };
      signal.addEventListener("abort", onAbort, { once: true });
    });
  }

  async #connect(): Promise<void> {
    const query: Record<string, string> = {};
    const headers: Record<string, string> = { Accept: "text/event-stream" };
    if (this.#runtime) {
      query.runtime = "true";
    }
    if (this.#lastId > 0) {
      headers["Last-Event-ID"] = String(this.#lastId);
    } else if (this.#fromNow) {
      query.from = "now";
    }
    const s = this.#session;
    const res = await s.client.open(
      "streamEvents",
      { namespace: s.namespace, session: s.name },
      { query, headers, idleTimeoutMs: this.#idleTimeoutMs, signal: this.#stop.signal },
    );
    const contentType = String(res.headers["content-type"] ?? "").split(";")[0]!.trim();
    if (contentType !== "text/event-stream") {
      res.destroy();
      throw new EventStreamError(`agentlane: event stream: the reply is ${JSON.stringify(contentType)}, not text/event-stream`);
    }
    if (this.#closed) {
      res.destroy();
      return;
    }
    res.on("error", () => {}); // a broken connection ends the reader's iteration
    const reader = new FrameReader(res);
    const fromNow = this.#lastId === 0 && this.#fromNow;
    this.#res = res;
    this.#reader = reader;
    this.connections++;
    if (fromNow) {
      // The server names the newest event at once, in an id-only frame:
      // taken now, so that a connection dropped before the first next()
      // (the caller busy, the connection silent past idleTimeoutMs)
      // resumes from it instead of from the newest event of the reconnect,
      // which would skip what came between.
      let first: Frame | undefined;
      try {
        first = await reader.next();
      } catch (err) {
        this.#disconnect();
        throw err;
      }
      if (first === undefined) {
        this.#disconnect();
        throw new Error("agentlane: event stream: the stream ended before its first frame");
      }
      if (first.data === undefined) {
        this.#decode(first);
      } else {
        this.#pending = first;
      }
    }
  }

  #disconnect(): void {
    this.#pending = undefined;
    const res = this.#res;
    this.#res = undefined;
    this.#reader = undefined;
    res?.destroy();
  }
}
