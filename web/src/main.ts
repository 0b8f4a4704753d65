// The UI's entry: the hash router (`#/threads/ID`, `#/approvals`, `#/costs`,
// `#/agents`, `#/policies`, `#/mcp`), the navigation, and the settings dialog (client id, kept
// in localStorage; API key or token, kept for the browser session only). Hash routes keep the server to two paths: `/` and
// `/assets/…`.

import { loadSettings, saveSettings, validClientId } from "./api";
import { h, replace } from "./dom";
import { clearError, initUi, showError, type View } from "./ui";
import { agentsView } from "./views/agents";
import { approvalsView } from "./views/approvals";
import { costsView } from "./views/costs";
import { gatewayView } from "./views/gateway";
import { policiesView } from "./views/policies";
import { threadsView } from "./views/threads";

const main = document.getElementById("main")!;
const nav = document.getElementById("nav")!;
const who = document.getElementById("who") as HTMLButtonElement;
const dialog = document.getElementById("settings") as HTMLDialogElement;
const clientInput = document.getElementById("client-id") as HTMLInputElement;
const tokenInput = document.getElementById("token") as HTMLInputElement;
const settingsForm = document.getElementById("settings-form") as HTMLFormElement;
let current: View | null = null;

const ROUTES: [string, string][] = [
  ["threads", "Threads"],
  ["approvals", "Approvals"],
  ["costs", "Costs"],
  ["agents", "Agents"],
  ["policies", "Policies"],
  ["mcp", "MCP gateway"],
];

function route(): void {
  const [, page = "threads", id = null] = location.hash.split("/");
  current?.dispose?.();
  clearError();
  const view =
    page === "approvals"
      ? approvalsView()
      : page === "costs"
        ? costsView()
        : page === "agents"
          ? agentsView()
          : page === "policies"
            ? policiesView()
            : page === "mcp"
              ? gatewayView()
              : threadsView(id ? decodeURIComponent(id) : null);
  current = view;
  replace(main, view.el);
  for (const link of nav.querySelectorAll("a")) {
    if (link.dataset.page === (ROUTES.some(([p]) => p === page) ? page : "threads")) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  const label = ROUTES.find(([p]) => p === page)?.[1] ?? "Threads";
  document.title = `${label} · agentplane`;
}

function showWho(): void {
  const { clientId, token } = loadSettings();
  who.textContent = `${clientId || "the key's client"}${token ? " · signed in" : ""}`;
}

function openSettings(): void {
  const { clientId, token } = loadSettings();
  clientInput.value = clientId;
  tokenInput.value = token;
  if (!dialog.open) dialog.showModal();
  clientInput.focus();
}

replace(nav, ROUTES.map(([page, label]) => h("a", { href: `#/${page}`, "data-page": page }, label)));
initUi(document.getElementById("banner")!, document.getElementById("live")!, openSettings);
who.addEventListener("click", openSettings);
document.getElementById("settings-cancel")!.addEventListener("click", () => dialog.close());
settingsForm.addEventListener("submit", (e) => {
  e.preventDefault();
  if (!validClientId(clientInput.value, tokenInput.value.trim())) {
    clientInput.setCustomValidity("1 to 128 letters, digits and . _ : @ -");
    clientInput.reportValidity();
    return;
  }
  try {
    saveSettings({ clientId: clientInput.value, token: tokenInput.value.trim() });
    dialog.close();
    showWho();
    route();
  } catch (err) {
    showError(err);
  }
});
clientInput.addEventListener("input", () => clientInput.setCustomValidity(""));
window.addEventListener("hashchange", route);
showWho();
route();
