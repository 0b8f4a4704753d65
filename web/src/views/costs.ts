// Costs: what the client's model calls cost, grouped by agent, thread, turn (of one
// thread), model, provider or day, as a bar chart and the same numbers in a table.

import { call, seg } from "../api";
import { barChart } from "../chart";
import { h, replace, usd } from "../dom";
import type { CostReport, Thread } from "../types";
import { showError, type View } from "../ui";

const GROUPS = ["agent", "thread", "turn", "model", "provider", "day"] as const;

export function costsView(): View {
  const group = h("select", { id: "cost-group" }, GROUPS.map((g) => h("option", { value: g }, g)));
  const thread = h("select", { id: "cost-thread", "aria-label": "Thread", hidden: true });
  const threadLabel = h("label", { for: "cost-thread", hidden: true }, "of thread");
  const out = h("div", { class: "cost-report" });
  let threads: Thread[] = [];

  async function load(): Promise<void> {
    const turnGroup = group.value === "turn";
    thread.hidden = !turnGroup;
    threadLabel.hidden = !turnGroup;
    if (turnGroup && !thread.value) {
      replace(out, h("p", { class: "muted" }, "Create a thread first: turns are grouped within one thread."));
      return;
    }
    const query = `group_by=${seg(group.value)}${turnGroup ? `&thread_id=${seg(thread.value)}` : ""}`;
    try {
      const report = await call<CostReport>("GET", `/v1/costs?${query}`);
      const label = (key: string) => (group.value === "thread" ? threads.find((t) => t.id === key)?.title || key : key);
      replace(
        out,
        h("p", { class: "total" }, `Total ${usd(report.total.usd)} · ${report.total.calls} model calls · ${report.total.input_tokens} in / ${report.total.output_tokens} out tokens`),
        report.rows.length
          ? barChart(
              report.rows.map((r) => ({ label: label(r.key), value: r.usd_micros, text: usd(r.usd) })),
              `Cost per ${report.group_by}`,
            )
          : h("p", { class: "empty muted" }, "No model calls yet."),
        h(
          "table",
          null,
          h("caption", { class: "sr-only" }, `Cost per ${report.group_by}`),
          h("thead", null, h("tr", null, h("th", { scope: "col" }, report.group_by), h("th", { scope: "col" }, "calls"), h("th", { scope: "col" }, "input tokens"), h("th", { scope: "col" }, "output tokens"), h("th", { scope: "col" }, "cost"))),
          h(
            "tbody",
            null,
            report.rows.map((r) =>
              h("tr", null, h("th", { scope: "row" }, label(r.key)), h("td", null, r.calls), h("td", null, r.input_tokens), h("td", null, r.output_tokens), h("td", null, usd(r.usd))),
            ),
          ),
        ),
      );
    } catch (e) {
      showError(e);
    }
  }

  group.addEventListener("change", () => void load());
  thread.addEventListener("change", () => void load());
  void (async () => {
    try {
      threads = (await call<{ threads: Thread[] }>("GET", "/v1/threads")).threads;
      replace(thread, threads.map((t) => h("option", { value: t.id }, t.title || t.id)));
    } catch (e) {
      showError(e);
    }
    await load();
  })();
  return {
    el: h(
      "section",
      { class: "page", "aria-label": "Costs" },
      h("h2", null, "Costs"),
      h("p", { class: "controls" }, h("label", { for: "cost-group" }, "Group by "), group, " ", threadLabel, " ", thread),
      out,
    ),
  };
}
