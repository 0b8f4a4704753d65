// Simple bar charts as inline SVG built node by node (the CSP allows no inline style
// or script, and no chart library is needed for bars). Each bar has a <title>, and the
// data is always also in a table beside the chart for keyboard and screen readers.

import { svg } from "./dom";

/** One bar. */
export interface Bar {
  label: string;
  value: number;
  /** What the bar's value reads as (`$0.0012`). */
  text: string;
}

const ROW = 22;
const LABEL = 180;
const WIDTH = 640;

/** Horizontal bars scaled to the largest value. */
export function barChart(bars: Bar[], caption: string): SVGElement {
  const max = Math.max(...bars.map((b) => b.value), 0);
  const height = Math.max(bars.length, 1) * ROW + 4;
  const chart = svg("svg", {
    class: "chart",
    viewBox: `0 0 ${WIDTH} ${height}`,
    role: "img",
    "aria-label": caption,
    preserveAspectRatio: "xMinYMin meet",
  });
  const room = WIDTH - LABEL - 110;
  bars.forEach((bar, i) => {
    const y = i * ROW + 2;
    const width = max > 0 ? Math.max((bar.value / max) * room, bar.value > 0 ? 2 : 0) : 0;
    const label = bar.label.length > 26 ? `${bar.label.slice(0, 12)}…${bar.label.slice(-12)}` : bar.label;
    chart.appendChild(
      svg(
        "g",
        null,
        svg("title", null, `${bar.label}: ${bar.text}`),
        svg("text", { x: LABEL - 6, y: y + 15, "text-anchor": "end", class: "chart-label" }, label),
        svg("rect", { x: LABEL, y: y + 3, width: width.toFixed(1), height: ROW - 6, rx: 2, class: "chart-bar" }),
        svg("text", { x: LABEL + width + 6, y: y + 15, class: "chart-value" }, bar.text),
      ),
    );
  });
  return chart;
}
