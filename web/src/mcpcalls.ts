// The MCP gateway log's figures for people: a call's duration and charge, its status as
// a badge class, and a page's totals. Pure (no DOM), so the unit tests run it in node.

import type { McpCall, McpCallStatus } from "./types";

/** Every status the gateway records (docs/mcp-gateway.md, "The log"). */
export const MCP_CALL_STATUSES: readonly McpCallStatus[] = ["ok", "error", "denied", "rate_limited", "budget_exceeded", "rejected", "expired", "invalid"];

/** The badge class of a status: a known status names itself (the stylesheet colours
 * it), anything else is plain (`other`). */
export function statusClass(status: string): string {
  return (MCP_CALL_STATUSES as readonly string[]).includes(status) ? status : "other";
}

/** A status for people: `rate_limited` → `rate limited`. */
export function statusText(status: string): string {
  return status.replace(/_/g, " ");
}

/** A duration: milliseconds under 10 s, seconds with one decimal up to a minute, then
 * minutes and seconds (a call that waited for an approval can take hours). */
export function duration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return "—";
  if (ms < 10_000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const seconds = Math.round(ms / 1000);
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes} min ${seconds % 60} s`;
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

/** A page of calls in numbers: how many, how many did not succeed, what they cost. */
export interface McpCallTotals {
  calls: number;
  /** Every status but `ok`. */
  failed: number;
  usd_micros: number;
}

export function totals(calls: McpCall[]): McpCallTotals {
  return {
    calls: calls.length,
    failed: calls.filter((c) => c.status !== "ok").length,
    usd_micros: calls.reduce((sum, c) => sum + (Number.isFinite(c.usd_micros) ? c.usd_micros : 0), 0),
  };
}
