// What the tests share: a scripted local server, the OpenAPI document and
// the live server's settings.

import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

/** The repository's root (the tests run from dist/test). */
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "..");
/** sdk/typescript. */
export const SDK = path.join(ROOT, "sdk", "typescript");

/** Whether tests missing what they need fail rather than skip (the Go test
 * that runs them against a live manager sets it). */
export const REQUIRE_LIVE = !!process.env.AGENTLANE_SDK_REQUIRE_LIVE;

/** One scripted reply. hold leaves the reply open after body (a stream that
 * goes silent); noReply never answers. */
export interface Reply {
  status: number;
  body?: string;
  headers?: Record<string, string>;
  hold?: boolean;
  noReply?: boolean;
}

export interface Recorded {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  /** Set once the client closed the connection. */
  closed: boolean;
}

/**
 * A local plain-http server that answers each request with the next entry
 * of its script (the last one again once it runs out), then closes the
 * connection. requests records what the client sent.
 */
export class ScriptedServer {
  readonly requests: Recorded[] = [];
  readonly #server: http.Server;
  readonly #waiters: Array<() => void> = [];
  script: Reply[];

  private constructor(script: Reply[]) {
    this.script = script;
    this.#server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const rec: Recorded = {
          method: req.method ?? "",
          path: req.url ?? "",
          headers: req.headers,
          body: Buffer.concat(chunks).toString("utf8"),
          closed: false,
        };
        res.on("close", () => {
          rec.closed = true;
          this.#wake();
        });
        const n = this.requests.length;
        this.requests.push(rec);
        this.#wake();
        const reply = this.script[Math.min(n, this.script.length - 1)]!;
        if (reply.noReply) {
          return;
        }
        const headers: Record<string, string> = {
          "Content-Type": reply.status === 200 && !reply.body?.startsWith("{") ? "text/event-stream" : "application/json",
          ...(reply.hold ? {} : { Connection: "close" }),
          ...reply.headers,
        };
        res.writeHead(reply.status, headers);
        if (reply.hold) {
          res.write(reply.body ?? "");
          return;
        }
        res.end(reply.body ?? "");
      });
    });
  }

  static async start(script: Reply[]): Promise<ScriptedServer> {
    const s = new ScriptedServer(script);
    await new Promise<void>((resolve) => s.#server.listen(0, "127.0.0.1", resolve));
    return s;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  #wake(): void {
    for (const w of this.#waiters.splice(0)) {
      w();
    }
  }

  /** Resolves once cond holds, checked whenever a request comes or closes. */
  async until(cond: () => boolean): Promise<void> {
    while (!cond()) {
      await new Promise<void>((resolve) => this.#waiters.push(resolve));
    }
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}

/** An Error reply body. */
export function errorBody(code: string, message = "no"): string {
  return JSON.stringify({ code, message });
}

/** SSE frames of events, each {id, type, ...}. */
export function frames(...events: Array<Record<string, unknown> & { id?: number; type: string }>): string {
  return events
    .map((ev) => {
      const full = { time: "2026-01-02T03:04:05.123456789Z", ...ev };
      return (ev.id ? `id: ${ev.id}\n` : "") + `event: ${ev.type}\ndata: ${JSON.stringify(full)}\n\n`;
    })
    .join("");
}

export interface OpenAPIDoc {
  paths: Record<string, Record<string, unknown>>;
  components: { schemas: Record<string, { properties?: Record<string, { enum?: string[] }> }> };
}

let doc: OpenAPIDoc | undefined;

/** The OpenAPI document as JSON: the file AGENTLANE_OPENAPI_JSON names,
 * else what `go run ./hack/openapi-json` prints; undefined without either. */
export function openapi(): OpenAPIDoc | undefined {
  if (doc === undefined) {
    const file = process.env.AGENTLANE_OPENAPI_JSON;
    if (file) {
      doc = JSON.parse(readFileSync(file, "utf8")) as OpenAPIDoc;
    } else {
      try {
        const out = execFileSync("go", ["run", "./hack/openapi-json"], { cwd: ROOT, timeout: 600_000, maxBuffer: 64 << 20 });
        doc = JSON.parse(out.toString("utf8")) as OpenAPIDoc;
      } catch {
        return undefined;
      }
    }
  }
  return doc;
}
