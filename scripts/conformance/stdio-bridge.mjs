// A transparent streamable-HTTP front for a stdio MCP server, so the conformance suite
// (which only speaks HTTP to a server under test) can test `agentplane mcp serve`.
//
//   node stdio-bridge.mjs PORT_FILE -- COMMAND [ARGS...]
//
// Listens on 127.0.0.1 (a free port, written to PORT_FILE once listening) and serves
// POST/DELETE at /mcp. It reads no message beyond its `id` and `method`: every JSON-RPC
// message goes to the child's stdin as one line, unchanged, and every line the child
// prints comes back unchanged.
//
// - `initialize` starts a child of its own (one stdio server is one MCP session) and
//   answers with an `Mcp-Session-Id` naming it; later requests with that header go to it;
//   DELETE ends it, and so does a fifth newer session (the suite leaves sessions open).
// - A request without a session (the 2026-07-28 stateless protocol) gets a child of its
//   own, ended after the response.
// - A request is answered as an SSE stream: whatever the child sends before the response
//   (progress, logging), then the response. A notification or a response from the
//   client is written to the child and answered 202.
//
// The HTTP details are therefore the bridge's, not agentplane's: the transport-level
// scenarios are not run through it (docs/mcp-conformance.md).
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import http from "node:http";
import readline from "node:readline";

const [portFile, separator, command, ...args] = process.argv.slice(2);
if (!portFile || separator !== "--" || !command) {
  console.error("usage: node stdio-bridge.mjs PORT_FILE -- COMMAND [ARGS...]");
  process.exit(2);
}

const MAX_SESSIONS = 4;
const sessions = new Map();
const children = new Set();
// Each child gets a data directory of its own (XDG_DATA_HOME): agentplane's SQLite
// database serves one process at a time, and the suite leaves sessions open.
const data = mkdtempSync(path.join(tmpdir(), "stdio-bridge-"));
let started = 0;

function startChild() {
  started += 1;
  const env = { ...process.env, XDG_DATA_HOME: path.join(data, String(started)) };
  const child = spawn(command, args, { stdio: ["pipe", "pipe", "inherit"], env });
  children.add(child);
  const state = { child, pending: new Map(), stream: null, exited: false };
  child.on("exit", (code, signal) => {
    state.exited = true;
    children.delete(child);
    // A request the child never answered gets an error, not a stream that just ends.
    for (const [id, res] of state.pending) {
      if (res.writableEnded) continue;
      const error = { code: -32603, message: `the stdio server exited (${signal ?? code}) before answering` };
      res.end(`event: message\ndata: ${JSON.stringify({ jsonrpc: "2.0", id: JSON.parse(id), error })}\n\n`);
    }
    state.pending.clear();
  });
  readline.createInterface({ input: child.stdout }).on("line", (line) => {
    let message;
    try {
      message = JSON.parse(line);
    } catch {
      console.error(`stdio-bridge: the child printed a line that is not JSON: ${line}`);
      return;
    }
    const isResponse = message.id !== undefined && !("method" in message);
    const key = isResponse ? JSON.stringify(message.id) : undefined;
    const res = isResponse ? state.pending.get(key) : state.stream;
    if (!res || res.writableEnded) return;
    res.write(`event: message\ndata: ${line}\n\n`);
    if (isResponse) {
      state.pending.delete(key);
      if (state.stream === res) state.stream = null;
      res.end();
      if (state.ephemeral) child.stdin.end();
    }
  });
  return state;
}

function reply(res, status, body, headers = {}) {
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(body === undefined ? undefined : JSON.stringify(body));
}

function forward(state, message, res, headers = {}) {
  const isRequest = message.method !== undefined && message.id !== undefined;
  if (state.exited) {
    reply(res, 404, { jsonrpc: "2.0", id: message.id ?? null, error: { code: -32001, message: "session ended" } });
    return;
  }
  state.child.stdin.write(`${JSON.stringify(message)}\n`);
  if (!isRequest) {
    reply(res, 202, undefined, headers);
    return;
  }
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", ...headers });
  state.pending.set(JSON.stringify(message.id), res);
  state.stream = res;
}

const server = http.createServer((req, res) => {
  const url = new URL(req.url, "http://127.0.0.1");
  if (url.pathname !== "/mcp") return reply(res, 404, { error: "not found" });
  const sessionId = req.headers["mcp-session-id"];
  if (req.method === "DELETE") {
    const state = sessions.get(sessionId);
    if (!state) return reply(res, 404, { error: "unknown session" });
    sessions.delete(sessionId);
    state.child.stdin.end();
    return reply(res, 200, undefined);
  }
  if (req.method !== "POST") return reply(res, 405, { error: "method not allowed" }, { allow: "POST, DELETE" });
  let body = "";
  req.on("data", (chunk) => (body += chunk));
  req.on("end", () => {
    let message;
    try {
      message = JSON.parse(body);
    } catch {
      return reply(res, 400, { jsonrpc: "2.0", id: null, error: { code: -32700, message: "Parse error" } });
    }
    if (Array.isArray(message)) {
      return reply(res, 400, { jsonrpc: "2.0", id: null, error: { code: -32600, message: "batches are not bridged" } });
    }
    if (message.method === "initialize") {
      const state = startChild();
      const id = randomUUID();
      sessions.set(id, state);
      // The suite leaves its sessions open: only the newest few keep their process.
      for (const [old, oldState] of sessions) {
        if (sessions.size <= MAX_SESSIONS) break;
        sessions.delete(old);
        oldState.child.stdin.end();
      }
      return forward(state, message, res, { "mcp-session-id": id });
    }
    if (sessionId !== undefined) {
      const state = sessions.get(sessionId);
      if (!state) return reply(res, 404, { jsonrpc: "2.0", id: message.id ?? null, error: { code: -32001, message: "unknown session" } });
      return forward(state, message, res);
    }
    // No session: one child for this one message.
    const state = startChild();
    state.ephemeral = true;
    forward(state, message, res);
    if (message.id === undefined || message.method === undefined) state.child.stdin.end();
  });
});

function stop() {
  for (const child of children) child.kill("SIGTERM");
  server.close();
  setTimeout(() => process.exit(0), 2000);
}
process.on("exit", () => rmSync(data, { recursive: true, force: true }));
process.on("SIGTERM", stop);
process.on("SIGINT", stop);

server.listen(0, "127.0.0.1", () => {
  writeFileSync(portFile, `${server.address().port}\n`);
});
