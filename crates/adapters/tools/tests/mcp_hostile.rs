//! A hostile MCP server over stdio (a small Node script written here): garbage and an
//! oversized line on stdout, tools with bad names and schemas, huge output, JSON-RPC
//! errors, `isError` results, mixed content, and a server that exits in a call.

mod mcp_support;

use std::time::Duration;

use agentplane_core::{ThreadId, ToolErrorKind};
use agentplane_tools::McpServers;
use mcp_support::*;
use serde_json::json;

const HOSTILE: &str = r#"
let buf = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => {
  buf += chunk;
  let i;
  while ((i = buf.indexOf('\n')) >= 0) {
    const line = buf.slice(0, i);
    buf = buf.slice(i + 1);
    if (line.trim()) handle(JSON.parse(line));
  }
});
const send = (m) => process.stdout.write(JSON.stringify(m) + '\n');
const ok = (id, result) => send({ jsonrpc: '2.0', id, result });
const text = (t) => ({ content: [{ type: 'text', text: t }] });
function handle(msg) {
  if (msg.id === undefined) return;
  if (msg.method === 'initialize') {
    process.stdout.write('garbage before the answer\n{"jsonrpc": broken\n\n');
    process.stdout.write('x'.repeat(17 * 1024 * 1024) + '\n');
    ok(msg.id, { protocolVersion: msg.params.protocolVersion, capabilities: { tools: {} },
                 serverInfo: { name: 'hostile', version: '1' } });
  } else if (msg.method === 'tools/list') {
    const obj = { type: 'object' };
    ok(msg.id, { tools: [
      { name: 'huge', description: 'A lot of text', inputSchema: obj },
      { name: 'mixed', inputSchema: obj, annotations: { readOnlyHint: true } },
      { name: 'fail', inputSchema: obj },
      { name: 'refuse', inputSchema: obj },
      { name: 'noisy', inputSchema: obj },
      { name: 'exit', inputSchema: obj },
      { name: 'has spaces', inputSchema: obj },
      { name: 'n'.repeat(80), inputSchema: obj },
      { name: 'bad-schema', inputSchema: { type: 12 } },
    ] });
  } else if (msg.method === 'tools/call') {
    switch (msg.params.name) {
      case 'huge': return ok(msg.id, text('y'.repeat(5 * 1024 * 1024)));
      case 'mixed': return ok(msg.id, { content: [
        { type: 'text', text: 'first' },
        { type: 'image', data: 'iVBORw0KGgo=', mimeType: 'image/png' },
        { type: 'resource', resource: { uri: 'mem://r', text: 'resource text' } },
        { type: 'resource_link', uri: 'mem://link', name: 'link' } ] });
      case 'fail': return ok(msg.id, { ...text('it broke: disk full'), isError: true });
      case 'refuse': return send({ jsonrpc: '2.0', id: msg.id,
                                   error: { code: -32000, message: 'not today' } });
      case 'noisy':
        process.stdout.write('more garbage\n' + 'z'.repeat(17 * 1024 * 1024) + '\n');
        return ok(msg.id, text('after the noise'));
      case 'exit':
        process.stderr.write('dying words\n');
        return process.exit(7);
    }
  } else {
    send({ jsonrpc: '2.0', id: msg.id, error: { code: -32601, message: 'no' } });
  }
}
"#;

#[tokio::test]
async fn a_hostile_server_never_breaks_the_client() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("hostile.cjs");
    std::fs::write(&script, HOSTILE).unwrap();
    let marker = marker("hostile");
    let servers = McpServers::new(vec![spec(
        "bad",
        stdio(&node(), &[script.to_str().unwrap()], &marker),
    )]);
    let ensemble = servers.ensemble("bad", &ThreadId::new()).unwrap();
    ensemble.open().await.expect("opens despite the garbage");

    let tools = ensemble.tools();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "mcp__bad__huge",
            "mcp__bad__mixed",
            "mcp__bad__fail",
            "mcp__bad__refuse",
            "mcp__bad__noisy",
            "mcp__bad__exit"
        ],
        "bad names and schemas are left out"
    );
    assert!(
        tools[0].side_effects,
        "no read-only hint: side effects assumed"
    );
    assert!(
        tools[1].side_effects,
        "a read-only hint is not trusted: every MCP tool counts as side-effecting"
    );

    let ctx = ctx(Duration::from_secs(20), 1000);
    let out = ensemble
        .call("mcp__bad__huge", json!({}), &ctx)
        .await
        .expect("huge");
    assert_eq!(out.content.len(), 1000);
    assert!(out.truncated);

    let big = mcp_support::ctx(Duration::from_secs(20), 10_000);
    let out = ensemble
        .call("mcp__bad__mixed", json!({}), &big)
        .await
        .expect("mixed");
    assert_eq!(
        out.content,
        "first\n[image image/png, 8 bytes]\nresource text\n[resource mem://link]"
    );

    let err = ensemble
        .call("mcp__bad__fail", json!({}), &big)
        .await
        .expect_err("isError");
    assert_eq!(err.kind, ToolErrorKind::ExecutionFailed);
    assert_eq!(err.message, "it broke: disk full");

    let err = ensemble
        .call("mcp__bad__refuse", json!({}), &big)
        .await
        .expect_err("JSON-RPC error");
    assert_eq!(err.kind, ToolErrorKind::ExecutionFailed);
    assert!(err.message.contains("not today"), "{}", err.message);

    let out = ensemble
        .call("mcp__bad__noisy", json!({}), &big)
        .await
        .expect("an oversized line is skipped");
    assert_eq!(out.content, "after the noise");

    let err = ensemble
        .call("mcp__bad__exit", json!({}), &big)
        .await
        .expect_err("exits");
    assert_eq!(err.kind, ToolErrorKind::ExecutionFailed);
    assert!(err.message.contains("closed"), "{}", err.message);
    assert!(err.message.contains("dying words"), "{}", err.message);
    let err = ensemble
        .call("mcp__bad__mixed", json!({}), &big)
        .await
        .expect_err("broken");
    assert!(err.message.contains("dying words"), "{}", err.message);

    ensemble.close().await;
    assert!(marked(&marker).is_empty());
}
