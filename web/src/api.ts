// The API client: settings (the client id, kept in localStorage; the API key or token,
// kept in sessionStorage only, so it leaves with the browser session), JSON calls with
// the standard error envelope turned into `ApiError`, and streamed calls whose SSE
// body the caller reads. Every /v1 request carries `X-Client-ID` (unless it is empty:
// an API key acts as its own client) and, when a credential is set,
// `Authorization: Bearer`. Nothing else in the UI calls fetch().

import type { McpCall, McpServerState, PinnedTool } from "./types";

const CLIENT_KEY = "agentplane.clientId";
const TOKEN_KEY = "agentplane.token";
/** The shape the server accepts for `X-Client-ID`. */
export const CLIENT_ID_PATTERN = /^[A-Za-z0-9._:@-]{1,128}$/;

/** Who the UI is to the server. */
export interface Settings {
  clientId: string;
  token: string;
}

/** The saved settings (client id `web` until the user picks one). */
export function loadSettings(): Settings {
  return {
    clientId: localStorage.getItem(CLIENT_KEY) ?? "web",
    token: sessionStorage.getItem(TOKEN_KEY) || "",
  };
}

/** Whether a client id is acceptable: the server's shape, or empty with a credential
 * (an API key acts as its own client). */
export function validClientId(clientId: string, token: string): boolean {
  return CLIENT_ID_PATTERN.test(clientId) || (clientId === "" && token !== "");
}

/** Saves the settings; refuses a client id the server would refuse. */
export function saveSettings(settings: Settings): void {
  if (!validClientId(settings.clientId, settings.token)) {
    throw new Error("The client id may use 1 to 128 letters, digits and . _ : @ -");
  }
  localStorage.setItem(CLIENT_KEY, settings.clientId);
  // A credential never outlives the browser session (and an old saved one goes).
  localStorage.removeItem(TOKEN_KEY);
  if (settings.token) sessionStorage.setItem(TOKEN_KEY, settings.token);
  else sessionStorage.removeItem(TOKEN_KEY);
}

/** A failed call: the envelope's code and message, or a network failure (`status` 0). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
  }

  /** Worth retrying later: the network, a restart, a busy or failing server. */
  get transient(): boolean {
    return this.status === 0 || this.status === 429 || this.status >= 500;
  }
}

function headers(json: boolean): Headers {
  const { clientId, token } = loadSettings();
  const out = new Headers();
  if (clientId) out.set("X-Client-ID", clientId);
  if (token) out.set("Authorization", `Bearer ${token}`);
  if (json) out.set("Content-Type", "application/json");
  return out;
}

async function send(method: string, path: string, body: unknown, signal?: AbortSignal): Promise<Response> {
  let response: Response;
  try {
    response = await fetch(path, {
      method,
      headers: headers(body !== undefined),
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
      cache: "no-store",
    });
  } catch (e) {
    if (signal?.aborted) throw e;
    throw new ApiError(0, "NETWORK", `The server could not be reached (${(e as Error).message}).`);
  }
  if (!response.ok) throw await failure(response);
  return response;
}

async function failure(response: Response): Promise<ApiError> {
  try {
    const envelope = await response.json();
    const error = envelope?.error;
    if (error && typeof error.code === "string") {
      return new ApiError(response.status, error.code, String(error.message ?? ""), error.details ?? {});
    }
  } catch {
    // Not the envelope: fall through to a generic error.
  }
  return new ApiError(response.status, "HTTP_" + response.status, response.statusText || "request failed");
}

/** A JSON call; resolves to the parsed body (`undefined` for 204). */
export async function call<T>(method: string, path: string, body?: unknown): Promise<T> {
  const response = await send(method, path, body);
  if (response.status === 204) return undefined as T;
  return (await response.json()) as T;
}

/** A streaming call: the open response (status checked); read it with `readSse`. */
export async function stream(method: string, path: string, body: unknown, signal?: AbortSignal): Promise<Response> {
  const response = await send(method, path, body, signal);
  if (!response.body) throw new ApiError(0, "NETWORK", "The response has no body.");
  return response;
}

/** The MCP gateway's log of this client's calls, newest first (`limit`: 1 to 1000). */
export async function mcpCalls(limit: number): Promise<McpCall[]> {
  const { calls } = await call<{ calls: McpCall[] }>("GET", `/v1/mcp/calls?limit=${encodeURIComponent(String(limit))}`);
  return calls;
}

/** Where each server the MCP gateway offers stands, in configuration order. */
export async function mcpServers(): Promise<McpServerState[]> {
  const { servers } = await call<{ servers: McpServerState[] }>("GET", "/v1/mcp/servers");
  return servers;
}

/** Upstream MCP tools' pinned definitions, changed ones first. */
export async function pinnedTools(): Promise<PinnedTool[]> {
  const { tools } = await call<{ tools: PinnedTool[] }>("GET", "/v1/mcp/tools");
  return tools;
}

/** Approves the definition `seenHash` of a changed tool (an admin's act; `409` when
 * the tool was listed otherwise since). */
export async function approveTool(tool: PinnedTool): Promise<PinnedTool> {
  return call<PinnedTool>("POST", `/v1/mcp/tools/${seg(tool.server)}/${seg(tool.tool)}/approve`, { hash: tool.seen_hash });
}

/** A path segment, escaped. */
export function seg(value: string): string {
  return encodeURIComponent(value);
}
