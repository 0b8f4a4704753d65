// One turn's trace, built from its stored events alone: the turn as the root span and,
// under it in the order they began (by event sequence), each model call, tool call, approval wait and
// permission wait, with start offsets (from the turn's start) and durations in ms,
// tokens and cost. No tracing backend is involved, so it works for every turn the
// store keeps, including turns from before an OpenTelemetry exporter was configured.
// Pure (no DOM), so the unit tests run it in node.
//
// What the events carry, and so what the spans mean:
// - The turn: `turn_started` → `turn_completed`. A turn with no `turn_completed` is
//   still running (or suspended on an approval): it is open up to `now`.
// - A model call has no start event. The engine records nothing while it waits for
//   the model, so a call begins where the turn's previous event left off (the turn's
//   start, a tool's result, a decided approval or permission) and ends at its `usage`
//   event (recorded, with `cost` right after, when the call has finished); the text it
//   streamed (`message_delta`) and any `provider_failover` fall inside it. Its duration
//   therefore includes the engine's own work preparing the request, which is small
//   beside the model's. Tokens come from `usage` (or `cost`), the charge from `cost`.
//   A call that never reached `usage` (it failed, or the turn was cancelled) ends at
//   the next other event, with status `error`.
// - A tool call: `tool_call_planned` → `tool_call_result`, so it includes any approval
//   or permission wait before it ran; `run` is the execution alone, the result's
//   `latency_ms` ending at the result.
// - An approval wait: `approval_requested` → `approval_decided` (the turn is suspended,
//   holding no worker, in between); a permission wait: `permission_required` →
//   `permission_resolved`. Either is open while undecided.

import type { AgentEvent } from "./types";

export type SpanKind = "turn" | "model" | "tool" | "approval" | "permission";

export interface Span {
  kind: SpanKind;
  /** Unique within the trace: `turn`, `model-1`, `tool-CALL`, `approval-ID`, `permission-ID`. */
  id: string;
  /** The model, the tool (from the model or an MCP server: text only), or the turn's agent. */
  name: string;
  /** From the turn's start. */
  startMs: number;
  durationMs: number;
  /** Still going on (no closing event, the turn not over): it runs to the trace's end. */
  open: boolean;
  /** `ok`/`error` (model, tool), the approval's outcome, the permission's decision,
   * the turn's stop reason; `running`/`pending` while open. */
  status: string;
  inputTokens?: number;
  outputTokens?: number;
  usdMicros?: number;
  /** A tool call's own execution (from `latency_ms`), within its span. */
  run?: { startMs: number; durationMs: number };
  /** The call an approval or permission held. */
  callId?: string;
  /** More for the hover: the policy, who decided, the error type. */
  detail?: string;
  children: Span[];
}

/** The kinds that belong to a model call rather than ending one (and the security
 * event recorded just before `usage` when a server over-reports its usage). */
const MODEL_KINDS = new Set(["message_delta", "provider_failover", "usage", "cost"]);
const ofModel = (e: AgentEvent) => MODEL_KINDS.has(e.kind) || (e.kind === "security_event" && e.event_type === "usage_over_reported");

function time(ts: string | undefined): number {
  const t = ts ? Date.parse(ts) : NaN;
  return Number.isFinite(t) ? t : NaN;
}

function num(value: unknown): number {
  const n = Number(value);
  return Number.isFinite(n) && n >= 0 ? n : 0;
}

/**
 * The spans of one turn from its events (any order; other turns' events are skipped
 * when `turnId` is given, otherwise the first event's turn is used). `now` (epoch ms)
 * is where open spans of an unfinished turn end; by default, its last event.
 * Returns null when there are no events.
 */
export function buildTrace(all: AgentEvent[], turnId?: string, now?: number): Span | null {
  const id = turnId ?? all[0]?.turn_id;
  const events = all.filter((e) => e.turn_id === id && Number.isFinite(time(e.ts))).sort((a, b) => a.seq - b.seq);
  if (!events.length) return null;
  const started = events.find((e) => e.kind === "turn_started");
  const origin = time((started ?? events[0]).ts);
  const completed = events.find((e) => e.kind === "turn_completed");
  const last = time(events[events.length - 1].ts);
  const end = completed ? time(completed.ts) : Math.max(last, now ?? last);
  const at = (e: AgentEvent) => Math.max(0, time(e.ts) - origin);

  const turn: Span = {
    kind: "turn",
    id: "turn",
    name: String(started?.agent ?? "turn"),
    startMs: 0,
    durationMs: end - origin,
    open: !completed,
    status: completed ? String(completed.stop_reason ?? "finished") : "running",
    inputTokens: 0,
    outputTokens: 0,
    usdMicros: 0,
    detail: started?.model ? `model ${started.model}` : undefined,
    children: [],
  };
  const model = String(started?.model ?? "model");
  const tools = new Map<string, Span>();
  const approvals = new Map<string, Span>();
  const permissions = new Map<string, Span>();
  let calls = 0;
  /** Where the turn's previous event left off: the next model call starts here. */
  let cursor = 0;
  /** The seq of that event: a model call begins just after it. */
  let cursorSeq = 0;
  /** Where each span began in the event sequence, to order the spans: timestamps are
   * to the millisecond, so a tool's result and the next model call often tie. */
  const began = new Map<Span, number>();
  /** The model call under way (text streamed, no usage yet). */
  let streaming: Span | null = null;
  /** The last model call that ended, for the `cost` after its `usage`. */
  let unpriced: Span | null = null;

  const open = (kind: SpanKind, key: string, name: string, startMs: number, status: string, seq: number): Span => {
    const span: Span = { kind, id: `${kind}-${key}`, name, startMs, durationMs: 0, open: true, status, children: [] };
    turn.children.push(span);
    began.set(span, seq);
    return span;
  };
  const close = (span: Span, atMs: number, status: string) => {
    span.durationMs = Math.max(0, atMs - span.startMs);
    span.open = false;
    span.status = status;
  };
  const modelCall = (): Span => {
    calls += 1;
    return open("model", String(calls), model, cursor, "running", cursorSeq + 0.5);
  };

  for (const e of events) {
    const t = at(e);
    if (!ofModel(e) && streaming) {
      // A call that never reached its usage: it failed, or the turn was cancelled.
      close(streaming, t, "error");
      streaming = null;
    }
    switch (e.kind) {
      case "message_delta":
      case "provider_failover":
        streaming ??= modelCall();
        if (e.kind === "provider_failover") streaming.detail = `failed over from ${e.from} to ${e.to}`;
        break;
      case "usage": {
        const span = streaming ?? modelCall();
        streaming = null;
        if (e.model) span.name = String(e.model);
        span.inputTokens = num(e.input_tokens);
        span.outputTokens = num(e.output_tokens);
        close(span, t, "ok");
        unpriced = span;
        break;
      }
      case "cost": {
        let span = unpriced;
        unpriced = null;
        if (!span) {
          // A cost without its usage (not written today): the call still happened.
          span = streaming ?? modelCall();
          streaming = null;
          if (e.model) span.name = String(e.model);
          span.inputTokens = num(e.input_tokens);
          span.outputTokens = num(e.output_tokens);
          close(span, t, "ok");
        }
        span.usdMicros = num(e.usd_micros);
        break;
      }
      case "tool_call_planned":
        tools.set(e.call_id, open("tool", String(e.call_id), String(e.tool ?? "tool"), t, "running", e.seq));
        break;
      case "tool_call_result": {
        const span = tools.get(e.call_id) ?? open("tool", String(e.call_id), String(e.tool ?? "tool"), t, "running", e.seq);
        close(span, t, String(e.status ?? "ok"));
        const latency = Math.min(num(e.latency_ms), span.durationMs);
        span.run = { startMs: t - latency, durationMs: latency };
        if (e.error_type) span.detail = String(e.error_type);
        break;
      }
      case "approval_requested": {
        const span = open("approval", String(e.approval_id), String(e.tool ?? "approval"), t, "pending", e.seq);
        span.callId = e.call_id;
        span.detail = e.policy ? `policy ${e.policy}` : undefined;
        approvals.set(e.approval_id, span);
        const tool = tools.get(e.call_id);
        if (tool) tool.status = "pending";
        break;
      }
      case "approval_decided": {
        const span = approvals.get(e.approval_id);
        if (!span) break;
        close(span, t, String(e.outcome ?? "decided"));
        if (e.by) span.detail = `${span.detail ? `${span.detail}, ` : ""}decided by ${e.by}`;
        const tool = tools.get(span.callId ?? "");
        if (tool?.open) tool.status = "running";
        break;
      }
      case "permission_required": {
        const span = open("permission", String(e.permission_id), String(e.tool ?? "permission"), t, "pending", e.seq);
        span.callId = e.call_id;
        permissions.set(e.permission_id, span);
        break;
      }
      case "permission_resolved": {
        const span = permissions.get(e.permission_id);
        if (!span) break;
        close(span, t, String(e.decision ?? "resolved"));
        if (e.reason) span.detail = String(e.reason);
        break;
      }
      default:
        break;
    }
    if (!ofModel(e)) {
      cursor = t;
      cursorSeq = e.seq;
    }
  }

  // What is still open runs to the trace's end: the turn's, or `now` for a live one.
  const endMs = turn.durationMs;
  for (const span of turn.children) {
    if (!span.open) continue;
    span.durationMs = Math.max(0, endMs - span.startMs);
    if (completed) {
      // The turn ended around it (cancelled, failed, interrupted): it never finished.
      span.status = span.kind === "approval" || span.kind === "permission" ? "undecided" : "unfinished";
      span.open = false;
    }
  }
  for (const span of turn.children) {
    if (span.kind !== "model") continue;
    turn.inputTokens! += span.inputTokens ?? 0;
    turn.outputTokens! += span.outputTokens ?? 0;
    turn.usdMicros! += span.usdMicros ?? 0;
  }
  turn.children.sort((a, b) => began.get(a)! - began.get(b)!);
  return turn;
}

/** A span's kind for people. */
export function kindText(kind: SpanKind): string {
  return { turn: "turn", model: "model call", tool: "tool call", approval: "approval wait", permission: "permission wait" }[kind];
}
