// Threads: the client's threads in a side list, a form to create one (agent, working
// directory, title), and the selected thread's chat beside them.

import { call, seg } from "../api";
import { h, replace, when } from "../dom";
import type { Agent, Thread } from "../types";
import { announce, clearError, showError, type View } from "../ui";
import { chatView } from "./chat";

const CWD_KEY = "agentplane.lastCwd";

/** The threads view; `selected` is the thread to open, if any. */
export function threadsView(selected: string | null): View {
  const list = h("ul", { class: "thread-list", "aria-label": "Threads" });
  const main = h("div", { class: "thread-main" });
  let chat: View | null = null;

  const agent = h("select", { id: "new-agent", required: true });
  const cwd = h("input", { id: "new-cwd", type: "text", required: true, placeholder: "/absolute/path", spellcheck: "false" });
  cwd.value = localStorage.getItem(CWD_KEY) ?? "";
  const title = h("input", { id: "new-title", type: "text", maxlength: 200, placeholder: "optional" });
  const create = h(
    "form",
    { class: "new-thread", "aria-label": "New thread" },
    h("label", { for: "new-agent" }, "Agent"),
    agent,
    h("label", { for: "new-cwd" }, "Working directory"),
    cwd,
    h("label", { for: "new-title" }, "Title"),
    title,
    h("button", { type: "submit", class: "primary" }, "Create thread"),
  );
  create.addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      const body: Record<string, string> = { agent: agent.value, cwd: cwd.value.trim() };
      if (title.value.trim()) body.title = title.value.trim();
      const thread = await call<Thread>("POST", "/v1/threads", body);
      clearError();
      localStorage.setItem(CWD_KEY, body.cwd);
      title.value = "";
      announce(`Thread ${thread.title ?? thread.id} created.`);
      location.hash = `#/threads/${thread.id}`;
    } catch (err) {
      showError(err);
    }
  });

  async function load(): Promise<void> {
    try {
      const [{ agents }, { threads }] = await Promise.all([
        call<{ agents: Agent[] }>("GET", "/v1/agents"),
        call<{ threads: Thread[] }>("GET", "/v1/threads"),
      ]);
      const chosen = agent.value;
      replace(agent, agents.map((a) => h("option", { value: a.id }, a.name || a.id)));
      if (chosen) agent.value = chosen;
      threads.sort((a, b) => b.created_at.localeCompare(a.created_at));
      replace(
        list,
        threads.length ? null : h("li", { class: "muted" }, "No threads yet."),
        threads.map((t) =>
          h(
            "li",
            null,
            h(
              "a",
              { href: `#/threads/${t.id}`, "aria-current": t.id === selected ? "page" : null, "data-thread": t.id },
              h("span", { class: "thread-title" }, t.title || t.id),
              h("span", { class: "muted small" }, `${t.agent} · ${when(t.created_at)}`),
            ),
          ),
        ),
      );
      if (selected && !chat) {
        const thread = threads.find((t) => t.id === selected);
        if (thread) {
          chat = chatView(thread);
          replace(main, chat.el);
          document.getElementById("composer")?.focus();
        } else {
          // Maybe another client's, or deleted: ask the server, which says why.
          try {
            const one = await call<Thread>("GET", `/v1/threads/${seg(selected)}`);
            chat = chatView(one);
            replace(main, chat.el);
          } catch (err) {
            showError(err);
          }
        }
      }
    } catch (err) {
      showError(err);
    }
  }

  replace(main, selected ? h("p", { class: "muted" }, "Loading…") : h("p", { class: "empty muted" }, "Pick a thread, or create one."));
  const el = h(
    "div",
    { class: "threads" },
    h(
      "aside",
      { class: "sidebar" },
      h("details", { class: "create", open: !selected }, h("summary", null, "New thread"), create),
      h("h2", { class: "small-heading" }, "Threads"),
      list,
    ),
    main,
  );
  void load();
  return { el, dispose: () => chat?.dispose?.() };
}
