// Policies, read-only: the set in force with each policy's type, targets, gist and
// source file, and the latest reload's validation errors (file:line: field: message)
// when a reload failed and the previous set stayed in force.

import { call } from "../api";
import { h, replace, when } from "../dom";
import type { PolicyList } from "../types";
import { showError, type View } from "../ui";

export function policiesView(): View {
  const out = h("div");
  void (async () => {
    try {
      const list = await call<PolicyList>("GET", "/v1/policies");
      const error = list.reload_error;
      replace(
        out,
        h("p", { class: "muted" }, list.source ? `From ${list.source}, loaded ${when(list.loaded_at)}.` : "No policies directory is configured: every tool call is allowed."),
        error
          ? h(
              "div",
              { class: "reload-error", role: "alert" },
              h("strong", null, `The latest reload failed${error.failed_at ? ` (${when(error.failed_at)})` : ""}; the previous set stays in force.`),
              h("ul", null, error.errors.map((e) => h("li", null, h("code", null, `${e.source}${e.line ? `:${e.line}` : ""}`), e.field ? ` ${e.field}:` : "", ` ${e.message}`))),
            )
          : null,
        list.policies.length
          ? h(
              "table",
              null,
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
  return { el: h("section", { class: "page", "aria-label": "Policies" }, h("h2", null, "Policies"), out) };
}

function targets(t: Record<string, string[] | null>): string {
  const parts = Object.entries(t)
    .filter(([, v]) => Array.isArray(v))
    .map(([k, v]) => `${k}: ${(v as string[]).join(", ")}`);
  return parts.length ? parts.join("; ") : "everything";
}
