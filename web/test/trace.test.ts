// Unit tests of the trace view's spans (run by web/test/run.mjs with node's test
// runner): turns built from stored-event fixtures shaped as the engine writes them.
import assert from "node:assert/strict";
import { test } from "node:test";
import { buildTrace, type Span } from "../src/trace";
import type { AgentEvent } from "../src/types";

const T0 = Date.parse("2025-03-01T09:30:00.000Z");

/** A turn's events: each `[offset ms, kind, fields]`, seq in order. */
function turn(id: string, rows: [number, string, Record<string, unknown>?][], firstSeq = 1): AgentEvent[] {
  return rows.map(([ms, kind, fields], i) => ({
    thread_id: "thr_1",
    turn_id: id,
    seq: firstSeq + i,
    ts: new Date(T0 + ms).toISOString(),
    kind,
    ...fields,
  }));
}

const started = { agent: "engineering", model: "scripted-model", input: "hi", workspace: "/ws" };
const usage = (input: number, output: number) => ({ provider: "p", model: "scripted-model", input_tokens: input, output_tokens: output, reported: true });
const cost = (input: number, output: number, micros: number) => ({ provider: "p", model: "scripted-model", input_tokens: input, output_tokens: output, usd_micros: micros, usd: micros / 1e6 });

/** A span's shape for comparing: kind, name, start, duration, status. */
function shape(s: Span): string {
  return `${s.kind} ${s.name} @${s.startMs} +${s.durationMs} ${s.status}${s.open ? " open" : ""}`;
}

test("a suspended and resumed turn: model calls, tools, and the approval wait between", () => {
  const events = turn("trn_a", [
    [0, "turn_started", started],
    [800, "usage", usage(1200, 40)],
    [800, "cost", cost(1200, 40, 4200)],
    [801, "tool_call_planned", { call_id: "c1", tool: "list_files", arguments: { path: "." } }],
    [812, "tool_call_result", { call_id: "c1", tool: "list_files", status: "ok", latency_ms: 10, output: "a" }],
    [1500, "usage", usage(1400, 60)],
    [1500, "cost", cost(1400, 60, 5100)],
    [1501, "tool_call_planned", { call_id: "c2", tool: "write_file", arguments: { path: "n" } }],
    [1503, "approval_requested", { approval_id: "apr_1", call_id: "c2", tool: "write_file", policy: "review-writes", approvers: [] }],
    // Suspended: no worker, no events, for a minute (a server restart in between).
    [61503, "approval_decided", { approval_id: "apr_1", outcome: "approved", by: "alice", decider: "token" }],
    [61520, "tool_call_result", { call_id: "c2", tool: "write_file", status: "ok", latency_ms: 5, output: "ok" }],
    [61700, "message_delta", { text: "I wrote " }],
    [62000, "message_delta", { text: "it." }],
    [62100, "usage", usage(1600, 30)],
    [62100, "cost", cost(1600, 30, 5250)],
    [62101, "workspace_changed", { created: [], modified: [], deleted: [], complete: true }],
    [62102, "turn_completed", { stop_reason: "text_answer", result: { text: "I wrote it." } }],
  ]);
  const trace = buildTrace(events)!;
  assert.equal(shape(trace), "turn engineering @0 +62102 text_answer");
  assert.deepEqual(trace.children.map(shape), [
    "model scripted-model @0 +800 ok",
    "tool list_files @801 +11 ok",
    "model scripted-model @812 +688 ok",
    "tool write_file @1501 +60019 ok",
    "approval write_file @1503 +60000 approved",
    "model scripted-model @61520 +580 ok",
  ]);
  const [m1, list, , write, approval, m3] = trace.children;
  assert.deepEqual([m1.inputTokens, m1.outputTokens, m1.usdMicros], [1200, 40, 4200]);
  assert.deepEqual([m3.inputTokens, m3.outputTokens, m3.usdMicros], [1600, 30, 5250]);
  assert.deepEqual(list.run, { startMs: 802, durationMs: 10 });
  // The tool's span holds the wait; its run is the execution after the decision.
  assert.deepEqual(write.run, { startMs: 61515, durationMs: 5 });
  assert.equal(approval.callId, "c2");
  assert.equal(approval.detail, "policy review-writes, decided by alice");
  assert.deepEqual([trace.inputTokens, trace.outputTokens, trace.usdMicros], [4200, 130, 14550]);
  assert.equal(new Set(trace.children.map((s) => s.id)).size, trace.children.length, "span ids are unique");
});

test("a failed tool keeps its status and error type; the turn goes on", () => {
  const trace = buildTrace(
    turn("trn_f", [
      [0, "turn_started", started],
      [300, "usage", usage(100, 10)],
      [300, "cost", cost(100, 10, 0)],
      [301, "tool_call_planned", { call_id: "c1", tool: "run_command", arguments: { cmd: "x" } }],
      [5301, "tool_call_result", { call_id: "c1", tool: "run_command", status: "error", error_type: "timeout", latency_ms: 5000, output: "" }],
      [5900, "usage", usage(150, 12)],
      [5900, "cost", cost(150, 12, 0)],
      [5901, "turn_completed", { stop_reason: "text_answer", result: { text: "it timed out" } }],
    ]),
  )!;
  assert.deepEqual(trace.children.map(shape), [
    "model scripted-model @0 +300 ok",
    "tool run_command @301 +5000 error",
    "model scripted-model @5301 +599 ok",
  ]);
  assert.equal(trace.children[1].detail, "timeout");
  assert.deepEqual(trace.children[1].run, { startMs: 301, durationMs: 5000 });
  assert.equal(trace.usdMicros, 0, "a local model costs nothing and says so");
});

test("a turn still waiting: the approval and its tool are open up to now", () => {
  const events = turn("trn_w", [
    [0, "turn_started", started],
    [400, "usage", usage(10, 1)],
    [400, "cost", cost(10, 1, 30)],
    [401, "tool_call_planned", { call_id: "c1", tool: "write_file", arguments: null }],
    [402, "approval_requested", { approval_id: "apr_9", call_id: "c1", tool: "write_file", policy: "p", approvers: [] }],
  ]);
  const trace = buildTrace(events, "trn_w", T0 + 10_000)!;
  assert.equal(shape(trace), "turn engineering @0 +10000 running open");
  assert.deepEqual(trace.children.map(shape), [
    "model scripted-model @0 +400 ok",
    "tool write_file @401 +9599 pending open",
    "approval write_file @402 +9598 pending open",
  ]);
  // Without `now`, open spans end at the last event.
  assert.equal(buildTrace(events)!.durationMs, 402);
});

test("a permission wait, and a model call that failed mid-stream", () => {
  const trace = buildTrace(
    turn("trn_p", [
      [0, "turn_started", started],
      [100, "usage", usage(10, 1)],
      [100, "cost", cost(10, 1, 0)],
      [101, "tool_call_planned", { call_id: "c1", tool: "read_file", arguments: {} }],
      [102, "permission_required", { permission_id: "prm_1", call_id: "c1", tool: "read_file", arguments: {}, options: ["approved", "declined"] }],
      [2102, "permission_resolved", { permission_id: "prm_1", decision: "declined", reason: "declined by the client" }],
      [2103, "tool_call_result", { call_id: "c1", tool: "read_file", status: "error", error_type: "permission_denied", latency_ms: 0, output: "" }],
      [2500, "message_delta", { text: "Sorr" }],
      [2600, "provider_failover", { from: "a", to: "b", code: "UPSTREAM_UNAVAILABLE", message: "x" }],
      [2900, "error", { code: "UPSTREAM_UNAVAILABLE", message: "every provider failed" }],
      [2901, "turn_completed", { stop_reason: "error", result: null }],
    ]),
  )!;
  assert.deepEqual(trace.children.map(shape), [
    "model scripted-model @0 +100 ok",
    "tool read_file @101 +2002 error",
    "permission read_file @102 +2000 declined",
    "model scripted-model @2103 +797 error",
  ]);
  assert.equal(trace.children[2].detail, "declined by the client");
  assert.equal(trace.children[3].detail, "failed over from a to b");
  assert.equal(trace.children[3].inputTokens, undefined, "no usage, no tokens");
});

test("a turn cancelled during an approval: what was open ends with the turn, unfinished", () => {
  const trace = buildTrace(
    turn("trn_c", [
      [0, "turn_started", started],
      [50, "usage", usage(1, 1)],
      [51, "tool_call_planned", { call_id: "c1", tool: "write_file", arguments: {} }],
      [52, "approval_requested", { approval_id: "apr_2", call_id: "c1", tool: "write_file", policy: "p", approvers: [] }],
      [1052, "turn_completed", { stop_reason: "cancelled", result: null }],
    ]),
  )!;
  assert.deepEqual(trace.children.map(shape), [
    "model scripted-model @0 +50 ok",
    "tool write_file @51 +1001 unfinished",
    "approval write_file @52 +1000 undecided",
  ]);
  assert.equal(trace.children[0].usdMicros, undefined, "usage without a cost: tokens, no price");
});

test("only the asked turn's events count; no events, no trace", () => {
  const a = turn("trn_1", [
    [0, "turn_started", started],
    [10, "usage", usage(5, 5)],
    [11, "turn_completed", { stop_reason: "text_answer", result: null }],
  ]);
  const b = turn("trn_2", [[20, "turn_started", started], [99, "usage", usage(7, 7)]], 4);
  const trace = buildTrace([...b, ...a], "trn_1")!;
  assert.equal(trace.children.length, 1);
  assert.equal(trace.inputTokens, 5);
  assert.equal(buildTrace([], "trn_1"), null);
  assert.equal(buildTrace(a, "trn_x"), null);
});

test("a tool's result and the next model call in the same millisecond keep their order", () => {
  const trace = buildTrace(
    turn("trn_t", [
      [0, "turn_started", started],
      [25, "usage", usage(1, 1)],
      [26, "tool_call_planned", { call_id: "c1", tool: "list_files", arguments: {} }],
      [26, "tool_call_result", { call_id: "c1", tool: "list_files", status: "ok", latency_ms: 0, output: "" }],
      [32, "usage", usage(2, 2)],
      [32, "tool_call_planned", { call_id: "c2", tool: "write_file", arguments: {} }],
      [33, "approval_requested", { approval_id: "apr_3", call_id: "c2", tool: "write_file", policy: "p", approvers: [] }],
    ]),
  )!;
  assert.deepEqual(
    trace.children.map((s) => `${s.kind} @${s.startMs}`),
    ["model @0", "tool @26", "model @26", "tool @32", "approval @33"],
  );
});
