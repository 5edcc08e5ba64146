/**
 * A client of the agentlane Session API (pkg/sessionapi/openapi.yaml).
 *
 * Client holds the server's address, its TLS trust and the bearer token;
 * client.session(namespace, name) gives a SessionClient, which has one
 * method per operation of the OpenAPI document, named after its
 * operationId. Every call goes through OPERATIONS, which the compiler checks
 * against the generated types (src/openapi.ts) and the tests against the
 * document itself.
 */

import { AsyncLocalStorage } from "node:async_hooks";
import { readFileSync } from "node:fs";
import * as http from "node:http";
import * as https from "node:https";
import { inspect } from "node:util";

import { StaticToken, TokenFile, type TokenSource } from "./auth.js";
import { ApiError, Code, MAX_ERROR_BODY } from "./errors.js";
import { EventStream, type EventStreamOptions } from "./events.js";
import type {
  Assignment,
  BudgetCheck,
  BudgetCheckRequest,
  BudgetStatus,
  CancelRequest,
  CancelResult,
  Checkpoint,
  CheckpointSaved,
  Command,
  Completion,
  CompletionResult,
  Consumed,
  DeadLetter,
  Delegation,
  DelegationList,
  DelegationRequest,
  Extension,
  ExternalTask,
  HeartbeatResult,
  LaneHandler,
  Message,
  PostResult,
  ReportRequest,
  Result,
  RunOutcome,
  Stats,
  SubmitRequest,
  Usage,
  operations,
  paths,
} from "./openapi.js";

type Method = "GET" | "POST" | "PUT" | "DELETE" | "PATCH";

/** An operation's HTTP method and path template. */
export interface Operation {
  readonly method: Method;
  readonly path: keyof paths & string;
}

// The compiler checks that OPERATIONS has every operationId of the
// generated types, and that each one's path has that operation under its
// method.
type CheckedOperations<T> = {
  [K in keyof operations]: K extends keyof T
    ? T[K] extends { method: infer M extends Method; path: infer P extends keyof paths }
      ? paths[P] extends { [m in Lowercase<M>]: operations[K] }
        ? T[K]
        : { error: "the path has not this operation under this method" }
      : never
    : never;
};

/** operationId: HTTP method and path. */
export const OPERATIONS = {
  healthz: { method: "GET", path: "/healthz" },
  getOpenAPI: { method: "GET", path: "/openapi.yaml" },
  submitCommand: { method: "POST", path: "/v1/namespaces/{namespace}/sessions/{session}/commands" },
  getCommand: { method: "GET", path: "/v1/namespaces/{namespace}/sessions/{session}/commands/{id}" },
  reportResult: { method: "POST", path: "/v1/namespaces/{namespace}/sessions/{session}/commands/{id}/result" },
  postMessage: { method: "POST", path: "/v1/namespaces/{namespace}/sessions/{session}/messages" },
  finishRun: { method: "POST", path: "/v1/namespaces/{namespace}/sessions/{session}/runs/{runId}/finish" },
  cancel: { method: "POST", path: "/v1/namespaces/{namespace}/sessions/{session}/cancel" },
  clearLane: { method: "POST", path: "/v1/namespaces/{namespace}/sessions/{session}/lanes/{lane}/clear" },
  setLaneHandler: { method: "PUT", path: "/v1/namespaces/{namespace}/sessions/{session}/lanes/{lane}/handler" },
  streamEvents: { method: "GET", path: "/v1/namespaces/{namespace}/sessions/{session}/events" },
  getStats: { method: "GET", path: "/v1/namespaces/{namespace}/sessions/{session}/stats" },
  listExternalTasks: { method: "GET", path: "/v1/namespaces/{namespace}/sessions/{session}/external" },
  completeExternalTask: {
    method: "POST",
    path: "/v1/namespaces/{namespace}/sessions/{session}/external/{id}/complete",
  },
  heartbeatExternalTask: {
    method: "POST",
    path: "/v1/namespaces/{namespace}/sessions/{session}/external/{id}/heartbeat",
  },
  extendCommand: { method: "POST", path: "/v1/namespaces/{namespace}/sessions/{session}/commands/{id}/extend" },
  listDeadLetters: { method: "GET", path: "/v1/namespaces/{namespace}/sessions/{session}/deadletters" },
  saveCheckpoint: { method: "PUT", path: "/v1/namespaces/{namespace}/sessions/{session}/checkpoints" },
  loadLatestCheckpoint: { method: "GET", path: "/v1/namespaces/{namespace}/sessions/{session}/checkpoints/latest" },
  loadCheckpoint: { method: "GET", path: "/v1/namespaces/{namespace}/sessions/{session}/checkpoints/{runId}" },
  delegate: { method: "POST", path: "/v1/namespaces/{namespace}/sessions/{session}/delegations" },
  listDelegations: { method: "GET", path: "/v1/namespaces/{namespace}/sessions/{session}/delegations" },
  getDelegation: { method: "GET", path: "/v1/namespaces/{namespace}/sessions/{session}/delegations/{id}" },
  getBudget: { method: "GET", path: "/v1/namespaces/{namespace}/sessions/{session}/budget" },
  checkBudget: { method: "POST", path: "/v1/namespaces/{namespace}/sessions/{session}/budget/check" },
  recordUsage: { method: "POST", path: "/v1/namespaces/{namespace}/sessions/{session}/budget/record" },
  getAssignment: { method: "GET", path: "/v1/namespaces/{namespace}/runtime/assignment" },
} as const satisfies Record<keyof operations, Operation>;
const checkedOperations: CheckedOperations<typeof OPERATIONS> = OPERATIONS;
void checkedOperations;

export type OperationId = keyof typeof OPERATIONS;

/** Environment variables the operator sets in runtime pods. */
export const ENV_URL = "AGENTLANE_SESSION_API_URL";
export const ENV_TOKEN_FILE = "AGENTLANE_SESSION_API_TOKEN_FILE";
export const ENV_CA_FILE = "AGENTLANE_SESSION_API_CA_FILE";
export const ENV_NAMESPACE = "AGENTLANE_NAMESPACE";
export const ENV_SESSION = "AGENTLANE_SESSION";

/** The wait of each long poll of awaitCommand and runCommand, in seconds. */
export const POLL_WAIT_SECONDS = 30;
/** Added to a call's own wait to time it out. */
const WAIT_SLACK_MS = 30_000;
/** How many times a call refused with NotLeader is sent again by default,
 * and the most it waits before each (whatever Retry-After asks). */
export const NOT_LEADER_RETRIES = 5;
export const MAX_NOT_LEADER_WAIT_SECONDS = 10;
/** Bounds a 2xx reply's body. */
export const MAX_REPLY_BODY = 64 << 20;

export interface ClientOptions {
  /** A fixed bearer token. */
  token?: string;
  /** A file holding the token, read again whenever it changes. */
  tokenFile?: string;
  /** Any other source of tokens. */
  tokenSource?: TokenSource;
  /** The CA certificates (PEM) that verify the server; else the system's roots. */
  ca?: string | Buffer | Array<string | Buffer>;
  /** A file of CA certificates (PEM), such as AGENTLANE_SESSION_API_CA_FILE. */
  caFile?: string;
  /** Allows a plain http:// base URL, which sends the token in clear text:
   * only for a manager run with --session-api-insecure-http on loopback. */
  insecureHttp?: boolean;
  /** Bounds a call that does not wait (ms); 30s by default. */
  timeoutMs?: number;
  /** How many times a call refused with 503 NotLeader is sent again; 0 turns it off. */
  notLeaderRetries?: number;
}

/** Options every call takes. */
export interface CallOptions {
  /** Aborts the call: it rejects with the signal's reason. */
  signal?: AbortSignal;
  /** Bounds the call (ms), in place of the client's timeout (and wait). */
  timeoutMs?: number;
}

/** What Client.open sends besides the operation. */
export interface RequestOptions extends CallOptions {
  query?: Record<string, string | undefined>;
  body?: unknown;
  headers?: Record<string, string>;
  auth?: boolean;
  /** For a stream: the connection is dropped after this long without
   * data (ms), and there is no overall timeout. */
  idleTimeoutMs?: number;
}

/** The command whose function runCommand is running, for the parentId of
 * the commands submitted from it. */
const parentCommand = new AsyncLocalStorage<string>();

/** A wait: seconds, or a Go duration string such as "30s". */
export type Wait = number | string;

/** Talks to one Session API server. Calls share a keep-alive agent; close()
 * releases its idle connections. */
export class Client {
  readonly baseUrl: string;
  readonly timeoutMs: number;
  readonly notLeaderRetries: number;
  readonly #url: URL;
  readonly #prefix: string;
  readonly #tokens: TokenSource | undefined;
  readonly #agent: http.Agent;
  readonly #transport: typeof http | typeof https;

  /** Waits before a call refused with NotLeader is sent again; tests replace it. */
  static sleep: (ms: number, signal?: AbortSignal) => Promise<void> = sleep;

  constructor(baseUrl: string, options: ClientOptions = {}) {
    let u: URL;
    try {
      u = new URL(baseUrl);
    } catch {
      throw new Error(`agentlane: base URL ${JSON.stringify(baseUrl)}: want http(s)://host[:port][/path]`);
    }
    if ((u.protocol !== "http:" && u.protocol !== "https:") || !u.hostname || u.search || u.hash) {
      throw new Error(`agentlane: base URL ${JSON.stringify(baseUrl)}: want http(s)://host[:port][/path]`);
    }
    if (u.username || u.password) {
      throw new Error("agentlane: base URL: credentials in the URL are not allowed");
    }
    if (u.protocol === "http:" && !options.insecureHttp) {
      throw new Error(
        `agentlane: ${baseUrl} is plain http, which sends the bearer token in clear text; ` +
          "use https, or pass insecureHttp: true on a loopback address",
      );
    }
    const given = [options.token, options.tokenFile, options.tokenSource].filter((v) => v !== undefined);
    if (given.length > 1) {
      throw new Error("agentlane: give one of token, tokenFile and tokenSource");
    }
    if (options.ca !== undefined && options.caFile !== undefined) {
      throw new Error("agentlane: give ca or caFile, not both");
    }
    const retries = options.notLeaderRetries ?? NOT_LEADER_RETRIES;
    if (!Number.isInteger(retries) || retries < 0) {
      throw new Error("agentlane: notLeaderRetries is not a non-negative integer");
    }
    this.notLeaderRetries = retries;
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.#url = u;
    this.#prefix = u.pathname.replace(/\/+$/, "");
    this.baseUrl = `${u.protocol}//${u.host}${this.#prefix}`;
    if (options.token !== undefined) {
      this.#tokens = new StaticToken(options.token);
    } else if (options.tokenFile !== undefined) {
      this.#tokens = new TokenFile(options.tokenFile);
    } else {
      this.#tokens = options.tokenSource;
    }
    if (u.protocol === "https:") {
      const ca = options.caFile !== undefined ? readFileSync(options.caFile) : options.ca;
      this.#agent = new https.Agent({ keepAlive: true, ca, minVersion: "TLSv1.2" });
      this.#transport = https;
    } else {
      this.#agent = new http.Agent({ keepAlive: true });
      this.#transport = http;
    }
  }

  /**
   * A client from the variables the operator sets in runtime pods:
   * AGENTLANE_SESSION_API_URL, _TOKEN_FILE and _CA_FILE. options fill in or
   * replace what they do not say.
   */
  static fromEnv(env: NodeJS.ProcessEnv = process.env, options: ClientOptions = {}): Client {
    const url = env[ENV_URL];
    if (!url) {
      throw new Error(`agentlane: ${ENV_URL} is not set`);
    }
    const o: ClientOptions = { ...options };
    if (env[ENV_TOKEN_FILE] && o.token === undefined && o.tokenSource === undefined) {
      o.tokenFile ??= env[ENV_TOKEN_FILE];
    }
    if (env[ENV_CA_FILE] && o.ca === undefined) {
      o.caFile ??= env[ENV_CA_FILE];
    }
    return new Client(url, o);
  }

  /** A client of one AgentSession's routes. */
  session(namespace: string, name: string): SessionClient {
    return new SessionClient(this, namespace, name);
  }

  /** The session named by AGENTLANE_NAMESPACE and AGENTLANE_SESSION. */
  sessionFromEnv(env: NodeJS.ProcessEnv = process.env): SessionClient {
    const ns = env[ENV_NAMESPACE];
    const name = env[ENV_SESSION];
    if (!ns || !name) {
      throw new Error(`agentlane: ${ENV_NAMESPACE} and ${ENV_SESSION} must be set`);
    }
    return this.session(ns, name);
  }

  /** Closes the idle connections the client keeps. */
  close(): void {
    this.#agent.destroy();
  }

  /** The server's liveness: "ok". */
  async healthz(options: CallOptions = {}): Promise<string> {
    return new TextDecoder().decode(await this.call("healthz", {}, { ...options, auth: false }));
  }

  /** The OpenAPI document the server was built with, as YAML. */
  async getOpenAPI(options: CallOptions = {}): Promise<string> {
    return new TextDecoder().decode(await this.call("getOpenAPI", {}, { ...options, auth: false }));
  }

  /**
   * Asks which session adopted the calling pod, a warm runtime pod of
   * namespace (its containers have AGENTLANE_WARM_POOL), with the pod's own
   * projected token. With wait (at most 60s) the server holds the call
   * until the pod is adopted or wait runs out. Resolves to the assignment,
   * or undefined while no session adopted the pod: ask again. A runtime
   * attaches to the assigned session only then.
   */
  async getAssignment(namespace: string, options: CallOptions & { wait?: Wait } = {}): Promise<Assignment | undefined> {
    const { wait, ...rest } = options;
    const timeoutMs = rest.timeoutMs ?? (wait ? waitMs(wait, 0) + WAIT_SLACK_MS : undefined);
    const raw = await this.call("getAssignment", { namespace }, { ...rest, timeoutMs, query: { wait: wait ? formatDuration(wait) : undefined } });
    return raw.length === 0 ? undefined : (JSON.parse(raw.toString("utf8")) as Assignment);
  }

  /** Calls an operation and returns the body of its 2xx reply; a non-2xx
   * reply rejects with ApiError. */
  async call(operation: OperationId, params: Record<string, string>, options: RequestOptions = {}): Promise<Buffer> {
    const res = await this.open(operation, params, options);
    try {
      return await readBody(res, MAX_REPLY_BODY, `agentlane: ${operation}: the reply`);
    } catch (err) {
      if (options.signal?.aborted) {
        throw options.signal.reason;
      }
      throw err;
    }
  }

  /**
   * Sends a request and resolves to its 2xx response, for the caller to
   * read (or destroy). A non-2xx reply rejects with ApiError; one that is
   * NotLeader (503 from a standby manager replica, as during a failover) is
   * first sent again after its Retry-After (1s when absent, at most 10s),
   * up to notLeaderRetries times. A standby refuses every call before
   * reading it, so this is safe for writes too.
   */
  async open(operation: OperationId, params: Record<string, string>, options: RequestOptions = {}): Promise<http.IncomingMessage> {
    let retries = this.notLeaderRetries;
    for (;;) {
      try {
        return await this.#openOnce(operation, params, options);
      } catch (err) {
        if (!(err instanceof ApiError) || err.code !== Code.NotLeader || err.status !== 503 || retries <= 0) {
          throw err;
        }
        retries--;
        const seconds = Math.min(err.retryAfter ?? 1, MAX_NOT_LEADER_WAIT_SECONDS);
        await Client.sleep(seconds * 1000, options.signal);
      }
    }
  }

  async #openOnce(operation: OperationId, params: Record<string, string>, options: RequestOptions): Promise<http.IncomingMessage> {
    const { method, path: template } = OPERATIONS[operation];
    let path = this.#prefix + expand(template, params);
    const query = new URLSearchParams();
    for (const [k, v] of Object.entries(options.query ?? {})) {
      if (v !== undefined) {
        query.set(k, v);
      }
    }
    if ([...query.keys()].length > 0) {
      path += "?" + query.toString();
    }
    const headers: Record<string, string> = { Accept: "application/json", "User-Agent": "agentlane-typescript" };
    let data: Buffer | undefined;
    if (options.body !== undefined) {
      data = Buffer.from(JSON.stringify(options.body), "utf8");
      headers["Content-Type"] = "application/json";
      headers["Content-Length"] = String(data.length);
    } else if (method !== "GET") {
      headers["Content-Length"] = "0";
    }
    Object.assign(headers, options.headers ?? {});
    if (options.auth !== false && this.#tokens !== undefined) {
      headers["Authorization"] = "Bearer " + (await this.#tokens.token());
    }
    const signal = options.signal;
    signal?.throwIfAborted();
    const timeoutMs = options.idleTimeoutMs !== undefined ? undefined : (options.timeoutMs ?? this.timeoutMs);

    return new Promise<http.IncomingMessage>((resolve, reject) => {
      let settled = false;
      let timer: NodeJS.Timeout | undefined;
      const req = this.#transport.request({
        protocol: this.#url.protocol,
        hostname: this.#url.hostname.replace(/^\[(.*)\]$/, "$1"),
        port: this.#url.port || undefined,
        method,
        path,
        headers,
        agent: this.#agent,
      });
      const fail = (err: unknown): void => {
        if (timer !== undefined) {
          clearTimeout(timer);
        }
        signal?.removeEventListener("abort", onAbort);
        if (!settled) {
          settled = true;
          reject(err);
        }
      };
      const onAbort = (): void => {
        const reason: unknown = signal?.reason;
        req.destroy(reason instanceof Error ? reason : new Error(String(reason)));
        fail(reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      if (timeoutMs !== undefined) {
        timer = setTimeout(() => {
          const err = new Error(`agentlane: ${operation}: no reply within ${timeoutMs}ms`);
          err.name = "TimeoutError";
          req.destroy(err);
          fail(err);
        }, timeoutMs);
      }
      if (options.idleTimeoutMs !== undefined) {
        const idle = options.idleTimeoutMs;
        req.setTimeout(idle, () => {
          req.destroy(new Error(`agentlane: ${operation}: nothing received for ${idle}ms`));
        });
      }
      req.on("error", fail);
      req.on("response", (res) => {
        const status = res.statusCode ?? 0;
        const done = (): void => {
          if (timer !== undefined) {
            clearTimeout(timer);
          }
          signal?.removeEventListener("abort", onAbort);
        };
        if (status < 200 || status > 299) {
          readBody(res, MAX_ERROR_BODY, "", true).then(
            (body) => {
              done();
              fail(ApiError.fromReply(status, body, headerOf(res, "retry-after")));
            },
            fail,
          );
          return;
        }
        if (timeoutMs === undefined) {
          // A stream: the caller's signal keeps ending it while it lasts.
          res.on("close", done);
          settled = true;
          resolve(res);
          return;
        }
        // The timeout and signal keep covering the body's read.
        res.on("end", done);
        res.on("close", done);
        settled = true;
        resolve(res);
      });
      req.end(data);
    });
  }

  [inspect.custom](): string {
    return `Client { ${this.baseUrl} }`;
  }

  toJSON(): string {
    return `Client ${this.baseUrl}`;
  }
}

/** Calls the routes of one AgentSession. */
export class SessionClient {
  readonly client: Client;
  readonly namespace: string;
  readonly name: string;

  /** Waits between polls of a command that holds a grant; tests replace it. */
  static sleep: (ms: number, signal?: AbortSignal) => Promise<void> = sleep;

  constructor(client: Client, namespace: string, name: string) {
    this.client = client;
    this.namespace = namespace;
    this.name = name;
  }

  async #call<T>(operation: OperationId, options: RequestOptions, params: Record<string, string> = {}): Promise<T> {
    const raw = await this.client.call(operation, { ...params, namespace: this.namespace, session: this.name }, options);
    return JSON.parse(raw.toString("utf8")) as T;
  }

  /**
   * Submits a command. Resolves once an Internal or Hybrid command holds a
   * grant, an External command is final, or request.wait ran out (the
   * command as it stands: neither granted nor final). A call aborted while
   * the server holds it closes the connection: the server then cancels the
   * command if no attempt of it was granted yet. Called from the function
   * runCommand runs for a command, the submission names that command as
   * its parentId unless it names one itself.
   */
  submitCommand(request: SubmitRequest, options: CallOptions = {}): Promise<Command> {
    const timeoutMs = options.timeoutMs ?? waitMs(request.wait, 300_000) + WAIT_SLACK_MS;
    const parentId = parentCommand.getStore();
    const body = request.parentId === undefined && parentId !== undefined ? { ...request, parentId } : request;
    return this.#call("submitCommand", { ...options, timeoutMs, body });
  }

  /** Reads a command; with wait, the server holds the call until the
   * command holds a grant or is final, or wait runs out. */
  getCommand(id: string, options: CallOptions & { wait?: Wait } = {}): Promise<Command> {
    const { wait, ...rest } = options;
    const timeoutMs = rest.timeoutMs ?? (wait ? waitMs(wait, 0) + WAIT_SLACK_MS : undefined);
    return this.#call("getCommand", { ...rest, timeoutMs, query: { wait: wait ? formatDuration(wait) : undefined } }, { id });
  }

  /** Reports the result of attempt report.attempt of an Internal or Hybrid
   * command. An attempt that lost its slot rejects with ApiError StaleAttempt
   * or NotRunning: drop its result. */
  reportResult(id: string, report: ReportRequest, options: CallOptions = {}): Promise<Command> {
    return this.#call("reportResult", { ...options, body: report }, { id });
  }

  /** Posts an inbound user message (or a /queue directive). */
  postMessage(message: Message | string, options: CallOptions = {}): Promise<PostResult> {
    const body: Message = typeof message === "string" ? { text: message } : message;
    return this.#call("postMessage", { ...options, body });
  }

  /** Ends a run, so that the session's next turn may start. outcome says
   * how it ended; a worker session of a Delegate lane reports its answer (or
   * error) this way, which becomes the delegated task's result. */
  async finishRun(runId: string, outcome?: RunOutcome, options: CallOptions = {}): Promise<void> {
    await this.#call("finishRun", { ...options, body: outcome }, { runId });
  }

  /** Cancels one command, a run's queued commands or the session's. */
  cancel(request: CancelRequest, options: CallOptions = {}): Promise<CancelResult> {
    return this.#call("cancel", { ...options, body: request });
  }

  /** Cancels the session's commands in one lane that have not started. */
  clearLane(lane: string, options: CallOptions = {}): Promise<CancelResult> {
    return this.#call("clearLane", options, { lane });
  }

  /**
   * Switches who handles the lane's new commands for this session:
   * External (the session completes them itself: listExternalTasks, then
   * completeExternalTask), Internal (the runtime runs them on a grant) or
   * Default (no switch). Rejects with ApiError LaneSwitchRefused on a lane
   * the LaneQueue keeps on its own runners.
   */
  setLaneHandler(lane: string, mode: LaneHandler["mode"], options: CallOptions = {}): Promise<LaneHandler> {
    return this.#call("setLaneHandler", { ...options, body: { mode } }, { lane });
  }

  /** Follows the session's events; resolves once the first connection is
   * made (its refusal rejects). See EventStream for the options. */
  streamEvents(options: EventStreamOptions = {}): Promise<EventStream> {
    return EventStream.open(this, options);
  }

  getStats(options: CallOptions = {}): Promise<Stats> {
    return this.#call("getStats", options);
  }

  /** The session's External attempts waiting for a result, oldest first. */
  async listExternalTasks(options: CallOptions = {}): Promise<ExternalTask[]> {
    return (await this.#call<{ items?: ExternalTask[] }>("listExternalTasks", options)).items ?? [];
  }

  /**
   * Reports a handler's result for attempt completion.attempt of the
   * external task id (without attempt, the attempt current when the call
   * is served); needs the update verb on the session's agentsessions/api,
   * or, for a lane the session handles itself (setLaneHandler External),
   * the access that submits. Only the first completion of the current
   * attempt counts: a refused one (StaleAttempt, AlreadyCompleted,
   * NotHandlerTask, NotRunning) changes nothing.
   */
  completeExternalTask(id: string, completion: Completion, options: CallOptions = {}): Promise<CompletionResult> {
    return this.#call("completeExternalTask", { ...options, body: completion }, { id });
  }

  /**
   * Shows that the handler still runs an attempt of the external task id
   * (options.attempt, else the current one), with an optional progress
   * note. A lane with a heartbeatTimeout times out an attempt that goes
   * that long without one. Fenced and authorized as a completion: a refused
   * one rejects with ApiError (StaleAttempt, AlreadyCompleted,
   * NotHandlerTask, NotRunning). Post as often as convenient: the task's
   * status records at most one per quarter of the heartbeatTimeout.
   */
  heartbeatExternalTask(
    id: string,
    options: CallOptions & { attempt?: number; progress?: string } = {},
  ): Promise<HeartbeatResult> {
    const { attempt, progress, ...rest } = options;
    return this.#call("heartbeatExternalTask", { ...rest, body: { attempt, progress } }, { id });
  }

  /**
   * Moves the deadline of the command's running attempt (options.attempt,
   * else the one running) later by `by` (seconds, or a duration such as
   * "5m"; 1s to 24h). An attempt may be extended at most 8 times and never
   * past 10 times its timeout: beyond, ApiError ExtendRefused.
   */
  extendCommand(id: string, by: Wait, options: CallOptions & { attempt?: number } = {}): Promise<Extension> {
    const { attempt, ...rest } = options;
    return this.#call("extendCommand", { ...rest, body: { attempt, by: formatDuration(by) } }, { id });
  }

  /** The session's commands that failed for good, oldest first. */
  async listDeadLetters(options: CallOptions = {}): Promise<DeadLetter[]> {
    return (await this.#call<{ items?: DeadLetter[] }>("listDeadLetters", options)).items ?? [];
  }

  saveCheckpoint(checkpoint: Checkpoint, options: CallOptions = {}): Promise<CheckpointSaved> {
    return this.#call("saveCheckpoint", { ...options, body: checkpoint });
  }

  loadLatestCheckpoint(options: CallOptions = {}): Promise<Checkpoint> {
    return this.#call("loadLatestCheckpoint", options);
  }

  loadCheckpoint(runId: string, options: CallOptions = {}): Promise<Checkpoint> {
    return this.#call("loadCheckpoint", options, { runId });
  }

  /** Hands work to a Delegate lane and resolves to the queued task at once. */
  delegate(request: DelegationRequest, options: CallOptions = {}): Promise<Delegation> {
    return this.#call("delegate", { ...options, body: request });
  }

  /** The session's delegated tasks that the cluster keeps, oldest first:
   * every page of them (the server sends at most 100 a page). */
  async listDelegations(options: CallOptions = {}): Promise<Delegation[]> {
    const items: Delegation[] = [];
    let next: string | undefined;
    for (;;) {
      const page: DelegationList = await this.#call("listDelegations", { ...options, query: { continue: next } });
      items.push(...page.items);
      if (!page.continue) {
        return items;
      }
      next = page.continue;
    }
  }

  /** One delegated task of this session; another's, or none, rejects with
   * ApiError CommandNotFound. */
  getDelegation(id: string, options: CallOptions = {}): Promise<Delegation> {
    return this.#call("getDelegation", options, { id });
  }

  getBudget(options: CallOptions = {}): Promise<BudgetStatus> {
    return this.#call("getBudget", options);
  }

  checkBudget(request: BudgetCheckRequest, options: CallOptions = {}): Promise<BudgetCheck> {
    return this.#call("checkBudget", { ...options, body: request });
  }

  recordUsage(usage: Usage, options: CallOptions = {}): Promise<Consumed> {
    return this.#call("recordUsage", { ...options, body: usage });
  }

  /** Long-polls a command until it holds a grant or is final (only final,
   * with final: true). */
  awaitCommand(id: string, options: { final?: boolean; signal?: AbortSignal } = {}): Promise<Command> {
    const done = options.final ? isFinal : (c: Command) => isFinal(c) || c.grant !== undefined;
    return this.#poll(id, done, options.signal);
  }

  async #poll(id: string, done: (c: Command) => boolean, signal?: AbortSignal): Promise<Command> {
    let backoff = 0;
    for (;;) {
      const cmd = await this.getCommand(id, { wait: POLL_WAIT_SECONDS, signal });
      if (done(cmd)) {
        return cmd;
      }
      if (cmd.grant === undefined) {
        backoff = 0;
        continue;
      }
      // While an attempt holds a grant the server answers at once.
      backoff = Math.min(Math.max(100, 2 * backoff), 5000);
      await SessionClient.sleep(backoff, signal);
    }
  }

  /**
   * Submits a command and carries it to its end: for every new grant
   * (Internal and Hybrid commands, once per retry) calls fn with the
   * command and reports the result (and usage) fn returns. A report refused
   * with StaleAttempt or NotRunning means the attempt lost its slot; the
   * command is then awaited for a retry's grant or its end. An External
   * command is awaited until it is final. Commands fn submits through any
   * SessionClient name this one as their parentId.
   */
  async runCommand(
    request: SubmitRequest,
    fn: (cmd: Command, signal: AbortSignal | undefined) => Promise<Attempt> | Attempt,
    options: { signal?: AbortSignal } = {},
  ): Promise<Command> {
    const signal = options.signal;
    let cmd = await this.submitCommand(request, { signal });
    let handled = 0; // the last attempt passed to fn; attempts count from 1
    while (!isFinal(cmd)) {
      const grant = cmd.grant;
      if (grant !== undefined && grant.attempt > handled) {
        handled = grant.attempt;
        const { result, usage } = await parentCommand.run(cmd.id, () => fn(cmd, signal));
        const report: ReportRequest = { attempt: grant.attempt, ...result, usage };
        try {
          cmd = await this.reportResult(cmd.id, report, { signal });
          continue;
        } catch (err) {
          if (!(err instanceof ApiError) || (err.code !== Code.StaleAttempt && err.code !== Code.NotRunning)) {
            throw err;
          }
        }
      }
      const last = handled;
      cmd = await this.#poll(cmd.id, (c) => isFinal(c) || (c.grant !== undefined && c.grant.attempt > last), signal);
    }
    return cmd;
  }

  [inspect.custom](): string {
    return `SessionClient { ${this.namespace}/${this.name} }`;
  }
}

/** What runCommand's function returns for an attempt. */
export interface Attempt {
  result: Result;
  usage?: Usage;
}

/** A command's states that are final. */
export const FINAL_STATES: ReadonlySet<string> = new Set(["Succeeded", "Failed", "TimedOut", "DeadLettered", "Cancelled"]);

/** Whether the command is in a final state. */
export function isFinal(cmd: Command): boolean {
  return FINAL_STATES.has(cmd.state);
}

/** Fills the {placeholders} of a path template, each escaped as one path segment. */
export function expand(template: string, params: Record<string, string>): string {
  let out = template;
  for (const [name, value] of Object.entries(params)) {
    if (!value) {
      throw new Error(`agentlane: ${name} is empty`);
    }
    out = out.replace(`{${name}}`, encodeURIComponent(value));
  }
  if (out.includes("{")) {
    throw new Error(`agentlane: ${template}: a path parameter is missing`);
  }
  return out;
}

/** A duration as the server reads it: a number is seconds, a string is
 * passed on as it is. */
export function formatDuration(value: Wait): string {
  if (typeof value === "string") {
    return value;
  }
  if (!(value >= 0)) {
    throw new Error(`agentlane: a duration cannot be negative: ${value}`);
  }
  const millis = Math.round(value * 1000);
  return millis % 1000 === 0 ? `${millis / 1000}s` : `${millis}ms`;
}

const UNITS: Record<string, number> = { ns: 1e-6, us: 1e-3, "µs": 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** A wait in milliseconds, from seconds or a Go duration string; def when absent or unreadable. */
export function waitMs(value: Wait | undefined, def: number): number {
  if (value === undefined || value === "") {
    return def;
  }
  if (typeof value === "number") {
    return value * 1000;
  }
  let total = 0;
  const re = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)/y;
  let at = 0;
  while (at < value.length) {
    re.lastIndex = at;
    const m = re.exec(value);
    if (!m) {
      return def;
    }
    total += Number(m[1]) * UNITS[m[2]!]!;
    at = re.lastIndex;
  }
  return total;
}

function headerOf(res: http.IncomingMessage, name: string): string | undefined {
  const v = res.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** Reads a body up to max bytes; past it, rejects (or, with truncate, stops). */
async function readBody(res: http.IncomingMessage, max: number, what: string, truncate = false): Promise<Buffer> {
  const parts: Buffer[] = [];
  let size = 0;
  for await (const chunk of res as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > max) {
      res.destroy();
      if (truncate) {
        parts.push(chunk.subarray(0, chunk.length - (size - max)));
        break;
      }
      throw new Error(`${what} is over ${max} bytes`);
    }
    parts.push(chunk);
  }
  return Buffer.concat(parts);
}

/** Resolves after ms, or rejects with the signal's reason when it aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
