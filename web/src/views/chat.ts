// The chat of one thread: its turns as they stream, each tool call an expandable step
// (arguments, result, latency, status), permission prompts and approval cards inline,
// cost per turn and for the thread with a per-turn chart, each turn's trace (a
// waterfall of its model calls, tool calls and waits, built from its events; see
// trace.ts), and the composer (Enter sends, Shift+Enter is a new line). Events come from a ThreadFeed, in order and
// once, so replay after a reconnect draws exactly what was missed.

import { call, seg, stream } from "../api";
import { barChart } from "../chart";
import { h, pretty, replace, usd } from "../dom";
import { type FeedState, ThreadFeed } from "../feed";
import { buildTrace } from "../trace";
import type { AgentEvent, Thread } from "../types";
import { announce, ApprovalCard, clearError, showError, type View } from "../ui";
import { waterfall } from "../waterfall";

/** One tool call's step. */
interface Step {
  el: HTMLDetailsElement;
  status: HTMLElement;
  latency: HTMLElement;
  result: HTMLElement;
}

/** One turn's block. */
class TurnBlock {
  readonly el: HTMLElement;
  readonly body: HTMLElement;
  readonly footer: HTMLElement;
  /** The turn's events as stored, for its trace. */
  readonly events: AgentEvent[] = [];
  readonly trace: HTMLDetailsElement;
  private readonly traceBody: HTMLElement;
  private tick: ReturnType<typeof setTimeout> | undefined;
  text: HTMLElement | null = null;
  readonly steps = new Map<string, Step>();
  readonly permissions = new Map<string, HTMLElement>();
  readonly approvals = new Map<string, ApprovalCard>();
  micros = 0;
  inputTokens = 0;
  outputTokens = 0;
  calls = 0;
  running = true;
  stopReason = "";

  constructor(readonly id: string, readonly index: number, event: AgentEvent) {
    this.body = h("div", { class: "turn-body" });
    this.footer = h("footer", { class: "turn-footer muted small" });
    this.traceBody = h("div", { class: "trace-body" });
    this.trace = h("details", { class: "trace" }, h("summary", null, `Trace of turn ${index}`), this.traceBody);
    this.trace.addEventListener("toggle", () => this.renderTrace());
    this.events.push(event);
    this.el = h(
      "article",
      { class: "turn", "data-turn": id, "aria-label": `Turn ${index}` },
      h("div", { class: "user" }, h("span", { class: "speaker" }, "You"), h("p", { class: "input" }, String(event.input ?? ""))),
      h("div", { class: "agent" }, h("span", { class: "speaker" }, `${event.agent} · ${event.model}`), this.body),
      this.footer,
      this.trace,
    );
    this.renderFooter();
  }

  /** Redraws the waterfall while it is open (from the events so far; a running turn's
   * open spans reach the present). */
  renderTrace(): void {
    clearTimeout(this.tick);
    this.tick = undefined;
    if (!this.trace.open) return;
    const trace = buildTrace(this.events, this.id, this.running ? Date.now() : undefined);
    replace(this.traceBody, trace ? waterfall(trace) : h("p", { class: "muted" }, "No events yet."));
    // A waiting turn's open bars grow with the clock, once a second, while shown.
    if (this.running && this.el.isConnected) this.tick = setTimeout(() => this.renderTrace(), 1000);
  }

  renderFooter(): void {
    const state = this.running
      ? h("span", { class: "badge running" }, "running")
      : h("span", { class: `badge ${this.stopReason}` }, this.stopReason.replace("_", " "));
    const cost = this.calls
      ? `Cost ${usd(this.micros / 1e6)} · ${this.calls} model call${this.calls === 1 ? "" : "s"} · ${this.inputTokens} in / ${this.outputTokens} out tokens`
      : "No model calls priced yet";
    replace(this.footer, state, " ", h("span", { class: "turn-cost" }, cost));
  }
}

/** The chat view of a thread. */
export function chatView(thread: Thread): View {
  const turns = new Map<string, TurnBlock>();
  const log = h("div", { class: "log", "aria-live": "off" });
  const status = h("span", { class: "feed-state", "data-state": "connecting" }, "connecting…");
  const total = h("span", { class: "thread-cost" }, "Thread cost $0");
  const chart = h("div", { class: "turn-chart" });
  const input = h("textarea", {
    id: "composer",
    rows: 3,
    placeholder: "Ask the agent… (Enter sends, Shift+Enter for a new line)",
    "aria-label": "Message",
  });
  const send = h("button", { type: "submit", class: "primary" }, "Send");
  const cancel = h("button", { type: "button", hidden: true }, "Cancel turn");
  const form = h("form", { class: "composer", "aria-label": "Send a message" }, input, h("div", { class: "composer-actions" }, cancel, send));

  const feed = new ThreadFeed(thread.id, apply, (state: FeedState, error) => {
    status.dataset.state = state;
    status.textContent = { connecting: "connecting…", live: "live", reconnecting: "reconnecting…", failed: "disconnected" }[state];
    if (state === "reconnecting") announce("Connection lost; reconnecting.");
    if (state === "live") announce("Connected.");
    if (error) showError(error);
  });

  function running(): TurnBlock | undefined {
    for (const turn of turns.values()) if (turn.running) return turn;
    return undefined;
  }

  function refreshControls(): void {
    const active = running();
    send.disabled = !!active;
    cancel.hidden = !active;
    let micros = 0;
    const bars = [];
    for (const turn of turns.values()) {
      micros += turn.micros;
      bars.push({ label: `Turn ${turn.index}`, value: turn.micros, text: usd(turn.micros / 1e6) });
    }
    total.textContent = `Thread cost ${usd(micros / 1e6)}`;
    replace(chart, bars.length ? barChart(bars, "Cost per turn") : null);
  }

  function turnOf(event: AgentEvent): TurnBlock | undefined {
    return turns.get(event.turn_id);
  }

  function apply(event: AgentEvent): void {
    if (event.kind === "turn_started") {
      const turn = new TurnBlock(event.turn_id, turns.size + 1, event);
      turns.set(event.turn_id, turn);
      log.appendChild(turn.el);
      refreshControls();
      scroll();
      return;
    }
    const turn = turnOf(event);
    if (!turn) return; // An event of a turn begun before the feed (cannot happen with after=0).
    turn.events.push(event);
    applyTo(turn, event);
    turn.renderTrace();
    scroll();
  }

  function applyTo(turn: TurnBlock, event: AgentEvent): void {
    switch (event.kind) {
      case "message_delta": {
        if (!turn.text) {
          turn.text = h("p", { class: "answer" });
          turn.body.appendChild(turn.text);
        }
        turn.text.textContent += String(event.text ?? "");
        break;
      }
      case "tool_call_planned": {
        turn.text = null;
        const stepStatus = h("span", { class: "badge running" }, "running");
        const latency = h("span", { class: "latency muted" });
        const result = h("div", { class: "result" }, h("p", { class: "muted" }, "No result yet."));
        const el = h(
          "details",
          { class: "step", "data-call": event.call_id },
          h("summary", null, h("span", { class: "tool" }, event.tool), " ", stepStatus, " ", latency),
          h("div", { class: "step-body" }, h("h4", null, "Arguments"), h("pre", { class: "args" }, pretty(event.arguments)), h("h4", null, "Result"), result),
        );
        turn.steps.set(event.call_id, { el, status: stepStatus, latency, result });
        turn.body.appendChild(el);
        break;
      }
      case "tool_call_result": {
        const step = turn.steps.get(event.call_id);
        if (!step) break;
        step.status.className = `badge ${event.status}`;
        step.status.textContent = event.error_type ? `${event.status}: ${event.error_type}` : event.status;
        step.latency.textContent = `${event.latency_ms} ms`;
        replace(
          step.result,
          h("pre", { class: "output" }, String(event.output ?? "")),
          event.truncated ? h("p", { class: "muted small" }, "Output truncated to the agent's cap.") : null,
        );
        break;
      }
      case "permission_required": {
        turn.text = null;
        const prompt = permissionPrompt(event);
        turn.permissions.set(event.permission_id, prompt);
        turn.body.appendChild(prompt);
        prompt.querySelector<HTMLButtonElement>("button")?.focus();
        break;
      }
      case "permission_resolved": {
        const prompt = turn.permissions.get(event.permission_id);
        if (prompt) {
          replace(
            prompt.querySelector(".actions")!,
            h("span", { class: `badge ${event.decision}` }, event.decision),
            ` ${event.reason ?? ""}`,
          );
        }
        break;
      }
      case "approval_requested": {
        turn.text = null;
        const step = turn.steps.get(event.call_id);
        if (step) {
          step.status.className = "badge pending";
          step.status.textContent = "awaiting approval";
        }
        const card = new ApprovalCard({
          id: event.approval_id,
          tool: event.tool,
          arguments: event.arguments,
          policy: event.policy,
          approvers: event.approvers ?? [],
          expires_at: event.expires_at,
          status: "pending",
        });
        turn.approvals.set(event.approval_id, card);
        turn.body.appendChild(card.el);
        announce(`The call to ${event.tool} waits for approval.`);
        break;
      }
      case "approval_decided": {
        // The decider's proof (`key:key_…`, `oidc:SUBJECT`, `token`) beside the client.
        const by = event.decider && event.decider !== "claimed" ? `${event.by} (${event.decider})` : event.by;
        turn.approvals.get(event.approval_id)?.decided(event.outcome, by, event.feedback, event.arguments);
        break;
      }
      case "cost": {
        turn.calls += 1;
        turn.micros += Number(event.usd_micros ?? 0);
        turn.inputTokens += Number(event.input_tokens ?? 0);
        turn.outputTokens += Number(event.output_tokens ?? 0);
        turn.renderFooter();
        refreshControls();
        break;
      }
      case "security_event":
        turn.body.appendChild(notice("security", `Refused (${event.event_type}): ${event.detail}`));
        break;
      case "policy_violation":
        turn.body.appendChild(notice("violation", `Policy ${event.policy}: ${event.detail}`));
        break;
      case "error":
        turn.body.appendChild(notice("error", `${event.code}: ${event.message}`));
        break;
      case "turn_completed": {
        turn.running = false;
        turn.stopReason = String(event.stop_reason);
        turn.text = null;
        const result = event.result;
        const isText = result && typeof result === "object" && Object.keys(result).length === 1 && "text" in result;
        if (result !== null && result !== undefined && !isText) {
          turn.body.appendChild(h("div", { class: "final" }, h("h4", null, "Result"), h("pre", null, pretty(result))));
        }
        turn.renderFooter();
        refreshControls();
        announce(`Turn ${turn.index} ${turn.stopReason.replace("_", " ")}.`);
        break;
      }
      default:
        break; // usage, and kinds this UI does not know yet
    }
  }

  function scroll(): void {
    // Follow the bottom unless the reader scrolled up.
    const near = log.scrollHeight - log.scrollTop - log.clientHeight < 120;
    if (near) log.scrollTop = log.scrollHeight;
  }

  async function submit(): Promise<void> {
    const text = input.value;
    if (!text.trim() || running()) return;
    send.disabled = true;
    try {
      // Not tied to the view: the turn's stream outlives a visit to another view.
      const response = await stream("POST", `/v1/threads/${seg(thread.id)}/turns`, { input: text });
      clearError();
      input.value = "";
      await feed.readTurn(response);
    } catch (e) {
      if (!feed.stopped) showError(e);
    } finally {
      if (!feed.stopped) refreshControls();
    }
  }

  form.addEventListener("submit", (e) => {
    e.preventDefault();
    void submit();
  });
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      void submit();
    }
  });
  cancel.addEventListener("click", async () => {
    const turn = running();
    if (!turn) return;
    try {
      await call("POST", `/v1/turns/${seg(turn.id)}/cancel`);
    } catch (e) {
      showError(e);
    }
  });

  const el = h(
    "section",
    { class: "chat", "aria-label": "Chat" },
    h(
      "header",
      { class: "chat-header" },
      h("h2", null, thread.title || thread.id),
      h("p", { class: "muted small" }, `${thread.agent} · ${thread.cwd} · `, status, " · ", total),
      h("details", { class: "chart-box", open: true }, h("summary", null, "Cost per turn"), chart),
    ),
    log,
    form,
  );
  feed.start();
  return { el, dispose: () => feed.stop() };
}

function notice(kind: string, text: string): HTMLElement {
  return h("p", { class: `notice ${kind}`, role: "note" }, text);
}

function permissionPrompt(event: AgentEvent): HTMLElement {
  const actions = h("div", { class: "actions" });
  const decide = async (decision: string) => {
    for (const b of actions.querySelectorAll("button")) b.disabled = true;
    try {
      await call("POST", `/v1/permissions/${seg(event.permission_id)}`, { decision });
    } catch (e) {
      showError(e);
    }
  };
  replace(
    actions,
    h("button", { type: "button", class: "primary", onclick: () => decide("approved") }, "Allow"),
    h("button", { type: "button", class: "danger", onclick: () => decide("declined") }, "Decline"),
  );
  return h(
    "section",
    { class: "permission", "aria-label": `Permission for ${event.tool}` },
    h("header", null, h("strong", null, "Permission needed"), " ", h("code", null, event.tool)),
    h("pre", { class: "args" }, pretty(event.arguments)),
    actions,
  );
}
