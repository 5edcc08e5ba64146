// The client against the OpenAPI document itself: every operationId has a
// method of that name calling its path with its HTTP method, and the
// generated enums (src/openapi.ts) are the document's. The compiler checks
// the rest (OPERATIONS against the generated paths).

import assert from "node:assert/strict";
import { test } from "node:test";

import { Client, ERROR_CODES, OPERATIONS, SessionClient, modeValues, stateValues } from "../src/index.js";
import { REQUIRE_LIVE, openapi } from "./support.js";

const METHODS = ["get", "put", "post", "delete", "patch", "head", "options"];

test("every operation of the document has a method", (t) => {
  const doc = openapi();
  if (doc === undefined) {
    if (REQUIRE_LIVE) {
      assert.fail("no OpenAPI document: AGENTLANE_OPENAPI_JSON is not set and `go run ./hack/openapi-json` failed");
    }
    t.skip("no OpenAPI document (set AGENTLANE_OPENAPI_JSON or install go)");
    return;
  }
  const seen = new Set<string>();
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const method of METHODS) {
      const op = item[method] as { operationId?: string } | undefined;
      if (!op?.operationId) {
        continue;
      }
      const id = op.operationId;
      seen.add(id);
      const mine = (OPERATIONS as Record<string, { method: string; path: string }>)[id];
      assert.ok(mine, `${id} is not in OPERATIONS`);
      assert.deepEqual(mine, { method: method.toUpperCase(), path }, id);
      const owner = path.startsWith("/v1/namespaces/{namespace}/sessions/{session}/") ? SessionClient : Client;
      assert.equal(typeof (owner.prototype as unknown as Record<string, unknown>)[id], "function", `${owner.name}.${id}`);
    }
  }
  assert.deepEqual([...seen].sort(), Object.keys(OPERATIONS).sort());

  const schemas = doc.components.schemas;
  assert.deepEqual([...ERROR_CODES], schemas.Error!.properties!.code!.enum, "src/openapi.ts is stale: npm run generate");
  assert.deepEqual([...modeValues], (schemas.Mode as { enum?: string[] }).enum);
  assert.deepEqual([...stateValues], (schemas.State as { enum?: string[] }).enum);
});
