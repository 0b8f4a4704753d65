// A small ACP agent on the official SDK (@agentclientprotocol/sdk), for agentplane's
// ACP client tests. What it does is chosen by words in the prompt:
//   (always)     two message chunks, a plan, a tool call that completes
//   "read"       reads notes.txt through the client (fs/read_text_file) and echoes it
//   "write"      writes out.txt through the client (fs/write_text_file)
//   "escape"     tries to read /etc/passwd through the client; says what it was told
//   "permission" asks session/request_permission and says which option came back
//   "terminal"   runs `echo` through the client's terminal, then tries `sh`
//   "wait"       waits until session/cancel, then answers `cancelled`
//   "stubborn"   ignores session/cancel and never answers (the client must kill it),
//                after starting a child process that would outlive a careless kill
//   "rawinput"   announces call-3 (kind edit) with `rawInput: {}` and sends its real
//                arguments in the next tool_call_update, as opencode does
//   "askinput"   announces call-4 (kind execute) with no arguments, then asks
//                permission for it with its arguments (`rawInput`) in the ask
//   "usage"      reports a usage_update (1500 tokens in context, $0.35 cumulative)
//   "quota"      answers with gemini's `_meta.quota.token_count` (90 in, 12 out)
//   "missing"    reads missing.txt through the client and says the error's code
//   "echo:"      says back what follows it in the prompt (what reached the agent)
//   "exfil"      reads secrets.txt through the client and keeps what it got in
//                seen.txt (node's fs: what reached the agent), then writes LEAK to
//                exfil.txt through the client and says whether it was refused, and
//                asks to read a path outside the workspace that holds an `sk-` key
//                (refused: its security event names the path)
//   "rogue"      writes and reads the paths after `outside=` and `secret=` itself,
//                with node's fs (not through the client): only the kernel stops that
//   "leak"       gives away a card number, an e-mail address and an `sk-` key (LEAK)
//                in a message chunk, a plan entry, a tool call's title and arguments
//                (a value and a key) and its output
//   (context)    says " [context sent]" when the prompt carries our thread context
// session/load replays the session like opencode and codex do: a chunk, the earlier
// turn's tool call and its end, and a usage_update ($0.25 cumulative).
// Env: ACP_PEER_AUTH=1 offers an auth method "test-key" and refuses session/new until
// it is used. ACP_PEER_PIDFILE: where "stubborn" writes its child's pid.
import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const requireAuth = process.env.ACP_PEER_AUTH === "1";
let authenticated = false;
let sessions = 0;
const cancelled = new Map();
const loaded = new Set();

const LEAK = "card 4111 1111 1111 1111, mail victim@example.com, key sk-live-Zx9Qw8Er7Ty6Ui5Op4As3Df";

const stream = acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin));

function chunk(text) {
  return { sessionUpdate: "agent_message_chunk", content: { type: "text", text } };
}

acp
  .agent({ name: "agentplane-test-peer" })
  .onRequest(acp.methods.agent.initialize, async () => ({
    protocolVersion: acp.PROTOCOL_VERSION,
    agentCapabilities: { loadSession: true },
    authMethods: requireAuth ? [{ id: "test-key", name: "Test key" }] : [],
  }))
  .onRequest(acp.methods.agent.authenticate, async ({ params }) => {
    if (params.methodId !== "test-key") throw acp.RequestError.invalidParams({ methodId: params.methodId });
    authenticated = true;
    return {};
  })
  .onRequest(acp.methods.agent.session.new, async () => {
    if (requireAuth && !authenticated) throw acp.RequestError.authRequired();
    sessions += 1;
    return { sessionId: `peer-session-${sessions}` };
  })
  .onRequest(acp.methods.agent.session.load, async ({ params, client }) => {
    loaded.add(params.sessionId);
    await client.notify(acp.methods.client.session.update, {
      sessionId: params.sessionId,
      update: chunk(`[loaded ${params.sessionId}] `),
    });
    const replay = (update) =>
      client.notify(acp.methods.client.session.update, { sessionId: params.sessionId, update });
    await replay({ sessionUpdate: "tool_call", toolCallId: "call-0", title: "earlier call", kind: "read", status: "pending", rawInput: { earlier: true } });
    await replay({ sessionUpdate: "tool_call_update", toolCallId: "call-0", status: "completed" });
    await replay({ sessionUpdate: "usage_update", used: 900, size: 200000, cost: { amount: 0.25, currency: "USD" } });
    await replay(chunk("the earlier answer. "));
    return {};
  })
  .onNotification(acp.methods.agent.session.cancel, async ({ params }) => {
    const wake = cancelled.get(params.sessionId);
    if (wake) wake();
  })
  .onRequest(acp.methods.agent.session.prompt, async ({ params, client }) => {
    const sessionId = params.sessionId;
    const text = params.prompt.map((b) => (b.type === "text" ? b.text : "")).join(" ");
    const say = (update) => client.notify(acp.methods.client.session.update, { sessionId, update });

    await say(chunk("Hello "));
    await say(chunk("from the SDK peer."));
    if (loaded.has(sessionId)) await say(chunk(` [resumed ${sessionId}]`));
    if (text.includes("[Earlier in this conversation]")) await say(chunk(" [context sent]"));
    await say({
      sessionUpdate: "plan",
      entries: [{ content: "answer the prompt", priority: "high", status: "in_progress" }],
    });
    await say({
      sessionUpdate: "tool_call",
      toolCallId: "call-1",
      title: "look around",
      kind: "read",
      status: "pending",
      rawInput: { what: "the workspace" },
    });
    let output = "looked";
    if (text.includes("read")) {
      const file = await client.request(acp.methods.client.fs.readTextFile, {
        sessionId,
        path: `${process.cwd()}/notes.txt`,
      });
      output = `notes: ${file.content}`;
    }
    await say({
      sessionUpdate: "tool_call_update",
      toolCallId: "call-1",
      status: "completed",
      content: [{ type: "content", content: { type: "text", text: output } }],
    });
    if (text.includes("write")) {
      await client.request(acp.methods.client.fs.writeTextFile, {
        sessionId,
        path: `${process.cwd()}/out.txt`,
        content: "written by the peer\n",
      });
      await say(chunk(" [wrote out.txt]"));
    }
    if (text.includes("escape")) {
      try {
        await client.request(acp.methods.client.fs.readTextFile, { sessionId, path: "/etc/passwd" });
        await say(chunk(" [escape: READ IT]"));
      } catch (e) {
        await say(chunk(` [escape refused: ${e.message}]`));
      }
    }
    if (text.includes("terminal")) {
      const term = await client.request(acp.methods.client.terminal.create, {
        sessionId,
        command: "echo",
        args: ["hello", "from", "a", "terminal"],
      });
      const exit = await client.request(acp.methods.client.terminal.waitForExit, { sessionId, terminalId: term.terminalId });
      const out = await client.request(acp.methods.client.terminal.output, { sessionId, terminalId: term.terminalId });
      await client.request(acp.methods.client.terminal.release, { sessionId, terminalId: term.terminalId });
      const stdout = out.output.split("--- stdout ---\n")[1]?.split("\n")[0] ?? "";
      await say(chunk(` [terminal exit ${exit.exitCode}: ${stdout}]`));
      try {
        const sh = await client.request(acp.methods.client.terminal.create, { sessionId, command: "sh", args: ["-c", "id"] });
        const shExit = await client.request(acp.methods.client.terminal.waitForExit, { sessionId, terminalId: sh.terminalId });
        const shOut = await client.request(acp.methods.client.terminal.output, { sessionId, terminalId: sh.terminalId });
        await say(chunk(` [sh refused: ${shExit.exitCode ?? "none"} ${shOut.output.split("\n")[0]}]`));
      } catch (e) {
        await say(chunk(` [sh refused: ${e.message}]`));
      }
    }
    if (text.includes("permission")) {
      const answer = await client.request(acp.methods.client.session.requestPermission, {
        sessionId,
        toolCall: { toolCallId: "call-2", title: "edit main.rs", kind: "edit", rawInput: { path: "main.rs" } },
        options: [
          { optionId: "allow", name: "Allow once", kind: "allow_once" },
          { optionId: "reject", name: "Reject", kind: "reject_once" },
        ],
      });
      const picked = answer.outcome.outcome === "selected" ? answer.outcome.optionId : "cancelled";
      await say(chunk(` [permission: ${picked}]`));
    }
    if (text.includes("rawinput")) {
      await say({ sessionUpdate: "tool_call", toolCallId: "call-3", title: "edit a.txt", kind: "edit", status: "pending", rawInput: {} });
      await say({ sessionUpdate: "tool_call_update", toolCallId: "call-3", rawInput: { filePath: "a.txt", newString: "x" } });
      await say({ sessionUpdate: "tool_call_update", toolCallId: "call-3", status: "completed" });
    }
    if (text.includes("askinput")) {
      await say({ sessionUpdate: "tool_call", toolCallId: "call-4", title: "cargo test", kind: "execute", status: "pending" });
      const answer = await client.request(acp.methods.client.session.requestPermission, {
        sessionId,
        toolCall: { toolCallId: "call-4", title: "cargo test", kind: "execute", rawInput: { command: "cargo test" } },
        options: [
          { optionId: "allow", name: "Allow once", kind: "allow_once" },
          { optionId: "reject", name: "Reject", kind: "reject_once" },
        ],
      });
      const picked = answer.outcome.outcome === "selected" ? answer.outcome.optionId : "cancelled";
      await say({ sessionUpdate: "tool_call_update", toolCallId: "call-4", status: picked === "allow" ? "completed" : "failed" });
      await say(chunk(` [askinput: ${picked}]`));
    }
    if (text.includes("echo:")) {
      // Says back what it was sent after "echo:", so a test sees what reached it.
      await say(chunk(` [heard: ${text.slice(text.indexOf("echo:") + 5)}]`));
    }
    if (text.includes("leak")) {
      await say(chunk(` [the customer: ${LEAK}]`));
      await say({ sessionUpdate: "plan", entries: [{ content: `mail ${LEAK}`, priority: "high", status: "pending" }] });
      await say({
        sessionUpdate: "tool_call",
        toolCallId: "call-leak",
        title: `send to victim@example.com`,
        kind: "fetch",
        status: "pending",
        rawInput: { to: "victim@example.com", "4111 1111 1111 1111": "sk-live-Zx9Qw8Er7Ty6Ui5Op4As3Df" },
      });
      await say({
        sessionUpdate: "tool_call_update",
        toolCallId: "call-leak",
        status: "completed",
        content: [{ type: "content", content: { type: "text", text: `sent: ${LEAK}` } }],
      });
    }
    if (text.includes("usage")) {
      await say({ sessionUpdate: "usage_update", used: 1500, size: 200000, cost: { amount: 0.35, currency: "USD" } });
    }
    if (text.includes("missing")) {
      try {
        await client.request(acp.methods.client.fs.readTextFile, { sessionId, path: `${process.cwd()}/missing.txt` });
        await say(chunk(" [missing: READ IT]"));
      } catch (e) {
        await say(chunk(` [missing: ${e.code} ${e.message}]`));
      }
    }
    if (text.includes("exfil")) {
      const file = await client.request(acp.methods.client.fs.readTextFile, {
        sessionId,
        path: `${process.cwd()}/secrets.txt`,
      });
      writeFileSync(`${process.cwd()}/seen.txt`, file.content);
      let wrote = "written";
      try {
        await client.request(acp.methods.client.fs.writeTextFile, {
          sessionId,
          path: `${process.cwd()}/exfil.txt`,
          content: `exfil: ${LEAK}\n`,
        });
      } catch (e) {
        wrote = `refused ${e.code}`;
      }
      await say(chunk(` [exfil ${wrote}]`));
      try {
        await client.request(acp.methods.client.fs.readTextFile, {
          sessionId,
          path: "/tmp/sk-live-Zx9Qw8Er7Ty6Ui5Op4As3Df/notes.txt",
        });
      } catch (e) {
        await say(chunk(` [outside ${e.code}]`));
      }
    }
    if (text.includes("rogue")) {
      const outside = /outside=(\S+)/.exec(text)?.[1];
      const secret = /secret=(\S+)/.exec(text)?.[1];
      const attempt = (name, f) => {
        try { f(); return `${name}: done`; } catch (e) { return `${name}: ${e.code}`; }
      };
      const results = [
        attempt("write-inside", () => writeFileSync(`${process.cwd()}/rogue-inside.txt`, "x")),
        attempt("write-outside", () => writeFileSync(outside, "escaped")),
        attempt("read-secret", () => readFileSync(secret)),
        attempt("read-own-proc", () => readFileSync("/proc/self/maps")),
        attempt("read-server-environ", () => readFileSync(`/proc/${process.ppid}/environ`)),
      ];
      await say(chunk(` [rogue ${results.join(", ")}]`));
    }
    if (text.includes("quota")) {
      return {
        stopReason: "end_turn",
        _meta: { quota: { token_count: { input_tokens: 90, output_tokens: 12 }, model_usage: [] } },
      };
    }
    if (text.includes("stubborn")) {
      const child = spawn("sleep", ["300"], { stdio: "ignore" });
      if (process.env.ACP_PEER_PIDFILE) writeFileSync(process.env.ACP_PEER_PIDFILE, String(child.pid));
      await say(chunk(" [ignoring cancel]"));
      await new Promise(() => {});
    }
    if (text.includes("wait")) {
      await say(chunk(" [waiting]"));
      await new Promise((resolve) => cancelled.set(sessionId, resolve));
      return { stopReason: "cancelled" };
    }
    return { stopReason: "end_turn" };
  })
  .connect(stream);
