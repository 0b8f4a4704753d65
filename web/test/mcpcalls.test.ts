// Unit tests of the MCP gateway view's figures (run by web/test/run.mjs with node's
// test runner).
import assert from "node:assert/strict";
import { test } from "node:test";
import { duration, statusClass, statusText, totals } from "../src/mcpcalls";
import type { McpCall } from "../src/types";

const call = (status: string, usd_micros: number): McpCall => ({
  id: "mcpc_1",
  ts: "2025-03-01T09:30:00Z",
  client: "c",
  agent: "mcp-gateway",
  server: "everything",
  tool: "everything__echo",
  status,
  duration_ms: 3,
  usd_micros,
});

test("a known status is its own badge class; anything else is plain", () => {
  assert.equal(statusClass("budget_exceeded"), "budget_exceeded");
  assert.equal(statusClass("ok"), "ok");
  assert.equal(statusClass("ok expired"), "other");
  assert.equal(statusClass("<b>"), "other");
  assert.equal(statusText("rate_limited"), "rate limited");
});

test("durations: ms, then s, then minutes and hours", () => {
  assert.equal(duration(0), "0 ms");
  assert.equal(duration(9_999), "9999 ms");
  assert.equal(duration(12_345), "12.3 s");
  assert.equal(duration(125_000), "2 min 5 s");
  assert.equal(duration(3 * 3600_000 + 7 * 60_000), "3 h 7 min");
  assert.equal(duration(-1), "—");
});

test("totals count the calls that did not succeed and add the charges", () => {
  assert.deepEqual(totals([]), { calls: 0, failed: 0, usd_micros: 0 });
  assert.deepEqual(totals([call("ok", 20_000), call("denied", 0), call("error", 20_000)]), { calls: 3, failed: 2, usd_micros: 40_000 });
});
