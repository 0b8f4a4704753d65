//! Where the real protocol peers are: the npm and PyPI packages that
//! `scripts/test-peers.sh` installs and announces in `AGENTPLANE_TEST_*` variables
//! (`scripts/test.sh` does both). Tests that need a peer panic with the way to get it,
//! rather than pass without it.

use std::path::PathBuf;

/// The value of a peer variable, or a panic saying how to set it.
fn announced(var: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| {
        panic!(
            "{var} is not set: this test needs the peers of scripts/test-peers.sh; run \
             ./scripts/test.sh, or `eval \"$(scripts/test-peers.sh)\"` first"
        )
    })
}

/// npm's `@modelcontextprotocol/server-everything` on stdio: the program and its args.
pub fn mcp_everything_stdio() -> (String, Vec<String>) {
    let script = format!(
        "{}/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
        announced("AGENTPLANE_TEST_NODE_PEERS")
    );
    (
        announced("AGENTPLANE_TEST_NODE"),
        vec![script, "stdio".to_owned()],
    )
}

/// The same server as a `[mcp.servers.NAME]` body (`command` and `args` lines).
pub fn mcp_everything_toml() -> String {
    let (node, args) = mcp_everything_stdio();
    format!("command = {node:?}\nargs = {args:?}\n")
}

/// A Python with PyPI's `mcp` and `openai` packages.
pub fn python() -> PathBuf {
    PathBuf::from(announced("AGENTPLANE_TEST_PYTHON"))
}

/// `peers/mcp_client.py`: an MCP client built on PyPI's `mcp` that prints one JSON
/// document.
pub fn mcp_client_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("peers/mcp_client.py")
}

/// `peers/mcp_tasks_client.py`: an MCP client over streamable HTTP that speaks the
/// MCP tasks extension (and fires calls in bursts), printing one JSON document.
pub fn mcp_tasks_client_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("peers/mcp_tasks_client.py")
}

/// `peers/openai_client.py`: the official `openai` PyPI package against an
/// OpenAI-compatible endpoint, printing one JSON document.
pub fn openai_client_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("peers/openai_client.py")
}

/// `peers/gateway_clients.py`: the `anthropic` package, `openai`'s Responses API and
/// the OpenAI Agents SDK against the gateway's other routes; one JSON document.
pub fn gateway_clients_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("peers/gateway_clients.py")
}

/// `peers/a2a_client.py`: an A2A client on PyPI's official `a2a-sdk` 1.x (protocol
/// 1.0): card resolver, `ClientFactory`/`Client`; one JSON command, one JSON answer.
pub fn a2a_client_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("peers/a2a_client.py")
}

/// A Python with PyPI's `a2a-sdk` 0.3 (protocol 0.3).
pub fn python_a2a_v0_3() -> PathBuf {
    PathBuf::from(announced("AGENTPLANE_TEST_PYTHON_A2A03"))
}

/// `peers/a2a_client_v03.py`: the same commands on `a2a-sdk` 0.3, for
/// [`python_a2a_v0_3`].
pub fn a2a_client_v0_3_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("peers/a2a_client_v03.py")
}

/// The JSON document the client printed, or a panic showing what it printed instead.
pub fn client_json(output: &std::process::Output) -> serde_json::Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "the MCP client printed no JSON ({e}); status {:?}\nstdout: {stdout}\nstderr: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// node, and `peers/acp_agent.mjs`: an ACP agent built on npm's official
/// `@agentclientprotocol/sdk` (what it does is chosen by words in the prompt).
pub fn acp_sdk_agent() -> (String, Vec<String>) {
    let script = format!("{}/acp_agent.mjs", announced("AGENTPLANE_TEST_NODE_PEERS"));
    (announced("AGENTPLANE_TEST_NODE"), vec![script])
}

/// `peers/acp_hostile.py`: an ACP agent that misbehaves as told by its argument
/// (`garbage`, `oversized`, `wrong-ids`, `exit-mid-turn`, `silent`, `silent-prompt`,
/// `flood`), run by python3's real interpreter (not a version manager's shim, which
/// would run programs outside an agent's kernel sandbox).
pub fn acp_hostile_agent(mode: &str) -> (String, Vec<String>) {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("peers/acp_hostile.py");
    (
        real_python3(),
        vec![script.display().to_string(), mode.to_owned()],
    )
}

/// `sys.executable` of the `python3` on `PATH`.
fn real_python3() -> String {
    std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .map(|path| path.trim().to_owned())
        .filter(|path| !path.is_empty())
        .unwrap_or_else(|| "python3".to_owned())
}

/// `peers/mcp_hostile.py`: an MCP server on stdio with one tool, `echo`, whose call
/// misbehaves as told by its argument (`garbage`, `wrong-ids`, `wrong-only`, `stall`,
/// `exit`, `flood`, `leaky`: a card number, an e-mail address and an API key as a
/// JSON-RPC error, an `isError` result or a result; `from-file` with a second argument
/// lists the tools that JSON file holds at each `tools/list`), run by python3.
pub fn mcp_hostile_server(mode: &str) -> (String, Vec<String>) {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("peers/mcp_hostile.py");
    (
        "python3".to_owned(),
        vec![script.display().to_string(), mode.to_owned()],
    )
}

/// node, and npm's claude ACP adapter (`@zed-industries/claude-agent-acp`).
pub fn claude_acp_adapter() -> (String, Vec<String>) {
    let script = format!(
        "{}/node_modules/@zed-industries/claude-agent-acp/dist/index.js",
        announced("AGENTPLANE_TEST_NODE_PEERS")
    );
    (announced("AGENTPLANE_TEST_NODE"), vec![script])
}

/// npm's `opencode-ai` (pinned in `scripts/test-peers.sh`), installed into a cache:
/// the `opencode` program.
pub fn opencode() -> String {
    announced("AGENTPLANE_TEST_OPENCODE")
}

/// npm's `@anthropic-ai/claude-code` (pinned in `scripts/test-peers.sh`), installed
/// into a cache: the `claude` program.
pub fn claude_code() -> String {
    announced("AGENTPLANE_TEST_CLAUDE_CODE")
}

/// npm's `@openai/codex` (pinned in `scripts/test-peers.sh`), installed into a cache:
/// the `codex` program.
pub fn codex() -> String {
    announced("AGENTPLANE_TEST_CODEX")
}

/// npm's `@modelcontextprotocol/inspector` (pinned in `scripts/test-peers.sh`): the
/// `mcp-inspector` program, whose `--cli` mode is an MCP client.
pub fn mcp_inspector() -> String {
    announced("AGENTPLANE_TEST_MCP_INSPECTOR")
}

/// node, and `peers/acp_client.mjs`: an ACP client built on npm's official
/// `@agentclientprotocol/sdk` that starts its agent as a child and prints one JSON
/// document of what it saw.
pub fn acp_sdk_client() -> (String, Vec<String>) {
    let script = format!("{}/acp_client.mjs", announced("AGENTPLANE_TEST_NODE_PEERS"));
    (announced("AGENTPLANE_TEST_NODE"), vec![script])
}

/// `peers/a2a_agent.py`: an A2A agent built on PyPI's `a2a-sdk` 1.3.0 server classes
/// (protocol 1.0), whose behaviour the message chooses; run it with [`python`]. It
/// prints `{"port": N}` once listening.
pub fn a2a_agent_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("peers/a2a_agent.py")
}
