// Pieces every view shares: the error banner, the live-region announcer, the view
// contract, and the approval card (used in the chat and in the approvals queue).

import { ApiError, call, seg } from "./api";
import { h, pretty, replace, when } from "./dom";
import type { Approval } from "./types";
import { editableJson } from "./visible";

/** A mounted view; `dispose` ends its streams and timers. */
export interface View {
  el: HTMLElement;
  dispose?: () => void;
}

let banner: HTMLElement | null = null;
let live: HTMLElement | null = null;
let onUnauthorized: () => void = () => {};

/** Wires the banner and the live region (once, at start). */
export function initUi(bannerEl: HTMLElement, liveEl: HTMLElement, unauthorized: () => void): void {
  banner = bannerEl;
  live = liveEl;
  onUnauthorized = unauthorized;
}

/** Shows an error for people: the envelope's code and message. */
export function showError(e: unknown): void {
  if (!banner) return;
  const error = e instanceof ApiError ? e : null;
  const text = error ? `${error.code}: ${error.message}` : String((e as Error)?.message ?? e);
  const dismiss = h("button", { type: "button", class: "link", onclick: () => replace(banner!) }, "Dismiss");
  replace(banner, h("div", { class: "banner", role: "alert" }, h("span", null, text), " ", dismiss));
  if (error?.status === 401) onUnauthorized();
}

/** Clears the error banner. */
export function clearError(): void {
  if (banner) replace(banner);
}

/** Says something to screen readers (and the status line). */
export function announce(text: string): void {
  if (live) live.textContent = text;
}

/** The fields an approval card shows; from an `approval_requested` event or the API. */
export interface ApprovalInfo {
  id: string;
  tool: string;
  arguments: unknown;
  policy: string;
  approvers: string[];
  expires_at: string;
  status: Approval["status"];
  thread_id?: string;
  agent?: string;
  feedback?: string | null;
  decided_by?: string | null;
  edited_arguments?: unknown;
}

/** A card to approve, edit and approve, or reject a held tool call. */
export class ApprovalCard {
  readonly el: HTMLElement;
  private readonly actions: HTMLElement;
  private readonly outcome: HTMLElement;

  constructor(private info: ApprovalInfo, private readonly onDecided?: (a: Approval) => void) {
    this.actions = h("div", { class: "actions" });
    this.outcome = h("p", { class: "outcome" });
    this.el = h(
      "section",
      { class: "approval", "data-approval": info.id, "aria-label": `Approval for ${info.tool}` },
      h(
        "header",
        null,
        h("strong", null, "Approval required"),
        " ",
        h("code", null, info.tool),
        h("span", { class: "muted" }, ` · policy ${info.policy}`),
        info.agent ? h("span", { class: "muted" }, ` · agent ${info.agent}`) : null,
      ),
      h("pre", { class: "args" }, pretty(info.arguments)),
      h(
        "p",
        { class: "muted small" },
        info.approvers.length ? `Approvers: ${info.approvers.join(", ")}. ` : "The thread's owner decides. ",
        `Expires ${when(info.expires_at)}.`,
      ),
      this.actions,
      this.outcome,
    );
    this.render();
  }

  /** Shows a decision made elsewhere (an `approval_decided` event, another tab). */
  decided(status: Approval["status"], by?: string | null, feedback?: string | null, edited?: unknown): void {
    this.info = { ...this.info, status, decided_by: by ?? null, feedback: feedback ?? null, edited_arguments: edited };
    this.render();
  }

  private render(): void {
    const { status } = this.info;
    this.el.dataset.status = status;
    if (status !== "pending") {
      replace(this.actions);
      const by = this.info.decided_by ? ` by ${this.info.decided_by}` : "";
      const feedback = this.info.feedback ? ` — “${this.info.feedback}”` : "";
      const edited = this.info.edited_arguments;
      replace(
        this.outcome,
        h("span", { class: `badge ${status}` }, status),
        `${by}${feedback}`,
        edited !== undefined && edited !== null ? [h("br"), "Ran with:", h("pre", { class: "args" }, pretty(edited))] : null,
      );
      return;
    }
    replace(this.outcome);
    const editor = h("textarea", {
      class: "json",
      rows: 6,
      "aria-label": "Edited arguments (JSON)",
      spellcheck: "false",
    });
    // Hidden characters as JSON escapes: shown, and still the same value once parsed.
    editor.value = editableJson(pretty(this.info.arguments));
    const feedback = h("input", { type: "text", "aria-label": "Feedback for the model", placeholder: "Why not (sent to the model)" });
    const editArea = h(
      "div",
      { class: "decide-more", hidden: true },
      editor,
      h("button", { type: "button", onclick: () => this.submitEdit(editor.value) }, "Approve edited call"),
    );
    const rejectArea = h(
      "div",
      { class: "decide-more", hidden: true },
      feedback,
      h("button", { type: "button", class: "danger", onclick: () => this.decide({ decision: "reject", feedback: feedback.value || undefined }) }, "Send rejection"),
    );
    feedback.addEventListener("keydown", (e) => {
      if (e.key === "Enter") {
        e.preventDefault();
        void this.decide({ decision: "reject", feedback: feedback.value || undefined });
      }
    });
    const toggle = (area: HTMLElement, focus: HTMLElement) => (e: Event) => {
      area.hidden = !area.hidden;
      (e.currentTarget as HTMLElement).setAttribute("aria-expanded", String(!area.hidden));
      if (!area.hidden) focus.focus();
    };
    replace(
      this.actions,
      h("button", { type: "button", class: "primary", onclick: () => this.decide({ decision: "approve" }) }, "Approve"),
      h("button", { type: "button", "aria-expanded": "false", onclick: toggle(editArea, editor) }, "Edit…"),
      h("button", { type: "button", "aria-expanded": "false", onclick: toggle(rejectArea, feedback) }, "Reject…"),
      editArea,
      rejectArea,
    );
  }

  private submitEdit(text: string): void {
    let args: unknown;
    try {
      args = JSON.parse(text);
    } catch (e) {
      showError(new Error(`The edited arguments are not JSON: ${(e as Error).message}`));
      return;
    }
    void this.decide({ decision: "edit", arguments: args });
  }

  private async decide(body: Record<string, unknown>): Promise<void> {
    for (const button of this.actions.querySelectorAll("button")) button.disabled = true;
    try {
      const decided = await call<Approval>("POST", `/v1/approvals/${seg(this.info.id)}`, body);
      clearError();
      this.decided(decided.status, decided.decided_by, decided.feedback, decided.edited_arguments);
      announce(`Approval ${decided.status}.`);
      this.onDecided?.(decided);
    } catch (e) {
      showError(e);
      for (const button of this.actions.querySelectorAll("button")) button.disabled = false;
    }
  }
}
