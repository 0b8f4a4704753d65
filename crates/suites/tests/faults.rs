//! The fault suite (docs/reliability.md, "Fault suite"): the model server, MCP servers
//! and ACP agents misbehave on purpose, and each turn through the real binary ends in the
//! documented state with the documented error code, while the server keeps answering
//! and its memory stays bounded.
//!
//! Sized by `AGENTPLANE_SUITE_SIZE` (`full` repeats the faults more often and loads
//! more turns).

use std::time::Duration;

use agentplane_suites::faults::{
    self, LoadEnd, Outcome, cancel, healthy, memory, refused_url, sandbox_with_llm,
};
use agentplane_suites::{SseReader, create_thread, full_size, start};
use agentplane_testkit::{Scenario, ScriptedServer, Step, peers};

/// `[llm]` for the fault turns: one attempt, and two seconds for headers or each piece.
const ONE_SHOT: &str = "max_retries = 0\nrequest_timeout_secs = 2";

fn text_chunk(text: &str) -> String {
    format!(r#"data: {{"choices":[{{"index":0,"delta":{{"content":"{text}"}}}}]}}"#)
}

fn assert_failed(outcome: &Outcome, code: &str, what: &str) {
    assert_eq!(outcome.stop_reason, "error", "{what}: {outcome:?}");
    assert_eq!(
        outcome.error_code.as_deref(),
        Some(code),
        "{what}: {outcome:?}"
    );
}

fn assert_answered(outcome: &Outcome, what: &str) {
    assert_eq!(outcome.stop_reason, "text_answer", "{what}: {outcome:?}");
    assert!(outcome.error_code.is_none(), "{what}: {outcome:?}");
}

/// Nobody listens: the model cannot be resolved, so the turn request itself is refused
/// (502 `UPSTREAM_UNAVAILABLE`) and nothing is stored; once a model server listens on
/// that address, turns run again without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_refuses_the_turn_until_the_model_is_back() {
    let url = refused_url();
    let sb = sandbox_with_llm(ONE_SHOT, "");
    let served = start(&sb, &url, &[]).await;
    let thread = create_thread(&served, &sb, "chat", "refused").await;
    for _ in 0..3 {
        let outcome = faults::turn_on(&served, &thread, "hi").await;
        assert_eq!(outcome.http_status, 502, "{outcome:?}");
        assert_eq!(outcome.error_code.as_deref(), Some("UPSTREAM_UNAVAILABLE"));
        let message = outcome.error_message.unwrap_or_default();
        assert!(message.contains("cannot reach"), "{message}");
        assert!(healthy(&served).await);
    }
    let stored = agentplane_suites::history(&served, &thread).await;
    assert_eq!(
        stored["turns"].as_array().map(Vec::len),
        Some(0),
        "{stored}"
    );

    let addr: std::net::SocketAddr = url
        .trim_start_matches("http://")
        .trim_end_matches("/v1")
        .parse()
        .expect("address");
    let model = ScriptedServer::bind(Scenario::new(vec![Step::text("back")]), addr)
        .await
        .expect("the port is still free");
    let outcome = faults::turn_on(&served, &thread, "hi").await;
    assert_answered(&outcome, "model back");
    assert_eq!(model.chat_request_count(), 1);
}

/// Every model-server fault, one turn each, in the order of the scenario; the last turn
/// shows the server still runs turns normally afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_model_fault_ends_its_turn_with_the_documented_code() {
    let big = "x".repeat(64 * 1024);
    let big_delta = text_chunk(&big);
    let big_comment = format!(": {big}");
    let cases: Vec<(&str, Step, &str)> = vec![
        ("500", Step::error(500, "{}"), "UPSTREAM_UNAVAILABLE"),
        (
            "503",
            Step::error(503, r#"{"error":"busy"}"#),
            "UPSTREAM_UNAVAILABLE",
        ),
        (
            "429",
            Step::error(429, r#"{"error":{"message":"slow down"}}"#),
            "RATE_LIMITED",
        ),
        (
            "429 with Retry-After",
            Step::error_retry_after(429, "{}", "3600"),
            "RATE_LIMITED",
        ),
        (
            "reset mid-stream",
            Step::text("half an answer")
                .with_split(4)
                .truncated_after(2),
            "UPSTREAM_UNAVAILABLE",
        ),
        (
            "malformed chunk",
            Step::raw_chunks(&["data: {\"choices\":[{\"ind", "ex\": oops}\n\n"]),
            "UPSTREAM_UNAVAILABLE",
        ),
        (
            "wrong shape",
            Step::raw_sse(&[r#"data: {"choices": 5}"#, "data: [DONE]"]),
            "UPSTREAM_UNAVAILABLE",
        ),
        (
            "not even SSE",
            Step::raw_chunks(&["<html>502 Bad Gateway</html>"]),
            "UPSTREAM_UNAVAILABLE",
        ),
        (
            "headers then silence",
            Step::text("never sent").stalled_after(0),
            "TIMEOUT",
        ),
        (
            "silence mid-stream",
            Step::text("some words first")
                .with_split(2)
                .stalled_after(2),
            "TIMEOUT",
        ),
        ("silence before headers", Step::silent(), "TIMEOUT"),
        (
            "endless text",
            Step::endless_sse(&[&big_delta]),
            "UPSTREAM_UNAVAILABLE",
        ),
        (
            "endless comments",
            Step::endless_sse(&[&big_comment]),
            "UPSTREAM_UNAVAILABLE",
        ),
    ];
    let mut steps: Vec<Step> = cases.iter().map(|(_, step, _)| step.clone()).collect();
    steps.push(Step::text("all good"));
    let model = ScriptedServer::start(Scenario::new(steps))
        .await
        .expect("model");
    let sb = sandbox_with_llm(ONE_SHOT, "");
    let served = start(&sb, &model.base_url(), &[]).await;
    for (what, _, code) in &cases {
        let outcome = faults::turn(&served, &sb, "chat", "hi").await;
        assert_failed(&outcome, code, what);
        assert!(healthy(&served).await, "{what}");
    }
    let last = faults::turn(&served, &sb, "chat", "hi").await;
    assert_answered(&last, "after the faults");
    assert_eq!(model.chat_request_count(), cases.len() + 1);
}

/// With retries, a short storm is absorbed and a long one fails with the last code;
/// `Retry-After` is not waited for (the pause doubles from 0.5 s, capped at 30 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storms_are_retried_then_reported() {
    let model = ScriptedServer::start(Scenario::new(vec![
        // A short storm: two failures, then an answer.
        Step::error(503, "{}"),
        Step::error_retry_after(429, "{}", "1"),
        Step::text("through the storm"),
        // A long one: three failures use up the two retries.
        Step::error(502, "{}"),
        Step::error(500, "{}"),
        Step::error(503, "{}"),
        // 429s only, with a Retry-After of an hour.
        Step::error_retry_after(429, "{}", "3600"),
        Step::error_retry_after(429, "{}", "3600"),
        Step::error_retry_after(429, "{}", "3600"),
    ]))
    .await
    .expect("model");
    let sb = sandbox_with_llm("max_retries = 2\nrequest_timeout_secs = 5", "");
    let served = start(&sb, &model.base_url(), &[]).await;
    assert_answered(
        &faults::turn(&served, &sb, "chat", "hi").await,
        "short storm",
    );
    assert_failed(
        &faults::turn(&served, &sb, "chat", "hi").await,
        "UPSTREAM_UNAVAILABLE",
        "5xx storm",
    );
    assert_failed(
        &faults::turn(&served, &sb, "chat", "hi").await,
        "RATE_LIMITED",
        "429 storm",
    );
    assert_eq!(model.chat_request_count(), 9);
}

/// A stalled model call holds one turn; `/healthz` and another thread's turn still
/// answer, and the stalled turn ends with `TIMEOUT`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_answers_while_a_model_call_stalls() {
    let model = ScriptedServer::start(Scenario::new(vec![
        Step::text("never").stalled_after(0),
        Step::text("meanwhile"),
    ]))
    .await
    .expect("model");
    let sb = sandbox_with_llm("max_retries = 0\nrequest_timeout_secs = 6", "");
    let served = start(&sb, &model.base_url(), &[]).await;
    let stalled_thread = create_thread(&served, &sb, "chat", "stalled").await;
    let mut stalled = SseReader::open(&served, &stalled_thread, "hi").await;
    wait_for_requests(&model, 1).await;
    assert!(healthy(&served).await);
    let other = faults::turn(&served, &sb, "chat", "hi").await;
    assert_answered(&other, "the other thread");
    let outcome = faults::outcome_of(stalled.until("turn_completed").await);
    assert_failed(&outcome, "TIMEOUT", "stalled");
}

async fn wait_for_requests(model: &ScriptedServer, count: usize) {
    assert!(
        model.called(count, agentplane_suites::EVENT_BUDGET).await,
        "the model got no request"
    );
}

/// Repeated faults (endless streams, resets, 5xx, malformed chunks) leave the serve
/// process's memory where a few turns put it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_stays_bounded_under_repeated_faults() {
    let big_delta = text_chunk(&"y".repeat(64 * 1024));
    let model = ScriptedServer::start(
        Scenario::new(vec![
            Step::endless_sse(&[&big_delta]),
            Step::text("cut short").with_split(3).truncated_after(2),
            Step::error(500, "{}"),
            Step::raw_chunks(&["data: {nope\n\n"]),
        ])
        .repeating(true),
    )
    .await
    .expect("model");
    let sb = sandbox_with_llm(ONE_SHOT, "");
    let served = start(&sb, &model.base_url(), &[]).await;
    let rounds = if full_size() { 25 } else { 6 };
    // A warm-up round of each fault: caches, pools and SQLite pages settle.
    for _ in 0..8 {
        let outcome = faults::turn(&served, &sb, "chat", "hi").await;
        assert_eq!(outcome.stop_reason, "error", "{outcome:?}");
    }
    let before = memory(served.pid());
    for _ in 0..rounds * 4 {
        let outcome = faults::turn(&served, &sb, "chat", "hi").await;
        assert_eq!(outcome.stop_reason, "error", "{outcome:?}");
    }
    let after = memory(served.pid());
    eprintln!("serve memory over {rounds} rounds of 4 faults: {before:?} → {after:?}");
    // Generous: each endless stream may hold its 8 MiB answer while it lasts.
    let growth = after.rss_kib.saturating_sub(before.rss_kib);
    assert!(growth < 64 * 1024, "RSS grew by {growth} KiB");
    assert!(after.hwm_kib < 512 * 1024, "peak RSS {} KiB", after.hwm_kib);
    assert!(healthy(&served).await);
}

fn toml_list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|a| format!("{a:?}")).collect();
    format!("[{}]", quoted.join(", "))
}

/// A misbehaving MCP server's call is a tool result the model sees; the turn goes on
/// and ends with the model's answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_server_faults_are_tool_results_and_the_turn_goes_on() {
    // mode, whether the call succeeds, the error type when it does not
    let cases = [
        ("garbage", true, None),
        ("wrong-ids", true, None),
        ("flood", true, None),
        ("stall", false, Some("timeout")),
        ("wrong-only", false, Some("timeout")),
        ("exit", false, Some("execution_failed")),
    ];
    let mut config = String::new();
    let mut steps = Vec::new();
    for (mode, _, _) in &cases {
        let name = mode.replace('-', "_");
        let (python, args) = peers::mcp_hostile_server(mode);
        config.push_str(&format!(
            "\n[mcp.servers.{name}]\ncommand = {python:?}\nargs = {}\n\
             startup_timeout_secs = 10\ncall_timeout_secs = 2\n\
             [agents.mcp_{name}]\nsystem_prompt = \"You echo.\"\nensembles = [\"{name}\"]\n",
            toml_list(&args)
        ));
        steps.push(Step::tool_call(
            format!("mcp__{name}__echo"),
            serde_json::json!({"text": "hi"}),
        ));
        steps.push(Step::text("done"));
    }
    let model = ScriptedServer::start(Scenario::new(steps))
        .await
        .expect("model");
    let sb = sandbox_with_llm(ONE_SHOT, &config);
    let served = start(&sb, &model.base_url(), &[]).await;
    for (mode, ok, error_type) in cases {
        let agent = format!("mcp_{}", mode.replace('-', "_"));
        let outcome = faults::turn(&served, &sb, &agent, "echo hi").await;
        assert_answered(&outcome, mode);
        let results = outcome.of_kind("tool_call_result");
        assert_eq!(results.len(), 1, "{mode}: {outcome:?}");
        let result = results[0];
        let expected_status = if ok { "ok" } else { "error" };
        assert_eq!(result["status"], expected_status, "{mode}: {result}");
        if let Some(kind) = error_type {
            assert_eq!(result["error_type"], kind, "{mode}: {result}");
        }
        if mode == "flood" {
            assert_eq!(result["truncated"], true, "{mode}: cut to the output cap");
        } else if ok {
            assert!(
                result["output"].as_str().unwrap_or("").contains("echo: hi"),
                "{mode}: {result}"
            );
        }
        assert!(healthy(&served).await, "{mode}");
    }
}

/// A misbehaving ACP agent: protocol noise is ignored, an exit or a silent handshake
/// fails the turn with its code, a silent prompt runs until cancelled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acp_agent_faults_end_in_their_documented_state() {
    let modes = [
        "garbage",
        "wrong-ids",
        "flood",
        "exit-mid-turn",
        "silent",
        "silent-prompt",
    ];
    let mut config = String::new();
    for mode in modes {
        let (python, args) = peers::acp_hostile_agent(mode);
        config.push_str(&format!(
            "\n[agents.acp_{}]\nkind = \"acp\"\nprofile = \"opencode\"\n\
             [agents.acp_{0}.acp]\ncommand = {python:?}\nargs = {}\nhandshake_timeout_secs = 2\n",
            mode.replace('-', "_"),
            toml_list(&args)
        ));
    }
    let sb = sandbox_with_llm(ONE_SHOT, &config);
    let served = start(&sb, &refused_url(), &[]).await;
    for mode in ["garbage", "wrong-ids"] {
        let outcome = faults::turn(
            &served,
            &sb,
            &format!("acp_{}", mode.replace('-', "_")),
            "hi",
        )
        .await;
        assert_answered(&outcome, mode);
    }
    let flood = faults::turn(&served, &sb, "acp_flood", "hi").await;
    assert_answered(&flood, "flood");
    let done = flood.of_kind("turn_completed")[0];
    let text = done["result"]["text"].as_str().unwrap_or_default();
    assert_eq!(
        text.len(),
        "partial answer and the rest".len() + 20_000 * 100
    );
    // Chunks that arrive faster than the store writes share a `message_delta` (one
    // event per chunk made this turn 20,000 writes long).
    let deltas = flood.of_kind("message_delta").len();
    assert!(deltas < 10_000, "{deltas} message_delta events");
    eprintln!("an ACP flood of 20,000 chunks: {deltas} message_delta events");
    let exit = faults::turn(&served, &sb, "acp_exit_mid_turn", "hi").await;
    assert_failed(&exit, "UPSTREAM_UNAVAILABLE", "exit mid-turn");
    let silent = faults::turn(&served, &sb, "acp_silent", "hi").await;
    assert_failed(&silent, "TIMEOUT", "silent handshake");

    // A prompt never answered: the turn runs until cancelled; the server answers meanwhile.
    let thread = create_thread(&served, &sb, "acp_silent_prompt", "stuck").await;
    let mut stuck = SseReader::open(&served, &thread, "hi").await;
    let started = stuck.until("turn_started").await;
    let turn_id = started
        .last()
        .and_then(|e| e.data["turn_id"].as_str())
        .expect("turn id")
        .to_owned();
    assert!(healthy(&served).await);
    let other = faults::turn(&served, &sb, "acp_garbage", "hi").await;
    assert_answered(&other, "another thread meanwhile");
    cancel(&served, &turn_id).await;
    let outcome = faults::outcome_of(stuck.until("turn_completed").await);
    assert_eq!(outcome.stop_reason, "cancelled", "{outcome:?}");
}

/// The bounded form of the load-under-faults run: many turns at once while one model
/// request in ten fails; every turn ends, in the documented state, within a generous
/// deadline. Timings are printed, never asserted (`bench/load-faults.sh` compares them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_turns_all_end_while_a_tenth_of_model_requests_fail() {
    let turns = if full_size() { 1000 } else { 150 };
    let model = ScriptedServer::start(faults::load_scenario(10))
        .await
        .expect("model");
    let sb = sandbox_with_llm("max_retries = 0\nrequest_timeout_secs = 30", "");
    let served = start(&sb, &model.base_url(), &[]).await;
    let ended = faults::load(&served, &sb, "chat", turns, Duration::from_secs(120)).await;
    let mut answered = 0;
    let mut failed = 0;
    for turn in &ended {
        match &turn.end {
            LoadEnd::Completed {
                stop_reason,
                error_code,
            } if stop_reason == "text_answer" && error_code.is_none() => answered += 1,
            LoadEnd::Completed {
                stop_reason,
                error_code,
            } if stop_reason == "error"
                && error_code.as_deref() == Some("UPSTREAM_UNAVAILABLE") =>
            {
                failed += 1
            }
            other => panic!("a turn did not end as documented: {other:?}"),
        }
    }
    let latencies: Vec<Duration> = ended.iter().map(|t| t.latency).collect();
    eprintln!(
        "{turns} turns, {failed} failed upstream: p50 {:?}, p99 {:?}",
        faults::quantile(&latencies, 0.5),
        faults::quantile(&latencies, 0.99)
    );
    assert_eq!(answered + failed, turns);
    // One model request per turn, and exactly one in ten of them fails.
    assert_eq!(model.chat_request_count(), turns);
    assert_eq!(failed, turns / 10);
    assert!(healthy(&served).await);
}
