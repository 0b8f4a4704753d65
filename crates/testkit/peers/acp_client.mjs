// An ACP client on the official SDK (@agentclientprotocol/sdk), for testing
// `agentplane acp`: starts the given command as its agent, then initialize,
// session/new, and one session/prompt per --prompt; a prompt written "cancel:TEXT" is
// cancelled with session/cancel once the first message chunk arrives. Permission
// requests are answered with the option of kind --permission (allow_once | reject_once),
// or never (`never`).
// Prints one JSON document: what the agent answered and streamed.
//
// Usage: node acp_client.mjs --cwd DIR [--permission allow_once] --prompt P... -- CMD ARGS...
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const argv = process.argv.slice(2);
const split = argv.indexOf("--");
const own = argv.slice(0, split);
const [command, ...commandArgs] = argv.slice(split + 1);
let cwd = process.cwd();
let permissionKind = "allow_once";
const prompts = [];
for (let i = 0; i < own.length; i += 2) {
  if (own[i] === "--cwd") cwd = own[i + 1];
  else if (own[i] === "--permission") permissionKind = own[i + 1];
  else if (own[i] === "--prompt") prompts.push(own[i + 1]);
}

const child = spawn(command, commandArgs, { stdio: ["pipe", "pipe", "inherit"] });
const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));

const out = { prompts: [], permissions: [] };
let current = null;

const app = acp
  .client({ name: "agentplane-test-client" })
  .onNotification(acp.methods.client.session.update, async ({ params }) => {
    if (!current) return;
    const update = params.update;
    current.updates.push(update.sessionUpdate);
    if (update.sessionUpdate === "agent_message_chunk" && update.content.type === "text") {
      current.text += update.content.text;
      if (current.cancelOnChunk && !current.cancelSent) {
        current.cancelSent = true;
        await current.ctx.notify(acp.methods.agent.session.cancel, { sessionId: params.sessionId });
      }
    }
    if (update.sessionUpdate === "tool_call") current.toolCalls.push(update.title);
  })
  .onRequest(acp.methods.client.session.requestPermission, async ({ params }) => {
    out.permissions.push({ title: params.toolCall.title, options: params.options.map((o) => o.kind) });
    if (permissionKind === "never") return new Promise(() => {});
    const option = params.options.find((o) => o.kind === permissionKind);
    return option
      ? { outcome: { outcome: "selected", optionId: option.optionId } }
      : { outcome: { outcome: "cancelled" } };
  });

try {
  await app.connectWith(stream, async (ctx) => {
    out.initialize = await ctx.request(acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: {},
    });
    const session = await ctx.request(acp.methods.agent.session.new, { cwd, mcpServers: [] });
    out.sessionId = session.sessionId;
    for (const raw of prompts) {
      const cancel = raw.startsWith("cancel:");
      const text = cancel ? raw.slice("cancel:".length) : raw;
      current = { ctx, text: "", updates: [], toolCalls: [], cancelOnChunk: cancel, cancelSent: false };
      const started = Date.now();
      try {
        const answer = await ctx.request(acp.methods.agent.session.prompt, {
          sessionId: session.sessionId,
          prompt: [{ type: "text", text }],
        });
        out.prompts.push({ stopReason: answer.stopReason, text: current.text, updates: current.updates, toolCalls: current.toolCalls, ms: Date.now() - started });
      } catch (e) {
        out.prompts.push({ error: String(e.message ?? e), text: current.text, updates: current.updates });
      }
    }
  });
} catch (e) {
  out.error = String(e.message ?? e);
}
child.stdin.end();
process.stdout.write(JSON.stringify(out) + "\n");
setTimeout(() => process.exit(0), 100);
