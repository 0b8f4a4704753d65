// The API's shapes as the UI reads them (README.md, /openapi.json). Fields another
// version of the server may not send are optional, and views tolerate their absence.

export interface Agent {
  id: string;
  name: string;
  description?: string;
  ensembles?: string[];
  model?: { status: string; model: string; detail?: string | null };
  /** From the agent-versions API, when the server has it. */
  version?: string | number | null;
  versions?: unknown[];
  [key: string]: unknown;
}

export interface Thread {
  id: string;
  agent: string;
  cwd: string;
  title: string | null;
  created_at: string;
  summary?: string | null;
}

/** A stored event: common fields plus its kind's fields. */
export interface AgentEvent {
  thread_id: string;
  turn_id: string;
  seq: number;
  ts: string;
  kind: string;
  [field: string]: any;
}

export interface Approval {
  id: string;
  thread_id: string;
  turn_id: string;
  agent: string;
  call_id: string;
  tool: string;
  arguments: unknown;
  policy: string;
  approvers: string[];
  status: "pending" | "approved" | "edited" | "rejected" | "expired";
  edited_arguments?: unknown;
  feedback?: string | null;
  decided_by?: string | null;
  created_at: string;
  expires_at: string;
  decided_at?: string | null;
}

export interface CostRow {
  key: string;
  calls: number;
  input_tokens: number;
  output_tokens: number;
  usd_micros: number;
  usd: number;
}

export interface CostReport {
  group_by: string;
  rows: CostRow[];
  total: Omit<CostRow, "key">;
}

export interface PolicyList {
  source: string | null;
  loaded_at: string | null;
  policies: {
    name: string;
    type: string;
    description: string | null;
    targets: Record<string, string[] | null>;
    summary: string;
    source: string;
  }[];
  reload_error: {
    failed_at: string | null;
    errors: { source: string; line: number | null; field: string | null; message: string }[];
  } | null;
}

/** `POST /v1/policies/explain`'s body: the facts of one request to decide. */
export interface ExplainRequest {
  agent: string;
  /** Absent: a turn-level request. */
  tool?: string;
  /** The call's arguments; only with `tool`. */
  args?: Record<string, unknown>;
  /** Default: the caller. */
  client?: string;
  roles?: string[];
  /** Default: the configured agent's tags. */
  tags?: string[];
  version?: string;
  /** RFC 3339; default: now. */
  at?: string;
}

/** One policy's part in an explained decision. */
export interface ExplainedPolicy {
  name: string;
  type: string;
  mode: "enforce" | "audit" | string;
  source: string;
  /** Whether its targets and condition selected the request. */
  matched: boolean;
  /** The target or condition that decided whether it matched. */
  why: string;
  /** What it made of the request, when it matched. */
  effect?: string;
}

/** `POST /v1/policies/explain`'s answer. */
export interface Explained {
  /** `sha256:…`: the version of the set in force. */
  policy_set: string;
  decision: "allow" | "deny" | "approval" | string;
  /** The deciding policy, for `deny` and `approval`. */
  decided_by?: string;
  reason: string;
  /** The enforced policies that selected the request, in set order. */
  matched: string[];
  /** Every policy, in set order. */
  policies: ExplainedPolicy[];
}

/** How a call through the MCP gateway ended (docs/mcp-gateway.md, "The log"). */
export type McpCallStatus = "ok" | "error" | "denied" | "rate_limited" | "budget_exceeded" | "rejected" | "expired" | "invalid";

/** One row of the MCP gateway's log (`GET /v1/mcp/calls`); never the arguments. The
 * strings other than `id`, `ts` and `status` may come from upstream MCP servers or
 * their callers: shown as text only. */
export interface McpCall {
  /** `mcpc_…`. */
  id: string;
  /** When it ended (RFC 3339). */
  ts: string;
  client: string;
  /** The agent name policies and budgets saw it under (`mcp-gateway` by default). */
  agent: string;
  server: string;
  /** `SERVER__TOOL`. */
  tool: string;
  /** One of `McpCallStatus`; a newer server may send another. */
  status: McpCallStatus | string;
  /** Why it did not succeed. */
  detail?: string | null;
  /** The policy that refused it or asked for its approval. */
  policy?: string | null;
  /** The approval it waited for. */
  approval_id?: string | null;
  duration_ms: number;
  /** What it was charged (`[prices.tools]`), in millionths of a dollar. */
  usd_micros: number;
}

/** An upstream MCP tool's pinned definition (`GET /v1/mcp/tools`, ADR 0062). Every
 * string but the hashes and times comes from an upstream server: shown as text only. */
export interface PinnedTool {
  server: string;
  tool: string;
  /** `pinned` (listed as approved) or `changed` (quarantined under `pin = "strict"`). */
  status: "pinned" | "changed" | string;
  approved_hash: string;
  seen_hash: string;
  first_seen_at: string;
  changed_at?: string | null;
  approved_by?: string | null;
  /** What changed, field by field. */
  diff?: string | null;
  /** What the description screen finds in the definition last listed. */
  findings?: string[];
}

/** Where a server the MCP gateway offers stands (`GET /v1/mcp/servers`). `error` comes
 * from the upstream: shown as text only. */
export interface McpServerState {
  server: string;
  /** `connected`, `failing` or `not_connected`. */
  state: string;
  error?: string | null;
  since?: string | null;
  tools: number;
  quarantined: string[];
}
