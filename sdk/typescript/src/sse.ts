/**
 * A Server-Sent Events frame reader over a byte stream (a response body,
 * or any AsyncIterable of bytes): lines end in \n, \r\n or \r, comments
 * (lines starting with ':') are skipped, the data lines of one frame are
 * joined with newlines. Lines and a frame's data are bounded.
 */

import { EventStreamError } from "./errors.js";

/** Bounds one line of the stream, and the data of one event. */
export const MAX_EVENT_DATA = 1 << 20;

/** One dispatched frame: its id (undefined without an id line), its event
 * name, and its data lines joined by newlines (undefined without data). */
export interface Frame {
  id: string | undefined;
  event: string;
  data: string | undefined;
}

const LF = 0x0a;
const CR = 0x0d;

/** Splits bytes into lines, each at most maxLine bytes. */
export async function* lines(source: AsyncIterable<Uint8Array>, maxLine = MAX_EVENT_DATA): AsyncGenerator<string> {
  const decoder = new TextDecoder("utf-8");
  let parts: Uint8Array[] = [];
  let size = 0;
  let skipLF = false; // the last line ended with \r: a \n right after it belongs to it
  const take = (chunk: Uint8Array): string => {
    parts.push(chunk);
    const all = parts.length === 1 ? parts[0]! : Buffer.concat(parts);
    parts = [];
    size = 0;
    return decoder.decode(all);
  };
  for await (const chunk of source) {
    let start = 0;
    for (let i = 0; i < chunk.length; i++) {
      const b = chunk[i];
      if (b !== LF && b !== CR) {
        continue;
      }
      if (skipLF && b === LF && i === start) {
        skipLF = false;
        start = i + 1;
        continue;
      }
      skipLF = b === CR;
      if (size + (i - start) > maxLine) {
        throw new EventStreamError(`agentlane: event stream: a line is over ${maxLine} bytes`);
      }
      yield take(chunk.subarray(start, i));
      start = i + 1;
    }
    if (start < chunk.length) {
      skipLF = false;
      const rest = chunk.subarray(start);
      size += rest.length;
      if (size > maxLine) {
        throw new EventStreamError(`agentlane: event stream: a line is over ${maxLine} bytes`);
      }
      parts.push(Uint8Array.from(rest));
    }
  }
  // An unfinished last line is dropped, as an unfinished frame would be.
}

/** Reads frames from a byte stream. */
export class FrameReader {
  readonly #lines: AsyncGenerator<string>;

  constructor(source: AsyncIterable<Uint8Array>, maxData = MAX_EVENT_DATA) {
    this.#lines = lines(source, maxData);
    this.#maxData = maxData;
  }

  readonly #maxData: number;

  /** The next frame with an id or data; undefined at the end of the
   * stream (an unfinished frame is dropped). */
  async next(): Promise<Frame | undefined> {
    let id: string | undefined;
    let event = "";
    const data: string[] = [];
    let size = 0;
    for (;;) {
      const r = await this.#lines.next();
      if (r.done) {
        return undefined;
      }
      const line = r.value;
      if (line === "") {
        if (id !== undefined || data.length > 0) {
          return { id, event, data: data.length > 0 ? data.join("\n") : undefined };
        }
        event = "";
        continue;
      }
      if (line.startsWith(":")) {
        continue;
      }
      const colon = line.indexOf(":");
      const name = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) {
        value = value.slice(1);
      }
      if (name === "id" && !value.includes("\0")) {
        id = value;
      } else if (name === "event") {
        event = value;
      } else if (name === "data") {
        data.push(value);
        size += value.length + 1;
        if (size > this.#maxData) {
          throw new EventStreamError(`agentlane: event stream: an event is over ${this.#maxData} bytes`);
        }
      }
    }
  }

  /** Stops reading the source. */
  async close(): Promise<void> {
    await this.#lines.return(undefined);
  }
}
