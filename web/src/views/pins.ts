// Upstream MCP tools' pinned definitions (ADR 0062), under the MCP gateway's log: the
// tools whose definition changed since it was approved — quarantined under
// `pin = "strict"` — or that the description screen flagged, with what changed and what
// the screen found, each with an Approve button (an admin's act;
// it approves exactly the definition shown, by its hash), and how many tools are
// pinned as approved. Read on opening and on Refresh. Tool names and diffs come from
// upstream servers: text only.

import { ApiError, approveTool, mcpServers, pinnedTools } from "../api";
import { h, replace, when } from "../dom";
import type { McpServerState, PinnedTool } from "../types";
import { announce, clearError, showError } from "../ui";

export interface PinsSection {
  el: HTMLElement;
  load(): Promise<void>;
}

export function pinsSection(): PinsSection {
  const out = h("div", { class: "mcp-pins", "aria-busy": "true" }, h("p", { class: "muted" }, "Loading…"));
  const servers = h("ul", { class: "mcp-servers" });

  async function load(): Promise<void> {
    out.setAttribute("aria-busy", "true");
    try {
      const [states, tools] = await Promise.all([mcpServers(), pinnedTools()]);
      replace(servers, ...states.map(serverItem));
      show(tools);
    } catch (e) {
      const what = e instanceof ApiError ? `${e.code}: ${e.message}` : String((e as Error)?.message ?? e);
      replace(out, h("p", { class: "load-error", "data-state": "error" }, `The pinned tools could not be read (${what}).`));
    } finally {
      out.setAttribute("aria-busy", "false");
    }
  }

  function show(tools: PinnedTool[]): void {
    // A changed definition, or one the description screen flagged that no person
    // approved yet.
    const changed = tools.filter((t) => t.status === "changed" || ((t.findings?.length ?? 0) > 0 && !t.approved_by));
    const pinned = tools.length - changed.length;
    const summary = h(
      "p",
      { class: "pins-total" },
      `${pinned} ${pinned === 1 ? "tool" : "tools"} pinned as approved`,
      changed.length ? ` · ${changed.length} to look at` : "",
    );
    if (!changed.length) {
      replace(out, summary);
      return;
    }
    replace(out, summary, h("ul", { class: "pin-list" }, changed.map(item)));
  }

  function serverItem(s: McpServerState): HTMLElement {
    const badge = s.state === "connected" ? "ok" : s.state === "failing" ? "error" : "other";
    return h(
      "li",
      { "data-server": s.server, "data-state": s.state },
      h("code", null, s.server),
      " ",
      h("span", { class: `badge ${badge}` }, s.state.replace(/_/g, " ")),
      s.state === "connected" ? ` · ${s.tools} ${s.tools === 1 ? "tool" : "tools"}` : "",
      s.quarantined.length ? ` · held back: ${s.quarantined.join(", ")}` : "",
      s.error ? h("div", { class: "detail small" }, s.error) : "",
    );
  }

  function item(tool: PinnedTool): HTMLElement {
    const approve = h("button", { type: "button", class: "approve-pin" }, "Approve this definition");
    approve.addEventListener("click", async () => {
      approve.disabled = true;
      try {
        await approveTool(tool);
        clearError();
        announce(`The new definition of ${tool.tool} is approved.`);
        await load();
      } catch (e) {
        approve.disabled = false;
        showError(e);
      }
    });
    return h(
      "li",
      { "data-pin": `${tool.server}/${tool.tool}`, "data-status": tool.status },
      h("div", null, h("code", null, `${tool.server}__${tool.tool}`), " ", h("span", { class: "badge denied" }, tool.status === "changed" ? "changed" : "flagged"), tool.changed_at ? h("span", { class: "muted small" }, " since ", h("time", { datetime: tool.changed_at }, when(tool.changed_at))) : ""),
      h("div", { class: "detail small" }, tool.diff ?? ""),
      tool.findings?.length ? h("div", { class: "small" }, "description screen: ", tool.findings.join("; ")) : "",
      h("div", { class: "muted small" }, "held back under pin = \"strict\" (offered under \"warn\") until approved · seen ", h("code", null, tool.seen_hash.slice(0, 12))),
      approve,
    );
  }

  return {
    el: h(
      "section",
      { class: "pins", "aria-label": "Upstream servers and pinned tool definitions" },
      h("h3", null, "Upstream servers"),
      servers,
      h("h3", null, "Pinned tool definitions"),
      h("p", { class: "muted" }, "An upstream tool whose description or schema changed after it was first listed is held back until an admin approves the new definition."),
      out,
    ),
    load,
  };
}
