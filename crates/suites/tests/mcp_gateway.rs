//! The MCP gateway through the real binary, fronting npm's server-everything, driven by
//! PyPI's official `mcp` client (and, for the tasks extension and bursts, by
//! `peers/mcp_tasks_client.py`), with agentplane keys as bearer tokens:
//!
//! - each caller lists exactly what it may call (a `tool_access` condition on a role
//!   hides a tool from one caller, not from another) and a call of a hidden tool is
//!   refused all the same; both protocol generations; the gateway's log;
//! - a call under `approval_required` waits and completes after the decision, becomes
//!   a task for a client of the tasks extension that survives a restart, and ends as a
//!   tool error when its approval expires;
//! - stdio (`agentplane mcp gateway`), on its own store and relayed to a running server
//!   (its approvals decided with `agentplane approvals`, a key from the environment);
//! - 401 with the resource-metadata link, and RFC 9728's document;
//! - npm's MCP Inspector (its CLI) at `/gateway/mcp`, and malformed requests to every
//!   MCP path answered in the error envelope;
//! - a priced tool and a budget that fits 10 calls: of 50 at once exactly 10 run, and
//!   the spend outlives a restart.
//!
//! Needs the MCP peers of `scripts/test-peers.sh` (the Inspector among them).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agentplane_suites::{Sandbox, Served, binary, sandbox, start};
use agentplane_testkit::{Scenario, ScriptedServer, peers};
use serde_json::{Value, json};

const POLICIES: &str = "\
- name: no-env-for-contractors
  type: tool_access
  targets: {tools: [mcp__everything__get-env]}
  when: {context: roles, in: [contractor]}
  rules: {deny: ['*']}
- name: sums-need-approval
  type: approval_required
  targets: {tools: [mcp__everything__get-sum]}
  rules: {}
";

/// A sandbox whose gateway offers server-everything, with `policies` and `extra`.
fn gateway_sandbox(policies: &str, extra: &str) -> Sandbox {
    let sb = sandbox(&format!(
        "[mcp.servers.everything]\n{}cwd = \"servers\"\n\
         [mcp.gateway]\nservers = [\"everything\"]\n\
         [policies]\ndir = \"policies\"\n{extra}",
        peers::mcp_everything_toml()
    ));
    std::fs::create_dir_all(sb.root.join("servers")).expect("servers dir");
    std::fs::create_dir(sb.root.join("policies")).expect("policies dir");
    std::fs::write(sb.root.join("policies").join("gateway.yaml"), policies).expect("policy");
    sb
}

/// A served gateway over `gateway_sandbox(policies, extra)`, with the key of an `ide`
/// operator created before the server holds the file. Bind `_model` and `_sb` where it
/// is destructured (never `_`): the model stops and the sandbox's folder goes when they
/// are dropped.
struct Gateway {
    _model: ScriptedServer,
    sb: Sandbox,
    ide: String,
    served: Served,
}

async fn gateway(policies: &str, extra: &str) -> Gateway {
    let model = ScriptedServer::start(Scenario::new(vec![]))
        .await
        .expect("model");
    let sb = gateway_sandbox(policies, extra);
    let ide = key(&sb, "ide", &["operator"]);
    let served = start(&sb, &model.base_url(), &[]).await;
    Gateway {
        _model: model,
        sb,
        ide,
        served,
    }
}

/// `agentplane keys create` before the server holds the file: the secret.
fn key(sb: &Sandbox, client: &str, roles: &[&str]) -> String {
    agentplane_suites::cli_key(sb, client, roles)
}

/// PyPI's `mcp` client against `/mcp/gateway` with `key`: lists, and calls `tool`.
async fn sdk(served: &Served, key: &str, mode: &str, call: Option<(&str, Value)>) -> Value {
    let mut cmd = Command::new(peers::python());
    cmd.arg(peers::mcp_client_script())
        .args(["--timeout", "60", "--mode", mode, "--http"])
        .arg(format!("{}/mcp/gateway", served.base))
        .arg("--header")
        .arg(format!("Authorization: Bearer {key}"));
    if let Some((tool, arguments)) = call {
        cmd.args(["--tool", tool, "--arguments", &arguments.to_string()]);
    }
    run_json(cmd).await
}

/// `peers/mcp_tasks_client.py` with `args`.
async fn tasks_client(served: &Served, key: &str, args: &[&str]) -> Value {
    let mut cmd = Command::new(peers::python());
    cmd.arg(peers::mcp_tasks_client_script())
        .arg(args[0])
        .arg("--url")
        .arg(format!("{}/mcp/gateway", served.base))
        .args(["--key", key])
        .args(&args[1..]);
    run_json(cmd).await
}

async fn run_json(mut cmd: Command) -> Value {
    cmd.stdin(Stdio::null());
    let output = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .expect("join")
        .expect("the client runs");
    peers::client_json(&output)
}

fn tool_names(listed: &Value) -> Vec<String> {
    listed["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("tools: {listed}"))
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

fn text_of(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("a text result: {result}"))
        .to_owned()
}

async fn get(served: &Served, key: &str, path: &str) -> Value {
    let response = reqwest::Client::new()
        .get(format!("{}{path}", served.base))
        .bearer_auth(key)
        .send()
        .await
        .expect("GET");
    assert_eq!(response.status(), 200, "{path}");
    response.json().await.expect("JSON")
}

/// The one pending approval of `key`'s client, once it exists.
async fn pending_approval(served: &Served, key: &str) -> String {
    let http = reqwest::Client::new();
    first_pending(|| {
        http.get(format!("{}/v1/approvals", served.base))
            .bearer_auth(key)
    })
    .await
}

/// The approval `list` (a `GET /v1/approvals` as some client) shows, once there is
/// exactly one.
async fn first_pending(list: impl Fn() -> reqwest::RequestBuilder) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let response = list().send().await.expect("GET");
        assert_eq!(response.status(), 200, "GET /v1/approvals");
        let listed: Value = response.json().await.expect("JSON");
        if let Some(id) = listed["approvals"][0]["id"].as_str() {
            assert_eq!(listed["approvals"].as_array().map(Vec::len), Some(1));
            return id.to_owned();
        }
        assert!(Instant::now() < deadline, "no approval: {listed}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn approve(served: &Served, key: &str, approval: &str) {
    let response = reqwest::Client::new()
        .post(format!("{}/v1/approvals/{approval}", served.base))
        .bearer_auth(key)
        .json(&json!({"decision": "approve"}))
        .send()
        .await
        .expect("decide");
    assert_eq!(
        response.status(),
        200,
        "{}",
        response.text().await.unwrap_or_default()
    );
}

#[tokio::test]
async fn each_caller_lists_exactly_what_it_may_call_in_both_generations() {
    let model = ScriptedServer::start(Scenario::new(vec![]))
        .await
        .expect("model");
    let sb = gateway_sandbox(POLICIES, "");
    let contractor = key(&sb, "ide", &["operator", "contractor"]);
    let staff = key(&sb, "staff", &["operator"]);
    let viewer = key(&sb, "watcher", &["viewer"]);
    let served = start(&sb, &model.base_url(), &[]).await;

    for mode in ["auto", "legacy"] {
        let listed = sdk(
            &served,
            &contractor,
            mode,
            Some(("everything__echo", json!({"message": "hi"}))),
        )
        .await;
        let expected = if mode == "auto" {
            "2026-07-28"
        } else {
            "2025-11-25"
        };
        assert_eq!(listed["protocol"], expected, "{listed}");
        let names = tool_names(&listed);
        assert!(names.contains(&"everything__echo".to_owned()), "{names:?}");
        assert!(
            !names.contains(&"everything__get-env".to_owned()),
            "{names:?}"
        );
        assert_eq!(listed["isError"], false, "{listed}");
        assert_eq!(text_of(&listed["result"]), "Echo: hi");
    }
    let names = tool_names(&sdk(&served, &staff, "auto", None).await);
    assert!(
        names.contains(&"everything__get-env".to_owned()),
        "another role sees it: {names:?}"
    );
    // A viewer may call nothing, so it lists nothing.
    assert_eq!(
        tool_names(&sdk(&served, &viewer, "auto", None).await),
        Vec::<String>::new()
    );

    // A hidden tool called anyway: refused, naming the policy.
    let refused = sdk(
        &served,
        &contractor,
        "auto",
        Some(("everything__get-env", json!({}))),
    )
    .await;
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(
        text_of(&refused["result"]).contains("no-env-for-contractors"),
        "{refused}"
    );
    // A call outside the tool's schema never reaches the server.
    let invalid = sdk(
        &served,
        &contractor,
        "auto",
        Some(("everything__echo", json!({"message": 7}))),
    )
    .await;
    assert_eq!(invalid["isError"], true, "{invalid}");

    let log = get(&served, &contractor, "/v1/mcp/calls").await;
    let statuses: Vec<(&str, &str)> = log["calls"]
        .as_array()
        .expect("calls")
        .iter()
        .map(|c| {
            (
                c["tool"].as_str().unwrap_or(""),
                c["status"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        statuses,
        [
            ("everything__echo", "invalid"),
            ("everything__get-env", "denied"),
            ("everything__echo", "ok"),
            ("everything__echo", "ok"),
        ],
        "newest first, the client's own: {log}"
    );
    assert_eq!(log["calls"][1]["policy"], "no-env-for-contractors");
    let other = get(&served, &staff, "/v1/mcp/calls").await;
    assert_eq!(other["calls"], json!([]), "another client's log is its own");
    let metrics = reqwest::Client::new()
        .get(format!("{}/metrics", served.base))
        .bearer_auth(&staff)
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(
        metrics.contains("tool_calls_total{tool=\"everything__echo\",status=\"ok\"} 2"),
        "{}",
        metrics
            .lines()
            .filter(|l| l.contains("tool_calls"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[tokio::test]
async fn an_approval_is_waited_for_and_survives_a_restart_as_a_task() {
    let model = ScriptedServer::start(Scenario::new(vec![]))
        .await
        .expect("model");
    let sb = gateway_sandbox(POLICIES, "");
    let ide = key(&sb, "ide", &["operator"]);
    let mut served = start(&sb, &model.base_url(), &[]).await;

    // A client without tasks waits, with progress, until the decision.
    let waiting = {
        let base = served.base.clone();
        let ide = ide.clone();
        tokio::spawn(async move {
            let mut cmd = Command::new(peers::python());
            cmd.arg(peers::mcp_client_script())
                .args(["--timeout", "60", "--http"])
                .arg(format!("{base}/mcp/gateway"))
                .arg("--header")
                .arg(format!("Authorization: Bearer {ide}"))
                .args([
                    "--tool",
                    "everything__get-sum",
                    "--arguments",
                    r#"{"a": 2, "b": 3}"#,
                ]);
            run_json(cmd).await
        })
    };
    let approval = pending_approval(&served, &ide).await;
    // Long enough for at least one progress notification.
    tokio::time::sleep(Duration::from_millis(600)).await;
    approve(&served, &ide, &approval).await;
    let answered = waiting.await.expect("join");
    assert_eq!(answered["isError"], false, "{answered}");
    assert_eq!(text_of(&answered["result"]), "The sum of 2 and 3 is 5.");
    assert!(
        answered["progressMessages"].as_array().is_some_and(|m| m
            .iter()
            .any(|m| m.as_str().is_some_and(|m| m.contains(&approval)))),
        "{answered}"
    );

    // A client of the tasks extension gets a task, which outlives agentplane.
    let created = tasks_client(
        &served,
        &ide,
        &[
            "call",
            "--tool",
            "everything__get-sum",
            "--arguments",
            r#"{"a": 4, "b": 5}"#,
        ],
    )
    .await;
    let task = &created["response"]["result"];
    assert_eq!(task["resultType"], "task", "{created}");
    assert_eq!(task["status"], "working", "{created}");
    let task_id = task["taskId"].as_str().expect("taskId").to_owned();
    served.kill_9();
    let served = start(&sb, &model.base_url(), &[]).await;
    let read = tasks_client(&served, &ide, &["get", "--task", &task_id]).await;
    assert_eq!(read["response"]["result"]["status"], "working", "{read}");
    approve(&served, &ide, &task_id).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let done = loop {
        let read = tasks_client(&served, &ide, &["get", "--task", &task_id]).await;
        if read["response"]["result"]["status"] == "completed" {
            break read;
        }
        assert!(Instant::now() < deadline, "never completed: {read}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let result = &done["response"]["result"]["result"];
    assert_eq!(result["isError"], false, "{done}");
    assert_eq!(text_of(result), "The sum of 4 and 5 is 9.");
    // Another client cannot read it, and nonsense ids are unknown tasks.
    let stranger = {
        drop(served);
        let other = key(&sb, "other", &["operator"]);
        let served = start(&sb, &model.base_url(), &[]).await;
        [
            tasks_client(&served, &other, &["get", "--task", &task_id]).await,
            tasks_client(&served, &ide, &["get", "--task", "apr_../../etc"]).await,
            tasks_client(&served, &ide, &["get", "--task", ""]).await,
        ]
    };
    for answer in &stranger {
        assert!(
            answer["response"]["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("unknown task")),
            "{answer}"
        );
    }
}

#[tokio::test]
async fn an_expired_approval_is_a_tool_error() {
    let Gateway {
        _model,
        sb: _sb,
        ide,
        served,
    } = gateway(POLICIES, "[approvals]\nexpire_after_secs = 1\n").await;
    let expired = sdk(
        &served,
        &ide,
        "auto",
        Some(("everything__get-sum", json!({"a": 1, "b": 1}))),
    )
    .await;
    assert_eq!(expired["isError"], true, "{expired}");
    assert!(text_of(&expired["result"]).contains("expired"), "{expired}");
    let log = get(&served, &ide, "/v1/mcp/calls").await;
    assert_eq!(log["calls"][0]["status"], "expired", "{log}");
}

#[tokio::test]
async fn the_gateway_on_stdio_serves_a_local_client() {
    let sb = gateway_sandbox(POLICIES, "");
    let config = sb.root.join("agentplane.toml");
    for mode in ["auto", "legacy"] {
        let mut cmd = Command::new(peers::python());
        cmd.arg(peers::mcp_client_script())
            .args(["--timeout", "60", "--mode", mode, "--stdio"])
            .arg(binary())
            .args([
                "--tool",
                "everything__echo",
                "--arguments",
                r#"{"message": "over stdio"}"#,
            ])
            .arg("--")
            .arg("--config")
            .arg(&config)
            .args(["mcp", "gateway"])
            .current_dir(&sb.workspace);
        let answered = run_json(cmd).await;
        assert!(
            tool_names(&answered).contains(&"everything__get-env".to_owned()),
            "{answered}"
        );
        assert_eq!(answered["isError"], false, "{answered}");
        assert_eq!(text_of(&answered["result"]), "Echo: over stdio");
    }
    assert_calls_recorded(&sb.db, 2);
}

/// PyPI's `mcp` client starting `agentplane mcp gateway` on stdio with `config`, with
/// `env` added to what the SDK passes on (as a desktop client's `env` block), calling
/// `tool`.
fn stdio_client(config: &Path, env: &[(&str, &str)], tool: &str, arguments: &str) -> Command {
    let mut cmd = Command::new(peers::python());
    cmd.arg(peers::mcp_client_script())
        .args(["--timeout", "60"])
        .args(["--tool", tool, "--arguments", arguments]);
    for (name, value) in env {
        cmd.arg("--env").arg(format!("{name}={value}"));
    }
    cmd.arg("--stdio")
        .arg(binary())
        .arg("--")
        .arg("--config")
        .arg(config)
        .args(["mcp", "gateway"]);
    if let Some(dir) = config.parent() {
        cmd.current_dir(dir);
    }
    cmd
}

/// `agentplane approvals ARGS` against `served`, as the CLI's default local client;
/// its stdout, after asserting it succeeded.
fn approvals_cli(served: &Served, args: &[&str]) -> String {
    let output = Command::new(binary())
        .arg("approvals")
        .args(args)
        .args(["--server", &served.base])
        .env_remove("AGENTPLANE_KEY")
        .env_remove("AGENTPLANE_CLIENT_ID")
        .output()
        .expect("agentplane approvals");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "approvals {args:?}: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

#[tokio::test]
async fn the_stdio_gateway_beside_a_running_server_relays_to_it() {
    // The setup a desktop client has: `serve` runs on the configuration (on a port
    // of its own, named by no flag the client knows), and the client starts
    // `agentplane mcp gateway` with nothing but `--config`.
    let model = ScriptedServer::start(Scenario::new(vec![]))
        .await
        .expect("model");
    let sb = gateway_sandbox(POLICIES, "");
    let config = sb.root.join("agentplane.toml");
    let served = start(&sb, &model.base_url(), &[]).await;

    let answered = run_json(stdio_client(
        &config,
        &[],
        "everything__echo",
        r#"{"message": "through the server"}"#,
    ))
    .await;
    assert_eq!(answered["isError"], false, "{answered}");
    assert_eq!(text_of(&answered["result"]), "Echo: through the server");
    assert!(
        tool_names(&answered).contains(&"everything__get-sum".to_owned()),
        "{answered}"
    );
    // The call is the server's: in its log, as the local client's.
    let http = reqwest::Client::new();
    let calls: Value = http
        .get(format!("{}/v1/mcp/calls", served.base))
        .header("X-Client-ID", "local")
        .send()
        .await
        .expect("GET")
        .json()
        .await
        .expect("JSON");
    assert_eq!(calls["calls"][0]["tool"], "everything__echo", "{calls}");
    assert_eq!(calls["calls"][0]["status"], "ok", "{calls}");

    // A call that needs an approval waits in the server, where `agentplane approvals`
    // sees and decides it; the answer reaches the stdio client.
    let waiting = tokio::spawn(run_json(stdio_client(
        &config,
        &[],
        "everything__get-sum",
        r#"{"a": 20, "b": 22}"#,
    )));
    let approval = first_pending(|| {
        http.get(format!("{}/v1/approvals", served.base))
            .header("X-Client-ID", "local")
    })
    .await;
    let listed = approvals_cli(&served, &["list"]);
    assert!(listed.contains(&approval), "{listed}");
    approvals_cli(&served, &["approve", &approval]);
    let answered = waiting.await.expect("join");
    assert_eq!(answered["isError"], false, "{answered}");
    assert_eq!(text_of(&answered["result"]), "The sum of 20 and 22 is 42.");
    assert_calls_recorded(&sb.db, 2);

    // A server that stops mid-session: the client gets an MCP error naming it, not a
    // closed pipe. Started again, the next session works.
    drop(served);
    let down = run_json(stdio_client(
        &config,
        &[("AGENTPLANE_KEY", "ap_not_a_real_key_at_all")],
        "everything__echo",
        r#"{"message": "nobody home"}"#,
    ))
    .await;
    let message = down["error"]["message"]
        .as_str()
        .or_else(|| down["connectError"].as_str())
        .unwrap_or_else(|| panic!("an error: {down}"));
    assert!(message.contains("/gateway/mcp"), "{down}");
    assert!(message.contains("cannot be reached"), "{down}");
}

#[tokio::test]
async fn the_stdio_gateway_relays_with_the_key_a_desktop_client_gives_it() {
    let Gateway {
        _model,
        sb,
        ide,
        served,
    } = gateway(POLICIES, "").await;
    let config = sb.root.join("agentplane.toml");
    // A server with keys refuses the keyless relay: the client hears why.
    let refused = run_json(stdio_client(&config, &[], "everything__echo", "{}")).await;
    let message = refused["error"]["message"]
        .as_str()
        .or_else(|| refused["connectError"].as_str())
        .unwrap_or_else(|| panic!("an error: {refused}"));
    assert!(message.contains("AGENTPLANE_AUTH_TOKEN"), "{refused}");
    // With the key in its environment (as a client's `env` block sets it), the calls
    // are the key's client's.
    let answered = run_json(stdio_client(
        &config,
        &[("AGENTPLANE_KEY", ide.as_str())],
        "everything__echo",
        r#"{"message": "with a key"}"#,
    ))
    .await;
    assert_eq!(answered["isError"], false, "{answered}");
    assert_eq!(text_of(&answered["result"]), "Echo: with a key");
    let calls = get(&served, &ide, "/v1/mcp/calls").await;
    assert_eq!(calls["calls"][0]["status"], "ok", "{calls}");
}

/// The gateway's log in the database holds `n` successful calls.
fn assert_calls_recorded(db: &Path, n: usize) {
    let db = rusqlite::Connection::open(db).expect("the database");
    let ok: i64 = db
        .query_row(
            "SELECT count(*) FROM mcp_calls WHERE status = 'ok'",
            [],
            |row| row.get(0),
        )
        .expect("count");
    assert_eq!(ok, i64::try_from(n).expect("small"));
}

#[tokio::test]
async fn a_caller_without_a_token_is_pointed_at_the_resource_metadata() {
    let Gateway {
        _model,
        sb: _sb,
        ide: _,
        served,
    } = gateway(POLICIES, "").await;
    // Both paths of the gateway, each pointing at its own document.
    for path in ["/mcp/gateway", "/gateway/mcp"] {
        let response = reqwest::Client::new()
            .post(format!("{}{path}", served.base))
            .header("Accept", "application/json, text/event-stream")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
            .send()
            .await
            .expect("POST");
        assert_eq!(response.status(), 401, "{path}");
        let challenge = response.headers()["www-authenticate"]
            .to_str()
            .expect("ascii")
            .to_owned();
        let link = format!("{}/.well-known/oauth-protected-resource{path}", served.base);
        assert!(challenge.starts_with("Bearer"), "{challenge}");
        assert!(
            challenge.contains(&format!("resource_metadata=\"{link}\"")),
            "{challenge}"
        );
        let document: Value = reqwest::get(&link)
            .await
            .expect("GET")
            .json()
            .await
            .expect("JSON");
        assert_eq!(document["resource"], format!("{}{path}", served.base));
        assert_eq!(document["bearer_methods_supported"], json!(["header"]));
        // A wrong key is refused too, with the same challenge.
        let response = reqwest::Client::new()
            .post(format!("{}{path}", served.base))
            .bearer_auth("ap_0000000000000000000000000000000000000000000000000000000000000000")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
            .send()
            .await
            .expect("POST");
        assert_eq!(response.status(), 401, "{path}");
    }
}

#[tokio::test]
async fn fifty_priced_calls_at_once_against_a_budget_for_ten_run_exactly_ten() {
    let model = ScriptedServer::start(Scenario::new(vec![]))
        .await
        .expect("model");
    let budget = "\
- name: ten-sums
  type: budget
  targets: {agents: [mcp-gateway]}
  rules: {usd: 10, period: total, per: [client]}
";
    let sb = gateway_sandbox(budget, "[prices.tools]\n\"everything__get-sum\" = 1.0\n");
    let ide = key(&sb, "ide", &["operator"]);
    let mut served = start(&sb, &model.base_url(), &[]).await;
    let burst = tasks_client(
        &served,
        &ide,
        &[
            "burst",
            "--no-tasks",
            "--count",
            "50",
            "--tool",
            "everything__get-sum",
            "--arguments",
            r#"{"a": 1, "b": 2}"#,
        ],
    )
    .await;
    let responses = burst["responses"]
        .as_array()
        .unwrap_or_else(|| panic!("{burst}"));
    assert_eq!(responses.len(), 50);
    let ran = responses
        .iter()
        .filter(|r| r["result"]["isError"] == false)
        .count();
    assert_eq!(ran, 10, "{burst}");
    for refused in responses.iter().filter(|r| r["result"]["isError"] == true) {
        assert!(
            text_of(&refused["result"]).contains("ten-sums"),
            "{refused}"
        );
    }
    let log = get(&served, &ide, "/v1/mcp/calls?limit=100").await;
    let calls = log["calls"].as_array().expect("calls");
    assert_eq!(calls.iter().filter(|c| c["status"] == "ok").count(), 10);
    assert_eq!(
        calls
            .iter()
            .filter(|c| c["status"] == "budget_exceeded")
            .count(),
        40
    );
    let costs = get(&served, &ide, "/v1/costs?group_by=model").await;
    assert_eq!(costs["total"]["usd_micros"], 10_000_000, "{costs}");

    // The spend is in the store: after a restart the budget is still spent.
    served.kill_9();
    let served = start(&sb, &model.base_url(), &[]).await;
    let after = tasks_client(
        &served,
        &ide,
        &[
            "burst",
            "--no-tasks",
            "--count",
            "1",
            "--tool",
            "everything__get-sum",
            "--arguments",
            r#"{"a": 1, "b": 2}"#,
        ],
    )
    .await;
    assert_eq!(after["responses"][0]["result"]["isError"], true, "{after}");
}

#[tokio::test]
async fn hostile_calls_get_clear_errors_and_reach_no_server() {
    let model = ScriptedServer::start(Scenario::new(vec![]))
        .await
        .expect("model");
    let sb = gateway_sandbox(POLICIES, "");
    let ide = key(&sb, "ide", &["operator"]);
    let contractor = key(&sb, "temp", &["operator", "contractor"]);
    let served = start(&sb, &model.base_url(), &[]).await;
    let long = "x".repeat(10_000);
    for name in [
        "",
        "__",
        "everything__",
        "__echo",
        "../everything__echo",
        "everything__echo\u{202e}",
        long.as_str(),
        "nope__echo",
        "everything__nope",
    ] {
        let answer = tasks_client(
            &served,
            &ide,
            &["call", "--tool", name, "--arguments", "{}"],
        )
        .await;
        let error = &answer["response"]["error"];
        assert_eq!(error["code"], -32602, "{name:?}: {answer}");
        assert!(
            error["message"]
                .as_str()
                .is_some_and(|m| m.contains("unknown tool")),
            "{answer}"
        );
    }
    // A contractor is not offered get-env (denied outright for that role): the
    // unknown-tool answer names what its `tools/list` shows, and not get-env.
    let answer = tasks_client(
        &served,
        &contractor,
        &["call", "--tool", "everything__nope", "--arguments", "{}"],
    )
    .await;
    let message = answer["response"]["error"]["message"].to_string();
    assert!(message.contains("everything__echo"), "{answer}");
    assert!(
        !message.contains("get-env"),
        "a hidden tool was named: {answer}"
    );
    // Arguments that are not an object, or do not fit the schema.
    for arguments in [
        "[1, 2]",
        "\"text\"",
        "null",
        r#"{"message": {"deep": [1, 2, 3]}}"#,
    ] {
        let answer = tasks_client(
            &served,
            &ide,
            &[
                "call",
                "--tool",
                "everything__echo",
                "--arguments",
                arguments,
            ],
        )
        .await;
        let refused = answer["response"]["error"].is_object()
            || answer["response"]["result"]["isError"] == true;
        assert!(refused, "{arguments}: {answer}");
    }
    // A body over the limit is refused before MCP sees it.
    let huge = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "everything__echo", "arguments": {"message": "y".repeat(1024 * 1024 + 1)}}});
    let response = reqwest::Client::new()
        .post(format!("{}/mcp/gateway", served.base))
        .bearer_auth(&ide)
        .header("Accept", "application/json, text/event-stream")
        .json(&huge)
        .send()
        .await
        .expect("POST");
    assert_eq!(response.status(), 413);
    // Nothing of it reached the server: only refusals in the log, and no `ok`.
    let log = get(&served, &ide, "/v1/mcp/calls").await;
    for call in log["calls"].as_array().expect("calls") {
        assert_eq!(call["status"], "invalid", "{call}");
    }
}

/// The MCP Inspector's CLI (npm, pinned) with `args`, against `url` with `key`.
async fn inspector(url: &str, key: &str, args: &[&str]) -> Value {
    let home = tempfile::tempdir().expect("home");
    let mut cmd = Command::new(peers::mcp_inspector());
    cmd.arg("--cli")
        .arg(url)
        .args(["--header", &format!("Authorization: Bearer {key}")])
        .args(args)
        .env("HOME", home.path())
        .env("MCP_CATALOG_PATH", home.path().join("mcp.json"));
    run_json(cmd).await
}

#[tokio::test]
async fn the_mcp_inspector_reaches_the_gateway_at_a_path_ending_in_mcp() {
    let Gateway {
        _model,
        sb,
        ide,
        served,
    } = gateway(POLICIES, "").await;
    // No `--transport`: the Inspector takes it from the URL's `/mcp` ending.
    let url = format!("{}/gateway/mcp", served.base);
    let listed = inspector(&url, &ide, &["--method", "tools/list"]).await;
    let names = tool_names(&listed);
    assert!(names.contains(&"everything__echo".to_owned()), "{listed}");
    assert!(
        !names
            .iter()
            .any(|n| n.starts_with("chat") || n.starts_with("careful")),
        "the gateway's tools, not the agents of /mcp: {names:?}"
    );
    let answered = inspector(
        &url,
        &ide,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "everything__echo",
            "--tool-arg",
            "message=from the inspector",
        ],
    )
    .await;
    assert!(
        text_of(&answered).contains("from the inspector"),
        "{answered}"
    );
    assert_calls_recorded(&sb.root.join("events.db"), 1);
}

#[tokio::test]
async fn malformed_mcp_requests_are_answered_in_the_error_envelope() {
    let Gateway {
        _model,
        sb: _sb,
        ide,
        served,
    } = gateway(POLICIES, "").await;
    let http = reqwest::Client::new();
    let both = "application/json, text/event-stream";
    for path in ["/mcp", "/mcp/gateway", "/gateway/mcp"] {
        let url = format!("{}{path}", served.base);
        let cases = [
            ("application/xml", both, "{\"jsonrpc\":\"2.0\"}", 415),
            (
                "application/json",
                "text/html",
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}",
                406,
            ),
        ];
        for (content_type, accept, body, status) in cases {
            let response = http
                .post(&url)
                .bearer_auth(&ide)
                .header("Content-Type", content_type)
                .header("Accept", accept)
                .body(body)
                .send()
                .await
                .expect("POST");
            assert_eq!(response.status(), status, "{path} {content_type} {accept}");
            let text = response.text().await.expect("body");
            agentplane_suites::attacks::assert_envelope(&text, "INVALID_ARGUMENT");
        }
        // Not JSON at all, with the right headers: still JSON back (JSON-RPC's parse
        // error or the envelope), never plain text.
        let response = http
            .post(&url)
            .bearer_auth(&ide)
            .header("Content-Type", "application/json")
            .header("Accept", both)
            .body("{\"jsonrpc\": ")
            .send()
            .await
            .expect("POST");
        let status = response.status();
        let kind = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let text = response.text().await.expect("body");
        assert!(status.is_client_error(), "{path}: {status} {text}");
        assert!(
            kind.starts_with("application/json") && serde_json::from_str::<Value>(&text).is_ok(),
            "{path}: {status} {kind} {text}"
        );
    }
}

#[tokio::test]
async fn a_policy_naming_a_tool_as_the_gateway_lists_it_governs_it_and_explains_it() {
    // The listed names, `SERVER__TOOL`, not the `mcp__` form the other tests use.
    let listed_names = "\
- name: no-env
  type: tool_access
  targets: {tools: [everything__get-env]}
  rules: {deny: ['*']}
";
    let Gateway {
        _model,
        sb,
        ide,
        served,
    } = gateway(listed_names, "").await;
    let called = sdk(
        &served,
        &ide,
        "auto",
        Some(("everything__get-env", json!({}))),
    )
    .await;
    let names = tool_names(&called);
    assert!(names.contains(&"everything__echo".to_owned()), "{names:?}");
    assert!(
        !names.contains(&"everything__get-env".to_owned()),
        "hidden: {names:?}"
    );
    assert_eq!(called["isError"], true, "{called}");
    assert!(
        text_of(&called["result"]).contains("no-env"),
        "refused by its policy's name: {called}"
    );
    // `policy explain` with either name: the gateway's decision.
    for tool in ["everything__get-env", "mcp__everything__get-env"] {
        let out = Command::new(binary())
            .current_dir(&sb.root)
            .args([
                "policy",
                "explain",
                "--agent",
                "mcp-gateway",
                "--tool",
                tool,
            ])
            .args(["--json", "policies"])
            .output()
            .expect("policy explain");
        let explained: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        assert_eq!(explained["decision"], "deny", "{tool}: {explained}");
        assert_eq!(explained["decided_by"], "no-env", "{tool}: {explained}");
    }
}

/// A gateway call waiting on `a` is approved on `b` (or on `a`): the client waiting on
/// `a` gets the call's real answer, never "whether the server finished it is
/// unknown", and the call runs once. Needs PostgreSQL (`scripts/postgres.sh`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_decided_on_either_replica_answers_the_waiting_client_once() {
    let Some(postgres) = agentplane_suites::postgres::service("AGENTPLANE_TEST_POSTGRES_URL")
    else {
        return;
    };
    let (url, name) = agentplane_suites::postgres::fresh_database(&postgres).await;
    let model = ScriptedServer::start(Scenario::new(vec![]))
        .await
        .expect("model");
    let sb = gateway_sandbox(
        POLICIES,
        "[cluster]\nheartbeat_secs = 1\nreplica_timeout_secs = 3\n",
    );
    let a = start(&sb, &model.base_url(), &["--db", &url]).await;
    let b = start(&sb, &model.base_url(), &["--db", &url]).await;
    let rounds = 6;
    for round in 0..rounds {
        let decider = if round % 3 == 2 { &a } else { &b };
        let waiting = {
            let base = a.base.clone();
            tokio::spawn(async move {
                let mut cmd = Command::new(peers::python());
                cmd.arg(peers::mcp_client_script())
                    .args(["--timeout", "60", "--http"])
                    .arg(format!("{base}/mcp/gateway"))
                    .args([
                        "--header",
                        &format!("X-Client-ID: {}", agentplane_suites::CLIENT),
                    ])
                    .args(["--tool", "everything__get-sum", "--arguments"])
                    .arg(json!({"a": round, "b": 1}).to_string());
                run_json(cmd).await
            })
        };
        let approval =
            first_pending(|| agentplane_suites::api(&a, reqwest::Method::GET, "/v1/approvals"))
                .await;
        let response = agentplane_suites::api(
            decider,
            reqwest::Method::POST,
            &format!("/v1/approvals/{approval}"),
        )
        .json(&json!({"decision": "approve"}))
        .send()
        .await
        .expect("decide");
        assert_eq!(response.status(), 200, "round {round}");
        let answered = waiting.await.expect("join");
        assert_eq!(answered["isError"], false, "round {round}: {answered}");
        assert_eq!(
            text_of(&answered["result"]),
            format!("The sum of {round} and 1 is {}.", round + 1),
            "round {round}"
        );
    }
    // Each call ran once: one `ok` record per round in the shared log.
    let log: Value = agentplane_suites::api(&b, reqwest::Method::GET, "/v1/mcp/calls")
        .send()
        .await
        .expect("GET")
        .json()
        .await
        .expect("JSON");
    let ok = log["calls"].as_array().map_or(0, |calls| {
        calls.iter().filter(|c| c["status"] == "ok").count()
    });
    assert_eq!(ok, rounds as usize, "{log}");
    drop((a, b));
    agentplane_suites::postgres::drop_database(&postgres, &name).await;
}

/// One JSON-RPC request to `/gateway/mcp` as `CLIENT` in a fresh 2025-06-18 session:
/// the answer's `result`.
async fn gateway_request(served: &Served, method: &str, params: Value) -> Value {
    let http = reqwest::Client::new();
    let post = |body: Value, session: Option<&str>| {
        let mut request = http
            .post(format!("{}/gateway/mcp", served.base))
            .header("X-Client-ID", agentplane_suites::CLIENT)
            .header("Accept", "application/json, text/event-stream")
            .json(&body);
        if let Some(session) = session {
            request = request
                .header("mcp-session-id", session)
                .header("mcp-protocol-version", "2025-06-18");
        }
        request.send()
    };
    let init = post(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "suites", "version": "1"}}}),
        None,
    )
    .await
    .expect("initialize");
    let session = init
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .expect("a session")
        .to_owned();
    let _ = init.bytes().await;
    let _ = post(
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        Some(&session),
    )
    .await
    .expect("initialized");
    let answer = post(
        json!({"jsonrpc": "2.0", "id": 2, "method": method, "params": params}),
        Some(&session),
    )
    .await
    .expect("request")
    .text()
    .await
    .expect("text");
    std::iter::once(answer.as_str())
        .chain(answer.lines().filter_map(|l| l.strip_prefix("data:")))
        .filter_map(|m| serde_json::from_str::<Value>(m.trim()).ok())
        .find(|m| m["id"] == 2)
        .map(|m| m["result"].clone())
        .unwrap_or_else(|| panic!("no answer to {method}: {answer}"))
}

#[tokio::test]
async fn an_upstream_that_is_down_is_named_in_the_list_the_state_and_the_call() {
    let model = ScriptedServer::start(Scenario::new(vec![]))
        .await
        .expect("model");
    let sb = sandbox(&format!(
        "[mcp.servers.everything]\n{}cwd = \"servers\"\n\
         [mcp.servers.down]\ncommand = \"sh\"\nargs = [\"-c\", \"echo the database is gone >&2; exit 1\"]\n\
         [mcp.gateway]\nservers = [\"everything\", \"down\"]\n",
        peers::mcp_everything_toml()
    ));
    std::fs::create_dir_all(sb.root.join("servers")).expect("servers dir");
    let served = start(&sb, &model.base_url(), &[]).await;
    let before = agentplane_suites::get_json(&served, "/v1/mcp/servers").await;
    assert_eq!(before["servers"][1]["state"], "not_connected", "{before}");

    // The list keeps the servers that answer and names the one that did not.
    let listed = gateway_request(&served, "tools/list", json!({})).await;
    let names = tool_names(&listed);
    assert!(names.contains(&"everything__echo".to_owned()), "{listed}");
    assert!(!names.iter().any(|n| n.starts_with("down__")), "{listed}");
    let unavailable = &listed["_meta"]["io.agentplane/unavailable"];
    assert_eq!(unavailable[0]["server"], "down", "{listed}");
    assert!(
        unavailable[0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("the database is gone")),
        "{listed}"
    );
    // A call of its tool says which server and why, and is in the log.
    let called = gateway_request(
        &served,
        "tools/call",
        json!({"name": "down__query", "arguments": {}}),
    )
    .await;
    assert_eq!(called["isError"], true, "{called}");
    let said = text_of(&called);
    assert!(
        said.contains("`down`") && said.contains("did not start"),
        "{called}"
    );
    let state = agentplane_suites::get_json(&served, "/v1/mcp/servers").await;
    assert_eq!(state["servers"][0]["server"], "everything", "{state}");
    assert_eq!(state["servers"][0]["state"], "connected", "{state}");
    assert!(state["servers"][0]["tools"].as_u64() > Some(5), "{state}");
    assert_eq!(state["servers"][1]["state"], "failing", "{state}");
    assert!(
        state["servers"][1]["error"]
            .as_str()
            .is_some_and(|e| e.contains("the database is gone")),
        "{state}"
    );
    let log = agentplane_suites::get_json(&served, "/v1/mcp/calls").await;
    assert_eq!(log["calls"][0]["status"], "error", "{log}");
    assert_eq!(log["calls"][0]["server"], "down", "{log}");
}
