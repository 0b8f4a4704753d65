//! ACP agents (`kind = "acp"`) behind the same HTTP API: a turn on the SDK peer streams
//! its chunks, plan and tool calls as our events; its permission request is ours to
//! decide; a policy refuses its file writes; cancel ends it; `GET /v1/agents` says which
//! external agents are available and why not, without hanging.

use std::time::{Duration, Instant};

use agentplane_testkit::peers;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::harness::{Api, Setup};

fn toml_list(items: &[String]) -> String {
    format!(
        "[{}]",
        items
            .iter()
            .map(|a| format!("{a:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// The SDK peer as `[agents.peer]` (profile opencode: no key needed).
fn peer_agent() -> String {
    let (node, args) = peers::acp_sdk_agent();
    format!(
        "\n[agents.peer]\nkind = \"acp\"\nprofile = \"opencode\"\ndescription = \"the SDK peer\"\n\
         [agents.peer.acp]\ncommand = {node:?}\nargs = {}\n",
        toml_list(&args)
    )
}

async fn start(extra: &str) -> Api {
    let api = Setup::new(Vec::new())
        .extra_config(&peer_agent())
        .extra_config(extra)
        .start()
        .await;
    std::fs::write(api.workspace.join("notes.txt"), "remember the milk").expect("notes");
    api
}

fn kinds(frames: &[crate::harness::SseFrame]) -> Vec<String> {
    frames
        .iter()
        .map(|f| f.json()["kind"].as_str().unwrap_or("").to_owned())
        .collect()
}

#[tokio::test]
async fn an_acp_turn_streams_its_work_as_events_and_asks_us_for_permission() {
    let api = start("").await;
    let thread = api.create_thread("alice", "peer").await;
    let mut stream = api
        .start_turn("alice", &thread, "please read, then ask permission")
        .await;
    let mut frames = stream.until("permission_required").await;
    let required = frames.last().expect("frame").json();
    assert_eq!(
        required["tool"], "write_file",
        "kind `edit` is our write_file"
    );
    assert_eq!(required["arguments"]["agent_title"], "edit main.rs");
    assert_eq!(required["arguments"]["input"], json!({"path": "main.rs"}));
    let id = required["permission_id"].as_str().expect("id").to_owned();
    let answer = api
        .post(
            &format!("/v1/permissions/{id}"),
            "alice",
            json!({"decision": "approved"}),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    frames.extend(stream.until_completed().await);

    let kinds = kinds(&frames);
    assert_eq!(kinds.first().map(String::as_str), Some("turn_started"));
    assert_eq!(frames[0].json()["model"], "acp:opencode");
    for kind in [
        "message_delta",
        "plan",
        "tool_call_planned",
        "tool_call_result",
        "permission_resolved",
        "usage",
    ] {
        assert!(kinds.iter().any(|k| k == kind), "no {kind} in {kinds:?}");
    }
    assert_eq!(kinds.iter().filter(|k| *k == "turn_completed").count(), 1);
    let result = frames
        .iter()
        .find(|f| f.is("tool_call_result"))
        .expect("result")
        .json();
    assert_eq!(result["call_id"], "call-1");
    assert_eq!(result["status"], "ok");
    assert_eq!(result["output"], "notes: remember the milk");
    let usage = frames.iter().find(|f| f.is("usage")).expect("usage").json();
    assert_eq!(
        usage["reported"], false,
        "the peer reports no tokens: recorded as not measured"
    );
    let done = frames.last().expect("last").json();
    assert_eq!(done["kind"], "turn_completed");
    assert_eq!(done["stop_reason"], "text_answer");
    let text = done["result"]["text"].as_str().expect("text");
    assert!(text.starts_with("Hello from the SDK peer."), "{text}");
    assert!(text.contains("[permission: allow]"), "{text}");

    // The stored log is what was streamed.
    let turn = done["turn_id"].as_str().expect("turn id").to_owned();
    let stored = api.stored_events(&turn).await;
    assert_eq!(stored.len(), frames.len());
}

#[tokio::test]
async fn a_declined_permission_is_rejected_to_the_agent() {
    let api = start("").await;
    let thread = api.create_thread("alice", "peer").await;
    let mut stream = api.start_turn("alice", &thread, "permission").await;
    let frames = stream.until("permission_required").await;
    let id = frames.last().expect("frame").json()["permission_id"]
        .as_str()
        .expect("id")
        .to_owned();
    // Garbage is a decline (fail-closed), and the caller hears why.
    let answer = api
        .post(
            &format!("/v1/permissions/{id}"),
            "alice",
            json!({"decision": "yes please"}),
        )
        .await;
    answer.assert_error(400, "INVALID_ARGUMENT");
    let frames = stream.until_completed().await;
    let done = frames.last().expect("last").json();
    let text = done["result"]["text"].as_str().expect("text");
    assert!(text.contains("[permission: reject]"), "{text}");
}

#[tokio::test]
async fn a_policy_denying_write_file_refuses_the_agents_write() {
    let api = Setup::new(Vec::new())
        .extra_config(&peer_agent())
        .policy(
            "acp.yaml",
            "- name: no-writes\n  type: tool_access\n  targets: {agents: [peer]}\n  rules: {deny: [write_file]}\n",
        )
        .start()
        .await;
    let thread = api.create_thread("alice", "peer").await;
    let mut stream = api.start_turn("alice", &thread, "write").await;
    let frames = stream.until_completed().await;
    let done = frames.last().expect("last").json();
    // The SDK peer does not survive a refused write: its prompt fails, and the turn
    // ends in error with the agent's message.
    assert_eq!(done["stop_reason"], "error", "{done}");
    assert!(!api.workspace.join("out.txt").exists());
}

#[tokio::test]
async fn cancel_ends_an_acp_turn_promptly() {
    let api = start("").await;
    let thread = api.create_thread("alice", "peer").await;
    let mut stream = api.start_turn("alice", &thread, "wait").await;
    let frames = stream.until("turn_started").await;
    let turn = frames[0].json()["turn_id"]
        .as_str()
        .expect("turn")
        .to_owned();
    // Wait until the agent is working.
    loop {
        let frame = stream.next().await.expect("frame");
        if frame.is("message_delta") && frame.json()["text"] == " [waiting]" {
            break;
        }
    }
    let started = Instant::now();
    let cancelled = api
        .post(&format!("/v1/turns/{turn}/cancel"), "alice", Value::Null)
        .await;
    assert_eq!(cancelled.status, StatusCode::ACCEPTED);
    let frames = stream.until_completed().await;
    assert_eq!(
        frames.last().expect("last").json()["stop_reason"],
        "cancelled"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn agents_lists_external_agents_as_available_or_not_with_the_reason() {
    let (node, claude_args) = peers::claude_acp_adapter();
    let extra = format!(
        "\n[agents.claude]\nkind = \"acp\"\nprofile = \"claude\"\n\
         [agents.claude.acp]\ncommand = {node:?}\nargs = {}\n\
         [agents.codex]\nkind = \"acp\"\nprofile = \"codex\"\n\
         [agents.codex.acp]\ncommand = \"codex-acp-not-installed-here\"\n",
        toml_list(&claude_args)
    );
    let api = start(&extra).await;
    let started = Instant::now();
    let answer = api.get("/v1/agents", "alice").await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(answer.status, StatusCode::OK);
    let agents = answer.body["agents"].as_array().expect("agents");
    let find = |name: &str| {
        agents
            .iter()
            .find(|a| a["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {agents:?}"))
            .clone()
    };
    assert_eq!(
        find("peer")["model"],
        json!({"status": "ready", "model": "acp:opencode", "detail": null})
    );
    let claude = find("claude");
    assert_eq!(claude["model"]["status"], "unavailable");
    assert_eq!(claude["model"]["model"], "acp:claude");
    let why = claude["model"]["detail"].as_str().expect("detail");
    assert!(why.starts_with("key missing: ANTHROPIC_API_KEY"), "{why}");
    let codex = find("codex");
    assert_eq!(codex["model"]["status"], "unavailable");
    let why = codex["model"]["detail"].as_str().expect("detail");
    assert!(why.starts_with("program missing"), "{why}");

    // A turn on the unavailable claude agent ends in error with the same reason,
    // without starting the adapter.
    let thread = api.create_thread("alice", "claude").await;
    let mut stream = api.start_turn("alice", &thread, "hello").await;
    let frames = stream.until_completed().await;
    let error = frames.iter().find(|f| f.is("error")).expect("error").json();
    assert_eq!(error["code"], "UPSTREAM_UNAVAILABLE");
    assert!(
        error["message"]
            .as_str()
            .expect("message")
            .contains("ANTHROPIC_API_KEY")
    );
    assert_eq!(frames.last().expect("last").json()["stop_reason"], "error");
}

#[tokio::test]
async fn bad_acp_agent_config_is_refused_at_load_naming_the_key() {
    use agentplane_runtime::{Config, config::ConfigSource};
    let dir = tempfile::tempdir().expect("tempdir");
    for (body, key) in [
        ("kind = \"acp\"\n", "agents.x.profile"),
        ("kind = \"acp\"\nprofile = \"nope\"\n", "agents.x.profile"),
        ("kind = \"robot\"\n", "agents.x.kind"),
        (
            "kind = \"acp\"\nprofile = \"codex\"\nensembles = [\"fs\"]\n",
            "agents.x.ensembles",
        ),
        (
            "system_prompt = \"p\"\nprofile = \"codex\"\n",
            "agents.x.kind",
        ),
        (
            "kind = \"acp\"\nprofile = \"codex\"\n[agents.x.acp]\nenv = { K = \"${secret:bad name}\" }\n",
            "agents.x.acp.env",
        ),
    ] {
        let file = dir.path().join("agentplane.toml");
        std::fs::write(&file, format!("[agents.x]\n{body}")).expect("write");
        let env = |_: &str| None;
        let error = Config::load_from(&ConfigSource {
            explicit: Some(&file),
            cwd: dir.path(),
            env: &env,
        })
        .expect_err("refused");
        assert!(error.to_string().contains(key), "{body}: {error}");
    }
}

/// The hostile peer in `garbage` mode as `[agents.rough]`: garbage lines around every
/// answer, and token usage at the end of its prompt.
fn rough_agent() -> String {
    let (python, args) = peers::acp_hostile_agent("garbage");
    format!(
        "\n[agents.rough]\nkind = \"acp\"\nprofile = \"opencode\"\n\
         [agents.rough.acp]\ncommand = {python:?}\nargs = {}\n\
         [prices.\"acp:opencode\"]\ninput_per_mtok = 10.0\noutput_per_mtok = 20.0\n",
        toml_list(&args)
    )
}

#[tokio::test]
async fn reported_usage_is_priced_and_counted_like_a_model_call() {
    let api = start(&rough_agent()).await;
    let thread = api.create_thread("alice", "rough").await;
    let mut stream = api.start_turn("alice", &thread, "hi").await;
    let frames = stream.until_completed().await;
    let done = frames.last().expect("last").json();
    assert_eq!(done["stop_reason"], "text_answer", "{done}");
    assert_eq!(done["result"]["text"], "partial answer and the rest");
    let usage = frames.iter().find(|f| f.is("usage")).expect("usage").json();
    assert_eq!(usage["reported"], true);
    assert_eq!(usage["input_tokens"], 1200);
    assert_eq!(usage["output_tokens"], 300);
    let cost = frames.iter().find(|f| f.is("cost")).expect("cost").json();
    // 1200 × $10/M + 300 × $20/M = $0.018.
    assert_eq!(cost["usd_micros"], 18_000);
    assert_eq!(cost["model"], "acp:opencode");
    let report = api.get("/v1/costs?group_by=agent", "alice").await;
    assert_eq!(report.status, StatusCode::OK, "{:?}", report.body);
    assert!(report.body.to_string().contains("rough"), "{}", report.body);
}

#[tokio::test]
async fn a_spent_budget_stops_acp_turns_before_the_agent_starts() {
    // The agent reports $0.018 a turn; its max_cost_usd is $0.01, what the budget
    // reserves up front and the most a turn is charged.
    let capped = rough_agent().replacen(
        "[agents.rough.acp]",
        "max_cost_usd = 0.01\n[agents.rough.acp]",
        1,
    );
    let api = Setup::new(Vec::new())
        .extra_config(&peer_agent())
        .extra_config(&capped)
        .policy(
            "budget.yaml",
            "- name: tiny\n  type: budget\n  rules: {usd: 0.01, period: day, per: [client]}\n",
        )
        .start()
        .await;
    // The peer has no max_cost_usd: under the budget, its turns are refused, naming it.
    let thread = api.create_thread("alice", "peer").await;
    let mut stream = api.start_turn("alice", &thread, "hi").await;
    let frames = stream.until_completed().await;
    let error = frames.iter().find(|f| f.is("error")).expect("error").json();
    assert_eq!(error["code"], "BUDGET_EXCEEDED", "{error}");
    assert!(
        error["message"]
            .as_str()
            .unwrap_or_default()
            .contains("[agents.peer] max_cost_usd"),
        "{error}"
    );
    let thread = api.create_thread("alice", "rough").await;
    let mut stream = api.start_turn("alice", &thread, "hi").await;
    let frames = stream.until_completed().await;
    assert_eq!(
        frames.last().expect("last").json()["stop_reason"],
        "text_answer"
    );
    // Charged its max, never the $0.018 it claimed; the claim is kept.
    let cost = frames.iter().find(|f| f.is("cost")).expect("cost").json();
    assert_eq!(cost["usd_micros"], 10_000);
    let flagged = frames
        .iter()
        .find(|f| f.is("security_event"))
        .expect("security_event")
        .json();
    assert_eq!(flagged["event_type"], "usage_over_reported", "{flagged}");
    // The budget is spent: the next one is refused before anything starts.
    let response = api
        .request(
            reqwest::Method::POST,
            &format!("/v1/threads/{thread}/turns"),
            Some("alice"),
        )
        .json(&json!({"input": "again"}))
        .send()
        .await
        .expect("turn request");
    assert_eq!(response.status(), StatusCode::PAYMENT_REQUIRED);
}

#[tokio::test]
async fn the_example_profiles_are_listed_with_why_they_cannot_run_here() {
    let example = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/acp-agents.toml"),
    )
    .expect("examples/acp-agents.toml");
    let api = Setup::new(Vec::new())
        .extra_config(&format!("\n{example}"))
        .start()
        .await;
    let started = Instant::now();
    let answer = api.get("/v1/agents", "alice").await;
    assert!(started.elapsed() < Duration::from_secs(5));
    let agents = answer.body["agents"].as_array().expect("agents");
    for (name, program) in [
        ("codex", "codex-acp"),
        ("gemini", "gemini"),
        ("opencode", "opencode"),
        ("claude", "claude-agent-acp"),
    ] {
        let agent = agents
            .iter()
            .find(|a| a["name"] == name)
            .unwrap_or_else(|| panic!("no {name}"));
        assert_eq!(agent["model"]["model"], format!("acp:{name}"));
        if agentplane_acp_program_on_path(program) {
            continue;
        }
        assert_eq!(agent["model"]["status"], "unavailable", "{agent}");
        let why = agent["model"]["detail"].as_str().expect("detail");
        assert!(
            why.starts_with(&format!("program missing: `{program}`")),
            "{name}: {why}"
        );
    }
}

/// Whether `program` happens to be installed here (then its availability depends on
/// keys, not on the program).
fn agentplane_acp_program_on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}
