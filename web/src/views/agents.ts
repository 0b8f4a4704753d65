// Agents: each agent's description, tool ensembles and model status, and its versions
// when the server records them (fields absent on older servers are simply not shown;
// the versions list is asked for on demand and tolerated when missing).

import { ApiError, call, seg } from "../api";
import { h, pretty, replace } from "../dom";
import type { Agent } from "../types";
import { showError, type View } from "../ui";

export function agentsView(): View {
  const list = h("div", { class: "cards" });
  void (async () => {
    try {
      const { agents } = await call<{ agents: Agent[] }>("GET", "/v1/agents");
      replace(list, agents.length ? agents.map(card) : h("p", { class: "muted" }, "No agents configured."));
    } catch (e) {
      showError(e);
    }
  })();
  return { el: h("section", { class: "page", "aria-label": "Agents" }, h("h2", null, "Agents"), list) };
}

function card(agent: Agent): HTMLElement {
  const model = agent.model;
  const versions = h("div", { class: "versions" });
  const known = Array.isArray(agent.versions) ? agent.versions : null;
  if (known) replace(versions, versionList(known));
  const more = h("button", { type: "button" }, "Versions");
  more.addEventListener("click", async () => {
    more.disabled = true;
    try {
      const answer = await call<unknown>("GET", `/v1/agents/${seg(agent.id)}/versions`);
      const items = Array.isArray(answer) ? answer : Array.isArray((answer as any)?.versions) ? (answer as any).versions : [answer];
      replace(versions, versionList(items));
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) replace(versions, h("p", { class: "muted small" }, "This server records no versions for this agent."));
      else showError(e);
    } finally {
      more.disabled = false;
    }
  });
  const version = agent.version ?? (agent as any).current_version ?? null;
  return h(
    "article",
    { class: "card", "data-agent": agent.id },
    h("h3", null, agent.name || agent.id, version !== null && version !== undefined ? h("span", { class: "badge" }, `v${String(version).replace(/^v/, "")}`) : null),
    agent.description ? h("p", null, agent.description) : null,
    h("p", { class: "small" }, "Tools: ", (agent.ensembles ?? []).length ? (agent.ensembles ?? []).join(", ") : "none"),
    model
      ? h(
          "p",
          { class: "small" },
          "Model ",
          h("code", null, model.model),
          " ",
          h("span", { class: `badge ${model.status}` }, model.status),
          model.detail ? h("span", { class: "muted" }, ` ${model.detail}`) : null,
        )
      : null,
    more,
    versions,
  );
}

function versionList(items: unknown[]): HTMLElement {
  if (!items.length) return h("p", { class: "muted small" }, "No versions recorded.");
  return h(
    "ol",
    { class: "version-list" },
    items.map((item) => {
      const v = (item ?? {}) as Record<string, unknown>;
      const name = v.version ?? v.id ?? v.name ?? "?";
      const flags = [v.status, v.active === true || v.current === true ? "current" : null].filter(Boolean).join(", ");
      return h(
        "li",
        null,
        h("details", null, h("summary", null, `v${String(name).replace(/^v/, "")}`, flags ? ` (${flags})` : "", v.created_at ? ` · ${String(v.created_at)}` : ""), h("pre", null, pretty(item))),
      );
    }),
  );
}
