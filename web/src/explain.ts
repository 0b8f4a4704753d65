// The explain form's fields turned into a `POST /v1/policies/explain` body, checked
// before anything is sent: arguments must be a JSON object and need a tool, the
// instant must be a real one. Pure (no DOM), so the unit tests run it in node.

import type { ExplainRequest } from "./types";

/** The form's raw values, as typed. */
export interface ExplainFields {
  agent: string;
  tool: string;
  args: string;
  client: string;
  roles: string;
  /** A `datetime-local` value (local time, no zone) or an RFC 3339 instant; "" for now. */
  at: string;
}

/** The body to send, or what is wrong with the fields (nothing is sent then). */
export type ExplainInput = { ok: true; body: ExplainRequest } | { ok: false; field: keyof ExplainFields; message: string };

/** Builds the request body from the form's fields. */
export function explainRequest(fields: ExplainFields): ExplainInput {
  const agent = fields.agent.trim();
  if (!agent) return { ok: false, field: "agent", message: "Choose an agent." };
  const body: ExplainRequest = { agent };
  const tool = fields.tool.trim();
  if (tool) body.tool = tool;
  const argsText = fields.args.trim();
  if (argsText) {
    if (!tool) return { ok: false, field: "args", message: "Arguments belong to a tool call: name the tool, or leave the arguments empty." };
    let args: unknown;
    try {
      args = JSON.parse(argsText);
    } catch (e) {
      return { ok: false, field: "args", message: `The arguments are not JSON (${(e as Error).message}). Write an object, like {"path": "notes.txt"}.` };
    }
    if (args === null || typeof args !== "object" || Array.isArray(args)) {
      return { ok: false, field: "args", message: 'The arguments must be a JSON object, like {"path": "notes.txt"}.' };
    }
    body.args = args as Record<string, unknown>;
  }
  const client = fields.client.trim();
  if (client) body.client = client;
  const roles = fields.roles
    .split(",")
    .map((r) => r.trim())
    .filter((r) => r !== "");
  if (roles.length) body.roles = roles;
  const at = fields.at.trim();
  if (at) {
    const instant = new Date(at);
    if (Number.isNaN(instant.getTime())) return { ok: false, field: "at", message: "The instant is not a date and time." };
    body.at = instant.toISOString();
  }
  return { ok: true, body };
}
