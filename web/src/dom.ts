// Building DOM nodes without HTML strings. Every piece of text goes in through
// `textContent` (strings become text nodes), never `innerHTML`, so nothing a model, a
// tool or another client wrote can become markup or script; and every text node and
// label passes the one rule of what a person sees (`visible.ts`), so no bidirectional
// override, control or invisible character is drawn as something it is not. No
// framework lives here: views build nodes and replace them when their data changes.

import { visible, visibleLine } from "./visible";

/** What `h` accepts as a child: nodes, text, or nothing (skipped). */
export type Child = Node | string | number | null | undefined | false | Child[];

/** Attribute values; functions under `on…` names become event listeners. */
export type Attrs = Record<string, string | number | boolean | null | undefined | ((e: any) => void)>;

/** An element with attributes and children. */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs?: Attrs | null,
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

const SVG_NS = "http://www.w3.org/2000/svg";

/** An SVG element (charts). */
export function svg(tag: string, attrs?: Attrs | null, ...children: Child[]): SVGElement {
  const el = document.createElementNS(SVG_NS, tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

function setAttrs(el: Element, attrs?: Attrs | null): void {
  if (!attrs) return;
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (typeof value === "function") {
      el.addEventListener(key.slice(2).toLowerCase(), value);
    } else {
      // Labels a person reads (tooltips, screen readers) pass the rule too.
      const text = value === true ? "" : String(value);
      el.setAttribute(key, key === "title" || key.startsWith("aria-") ? visibleLine(text) : text);
    }
  }
}

/** Appends children to a node. */
export function append(el: Node, children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.appendChild(child instanceof Node ? child : document.createTextNode(visible(String(child))));
  }
}

/** Replaces a node's children. */
export function replace(el: Node, ...children: Child[]): void {
  while (el.firstChild) el.removeChild(el.firstChild);
  append(el, children);
}

/** JSON for people: indented, `null` for undefined. */
export function pretty(value: unknown): string {
  if (typeof value === "string") return value;
  return JSON.stringify(value ?? null, null, 2);
}

/** Dollars with enough digits for tiny local-model costs. */
export function usd(value: number): string {
  if (value === 0) return "$0";
  if (value < 0.01) return `$${value.toFixed(6)}`;
  return `$${value.toFixed(4)}`;
}

/** A timestamp in the reader's locale. */
export function when(ts: string | null | undefined): string {
  if (!ts) return "";
  const date = new Date(ts);
  return Number.isNaN(date.getTime()) ? ts : date.toLocaleString();
}
