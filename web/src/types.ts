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
