// The MCP gateway: the client's calls through `/mcp/gateway` (or `agentplane mcp
// gateway`), newest first, from the gateway's log (`GET /v1/mcp/calls`): when, which
// tool, how it ended, how long it took, what it was charged, and the policy, approval
// or reason behind it. Never the arguments (the log does not keep them). Read on
// opening and on Refresh; no polling. Tool names, reasons and policy names may come
// from upstream MCP servers: they go in as text only. Below, the pinned tool definitions
// (`pins.ts`).

import { ApiError, mcpCalls } from "../api";
import { h, replace, usd, when } from "../dom";
import { duration, statusClass, statusText, totals } from "../mcpcalls";
import type { McpCall } from "../types";
import { announce, clearError, showError, type View } from "../ui";
import { pinsSection } from "./pins";

const LIMITS = [100, 500, 1000] as const;

export function gatewayView(): View {
  const limit = h("select", { id: "mcp-limit" }, LIMITS.map((n) => h("option", { value: n }, String(n))));
  const refresh = h("button", { type: "button", id: "mcp-refresh" }, "Refresh");
  const summary = h("p", { class: "total", "aria-live": "polite" });
  const out = h("div", { class: "mcp-calls", "aria-busy": "true" }, h("p", { class: "muted" }, "Loading…"));
  const pins = pinsSection();
  let disposed = false;
  let loading = 0;

  async function load(): Promise<void> {
    const mine = ++loading;
    refresh.disabled = true;
    out.setAttribute("aria-busy", "true");
    try {
      const calls = await mcpCalls(Number(limit.value));
      if (disposed || mine !== loading) return;
      clearError();
      show(calls);
      announce(`${calls.length} gateway ${calls.length === 1 ? "call" : "calls"} shown.`);
    } catch (e) {
      if (disposed || mine !== loading) return;
      replace(summary);
      const what = e instanceof ApiError ? `${e.code}: ${e.message}` : String((e as Error)?.message ?? e);
      replace(out, h("p", { class: "load-error", "data-state": "error" }, `The gateway's log could not be read (${what}). Refresh to try again.`));
      showError(e);
    } finally {
      if (mine === loading) {
        refresh.disabled = false;
        out.setAttribute("aria-busy", "false");
      }
    }
  }

  function show(calls: McpCall[]): void {
    if (!calls.length) {
      replace(summary);
      replace(
        out,
        h(
          "div",
          { class: "empty muted", "data-state": "empty" },
          h("p", null, "No calls through the MCP gateway yet."),
          h(
            "p",
            { class: "small" },
            "Offer MCP servers with ",
            h("code", null, "[mcp.gateway] servers = […]"),
            " in the configuration, then point an MCP client at ",
            h("code", null, "/mcp/gateway"),
            " (or run ",
            h("code", null, "agentplane mcp gateway"),
            ") with this client's credentials; every call lands here.",
          ),
        ),
      );
      return;
    }
    const sum = totals(calls);
    const max = Number(limit.value);
    replace(
      summary,
      `${sum.calls} ${sum.calls === 1 ? "call" : "calls"}${sum.calls >= max ? ` (the latest ${max})` : ""} · ${sum.failed} refused or failed · charged ${usd(sum.usd_micros / 1e6)}`,
    );
    replace(
      out,
      h(
        "table",
        { class: "mcp-call-list" },
        h("caption", { class: "sr-only" }, "Calls through the MCP gateway, newest first"),
        h("thead", null, h("tr", null, ["time", "tool", "status", "duration", "cost", "policy, approval, reason"].map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", null, calls.map(row)),
      ),
    );
  }

  limit.addEventListener("change", () => void load());
  refresh.addEventListener("click", () => {
    void load();
    void pins.load();
  });
  void load();
  void pins.load();
  return {
    el: h(
      "section",
      { class: "page", "aria-label": "MCP gateway" },
      h("h2", null, "MCP gateway"),
      h("p", { class: "muted" }, "Your client's tool calls through the MCP gateway, newest first: how each ended, how long it took and what it was charged. The log never keeps the arguments."),
      h("p", { class: "controls" }, h("label", { for: "mcp-limit" }, "Show the latest "), limit, " ", refresh),
      summary,
      out,
      pins.el,
    ),
    dispose: () => {
      disposed = true;
    },
  };
}

/** One call: every string from the server as text. */
function row(c: McpCall): HTMLElement {
  const notes = [
    c.policy ? h("div", null, "policy ", h("strong", null, c.policy)) : null,
    c.approval_id ? h("div", null, "approval ", h("code", null, c.approval_id)) : null,
    c.detail ? h("div", { class: "detail" }, c.detail) : null,
  ].filter((n) => n !== null);
  return h(
    "tr",
    { "data-call": c.id, "data-status": statusClass(c.status) },
    h("td", { class: "small" }, h("time", { datetime: c.ts }, when(c.ts))),
    h(
      "th",
      { scope: "row" },
      h("code", null, c.tool),
      h("div", { class: "muted small" }, `server ${c.server}`, c.agent ? ` · agent ${c.agent}` : ""),
    ),
    h("td", null, h("span", { class: `badge ${statusClass(c.status)}` }, statusText(c.status))),
    h("td", null, duration(c.duration_ms)),
    h("td", null, usd(c.usd_micros / 1e6)),
    h("td", { class: "small notes" }, notes.length ? notes : h("span", { class: "muted" }, "—")),
  );
}
