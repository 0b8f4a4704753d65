// A turn's trace drawn as a waterfall: one table row per span (the turn, then its
// model calls, tool calls, approval and permission waits in the order they began),
// each with a bar placed by its start and length on the turn's timeline, and its
// duration, tokens and cost beside it. The bars are inline SVG with percentage
// coordinates (the CSP allows no inline style); each row's `title` and the bar's
// <title> carry the details for hover, and the table itself is the text version.
// Tool names come from models and MCP servers: every string goes in as text. Classes
// are `trace-`prefixed so the chat's own selectors (`.turn`, `.approval`) never match.

import { h, svg, usd } from "./dom";
import { duration } from "./mcpcalls";
import { kindText, type Span } from "./trace";

/** The percentage of the timeline `ms` is at (never NaN). */
function pct(ms: number, total: number): number {
  if (!(total > 0)) return 0;
  return Math.min(100, Math.max(0, (ms / total) * 100));
}

function tokens(span: Span): string {
  if (span.inputTokens === undefined && span.outputTokens === undefined) return "";
  return `${span.inputTokens ?? 0} in / ${span.outputTokens ?? 0} out`;
}

/** The hover text of a span: what, when, how long, how it ended. */
export function describe(span: Span): string {
  const parts = [
    `${kindText(span.kind)} ${span.name}`,
    `starts at +${duration(span.startMs)}`,
    `${span.open ? "so far " : ""}${duration(span.durationMs)}`,
    span.status.replace(/_/g, " "),
  ];
  if (span.run) parts.push(`ran ${duration(span.run.durationMs)}`);
  const t = tokens(span);
  if (t) parts.push(`${t} tokens`);
  if (span.usdMicros !== undefined) parts.push(usd(span.usdMicros / 1e6));
  if (span.detail) parts.push(span.detail);
  return parts.join(" · ");
}

function bar(span: Span, total: number): SVGElement {
  const x = pct(span.startMs, total);
  // At least a sliver, so an instant still shows where it happened.
  const width = Math.max(pct(span.durationMs, total), 0.4);
  return svg(
    "svg",
    { class: "trace-track", width: "100%", height: 16, role: "img", "aria-label": describe(span) },
    svg("title", null, describe(span)),
    svg("rect", {
      x: `${Math.min(x, 100 - width).toFixed(3)}%`,
      y: 2,
      width: `${width.toFixed(3)}%`,
      height: 12,
      rx: 2,
      class: `trace-bar trace-${span.kind}${span.open ? " trace-open" : ""}`,
    }),
    span.run && span.run.durationMs > 0
      ? svg("rect", {
          x: `${pct(span.run.startMs, total).toFixed(3)}%`,
          y: 5,
          width: `${Math.max(pct(span.run.durationMs, total), 0.4).toFixed(3)}%`,
          height: 6,
          class: "trace-run",
        })
      : null,
  );
}

function row(span: Span, total: number): HTMLElement {
  return h(
    "tr",
    {
      class: `trace-row trace-${span.kind}`,
      "data-kind": span.kind,
      "data-span": span.id,
      "data-status": span.status,
      "data-start-ms": Math.round(span.startMs),
      "data-duration-ms": Math.round(span.durationMs),
      title: describe(span),
    },
    h(
      "th",
      { scope: "row", class: span.kind === "turn" ? "trace-name" : "trace-name child" },
      span.kind === "tool" || span.kind === "approval" || span.kind === "permission" ? h("code", null, span.name) : span.name,
      h("span", { class: "muted small" }, ` ${kindText(span.kind)}`),
      span.status !== "ok" ? h("span", { class: `badge ${span.status}` }, span.status.replace(/_/g, " ")) : null,
    ),
    h("td", { class: "trace-timeline" }, bar(span, total)),
    h("td", { class: "trace-duration" }, `${span.open ? "≥ " : ""}${duration(span.durationMs)}`),
    h("td", { class: "trace-tokens small" }, tokens(span)),
    h("td", { class: "trace-cost small" }, span.usdMicros !== undefined ? usd(span.usdMicros / 1e6) : ""),
  );
}

/** The waterfall of one turn's trace. */
export function waterfall(trace: Span): HTMLElement {
  const total = trace.durationMs;
  return h(
    "table",
    { class: "waterfall" },
    h("caption", { class: "sr-only" }, "The turn's model calls, tool calls and waits, on its timeline"),
    h(
      "thead",
      null,
      h(
        "tr",
        null,
        h("th", { scope: "col" }, "span"),
        h("th", { scope: "col", class: "trace-timeline" }, `timeline (0 – ${duration(total)})`),
        h("th", { scope: "col" }, "duration"),
        h("th", { scope: "col" }, "tokens"),
        h("th", { scope: "col" }, "cost"),
      ),
    ),
    h("tbody", null, row(trace, total), trace.children.map((s) => row(s, total))),
  );
}
