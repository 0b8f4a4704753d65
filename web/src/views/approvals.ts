// The approvals queue: held tool calls the client may decide (its threads' and those
// naming it as approver), pending first; "all" shows decided ones too. Refreshed every
// few seconds while open, since decisions may come from elsewhere (CLI, expiry).

import { call } from "../api";
import { h, replace, when } from "../dom";
import type { Approval } from "../types";
import { ApprovalCard, showError, type View } from "../ui";

const REFRESH_MS = 3000;

export function approvalsView(): View {
  const list = h("div", { class: "approvals-list" });
  const all = h("input", { type: "checkbox", id: "show-all" });
  let shown = "";

  async function load(): Promise<void> {
    try {
      const { approvals } = await call<{ approvals: Approval[] }>("GET", `/v1/approvals?status=${all.checked ? "all" : "pending"}`);
      // Redraw only on change, so a reviewer typing feedback is not interrupted.
      const key = JSON.stringify(approvals.map((a) => [a.id, a.status]));
      if (key === shown) return;
      shown = key;
      approvals.reverse(); // newest first
      replace(
        list,
        approvals.length ? null : h("p", { class: "empty muted" }, all.checked ? "No approvals yet." : "Nothing waits for a decision."),
        approvals.map((a) => {
          const card = new ApprovalCard(a, () => void load());
          return h(
            "div",
            { class: "approval-row" },
            h("p", { class: "muted small" }, "Thread ", h("a", { href: `#/threads/${a.thread_id}` }, a.thread_id), ` · requested ${when(a.created_at)}`),
            card.el,
          );
        }),
      );
    } catch (e) {
      showError(e);
    }
  }

  all.addEventListener("change", () => {
    shown = "";
    void load();
  });
  const timer = setInterval(() => void load(), REFRESH_MS);
  void load();
  return {
    el: h(
      "section",
      { class: "page", "aria-label": "Approvals" },
      h("h2", null, "Approvals"),
      h("p", { class: "controls" }, all, h("label", { for: "show-all" }, " Show decided approvals too")),
      list,
    ),
    dispose: () => clearInterval(timer),
  };
}
