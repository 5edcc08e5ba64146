/**
 * @agentlane/client: a client of the agentlane Session API for agent
 * runtimes on Node.js 20 or newer. See README.md.
 */

export * from "./auth.js";
export * from "./client.js";
export * from "./errors.js";
export * from "./events.js";
export { FrameReader, MAX_EVENT_DATA, type Frame } from "./sse.js";
// The request and reply types, one per schema of the OpenAPI document, and
// the enums' values (modeValues, stateValues, errorCodeValues, ...).
export type * from "./openapi.js";
export type { Error as ErrorBody } from "./openapi.js";
export {
  budgetCheckDecisionValues,
  budgetCheckReasonValues,
  budgetStatusReasonValues,
  delegationPhaseValues,
  errorCodeValues,
  modeValues,
  queueOptionsDropValues,
  queueOptionsModeValues,
  stateValues,
} from "./openapi.js";
