// Policies: the set in force with each policy's type, targets, gist and source file,
// and the latest reload's validation errors (file:line: field: message) when a reload
// failed and the previous set stayed in force; and a form that asks the server to
// explain how that set decides one request (`POST /v1/policies/explain`: nothing is
// run or recorded), answered with the decision, the deciding policy, the reason, the
// set's hash and every policy with whether it matched and why.

import { ApiError, call } from "../api";
import { explainRequest, type ExplainFields } from "../explain";
import { h, replace, when } from "../dom";
import type { Agent, Explained, PolicyList } from "../types";
import { announce, clearError, showError, type View } from "../ui";

export function policiesView(): View {
  const status = h("div");
  const out = h("div");
  void (async () => {
    try {
      const list = await call<PolicyList>("GET", "/v1/policies");
      const error = list.reload_error;
      replace(
        status,
        h("p", { class: "muted" }, list.source ? `From ${list.source}, loaded ${when(list.loaded_at)}.` : "No policies directory is configured: every tool call is allowed."),
        error
          ? h(
              "div",
              { class: "reload-error", role: "alert" },
              h("strong", null, `The latest reload failed${error.failed_at ? ` (${when(error.failed_at)})` : ""}; the previous set stays in force.`),
              h("ul", null, error.errors.map((e) => h("li", null, h("code", null, `${e.source}${e.line ? `:${e.line}` : ""}`), e.field ? ` ${e.field}:` : "", ` ${e.message}`))),
            )
          : null,
      );
      replace(
        out,
        list.policies.length
          ? h(
              "table",
              { class: "policy-list" },
              h("thead", null, h("tr", null, ["name", "type", "applies to", "rule", "file"].map((c) => h("th", { scope: "col" }, c)))),
              h(
                "tbody",
                null,
                list.policies.map((p) =>
                  h(
                    "tr",
                    null,
                    h("th", { scope: "row" }, p.name, p.description ? h("div", { class: "muted small" }, p.description) : null),
                    h("td", null, h("span", { class: "badge" }, p.type)),
                    h("td", { class: "small" }, targets(p.targets)),
                    h("td", { class: "small" }, p.summary),
                    h("td", null, h("code", null, p.source)),
                  ),
                ),
              ),
            )
          : h("p", { class: "empty muted" }, "No policies in force."),
      );
    } catch (e) {
      showError(e);
    }
  })();
  return {
    el: h("section", { class: "page", "aria-label": "Policies" }, h("h2", null, "Policies"), status, explainForm(), h("h3", null, "In force"), out),
  };
}

/** The explain form and its result region. */
function explainForm(): HTMLElement {
  const agent = h("select", { id: "explain-agent", name: "agent", required: true });
  const tool = h("input", { id: "explain-tool", name: "tool", type: "text", placeholder: "write_file (empty: the turn itself)", spellcheck: "false" });
  const args = h("textarea", {
    id: "explain-args",
    name: "args",
    class: "json",
    rows: 3,
    placeholder: '{"path": "notes.txt"}',
    spellcheck: "false",
    "aria-describedby": "explain-args-error",
  });
  const argsError = h("p", { id: "explain-args-error", class: "field-error", role: "alert" });
  const client = h("input", { id: "explain-client", name: "client", type: "text", placeholder: "default: you", spellcheck: "false" });
  const roles = h("input", { id: "explain-roles", name: "roles", type: "text", placeholder: "operator, admin", spellcheck: "false" });
  const at = h("input", { id: "explain-at", name: "at", type: "datetime-local", step: 1 });
  const submit = h("button", { type: "submit", class: "primary" }, "Explain");
  const result = h("div", { class: "explain-result", "aria-live": "polite" });

  const field = (input: HTMLElement, label: string, extra?: string): HTMLElement =>
    h("div", { class: "field" }, h("label", { for: input.id }, label, extra ? h("span", { class: "muted" }, ` (${extra})`) : null), input);

  const form = h(
    "form",
    { class: "explain-form", "aria-label": "Explain a decision", novalidate: true },
    field(agent, "Agent"),
    field(tool, "Tool", "optional"),
    field(client, "Client", "optional"),
    field(roles, "Roles", "comma-separated, optional"),
    field(at, "At", "local time, optional; default now"),
    h("div", { class: "field wide" }, h("label", { for: args.id }, "Arguments", h("span", { class: "muted" }, " (a JSON object, with a tool)")), args, argsError),
    h("div", { class: "actions" }, submit),
  );

  void (async () => {
    try {
      const { agents } = await call<{ agents: Agent[] }>("GET", "/v1/agents");
      replace(agent, agents.length ? agents.map((a) => h("option", { value: a.id }, a.name || a.id)) : h("option", { value: "" }, "No agents configured"));
    } catch (e) {
      showError(e);
    }
  })();

  args.addEventListener("input", () => {
    args.removeAttribute("aria-invalid");
    replace(argsError);
  });

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const fields: ExplainFields = { agent: agent.value, tool: tool.value, args: args.value, client: client.value, roles: roles.value, at: at.value };
    const input = explainRequest(fields);
    if (!input.ok) {
      if (input.field === "args") {
        args.setAttribute("aria-invalid", "true");
        replace(argsError, input.message);
        args.focus();
      } else {
        replace(result, h("p", { class: "field-error", role: "alert" }, input.message));
      }
      return;
    }
    args.removeAttribute("aria-invalid");
    replace(argsError);
    submit.disabled = true;
    replace(result, h("p", { class: "muted" }, "Explaining…"));
    try {
      const explained = await call<Explained>("POST", "/v1/policies/explain", input.body);
      clearError();
      replace(result, explanation(explained));
      announce(`Decision: ${explained.decision}${explained.decided_by ? ` by ${explained.decided_by}` : ""}.`);
    } catch (err) {
      // A request the server refused (a bad instant, an unknown field) is the form's
      // to show; anything else (a lost credential, the network) goes to the banner.
      if (err instanceof ApiError && err.status >= 400 && err.status < 500 && err.status !== 401 && err.status !== 403) {
        replace(result, h("p", { class: "field-error", role: "alert" }, `${err.code}: ${err.message}`));
      } else {
        replace(result);
        showError(err);
      }
    } finally {
      submit.disabled = false;
    }
  });

  return h("section", { class: "explain", "aria-labelledby": "explain-heading" }, h("h3", { id: "explain-heading" }, "Explain a decision"), form, result);
}

/** The answer: the decision, who decided and why, the set's hash, every policy. */
function explanation(x: Explained): HTMLElement {
  return h(
    "div",
    { class: "explained", "data-decision": x.decision },
    h(
      "p",
      { class: "verdict" },
      h("span", { class: `badge decision ${x.decision}` }, x.decision),
      x.decided_by ? [" by ", h("strong", null, x.decided_by)] : null,
    ),
    h("p", { class: "reason" }, x.reason),
    h("p", { class: "muted small" }, "Policy set ", h("code", null, x.policy_set)),
    x.policies.length
      ? h(
          "table",
          { class: "explain-table" },
          h("caption", { class: "sr-only" }, "Every policy in force, in order, and its part in the decision"),
          h("thead", null, h("tr", null, ["name", "type", "mode", "match", "why", "effect"].map((c) => h("th", { scope: "col" }, c)))),
          h(
            "tbody",
            null,
            x.policies.map((p) =>
              h(
                "tr",
                { "data-policy": p.name, "data-matched": String(p.matched) },
                h("th", { scope: "row" }, p.name, h("div", null, h("code", { class: "small" }, p.source))),
                h("td", null, h("span", { class: "badge" }, p.type)),
                h("td", null, h("span", { class: `badge ${p.mode}` }, p.mode)),
                h("td", null, h("span", { class: `badge ${p.matched ? "matched" : "unmatched"}` }, p.matched ? "match" : "no match")),
                h("td", { class: "small" }, p.why),
                h("td", { class: "small" }, p.effect ?? h("span", { class: "muted" }, "—")),
              ),
            ),
          ),
        )
      : h("p", { class: "empty muted" }, "No policies in force: every request is allowed."),
  );
}

function targets(t: Record<string, string[] | null>): string {
  const parts = Object.entries(t)
    .filter(([, v]) => Array.isArray(v))
    .map(([k, v]) => `${k}: ${(v as string[]).join(", ")}`);
  return parts.length ? parts.join("; ") : "everything";
}
