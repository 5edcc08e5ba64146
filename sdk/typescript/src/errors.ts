/**
 * The Session API's errors: every error reply is JSON `{code, message}` with
 * a stable code (the Error schema's enum, errorCodeValues), whatever its HTTP
 * status.
 */

import { errorCodeValues, type components } from "./openapi.js";

/** A stable error code of the Session API (the Error schema's enum). */
export type ErrorCode = components["schemas"]["Error"]["code"];

/** Every stable error code, as the OpenAPI document lists them. */
export const ERROR_CODES: readonly ErrorCode[] = errorCodeValues;

/**
 * The codes by name, `Code.NotLeader === "NotLeader"`, so that a typo is a
 * compile error.
 */
export const Code: { readonly [K in ErrorCode]: K } = Object.freeze(
  Object.fromEntries(errorCodeValues.map((c) => [c, c])) as { [K in ErrorCode]: K },
);

/** How much of an error reply is read. */
export const MAX_ERROR_BODY = 64 << 10;

/**
 * An error reply of the Session API. `code` is the stable code (one of
 * ERROR_CODES, or a newer one this client does not know), `message` the
 * server's explanation, `status` the HTTP status and `retryAfter`, on a 429
 * or 503 that carries Retry-After, the seconds it asks to wait.
 */
export class ApiError extends Error {
  override readonly name = "ApiError";
  readonly status: number;
  readonly code: ErrorCode | (string & {});
  readonly retryAfter: number | undefined;
  /** The server's explanation, without the code and status. */
  readonly detail: string;

  constructor(status: number, code: string, detail: string, retryAfter?: number) {
    super(`${code} (${status}): ${detail}`);
    this.status = status;
    this.code = code;
    this.detail = detail;
    this.retryAfter = retryAfter;
  }

  /**
   * The error of a non-2xx reply. A body that is not an Error (a proxy's
   * page, say) becomes the message of an Internal error.
   */
  static fromReply(status: number, body: Uint8Array, retryAfter: string | null | undefined): ApiError {
    const seconds = parseRetryAfter(retryAfter);
    const text = new TextDecoder().decode(body);
    let data: unknown;
    try {
      data = JSON.parse(text);
    } catch {
      data = undefined;
    }
    if (isRecord(data) && typeof data.code === "string" && data.code !== "") {
      return new ApiError(status, data.code, typeof data.message === "string" ? data.message : "", seconds);
    }
    const shown = text.trim() || `HTTP ${status}`;
    return new ApiError(status, Code.Internal, shown.slice(0, 1024), seconds);
  }
}

/** The stream broke in a way a reconnect would not mend: a frame over the
 * size bound, an event that is not JSON, a reply that is not an event
 * stream. */
export class EventStreamError extends Error {
  override readonly name = "EventStreamError";
}

/** Retry-After in whole seconds, when it is a positive integer. */
export function parseRetryAfter(value: string | null | undefined): number | undefined {
  if (!value || !/^\s*\d+\s*$/.test(value)) {
    return undefined;
  }
  const n = Number.parseInt(value, 10);
  return n > 0 ? n : undefined;
}

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
