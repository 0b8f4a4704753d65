//! Every refusal by a policy is recorded, through the real binary: a `tool_access`,
//! `time_window`, `data_scope`, rate-limit or budget refusal of a tool call or a turn
//! appends a `policy_denied` event naming the policy and its type, and counts in
//! `policy_denials_total{policy,agent,kind}` on `/metrics`. A turn refused before it
//! starts is still in the thread's log, as a turn that ended at once.

use std::time::{SystemTime, UNIX_EPOCH};

use agentplane_suites::{
    Sandbox, Served, SseReader, api, create_thread, events_of, history, sandbox, start,
};
use agentplane_testkit::{Scenario, ScriptedServer, Step};
use serde_json::{Value, json};

const WRITER: &str = "[agents.writer]\nsystem_prompt = \"You write.\"\nensembles = [\"fs\"]\n\
                      [policies]\ndir = \"policies\"\n";

/// A server with `policies` in force, its model answering `steps` in order.
async fn served_with(
    steps: Vec<Step>,
    policies: &[(&str, String)],
) -> (Served, Sandbox, ScriptedServer) {
    let model = ScriptedServer::start(Scenario::new(steps))
        .await
        .expect("model");
    let sb = sandbox(&format!(
        "{WRITER}[prices.\"scripted-model\"]\ninput_per_mtok = 0.0\noutput_per_mtok = 4.0\n"
    ));
    std::fs::create_dir(sb.root.join("policies")).expect("policies dir");
    for (name, text) in policies {
        std::fs::write(sb.root.join("policies").join(name), text).expect("policy");
    }
    let served = start(&sb, &model.base_url(), &[]).await;
    (served, sb, model)
}

/// Runs a turn; the HTTP status of its start.
async fn turn(served: &Served, thread: &str, input: &str) -> u16 {
    let response = api(
        served,
        reqwest::Method::POST,
        &format!("/v1/threads/{thread}/turns"),
    )
    .json(&json!({"input": input}))
    .send()
    .await
    .expect("start turn");
    let status = response.status().as_u16();
    if status == 200 {
        SseReader::from_response(response)
            .until("turn_completed")
            .await;
    }
    status
}

/// The thread's `policy_denied` events.
async fn denials(served: &Served, thread: &str) -> Vec<Value> {
    events_of(&history(served, thread).await)
        .into_iter()
        .filter(|e| e["kind"] == "policy_denied")
        .collect()
}

/// The `policy_denials_total` series of `policy`, `agent` and `kind` from `/metrics`.
async fn counted(served: &Served, policy: &str, agent: &str, kind: &str) -> f64 {
    let labels = [("policy", policy), ("agent", agent), ("kind", kind)];
    agentplane_suites::metric_sum(served, "policy_denials_total", &labels).await
}

/// The one `policy_denied` event of the thread names `policy` and `kind` (and `tool`
/// when given), and the metric counted it once.
async fn assert_recorded(
    served: &Served,
    thread: &str,
    policy: &str,
    agent: &str,
    kind: &str,
    tool: Option<&str>,
) {
    let found = denials(served, thread).await;
    assert_eq!(found.len(), 1, "{found:?}");
    let denial = &found[0];
    assert_eq!(denial["policy"], policy, "{denial}");
    assert_eq!(denial["policy_type"], kind, "{denial}");
    if let Some(tool) = tool {
        assert_eq!(denial["tool"], tool, "{denial}");
    }
    assert!(
        denial["detail"].as_str().is_some_and(|d| !d.is_empty()),
        "{denial}"
    );
    assert_eq!(
        counted(served, policy, agent, kind).await,
        1.0,
        "policy_denials_total for {policy}/{agent}/{kind}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_access_denial_of_a_call_is_recorded() {
    let (served, sb, _model) = served_with(
        vec![
            Step::tool_call("write_file", json!({"path": "a.txt", "content": "x"})),
            Step::text("could not write"),
        ],
        &[(
            "deny.yaml",
            "name: no-writes\ntype: tool_access\nrules: {deny: [write_file]}\n".to_owned(),
        )],
    )
    .await;
    let thread = create_thread(&served, &sb, "writer", "deny").await;
    assert_eq!(turn(&served, &thread, "write").await, 200);
    assert!(!sb.workspace.join("a.txt").exists());
    assert_recorded(
        &served,
        &thread,
        "no-writes",
        "writer",
        "tool_access",
        Some("write_file"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_denying_write_file_also_denies_edit_file() {
    // `edit_file` came after deny lists naming `write_file` were written: it is governed
    // as `write_file` too, so such a list still refuses every change to a file.
    let (served, sb, _model) = served_with(
        vec![
            Step::tool_call(
                "edit_file",
                json!({"path": "a.txt", "old_text": "kept", "new_text": "changed"}),
            ),
            Step::text("could not edit"),
        ],
        &[(
            "deny.yaml",
            "name: no-writes\ntype: tool_access\nrules: {deny: [write_file]}\n".to_owned(),
        )],
    )
    .await;
    std::fs::write(sb.workspace.join("a.txt"), "kept\n").expect("file");
    let thread = create_thread(&served, &sb, "writer", "deny-edit").await;
    assert_eq!(turn(&served, &thread, "edit").await, 200);
    assert_eq!(
        std::fs::read_to_string(sb.workspace.join("a.txt")).expect("file"),
        "kept\n"
    );
    assert_recorded(
        &served,
        &thread,
        "no-writes",
        "writer",
        "tool_access",
        Some("edit_file"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_time_window_refuses_the_turn_and_records_it() {
    // A one-minute window twelve hours from now.
    let hour = (SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs()
        / 3600
        + 12)
        % 24;
    let (served, sb, model) = served_with(
        vec![Step::text("never")],
        &[(
            "window.yaml",
            format!(
                "name: office-hours\ntype: time_window\n\
                 rules: {{timezone: UTC, hours: \"{hour:02}:00-{hour:02}:01\"}}\n"
            ),
        )],
    )
    .await;
    let thread = create_thread(&served, &sb, "chat", "window").await;
    assert_eq!(turn(&served, &thread, "hi").await, 403);
    assert_eq!(model.chat_request_count(), 0, "no model call");
    let turns = history(&served, &thread).await;
    assert_eq!(turns["turns"][0]["status"], "ended", "{turns}");
    assert_recorded(
        &served,
        &thread,
        "office-hours",
        "chat",
        "time_window",
        None,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_scope_refusal_of_a_call_is_recorded() {
    let (served, sb, _model) = served_with(
        vec![
            Step::tool_call("read_file", json!({"path": "secret.txt"})),
            Step::text("could not read"),
        ],
        &[(
            "scope.yaml",
            "name: public-only\ntype: data_scope\ntargets: {agents: [writer]}\n\
             rules: {paths: [\"public/**\"]}\n"
                .to_owned(),
        )],
    )
    .await;
    std::fs::write(sb.workspace.join("secret.txt"), "classified").expect("file");
    let thread = create_thread(&served, &sb, "writer", "scope").await;
    assert_eq!(turn(&served, &thread, "read").await, 200);
    assert_recorded(
        &served,
        &thread,
        "public-only",
        "writer",
        "data_scope",
        Some("read_file"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limit_refusals_of_a_turn_and_of_a_call_are_recorded() {
    let (served, sb, _model) = served_with(
        vec![
            Step::text("first"),
            Step::tool_call("list_files", json!({"path": "."})),
            Step::tool_call("list_files", json!({"path": "."})),
            Step::text("listed"),
        ],
        &[
            (
                "turns.yaml",
                "name: one-chat\ntype: rate_limit\ntargets: {agents: [chat]}\n\
                 rules: {window: 1h, max: 1}\n"
                    .to_owned(),
            ),
            (
                "calls.yaml",
                "name: one-listing\ntype: rate_limit\ntargets: {tools: [list_files]}\n\
                 rules: {window: 1h, max: 1}\n"
                    .to_owned(),
            ),
        ],
    )
    .await;
    let chat = create_thread(&served, &sb, "chat", "turns").await;
    assert_eq!(turn(&served, &chat, "one").await, 200);
    assert_eq!(turn(&served, &chat, "two").await, 429);
    assert_recorded(&served, &chat, "one-chat", "chat", "rate_limit", None).await;

    let writer = create_thread(&served, &sb, "writer", "calls").await;
    assert_eq!(turn(&served, &writer, "list twice").await, 200);
    assert_recorded(
        &served,
        &writer,
        "one-listing",
        "writer",
        "rate_limit",
        Some("list_files"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_refusal_of_a_model_call_is_recorded() {
    // One call costs 500 tokens × $4/M = $0.002 against a $0.001 budget: its worst case
    // (the agent's default cap of 4,096 tokens) does not fit, so it is never sent.
    let (served, sb, model) = served_with(
        vec![Step::text("too dear").with_usage(10, 500)],
        &[(
            "budget.yaml",
            "name: tiny\ntype: budget\nrules: {usd: 0.001, period: month}\n".to_owned(),
        )],
    )
    .await;
    let thread = create_thread(&served, &sb, "chat", "budget").await;
    assert_eq!(turn(&served, &thread, "hi").await, 200);
    assert_eq!(
        model.chat_request_count(),
        0,
        "a call that cannot be paid is not sent"
    );
    assert_recorded(&served, &thread, "tiny", "chat", "budget", None).await;
}
