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
// Env: ACP_PEER_AUTH=1 offers an auth method "test-key" and refuses session/new until
// it is used. ACP_PEER_PIDFILE: where "stubborn" writes its child's pid.
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const requireAuth = process.env.ACP_PEER_AUTH === "1";
let authenticated = false;
let sessions = 0;
const cancelled = new Map();

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
    await client.notify(acp.methods.client.session.update, {
      sessionId: params.sessionId,
      update: chunk(`[loaded ${params.sessionId}] `),
    });
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
