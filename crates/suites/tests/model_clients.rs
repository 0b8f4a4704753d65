//! The coding clients people run, through the real binary's model gateway (issue 51):
//! Claude Code (npm, pinned) in print mode with `ANTHROPIC_BASE_URL` pointed at
//! agentplane, and Codex CLI (npm, pinned) in `codex exec` with agentplane as its
//! Responses-API model provider, each read a file and write one with their own tools,
//! against the scripted model; every model call they made is recorded and priced under
//! its route's agent.
//!
//! Needs the peers of `scripts/test-peers.sh`. With `AGENTPLANE_TEST_TOOLS_URL` set
//! (`scripts/local-model-check.sh`: Qwen2.5-Coder-1.5B under llama.cpp, which writes its
//! calls as text), the Agents SDK and the Anthropic SDK also get real tool calls from
//! the real model.

use std::time::{Duration, Instant};

use agentplane_suites::{CLIENT, api, sandbox, start};
use agentplane_testkit::{Scenario, ScriptedServer, Step, peers};
use serde_json::{Value, json};

/// What a Claude Code session is priced at here: $1/M input, $2/M output.
const CONFIG: &str = "[gateway.agents]\nmessages = \"claude-code\"\n\
                      [prices.\"scripted-model\"]\ninput_per_mtok = 1.0\noutput_per_mtok = 2.0\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_reads_and_writes_through_the_gateway_and_every_call_is_priced() {
    let sb = sandbox(CONFIG);
    let workspace = sb.workspace.clone();
    std::fs::write(workspace.join("a.txt"), "hello\n").expect("a.txt");
    let read = json!({"file_path": workspace.join("a.txt")});
    let write = json!({"file_path": workspace.join("b.txt"), "content": "HELLO\n"});
    let model = ScriptedServer::start(Scenario::new(vec![
        Step::tool_call("Read", read).with_usage(1_000, 20),
        Step::tool_call("Write", write)
            .with_split(3)
            .with_usage(1_200, 30),
        Step::text("Wrote b.txt.").with_usage(1_300, 5),
    ]))
    .await
    .expect("model");
    let served = start(&sb, &model.base_url(), &[]).await;
    let home = tempfile::tempdir().expect("home");
    let mut command = std::process::Command::new(peers::claude_code());
    command
        .current_dir(&workspace)
        .args(["-p", "read a.txt and write its content uppercased to b.txt"])
        .args(["--allowedTools", "Read,Write", "--model", "scripted-model"])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("ANTHROPIC_BASE_URL", format!("{}/anthropic", served.base))
        .env("ANTHROPIC_API_KEY", "no-token-configured")
        .env("ANTHROPIC_CUSTOM_HEADERS", format!("X-Client-ID: {CLIENT}"))
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_TELEMETRY", "1");
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("client task")
        .expect("claude runs");
    let said = checked(&output, &served, &workspace, &model, "claude-code").await;
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("Wrote b.txt."),
        "{said}"
    );
}

/// Codex's configuration: agentplane as its model provider over the Responses API,
/// with the built-in tools the gateway cannot run (web search, sub-agents, goals) off.
fn codex_config(base: &str) -> String {
    format!(
        "model = \"scripted-model\"\nmodel_provider = \"agentplane\"\n\
         web_search = \"disabled\"\n[features]\nmulti_agent = false\ngoals = false\n\
         [model_providers.agentplane]\nname = \"agentplane\"\n\
         base_url = \"{base}/openai/v1\"\nenv_key = \"AGENTPLANE_KEY\"\nwire_api = \"responses\"\n\
         http_headers = {{ \"X-Client-ID\" = \"{CLIENT}\" }}\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_exec_reads_and_writes_through_the_responses_route_and_every_call_is_priced() {
    let sb = sandbox(
        "[gateway.agents]\nresponses = \"codex\"\n\
         [prices.\"scripted-model\"]\ninput_per_mtok = 1.0\noutput_per_mtok = 2.0\n",
    );
    let workspace = sb.workspace.clone();
    std::fs::write(workspace.join("a.txt"), "hello\n").expect("a.txt");
    let model = ScriptedServer::start(Scenario::new(vec![
        Step::tool_call("exec_command", json!({"cmd": "cat a.txt"})).with_usage(1_000, 20),
        Step::tool_call("exec_command", json!({"cmd": "printf 'HELLO\\n' > b.txt"}))
            .with_split(3)
            .with_usage(1_200, 30),
        Step::text("Wrote b.txt.").with_usage(1_300, 5),
    ]))
    .await
    .expect("model");
    let served = start(&sb, &model.base_url(), &[]).await;
    let home = tempfile::tempdir().expect("home");
    let codex_home = home.path().join("codex");
    std::fs::create_dir(&codex_home).expect("codex home");
    std::fs::write(codex_home.join("config.toml"), codex_config(&served.base)).expect("config");
    let mut command = std::process::Command::new(peers::codex());
    command
        .current_dir(&workspace)
        .args(["exec", "--skip-git-repo-check"])
        // Codex's own sandbox needs kernel features a CI container may lack; what runs
        // here is the scripted model's two commands, in a temp dir.
        .arg("--dangerously-bypass-approvals-and-sandbox")
        .arg("read a.txt and write it uppercased to b.txt")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("CODEX_HOME", &codex_home)
        .env("AGENTPLANE_KEY", "no-token-configured");
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("client task")
        .expect("codex runs");
    checked(&output, &served, &workspace, &model, "codex").await;
}

/// What both clients must have done: exited well, written `b.txt` from `a.txt`, made
/// three model calls with the first tool result in the second, each recorded and priced
/// under `agent` (3,500 input tokens at $1/M, 55 output at $2/M). What they said, for
/// the caller's own assertions.
async fn checked(
    output: &std::process::Output,
    served: &agentplane_suites::Served,
    workspace: &std::path::Path,
    model: &ScriptedServer,
    agent: &str,
) -> String {
    let said = format!(
        "stdout: {}\nstderr: {}\nserver: {}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
        served.stderr()
    );
    assert!(output.status.success(), "{said}");
    assert_eq!(
        std::fs::read_to_string(workspace.join("b.txt"))
            .ok()
            .as_deref(),
        Some("HELLO\n"),
        "{said}"
    );
    let requests = model.requests();
    assert_eq!(requests.len(), 3, "{said}");
    assert!(
        requests[1]["messages"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"
                && m["content"].as_str().is_some_and(|c| c.contains("hello")))),
        "the first tool result reached the model: {}",
        requests[1]
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    let costs = loop {
        let costs: Value = api(served, reqwest::Method::GET, "/v1/costs?group_by=agent")
            .send()
            .await
            .expect("costs")
            .json()
            .await
            .expect("costs JSON");
        if costs["total"]["calls"] == 3 || Instant::now() > deadline {
            break costs;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(costs["rows"][0]["key"], agent, "{costs}");
    assert_eq!(costs["total"]["calls"], 3, "{costs}");
    assert_eq!(costs["total"]["usd_micros"], 3_500 + 110, "{costs}");
    said
}

/// Runs `peers/gateway_clients.py MODE` against `served`; its exit code and JSON.
async fn gateway_client(served: &agentplane_suites::Served, mode: &str) -> (Option<i32>, Value) {
    let mut command = std::process::Command::new(peers::python());
    command
        .arg(peers::gateway_clients_script())
        .arg(mode)
        .args(["--base-url", &served.base, "--client-id", CLIENT])
        .args(["--model", "qwen2.5-coder"]);
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("client task")
        .expect("the client runs");
    (output.status.code(), peers::client_json(&output))
}

/// The finding, undone: with the project's recommended small model, a client
/// offering a tool got the call as JSON prose. Through the real binary, against the real
/// 1.5B model, the Agents SDK (default Responses mode) must run its function tool and
/// the Anthropic SDK must get a `tool_use`, whole or streamed. The model samples: up to
/// three tries each, one of which must succeed; every failed try is printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_small_model_gives_gateway_clients_real_tool_calls() {
    let Ok(model_url) = std::env::var("AGENTPLANE_TEST_TOOLS_URL") else {
        eprintln!("AGENTPLANE_TEST_TOOLS_URL is not set: scripts/local-model-check.sh runs this");
        return;
    };
    let sb = sandbox("");
    let served = start(&sb, &model_url, &[]).await;
    let paris = |v: &Value| v.as_str().is_some_and(|c| c.eq_ignore_ascii_case("paris"));
    for mode in ["agents", "anthropic"] {
        let mut failures = Vec::new();
        for attempt in 1..=3 {
            let (code, out) = gateway_client(&served, mode).await;
            let called = match mode {
                "agents" => out["tool_called_with"]
                    .as_array()
                    .is_some_and(|cities| cities.iter().any(paris)),
                _ => ["whole", "streamed"].iter().any(|shape| {
                    out[shape]["tool_uses"].as_array().is_some_and(|uses| {
                        uses.iter()
                            .any(|u| u["name"] == "get_weather" && paris(&u["input"]["city"]))
                    })
                }),
            };
            if code == Some(0) && called {
                eprintln!("{mode}: a real tool call on try {attempt}; before it: {failures:#?}");
                break;
            }
            failures.push(format!("try {attempt}: exit {code:?}: {out}"));
            assert!(
                attempt < 3,
                "{mode}: no try of three got a tool call:\n{}\nserver: {}",
                failures.join("\n"),
                served.stderr()
            );
        }
    }
}
