//! Remote A2A agents as governed agents of ours (`kind = "a2a"`), through the real
//! binary: `agentplane serve` on real SQLite drives `peers/a2a_agent.py`, an agent
//! written with the official `a2a-sdk` 1.3.0 server classes (protocol 1.0), as a child
//! process on 127.0.0.1 that requires a bearer key.
//!
//! - a turn streams the remote's artifact chunks as `message_delta`s, completes, and
//!   the thread's next turn continues the same remote context;
//! - usage the remote reports is recorded as usage and cost, and then a budget refuses
//!   the next turn; a rate limit refuses turns beyond it with 429, recorded;
//! - our cancel reaches the remote as `CancelTask`;
//! - the remote's `input-required` becomes our permission flow: approved, the task
//!   resumes and completes; declined, the remote task is cancelled;
//! - a native agent calls the remote as the tool `a2a__peer`; a `tool_access` policy
//!   denying it refuses the call;
//! - an unreachable remote, a garbage card, a garbage answer and a failed task end the
//!   turn with a clear `error` event, and the server keeps serving;
//! - every request sent is an `a2a_request` event (direction `out`), and the key is in
//!   no stored byte, no log line and no answer.

use std::time::{Duration, Instant};

use agentplane_suites::attacks::assert_nowhere;
use agentplane_suites::{
    CLIENT, Sandbox, Served, SseReader, api, create_thread, events_of, free_port, history, sandbox,
    start_with_env,
};
use agentplane_testkit::{Scenario, ScriptedServer, Step};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The key the peer requires; it must never show on our side.
const KEY: &str = "a2a-peer-key-5b0c9e1d7f";

/// The peer (protocol 1.0, bearer key), killed when dropped, and its base URL.
async fn peer() -> (tokio::process::Child, String) {
    peer_with(&["--auth", "bearer", "--key", KEY]).await
}

/// The peer started with `args`.
async fn peer_with(args: &[&str]) -> (tokio::process::Child, String) {
    agentplane_suites::python_peer(&agentplane_testkit::peers::a2a_agent_script(), args).await
}

/// What the peer saw: cancels, refused requests, versions, methods.
async fn record(base: &str) -> Value {
    reqwest::get(format!("{base}/record"))
        .await
        .expect("record")
        .json()
        .await
        .expect("record JSON")
}

/// `[agents.NAME]` of kind a2a at the peer, with the key from the secret `peer_key`.
fn remote_agent(name: &str, base: &str) -> String {
    format!(
        "[agents.{name}]\nkind = \"a2a\"\ndescription = \"The SDK's test agent.\"\n\
         url = \"{base}/.well-known/agent-card.json\"\n\
         [agents.{name}.a2a]\napi_key = \"peer_key\"\ntimeout_secs = 60\n"
    )
}

/// The same, with `max_cost_usd` (a budget reserves it before each turn).
fn remote_agent_costing(name: &str, base: &str, max_cost_usd: &str) -> String {
    remote_agent(name, base).replacen(
        &format!("[agents.{name}.a2a]"),
        &format!("max_cost_usd = {max_cost_usd}\n[agents.{name}.a2a]"),
        1,
    )
}

/// A sandbox whose config has the secret, `extra` and the policies folder.
fn configured(extra: &str) -> Sandbox {
    let sb = sandbox(&format!(
        "[secrets.peer_key]\nenv = \"AGENTPLANE_TEST_PEER_KEY\"\n\
         [policies]\ndir = \"policies\"\n{extra}"
    ));
    std::fs::create_dir_all(sb.root.join("policies")).expect("policies dir");
    sb
}

async fn serve(sb: &Sandbox, model: &ScriptedServer) -> Served {
    start_with_env(
        sb,
        &model.base_url(),
        &[],
        &[
            ("AGENTPLANE_TEST_PEER_KEY", KEY),
            ("AGENTPLANE_LOG", "debug"),
        ],
    )
    .await
}

async fn idle_model() -> ScriptedServer {
    ScriptedServer::start(Scenario::new(vec![Step::text("unused")]).repeating(true))
        .await
        .expect("model")
}

/// Runs a turn to its end: the events as streamed (each with its `kind`).
async fn turn(served: &Served, thread: &str, input: &str) -> Vec<Value> {
    let mut sse = SseReader::open(served, thread, input).await;
    with_kinds(sse.until("turn_completed").await)
}

fn with_kinds(received: Vec<agentplane_suites::Received>) -> Vec<Value> {
    received
        .into_iter()
        .map(|e| {
            let mut data = e.data;
            if data.get("kind").is_none() {
                data["kind"] = json!(e.event);
            }
            data
        })
        .collect()
}

fn of_kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["kind"] == kind).collect()
}

fn stop_reason(events: &[Value]) -> String {
    events.last().expect("an end")["stop_reason"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The answer's text as streamed.
fn streamed_text(events: &[Value]) -> String {
    of_kind(events, "message_delta")
        .iter()
        .filter_map(|e| e["text"].as_str())
        .collect()
}

/// Waits until the peer has seen `n` cancels (a cancel is answered before the peer's
/// executor is told, so this polls briefly).
async fn cancels_reach(base: &str, n: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let seen = record(base).await;
        if seen["cancels"].as_u64().unwrap_or(0) >= n || Instant::now() > deadline {
            return seen;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_turn_streams_continues_its_context_and_keeps_the_key_hidden() {
    let (_peer, base) = peer().await;
    let model = idle_model().await;
    let sb = configured(&remote_agent("peer", &base));
    let served = serve(&sb, &model).await;

    // The agent is listed and available (its card was read).
    let agents: Value = api(&served, reqwest::Method::GET, "/v1/agents")
        .send()
        .await
        .expect("agents")
        .json()
        .await
        .expect("agents JSON");
    let listed = agents.to_string();
    assert!(listed.contains("a2a:peer"), "{listed}");

    let thread = create_thread(&served, &sb, "peer", "remote").await;
    let events = turn(&served, &thread, "please stream three chunks").await;
    assert_eq!(stop_reason(&events), "text_answer", "{events:#?}");
    assert_eq!(of_kind(&events, "turn_started")[0]["model"], "a2a:peer");
    assert!(
        of_kind(&events, "message_delta").len() >= 2,
        "the chunks arrive as deltas: {events:#?}"
    );
    assert_eq!(streamed_text(&events), "alpha beta gamma");
    assert_eq!(
        events.last().expect("end")["result"]["text"],
        "alpha beta gamma"
    );
    // No usage reported: recorded as not measured.
    let usage = of_kind(&events, "usage");
    assert_eq!(usage.len(), 1, "{events:#?}");
    assert_eq!(usage[0]["reported"], false);
    assert_eq!(usage[0]["provider"], "a2a");

    // The second turn continues the remote context of the first.
    let events = turn(&served, &thread, "which context is this?").await;
    assert_eq!(stop_reason(&events), "text_answer", "{events:#?}");
    let text = streamed_text(&events);
    assert!(text.ends_with("seen 2"), "the same remote context: {text}");

    // A failed remote task is a clear error, not a panic.
    let events = turn(&served, &thread, "fail now").await;
    assert_eq!(stop_reason(&events), "error", "{events:#?}");
    let error = of_kind(&events, "error");
    let message = error[0]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("`peer`") && message.contains("failed") && message.contains("on purpose"),
        "{message}"
    );

    // Every request sent is recorded, with no content.
    let stored = events_of(&history(&served, &thread).await);
    let requests: Vec<&Value> = stored
        .iter()
        .filter(|e| e["kind"] == "a2a_request")
        .collect();
    assert!(
        requests
            .iter()
            .all(|r| r["direction"] == "out" && r["protocol_version"] == "1.0"),
        "{requests:#?}"
    );
    let streamed: Vec<&&Value> = requests
        .iter()
        .filter(|r| r["method"] == "SendStreamingMessage")
        .collect();
    assert_eq!(streamed.len(), 3, "{requests:#?}");
    assert_eq!(streamed[0]["outcome"], "completed");
    assert_eq!(streamed[2]["outcome"], "failed");
    assert!(streamed[1]["context"].is_string() && streamed[1]["task"].is_string());
    assert_eq!(streamed[0]["context"], streamed[1]["context"]);
    // The card was read (and cached) when `/v1/agents` checked availability, outside
    // any turn: no turn of this thread fetched it.
    assert!(
        !requests.iter().any(|r| r["method"] == "GetAgentCard"),
        "{requests:#?}"
    );
    assert!(
        !requests.iter().any(|r| r.to_string().contains("alpha")),
        "no content in a2a_request events"
    );

    // The peer got the key on every request and refused none; all in 1.0.
    let seen = record(&base).await;
    assert_eq!(seen["refused"], 0, "{seen}");
    assert!(
        seen["versions"]
            .as_array()
            .expect("versions")
            .iter()
            .all(|v| v == "1.0"),
        "{seen}"
    );
    let answers = vec![listed, history(&served, &thread).await.to_string()];
    assert_nowhere(&sb, &served, &answers, KEY);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_usage_is_costed_and_budgets_and_rate_limits_govern_remote_turns() {
    let (_peer, base) = peer().await;
    let model = idle_model().await;
    let sb = configured(&format!(
        "{}{}",
        remote_agent_costing("metered", &base, "0.25"),
        remote_agent("limited", &base)
    ));
    std::fs::write(
        sb.root.join("policies/budget.yaml"),
        "name: remote-budget\ntype: budget\ntargets: {agents: [metered]}\n\
         rules: {usd: 0.25, period: month}\n",
    )
    .expect("budget");
    std::fs::write(
        sb.root.join("policies/limit.yaml"),
        "name: remote-limit\ntype: rate_limit\ntargets: {agents: [limited]}\n\
         rules: {window: 1h, max: 2, per: [client]}\n",
    )
    .expect("limit");
    let served = serve(&sb, &model).await;

    // Usage the remote reports (1200 in, 300 out, $0.25) is the turn's usage and cost.
    let thread = create_thread(&served, &sb, "metered", "metered").await;
    let events = turn(&served, &thread, "usage please").await;
    assert_eq!(stop_reason(&events), "text_answer", "{events:#?}");
    let usage = of_kind(&events, "usage");
    assert_eq!(usage[0]["reported"], true, "{events:#?}");
    assert_eq!(usage[0]["input_tokens"], 1200);
    assert_eq!(usage[0]["output_tokens"], 300);
    let cost = of_kind(&events, "cost");
    assert_eq!(cost[0]["usd_micros"], 250_000, "{events:#?}");
    assert_eq!(cost[0]["model"], "a2a:metered");

    // The $0.25 budget is spent (the turn reserved its max_cost_usd of $0.25 and
    // settled what it reported): the next turn is refused before the remote is asked.
    let before = record(&base).await["methods"]
        .as_array()
        .map_or(0, Vec::len);
    let response = api(
        &served,
        reqwest::Method::POST,
        &format!("/v1/threads/{thread}/turns"),
    )
    .json(&json!({"input": "usage again"}))
    .send()
    .await
    .expect("turn");
    assert_eq!(response.status(), 402);
    let body = response.text().await.expect("body");
    assert!(body.contains("BUDGET_EXCEEDED"), "{body}");
    let after = record(&base).await["methods"]
        .as_array()
        .map_or(0, Vec::len);
    assert_eq!(before, after, "a refused turn sends nothing to the remote");
    let stored = events_of(&history(&served, &thread).await);
    assert!(
        stored
            .iter()
            .any(|e| e["kind"] == "policy_denied" && e["policy"] == "remote-budget"),
        "the refusal is recorded: {stored:#?}"
    );

    // Two turns a window: the third is refused with 429, recorded.
    let limited = create_thread(&served, &sb, "limited", "limited").await;
    for _ in 0..2 {
        let events = turn(&served, &limited, "hello").await;
        assert_eq!(stop_reason(&events), "text_answer", "{events:#?}");
    }
    let response = api(
        &served,
        reqwest::Method::POST,
        &format!("/v1/threads/{limited}/turns"),
    )
    .json(&json!({"input": "hello again"}))
    .send()
    .await
    .expect("turn");
    assert_eq!(response.status(), 429);
    let stored = events_of(&history(&served, &limited).await);
    assert!(
        stored
            .iter()
            .any(|e| e["kind"] == "policy_denied" && e["policy"] == "remote-limit"),
        "the refusal is recorded: {stored:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_reaches_the_remote_and_input_required_is_our_permission_flow() {
    let (_peer, base) = peer().await;
    let model = idle_model().await;
    let sb = configured(&remote_agent("peer", &base));
    let served = serve(&sb, &model).await;
    let thread = create_thread(&served, &sb, "peer", "remote").await;

    // Cancel: our turn ends cancelled, the peer saw CancelTask.
    let mut sse = SseReader::open(&served, &thread, "slow work").await;
    let started = sse.until("message_delta").await;
    let turn_id = started
        .iter()
        .find_map(|e| e.data["turn_id"].as_str())
        .expect("a turn id")
        .to_owned();
    let cancelled = api(
        &served,
        reqwest::Method::POST,
        &format!("/v1/turns/{turn_id}/cancel"),
    )
    .send()
    .await
    .expect("cancel");
    assert_eq!(cancelled.status(), 202);
    let events = with_kinds(sse.until("turn_completed").await);
    assert_eq!(stop_reason(&events), "cancelled", "{events:#?}");
    let seen = cancels_reach(&base, 1).await;
    assert_eq!(seen["cancels"], 1, "{seen}");
    assert!(
        seen["methods"]
            .as_array()
            .expect("methods")
            .iter()
            .any(|m| m == "CancelTask"),
        "{seen}"
    );

    // input-required → a permission; approved → the task resumes and completes.
    let mut sse = SseReader::open(&served, &thread, "ask before you deploy").await;
    let asked = with_kinds(sse.until("permission_required").await);
    let ask = of_kind(&asked, "permission_required")[0].clone();
    assert_eq!(ask["tool"], "a2a_input", "{ask}");
    assert_eq!(ask["arguments"]["question"], "May I deploy?", "{ask}");
    assert_eq!(ask["arguments"]["state"], "input-required", "{ask}");
    let id = ask["permission_id"].as_str().expect("permission id");
    let decided = api(
        &served,
        reqwest::Method::POST,
        &format!("/v1/permissions/{id}"),
    )
    .json(&json!({"decision": "approved"}))
    .send()
    .await
    .expect("decide");
    assert_eq!(
        decided.status(),
        200,
        "{}",
        decided.text().await.unwrap_or_default()
    );
    let events = with_kinds(sse.until("turn_completed").await);
    assert_eq!(stop_reason(&events), "text_answer", "{events:#?}");
    let text = streamed_text(&events);
    assert!(text.starts_with("deployed after: Approved"), "{text}");

    // Declined → the remote task is cancelled and the turn ends.
    let mut sse = SseReader::open(&served, &thread, "ask again").await;
    let asked = with_kinds(sse.until("permission_required").await);
    let id = of_kind(&asked, "permission_required")[0]["permission_id"]
        .as_str()
        .expect("permission id")
        .to_owned();
    let decided = api(
        &served,
        reqwest::Method::POST,
        &format!("/v1/permissions/{id}"),
    )
    .json(&json!({"decision": "declined"}))
    .send()
    .await
    .expect("decide");
    assert_eq!(decided.status(), 200);
    let events = with_kinds(sse.until("turn_completed").await);
    assert_eq!(stop_reason(&events), "cancelled", "{events:#?}");
    let seen = cancels_reach(&base, 2).await;
    assert_eq!(
        seen["cancels"], 2,
        "the declined task was cancelled: {seen}"
    );

    let stored = events_of(&history(&served, &thread).await);
    let cancels = stored
        .iter()
        .filter(|e| e["kind"] == "a2a_request" && e["method"] == "CancelTask")
        .count();
    assert_eq!(cancels, 2, "{stored:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_native_agent_calls_the_remote_as_a_governed_tool() {
    let (_peer, base) = peer().await;
    let call = || Step::tool_call("a2a__peer", json!({"message": "hello from a tool"}));
    let finish = || Step::tool_call("finish_task", json!({"summary": "asked"}));
    let slow = Step::tool_call("a2a__peer", json!({"message": "slow work"}));
    let model = ScriptedServer::start(Scenario::new(vec![
        call(),
        finish(),
        call(),
        finish(),
        slow,
        finish(),
    ]))
    .await
    .expect("model");
    let sb = configured(&format!(
        "{}[agents.caller]\nsystem_prompt = \"You ask the peer.\"\nensembles = [\"a2a__peer\"]\n\
         [agents.barred]\nsystem_prompt = \"You ask the peer.\"\nensembles = [\"a2a__peer\"]\n\
         [agents.impatient]\nsystem_prompt = \"You ask the peer.\"\nensembles = [\"a2a__peer\"]\n\
         tool_timeout_ms = 1500\n",
        remote_agent("peer", &base)
    ));
    std::fs::write(
        sb.root.join("policies/deny.yaml"),
        "name: no-remote-for-barred\ntype: tool_access\ntargets: {agents: [barred]}\n\
         rules: {deny: [a2a__peer]}\n",
    )
    .expect("policy");
    let served = serve(&sb, &model).await;

    let thread = create_thread(&served, &sb, "caller", "tool").await;
    let events = turn(&served, &thread, "ask the peer").await;
    let result = of_kind(&events, "tool_call_result")
        .into_iter()
        .find(|e| e["tool"] == "a2a__peer")
        .unwrap_or_else(|| panic!("no a2a__peer result: {events:#?}"))
        .clone();
    assert_eq!(result["status"], "ok", "{result}");
    assert!(
        result["output"]
            .as_str()
            .unwrap_or_default()
            .contains("echo: hello from a tool"),
        "{result}"
    );
    // The model was offered the tool.
    let offered = agentplane_testkit::offered_tools(&model.requests()[0]);
    assert!(offered.iter().any(|t| t == "a2a__peer"), "{offered:?}");

    let before = record(&base).await["methods"]
        .as_array()
        .map_or(0, Vec::len);
    let thread = create_thread(&served, &sb, "barred", "tool").await;
    let events = turn(&served, &thread, "ask the peer").await;
    let denied = of_kind(&events, "policy_denied");
    assert!(
        denied.iter().any(|e| e["policy"] == "no-remote-for-barred"),
        "{events:#?}"
    );
    let result = of_kind(&events, "tool_call_result")
        .into_iter()
        .find(|e| e["tool"] == "a2a__peer")
        .unwrap_or_else(|| panic!("no a2a__peer result: {events:#?}"))
        .clone();
    assert_eq!(result["status"], "error", "{result}");
    let after = record(&base).await["methods"]
        .as_array()
        .map_or(0, Vec::len);
    assert_eq!(before, after, "a denied call sends nothing to the remote");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_that_does_not_stream_gets_send_message() {
    let (_peer, base) = peer_with(&["--no-streaming", "--auth", "bearer", "--key", KEY]).await;
    let model = idle_model().await;
    let sb = configured(&remote_agent("plain", &base));
    let served = serve(&sb, &model).await;
    let thread = create_thread(&served, &sb, "plain", "plain").await;

    let events = turn(&served, &thread, "please stream").await;
    assert_eq!(stop_reason(&events), "text_answer", "{events:#?}");
    assert_eq!(streamed_text(&events), "alpha beta gamma", "{events:#?}");

    // The pause and the follow-up go through SendMessage too.
    let mut sse = SseReader::open(&served, &thread, "ask first").await;
    let asked = with_kinds(sse.until("permission_required").await);
    let id = of_kind(&asked, "permission_required")[0]["permission_id"]
        .as_str()
        .expect("permission id")
        .to_owned();
    let decided = api(
        &served,
        reqwest::Method::POST,
        &format!("/v1/permissions/{id}"),
    )
    .json(&json!({"decision": "approved"}))
    .send()
    .await
    .expect("decide");
    assert_eq!(decided.status(), 200);
    let events = with_kinds(sse.until("turn_completed").await);
    assert_eq!(stop_reason(&events), "text_answer", "{events:#?}");
    assert!(streamed_text(&events).starts_with("deployed after: Approved"));

    let seen = record(&base).await;
    let methods = seen["methods"].as_array().expect("methods");
    assert!(
        !methods.is_empty() && methods.iter().all(|m| m == "SendMessage"),
        "{seen}"
    );
    let stored = events_of(&history(&served, &thread).await);
    let outcomes: Vec<&Value> = stored
        .iter()
        .filter(|e| e["kind"] == "a2a_request")
        .map(|e| &e["outcome"])
        .collect();
    assert_eq!(
        outcomes,
        [
            &json!("completed"),
            &json!("input-required"),
            &json!("completed")
        ],
        "{stored:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_0_3_remote_is_spoken_to_in_0_3_with_its_api_key_header() {
    // The SDK's 0.3 card and its 0.3 JSON-RPC, with an API key in `X-Peer-Key`.
    let (_peer, base) = peer_with(&["--v03", "--auth", "apikey", "--key", KEY]).await;
    let model = idle_model().await;
    let sb = configured(&remote_agent("old", &base));
    let served = serve(&sb, &model).await;
    let thread = create_thread(&served, &sb, "old", "v03").await;

    let events = turn(&served, &thread, "please stream").await;
    assert_eq!(stop_reason(&events), "text_answer", "{events:#?}");
    assert_eq!(streamed_text(&events), "alpha beta gamma");
    let events = turn(&served, &thread, "usage please").await;
    assert_eq!(
        of_kind(&events, "usage")[0]["reported"],
        true,
        "{events:#?}"
    );
    assert_eq!(of_kind(&events, "cost")[0]["usd_micros"], 250_000);

    let mut sse = SseReader::open(&served, &thread, "slow work").await;
    let started = sse.until("message_delta").await;
    let turn_id = started
        .iter()
        .find_map(|e| e.data["turn_id"].as_str())
        .expect("a turn id")
        .to_owned();
    let cancelled = api(
        &served,
        reqwest::Method::POST,
        &format!("/v1/turns/{turn_id}/cancel"),
    )
    .send()
    .await
    .expect("cancel");
    assert_eq!(cancelled.status(), 202);
    let events = with_kinds(sse.until("turn_completed").await);
    assert_eq!(stop_reason(&events), "cancelled", "{events:#?}");
    let seen = cancels_reach(&base, 1).await;
    assert_eq!(seen["cancels"], 1, "{seen}");
    assert_eq!(
        seen["refused"], 0,
        "the key went in the header the card named: {seen}"
    );
    let methods = seen["methods"].as_array().expect("methods");
    assert!(
        methods
            .iter()
            .all(|m| m == "message/stream" || m == "tasks/cancel"),
        "0.3 method names only: {seen}"
    );
    assert!(
        seen["versions"]
            .as_array()
            .expect("versions")
            .iter()
            .all(|v| v == ""),
        "no A2A-Version header in 0.3: {seen}"
    );
    let stored = events_of(&history(&served, &thread).await);
    assert!(
        stored
            .iter()
            .filter(|e| e["kind"] == "a2a_request")
            .all(|e| e["protocol_version"] == "0.3"),
        "{stored:#?}"
    );
    assert_nowhere(&sb, &served, &[], KEY);
}

/// A tiny HTTP server on 127.0.0.1 answering a GET with `card`, and a POST with the
/// first of `answers` whose text occurs in the request (`""` matches any), as JSON,
/// until dropped.
async fn fake_remote(
    card: String,
    answers: Vec<(&'static str, u16, String)>,
) -> (tokio::task::JoinHandle<()>, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let card = card.replace("BASE", &base);
    let task = tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let card = card.clone();
            let answers = answers.clone();
            tokio::spawn(async move {
                let mut buffer = vec![0u8; 64 * 1024];
                let read = socket.read(&mut buffer).await.unwrap_or(0);
                let head = String::from_utf8_lossy(&buffer[..read]).to_string();
                let (status, body) = if head.starts_with("GET") {
                    (200, card)
                } else {
                    answers
                        .into_iter()
                        .find(|(needle, _, _)| head.contains(needle))
                        .map(|(_, status, body)| (status, body))
                        .unwrap_or((500, String::new()))
                };
                let response = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
                     connection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(response.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    (task, base)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_and_garbage_remotes_end_turns_with_clear_errors() {
    let card = r#"{"name":"fake","description":"d","version":"1","supportedInterfaces":[{"url":"BASE/","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],"capabilities":{"streaming":false},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"]}"#;
    let ok = |body: &str| vec![("", 200, body.to_owned())];
    let (_garbage_rpc, rpc_base) = fake_remote(card.to_owned(), ok("this is not JSON-RPC")).await;
    let (_garbage_card, card_base) =
        fake_remote("<html>not a card</html>".to_owned(), ok("{}")).await;
    let refusing =
        r#"{"jsonrpc":"2.0","id":"1","error":{"code":-32004,"message":"Unsupported operation"}}"#;
    let (_rpc_error, error_base) = fake_remote(card.to_owned(), ok(refusing)).await;
    let (_unauthorized, unauthorized_base) = fake_remote(
        card.to_owned(),
        vec![("", 401, r#"{"error":"no key"}"#.to_owned())],
    )
    .await;
    // Five MiB of valid JSON-RPC: over the 4 MiB cap on one answer.
    let huge = format!(
        r#"{{"jsonrpc":"2.0","id":"1","result":{{"message":{{"messageId":"m","role":"ROLE_AGENT","parts":[{{"text":"{}"}}]}}}}}}"#,
        "x".repeat(5 * 1024 * 1024)
    );
    let (_oversized, oversized_base) = fake_remote(card.to_owned(), vec![("", 200, huge)]).await;
    // A remote that answers at once with a working task, then completes it: asked again
    // with GetTask until it ends.
    let task = |state: &str, artifacts: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":"1","result":{{"id":"t1","contextId":"c1","status":{{"state":"{state}"}},"artifacts":[{artifacts}]}}}}"#
        )
    };
    let working = task(
        "TASK_STATE_WORKING",
        r#"{"artifactId":"a","parts":[{"text":"half "}]}"#,
    );
    let done = task(
        "TASK_STATE_COMPLETED",
        r#"{"artifactId":"a","parts":[{"text":"half done"}]}"#,
    );
    let sent = format!(r#"{{"jsonrpc":"2.0","id":"1","result":{{"task":{}}}}}"#, {
        let v: Value = serde_json::from_str(&working).expect("json");
        v["result"].to_string()
    });
    let (_polled, polled_base) = fake_remote(
        card.to_owned(),
        vec![("GetTask", 200, done), ("SendMessage", 200, sent)],
    )
    .await;
    let gone = free_port();
    let model = idle_model().await;
    let agent = |name: &str, base: &str| {
        format!(
            "[agents.{name}]\nkind = \"a2a\"\nurl = \"{base}/.well-known/agent-card.json\"\n\
             [agents.{name}.a2a]\nconnect_timeout_secs = 3\ntimeout_secs = 10\n"
        )
    };
    let sb = configured(&format!(
        "{}{}{}{}{}{}{}",
        agent("gone", &format!("http://127.0.0.1:{gone}")),
        agent("garbage_card", &card_base),
        agent("garbage_rpc", &rpc_base),
        agent("rpc_error", &error_base),
        agent("unauthorized", &unauthorized_base),
        agent("oversized", &oversized_base),
        agent("polled", &polled_base),
    ));
    let served = serve(&sb, &model).await;

    for (name, expected) in [
        ("gone", "could not reach it"),
        ("garbage_card", "could not be read"),
        ("garbage_rpc", "not A2A"),
        ("rpc_error", "-32004: Unsupported operation"),
        ("unauthorized", "refused our credential"),
        ("oversized", "larger than 4194304 bytes"),
    ] {
        let thread = create_thread(&served, &sb, name, "broken").await;
        let response = api(
            &served,
            reqwest::Method::POST,
            &format!("/v1/threads/{thread}/turns"),
        )
        .json(&json!({"input": "hello"}))
        .send()
        .await
        .expect("turn");
        let status = response.status();
        if status != 200 {
            // Refused at the start as unavailable: a clear envelope.
            let body = response.text().await.expect("body");
            assert!(body.contains(expected), "{name}: {status} {body}");
            continue;
        }
        let events = with_kinds(
            SseReader::from_response(response)
                .until("turn_completed")
                .await,
        );
        assert_eq!(stop_reason(&events), "error", "{name}: {events:#?}");
        let error = of_kind(&events, "error");
        let message = error[0]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(&format!("`{name}`")) && message.contains(expected),
            "{name}: {message}"
        );
    }
    // A task still working after the answer is polled to its end, its text not repeated.
    let thread = create_thread(&served, &sb, "polled", "polled").await;
    let events = turn(&served, &thread, "hello").await;
    assert_eq!(stop_reason(&events), "text_answer", "{events:#?}");
    assert_eq!(streamed_text(&events), "half done", "{events:#?}");
    let stored = events_of(&history(&served, &thread).await);
    let methods: Vec<(&Value, &Value)> = stored
        .iter()
        .filter(|e| e["kind"] == "a2a_request")
        .map(|e| (&e["method"], &e["outcome"]))
        .collect();
    assert_eq!(
        methods,
        [
            (&json!("SendMessage"), &json!("working")),
            (&json!("GetTask"), &json!("completed"))
        ],
        "{stored:#?}"
    );

    // Still serving, nothing panicked.
    let health = reqwest::get(format!("{}/healthz", served.base))
        .await
        .expect("healthz");
    assert_eq!(health.status(), 200);
    assert!(!served.stderr().contains("panicked"), "{}", served.stderr());
    let _ = CLIENT;
}
