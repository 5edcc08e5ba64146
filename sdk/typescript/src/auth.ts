/**
 * Bearer tokens for the Session API: a fixed string, or a file such as the
 * projected service-account token the kubelet renews in runtime pods.
 */

import { readFile, stat } from "node:fs/promises";
import { inspect } from "node:util";

/** Bounds what is read of a token file (a projected token is a few KiB). */
export const MAX_TOKEN_FILE = 64 << 10;

/** Gives the bearer token of each request. */
export interface TokenSource {
  token(): Promise<string>;
}

function checkToken(token: string, where: string): string {
  const t = token.trim();
  if (t === "") {
    throw new Error(`agentlane: ${where} is empty`);
  }
  // A header value cannot hold these; refusing them here keeps the token
  // out of an error message that would quote the header.
  if (/[\r\n\0]/.test(t)) {
    throw new Error(`agentlane: ${where} holds a line break or NUL`);
  }
  return t;
}

/** A fixed token. Never shown by inspect or JSON.stringify. */
export class StaticToken implements TokenSource {
  readonly #token: string;

  constructor(token: string) {
    this.#token = checkToken(token, "the token");
  }

  token(): Promise<string> {
    return Promise.resolve(this.#token);
  }

  toJSON(): string {
    return "StaticToken";
  }

  [inspect.custom](): string {
    return "StaticToken {}";
  }
}

/**
 * The token held in a file, read again whenever the file changes (its
 * device, inode, size or modification time, checked on every request),
 * which is how the kubelet's rotation of a projected token is picked up.
 * If a read fails, or finds the file empty or over MAX_TOKEN_FILE bytes,
 * the last token read is kept; with none yet, the request fails.
 */
export class TokenFile implements TokenSource {
  readonly path: string;
  #token = "";
  #stamp = "";
  #pending: Promise<string> | undefined;

  constructor(path: string) {
    if (!path) {
      throw new Error("agentlane: the token file's path is empty");
    }
    this.path = path;
  }

  token(): Promise<string> {
    // Concurrent calls share one stat (and read).
    this.#pending ??= this.#refresh().finally(() => {
      this.#pending = undefined;
    });
    return this.#pending;
  }

  async #refresh(): Promise<string> {
    try {
      const st = await stat(this.path, { bigint: true });
      const stamp = `${st.dev}:${st.ino}:${st.size}:${st.mtimeNs}`;
      if (stamp !== this.#stamp || this.#token === "") {
        if (st.size > BigInt(MAX_TOKEN_FILE)) {
          throw new Error(`the file is over ${MAX_TOKEN_FILE} bytes`);
        }
        const token = checkToken(await readFile(this.path, "utf8"), "the token file");
        this.#token = token;
        this.#stamp = stamp;
      }
    } catch (err) {
      if (this.#token === "") {
        const why = err instanceof Error ? err.message : String(err);
        throw new Error(`agentlane: reading the token file ${this.path}: ${why}`);
      }
    }
    return this.#token;
  }

  toJSON(): string {
    return `TokenFile ${this.path}`;
  }

  [inspect.custom](): string {
    return `TokenFile { path: ${JSON.stringify(this.path)} }`;
  }
}
