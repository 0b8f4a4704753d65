//! Budgets attacked with concurrency, replicas and kills, through the real binary: a
//! budget is never exceeded (ADR 0029). Every model call of the scripted model reports
//! 100 tokens in and 500 out; input is free and 500 output tokens cost $0.002 at
//! $4/M, and agents send `max_tokens = 500`, so a call's reserved worst case is exactly
//! its cost and a $0.02 budget pays for exactly 10 calls: any overspend, or any money
//! still held after a kill, shows as a count other than 10.
//!
//! The PostgreSQL part needs `AGENTPLANE_TEST_POSTGRES_URL` (`scripts/test.sh` starts
//! one); without it the test fails under `CI=true` and is skipped elsewhere.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agentplane_suites::{CLIENT, Sandbox, Served, SseReader, events_of, sandbox, start};
use agentplane_testkit::{Scenario, ScriptedServer, Step};
use serde_json::{Value, json};

/// What one call costs, in micro-dollars.
const CALL_MICROS: u64 = 2_000;
/// The cap: ten calls.
const BUDGET_MICROS: u64 = 20_000;

/// The price and an agent that sends the 500-token cap.
const PRICED: &str = "[prices.\"scripted-model\"]\ninput_per_mtok = 0.0\noutput_per_mtok = 4.0\n\
                      [agents.spender]\nsystem_prompt = \"You answer.\"\nmax_output_tokens = 500\n\
                      [policies]\ndir = \"policies\"\n";

/// A $0.02 budget named `name`; `extra` adds to its rules.
fn budget_policy(sb: &Sandbox, name: &str, extra: &str) {
    let dir = sb.root.join("policies");
    std::fs::create_dir_all(&dir).expect("policies dir");
    std::fs::write(
        dir.join(format!("{name}.yaml")),
        format!("name: {name}\ntype: budget\nrules: {{usd: 0.02, period: month{extra}}}\n"),
    )
    .expect("policy");
}

/// A monthly budget of `usd` dollars named `name`.
fn budget_of(sb: &Sandbox, name: &str, usd: &str) {
    let dir = sb.root.join("policies");
    std::fs::create_dir_all(&dir).expect("policies dir");
    std::fs::write(
        dir.join(format!("{name}.yaml")),
        format!("name: {name}\ntype: budget\nrules: {{usd: {usd}, period: month}}\n"),
    )
    .expect("policy");
}

/// A request to the server as `client`.
fn as_client(
    served: &Served,
    client: &str,
    method: reqwest::Method,
    path: &str,
) -> reqwest::RequestBuilder {
    reqwest::Client::new()
        .request(method, format!("{}{path}", served.base))
        .header("X-Client-ID", client)
}

async fn model(delay_ms: u64) -> ScriptedServer {
    ScriptedServer::start(
        Scenario::new(vec![
            Step::text("answer")
                .with_usage(100, 500)
                .with_delay_ms(delay_ms),
        ])
        .repeating(true),
    )
    .await
    .expect("model")
}

/// What the client's model calls cost so far (turns and gateway calls).
async fn spent(served: &Served, client: &str) -> (u64, u64) {
    let response = as_client(served, client, reqwest::Method::GET, "/v1/costs")
        .send()
        .await
        .expect("costs");
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.expect("costs JSON");
    (
        body["total"]["usd_micros"].as_u64().expect("usd_micros"),
        body["total"]["calls"].as_u64().expect("calls"),
    )
}

/// Runs one turn of `agent` on a new thread; its stop reason, or the HTTP status of a
/// refused start. A turn stopped by the budget must say which policy in its log.
async fn one_turn(served: &Served, sb: &Sandbox, client: &str, policy: &str) -> String {
    let thread = new_thread(served, sb, client).await;
    let response = post_turn(served, client, &thread).await;
    if response.status() != 200 {
        return response.status().as_u16().to_string();
    }
    let mut reader = SseReader::from_response(response);
    let events = reader.until("turn_completed").await;
    let stop = events.last().expect("end").data["stop_reason"]
        .as_str()
        .expect("stop reason")
        .to_owned();
    if stop == "error" {
        let history: Value = as_client(
            served,
            client,
            reqwest::Method::GET,
            &format!("/v1/threads/{thread}/history?includeEvents=1"),
        )
        .send()
        .await
        .expect("history")
        .json()
        .await
        .expect("history JSON");
        let stored = events_of(&history);
        assert!(
            stored.iter().any(|e| e["kind"] == "policy_denied"
                && e["policy"] == policy
                && e["policy_type"] == "budget"),
            "a turn the budget stopped has no policy_denied event: {stored:?}"
        );
        let error = stored
            .iter()
            .find(|e| e["kind"] == "error")
            .expect("error event");
        assert_eq!(error["code"], "BUDGET_EXCEEDED", "{error}");
    }
    stop
}

/// A thread of the `spender` agent for `client`.
async fn new_thread(served: &Served, sb: &Sandbox, client: &str) -> String {
    let response = as_client(served, client, reqwest::Method::POST, "/v1/threads")
        .json(&json!({"agent": "spender", "cwd": sb.workspace, "title": "spend"}))
        .send()
        .await
        .expect("create thread");
    assert_eq!(response.status(), 201);
    let body: Value = response.json().await.expect("thread JSON");
    body["id"].as_str().expect("thread id").to_owned()
}

/// `POST /v1/threads/{thread}/turns` as `client`.
async fn post_turn(served: &Served, client: &str, thread: &str) -> reqwest::Response {
    as_client(
        served,
        client,
        reqwest::Method::POST,
        &format!("/v1/threads/{thread}/turns"),
    )
    .json(&json!({"input": "hi"}))
    .send()
    .await
    .expect("start turn")
}

/// Starts a turn whose stream the caller keeps open.
async fn open_turn(served: &Served, sb: &Sandbox, client: &str) -> SseReader {
    let thread = new_thread(served, sb, client).await;
    let response = post_turn(served, client, &thread).await;
    assert_eq!(response.status(), 200, "{}", served.stderr());
    SseReader::from_response(response)
}

/// `n` turns of `client` at once, spread over `replicas`; their stop reasons.
async fn race(
    replicas: &[&Served],
    sb: &Sandbox,
    n: usize,
    client: &str,
    policy: &str,
) -> Vec<String> {
    let runs = (0..n).map(|i| one_turn(replicas[i % replicas.len()], sb, client, policy));
    futures_util::future::join_all(runs).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_turns_and_fifty_gateway_calls_never_pass_the_budget() {
    let model = model(100).await;
    let sb = sandbox(PRICED);
    budget_policy(&sb, "turns", "");
    let served = start(&sb, &model.base_url(), &[]).await;

    let stops = race(&[&served], &sb, 50, CLIENT, "turns").await;
    let (usd, calls) = spent(&served, CLIENT).await;
    println!("turns: {calls} calls, {usd} µ$ of {BUDGET_MICROS}; stops {stops:?}");
    assert_eq!(usd, calls * CALL_MICROS, "every call is priced once");
    assert_eq!(
        usd, BUDGET_MICROS,
        "the cap is used to the last call, never passed"
    );
    assert_eq!(stops.iter().filter(|s| *s == "text_answer").count(), 10);
    drop(served);

    // The gateway, on a fresh budget: 50 requests at once, each with the 500-token cap.
    let sb = sandbox(PRICED);
    budget_policy(&sb, "gateway", "");
    let served = start(&sb, &model.base_url(), &[]).await;
    // Hostile caps first: the largest `max_tokens` is a worst case no budget pays (402,
    // never sent, nothing left held); a negative or textual one is not a request (400).
    let gateway = |body: Value| {
        as_client(
            &served,
            CLIENT,
            reqwest::Method::POST,
            "/openai/v1/chat/completions",
        )
        .json(&body)
        .send()
    };
    let hi = json!([{"role": "user", "content": "hi"}]);
    for (cap, status) in [
        (json!(u32::MAX), 402),
        (json!(-1), 400),
        (json!("500"), 400),
    ] {
        let response =
            gateway(json!({"model": "scripted-model", "max_tokens": cap, "messages": hi}))
                .await
                .expect("gateway call");
        assert_eq!(response.status().as_u16(), status, "max_tokens {cap}");
    }
    // Had one been sent or left money held, the race below would not fit exactly ten.
    let calls = (0..50).map(|_| {
        as_client(
            &served,
            CLIENT,
            reqwest::Method::POST,
            "/openai/v1/chat/completions",
        )
        .json(&json!({
            "model": "scripted-model",
            "max_tokens": 500,
            "messages": [{"role": "user", "content": "hi"}],
        }))
        .send()
    });
    let mut statuses = Vec::new();
    for response in futures_util::future::join_all(calls).await {
        statuses.push(response.expect("gateway call").status().as_u16());
    }
    let ok = statuses.iter().filter(|s| **s == 200).count();
    let refused = statuses.iter().filter(|s| **s == 402).count();
    assert_eq!((ok, refused), (10, 40), "{statuses:?}");
    // Gateway calls are recorded in the background: wait until all ten are.
    let deadline = Instant::now() + Duration::from_secs(10);
    let (usd, calls) = loop {
        let (usd, calls) = spent(&served, CLIENT).await;
        if calls >= 10 || Instant::now() > deadline {
            break (usd, calls);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    println!("gateway: {calls} calls, {usd} µ$ of {BUDGET_MICROS}");
    assert_eq!(usd, BUDGET_MICROS, "the gateway never passes the cap");
    // A gateway call has no thread to record its refusal in: the metric counts it.
    let metrics = reqwest::get(format!("{}/metrics", served.base))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics text");
    let denied = metrics
        .lines()
        .find(|l| {
            l.starts_with("policy_denials_total{")
                && l.contains("policy=\"gateway\"")
                && l.contains("agent=\"gateway\"")
                && l.contains("kind=\"budget\"")
        })
        .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok());
    // The 40 refused in the race, and the hostile cap before it.
    assert_eq!(denied, Some(41.0), "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_during_reserved_calls_leaves_nothing_held_after_a_restart() {
    // Slow calls: five turns hold their reservations when the server is killed.
    let model = model(3_000).await;
    let sb = sandbox(PRICED);
    budget_policy(&sb, "held", "");
    let mut served = start(&sb, &model.base_url(), &[]).await;
    let mut readers = Vec::new();
    for _ in 0..5 {
        readers.push(open_turn(&served, &sb, CLIENT).await);
    }
    assert!(
        model.called(5, Duration::from_secs(10)).await,
        "the calls never started"
    );
    served.kill_9();
    drop(readers);
    let served = start(&sb, &model.base_url(), &[]).await;
    // Nothing was spent by the killed calls, and nothing stays held: ten calls fit.
    let stops = race(&[&served], &sb, 12, CLIENT, "held").await;
    let (usd, calls) = spent(&served, CLIENT).await;
    assert_eq!((usd, calls), (BUDGET_MICROS, 10), "stops: {stops:?}");
}

/// A fresh database on the server of `url`: its URL, the name to drop, and a client.
async fn fresh_database(url: &str) -> (String, String, tokio_postgres::Client) {
    let (admin, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect to the test PostgreSQL");
    tokio::spawn(connection);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_nanos();
    let name = format!("ap_budgets_{}_{nanos}", std::process::id());
    admin
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .expect("create a database");
    let (server, _) = url.split_once('?').unwrap_or((url, ""));
    let slash = server.rfind('/').expect("a URL with a database");
    let fresh = if slash > server.find("://").expect("a URL") + 2 {
        format!("{}/{name}", &server[..slash])
    } else {
        format!("{server}/{name}")
    };
    let (client, connection) = tokio_postgres::connect(&fresh, tokio_postgres::NoTls)
        .await
        .expect("connect to the fresh database");
    tokio::spawn(connection);
    (fresh, name, client)
}

async fn held(db: &tokio_postgres::Client) -> (i64, i64) {
    let holds: i64 = db
        .query_one("SELECT count(*) FROM budget_holds", &[])
        .await
        .expect("holds")
        .get(0);
    let reserved: i64 = db
        .query_one(
            "SELECT coalesce(sum(reserved), 0)::bigint FROM budget_accounts",
            &[],
        )
        .await
        .expect("reserved")
        .get(0);
    (holds, reserved)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_on_postgresql_never_jointly_pass_a_budget_and_a_dead_ones_holds_are_released()
{
    let postgres = match std::env::var("AGENTPLANE_TEST_POSTGRES_URL") {
        Ok(url) if !url.is_empty() => url,
        _ => {
            assert!(
                std::env::var("CI").is_err(),
                "CI must provide AGENTPLANE_TEST_POSTGRES_URL (scripts/test.sh starts it)"
            );
            eprintln!("AGENTPLANE_TEST_POSTGRES_URL is not set; run ./scripts/test.sh");
            return;
        }
    };
    let (db, name, client) = fresh_database(&postgres).await;
    let model = model(1_500).await;
    let sb = sandbox(&format!(
        "{PRICED}[cluster]\nheartbeat_secs = 1\nreplica_timeout_secs = 3\n"
    ));
    budget_policy(&sb, "shared", "");
    let mut a = start(&sb, &model.base_url(), &["--db", &db]).await;
    let b = start(&sb, &model.base_url(), &["--db", &db]).await;

    // 1. Fifty turns at once, half on each replica, under one budget.
    let stops = race(&[&a, &b], &sb, 50, CLIENT, "shared").await;
    let (usd, calls) = spent(&b, CLIENT).await;
    println!("two replicas: {calls} calls, {usd} µ$ of {BUDGET_MICROS}; stops {stops:?}");
    assert_eq!(
        usd, BUDGET_MICROS,
        "the replicas never jointly pass the cap"
    );
    assert_eq!(calls, 10);
    assert_eq!(held(&client).await, (0, 0), "everything settled");

    // 2. A second budget, per client, spent by a new client; calls in flight on A hold
    // money when A is killed. B claims A and releases its holds: the whole budget can
    // still be spent.
    std::fs::write(
        sb.root.join("policies").join("shared.yaml"),
        "name: shared\ntype: budget\ntargets: {agents: [chat]}\nrules: {usd: 0.02, period: month}\n",
    )
    .expect("retarget");
    budget_policy(&sb, "second", ", per: [client]");
    let second = "second-client";
    // Both replicas reload the policies directory.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut readers = Vec::new();
    for _ in 0..3 {
        readers.push(open_turn(&a, &sb, second).await);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while held(&client).await.0 < 3 {
        assert!(Instant::now() < deadline, "the calls never held money");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    a.kill_9();
    drop(readers);
    let deadline = Instant::now() + Duration::from_secs(30);
    while held(&client).await != (0, 0) {
        assert!(
            Instant::now() < deadline,
            "a dead replica's holds were never released:\n{}",
            b.stderr()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (before, calls_before) = spent(&b, second).await;
    let stops = race(&[&b], &sb, 12, second, "second").await;
    let (after, calls_after) = spent(&b, second).await;
    assert_eq!(
        (after - before, calls_after - calls_before),
        (BUDGET_MICROS, 10),
        "the second budget is spent exactly, nothing of A's left held: {stops:?}"
    );
    drop(b);
    drop(a);
    drop(client);
    if let Ok((admin, connection)) = tokio_postgres::connect(&postgres, tokio_postgres::NoTls).await
    {
        tokio::spawn(connection);
        let _ = admin
            .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .await;
    }
}

/// The PostgreSQL URL for the tests that run on both stores; `None` (and a note) where
/// none is configured outside CI.
fn postgres_url() -> Option<String> {
    match std::env::var("AGENTPLANE_TEST_POSTGRES_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            assert!(
                std::env::var("CI").is_err(),
                "CI must provide AGENTPLANE_TEST_POSTGRES_URL (scripts/test.sh starts it)"
            );
            eprintln!("AGENTPLANE_TEST_POSTGRES_URL is not set: the PostgreSQL half is skipped");
            None
        }
    }
}

/// Runs `body` on SQLite, then on a fresh PostgreSQL database when one is configured.
async fn on_both_stores<F, Fut>(body: F)
where
    F: Fn(Vec<String>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    body(Vec::new()).await;
    if let Some(postgres) = postgres_url() {
        let (db, name, client) = fresh_database(&postgres).await;
        body(vec!["--db".to_owned(), db]).await;
        drop(client);
        if let Ok((admin, connection)) =
            tokio_postgres::connect(&postgres, tokio_postgres::NoTls).await
        {
            tokio::spawn(connection);
            let _ = admin
                .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                .await;
        }
    }
}

/// A gateway call of `CLIENT` with the output cap `max_tokens`, streamed or not.
async fn gateway_call(served: &Served, max_tokens: u32, stream: bool) -> reqwest::Response {
    as_client(
        served,
        CLIENT,
        reqwest::Method::POST,
        "/openai/v1/chat/completions",
    )
    .json(&json!({
        "model": "scripted-model",
        "max_tokens": max_tokens,
        "stream": stream,
        "messages": [{"role": "user", "content": "hi"}],
    }))
    .send()
    .await
    .expect("gateway call")
}

/// A streamed gateway call with the 500-token cap, read until its first text delta and
/// then dropped: the client leaves right after the text arrives.
async fn abandon_after_text(served: &Served) {
    let response = gateway_call(served, 500, true).await;
    assert_eq!(response.status(), 200);
    let mut reader = SseReader::from_response(response);
    loop {
        let event = reader
            .next()
            .await
            .expect("a chunk before the client leaves");
        if event.data["choices"][0]["delta"]["content"].is_string() {
            return;
        }
    }
}

/// Waits until `client` has `calls` recorded calls (gateway calls are recorded in the
/// background), then returns what was spent.
async fn spent_when(served: &Served, client: &str, calls: u64) -> (u64, u64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (usd, recorded) = spent(served, client).await;
        if recorded >= calls || Instant::now() > deadline {
            return (usd, recorded);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Twenty streamed gateway calls whose client leaves as soon as the text arrives are
/// all charged: ten whose usage arrives after the client left (charged that usage),
/// ten whose server then goes silent (charged the worst case, which here equals it).
/// Under a budget of exactly twenty calls, the next call is refused: the abandoned
/// calls were charged on the budget too, not only in the reports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abandoned_streamed_gateway_calls_are_charged_on_both_stores() {
    on_both_stores(|extra| async move {
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let usage_later = Step::text("answer in pieces")
            .with_usage(100, 500)
            .with_split(3)
            .with_chunk_delay_ms(300);
        let silent = Step::text("answer then silence")
            .with_usage(100, 500)
            .with_split(3)
            .stalled_after(2);
        let mut steps = vec![usage_later; 10];
        steps.extend(vec![silent; 10]);
        steps.push(Step::text("one more").with_usage(100, 500));
        let model = ScriptedServer::start(Scenario::new(steps))
            .await
            .expect("model");
        let sb = sandbox(PRICED);
        // Twenty calls' worth.
        budget_of(&sb, "twenty", "0.04");
        let served = start(&sb, &model.base_url(), &extra).await;

        for _ in 0..10 {
            abandon_after_text(&served).await;
        }
        futures_util::future::join_all((0..10).map(|_| abandon_after_text(&served))).await;
        let (usd, calls) = spent_when(&served, CLIENT, 20).await;
        println!("abandoned ({extra:?}): {calls} calls, {usd} µ$");
        assert_eq!(calls, 20, "every abandoned call is recorded");
        assert_eq!(
            usd,
            20 * CALL_MICROS,
            "each is charged its usage or worst case"
        );
        // The budget saw them too: a twenty-first call does not fit.
        let response = gateway_call(&served, 500, false).await;
        assert_eq!(response.status(), 402, "the budget was not charged");
    })
    .await;
}

/// An upstream that reports 1,000,000 tokens each way against `max_tokens: 50`: thirty
/// concurrent streamed gateway calls and five turns settle within a $0.005 cap, each
/// charged its worst case (50 output tokens, $0.0002); the over-report is flagged (a
/// `security_event` in each turn, the metric for all).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_over_reports_usage_is_charged_at_most_the_worst_case_on_both_stores() {
    const WORST: u64 = 200;
    const CAP: u64 = 5_000;
    on_both_stores(|extra| async move {
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let model = ScriptedServer::start(
            Scenario::new(vec![
                Step::text("lying")
                    .with_usage(1_000_000, 1_000_000)
                    .with_delay_ms(50),
            ])
            .repeating(true),
        )
        .await
        .expect("model");
        let sb = sandbox(&format!(
            "{PRICED}[agents.liar]\nsystem_prompt = \"You answer.\"\nmax_output_tokens = 50\n"
        ));
        budget_of(&sb, "cap", "0.005");
        let served = start(&sb, &model.base_url(), &extra).await;

        // Five turns first: each records what it was charged and why.
        for _ in 0..5 {
            let response = as_client(&served, CLIENT, reqwest::Method::POST, "/v1/threads")
                .json(&json!({"agent": "liar", "cwd": sb.workspace}))
                .send()
                .await
                .expect("thread");
            let thread: Value = response.json().await.expect("thread JSON");
            let thread = thread["id"].as_str().expect("id").to_owned();
            let response = post_turn(&served, CLIENT, &thread).await;
            assert_eq!(response.status(), 200);
            let events = SseReader::from_response(response)
                .until("turn_completed")
                .await;
            let cost = events
                .iter()
                .find(|e| e.event == "cost")
                .expect("cost event");
            assert_eq!(cost.data["usd_micros"], WORST, "{:?}", cost.data);
            let flagged = events.iter().find(|e| {
                e.event == "security_event" && e.data["event_type"] == "usage_over_reported"
            });
            assert!(flagged.is_some(), "no security_event: {events:?}");
            let usage = events.iter().find(|e| e.event == "usage").expect("usage");
            assert_eq!(
                usage.data["input_tokens"], 1_000_000,
                "recorded as reported"
            );
        }
        // Thirty streamed gateway calls at once with `max_tokens: 50`.
        let calls = (0..30).map(|_| async {
            let response = gateway_call(&served, 50, true).await;
            let status = response.status().as_u16();
            let _ = response.text().await;
            status
        });
        let statuses = futures_util::future::join_all(calls).await;
        let ok = statuses.iter().filter(|s| **s == 200).count() as u64;
        assert_eq!(ok, CAP / WORST - 5, "{statuses:?}");
        let (usd, calls) = spent_when(&served, CLIENT, ok + 5).await;
        println!("over-reported ({extra:?}): {calls} calls, {usd} µ$ of {CAP}");
        assert_eq!(usd, (ok + 5) * WORST);
        assert!(usd <= CAP, "settled past the cap: {usd}");
        let metrics = reqwest::get(format!("{}/metrics", served.base))
            .await
            .expect("metrics")
            .text()
            .await
            .expect("metrics text");
        let flagged: f64 = metrics
            .lines()
            .filter(|l| l.starts_with("usage_over_reported_total{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum();
        assert_eq!(flagged, (ok + 5) as f64, "{metrics}");
    })
    .await;
}

/// Five turns cancelled as soon as their first text arrives (the model asked, its
/// answer still coming) are each charged the worst case — a `usage` event marked
/// unreported and a `cost` of $0.002 — and a budget of exactly five calls then refuses
/// the next turn: a cancel does not make the model's work free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turns_cancelled_mid_answer_are_charged_on_both_stores() {
    on_both_stores(|extra| async move {
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let slow = Step::text("a slow answer in pieces")
            .with_usage(100, 500)
            .with_split(4)
            .with_chunk_delay_ms(1_500);
        let model = ScriptedServer::start(Scenario::new(vec![slow]).repeating(true))
            .await
            .expect("model");
        let sb = sandbox(PRICED);
        budget_of(&sb, "five", "0.01");
        let served = start(&sb, &model.base_url(), &extra).await;
        for _ in 0..5 {
            let thread = new_thread(&served, &sb, CLIENT).await;
            let response = post_turn(&served, CLIENT, &thread).await;
            assert_eq!(response.status(), 200);
            let mut reader = SseReader::from_response(response);
            let started = reader.until("message_delta").await;
            let turn = started
                .iter()
                .find_map(|e| e.data["turn_id"].as_str())
                .expect("a turn id")
                .to_owned();
            let cancelled = as_client(
                &served,
                CLIENT,
                reqwest::Method::POST,
                &format!("/v1/turns/{turn}/cancel"),
            )
            .send()
            .await
            .expect("cancel");
            assert_eq!(cancelled.status(), 202);
            let events = reader.until("turn_completed").await;
            let end = events.last().expect("end");
            assert_eq!(end.data["stop_reason"], "cancelled", "{:?}", end.data);
            let cost = events
                .iter()
                .find(|e| e.event == "cost")
                .expect("a cost event");
            assert_eq!(cost.data["usd_micros"], CALL_MICROS, "{:?}", cost.data);
            let usage = events.iter().find(|e| e.event == "usage").expect("usage");
            assert_eq!(usage.data["reported"], false, "{:?}", usage.data);
        }
        let (usd, calls) = spent(&served, CLIENT).await;
        println!("cancelled ({extra:?}): {calls} calls, {usd} µ$");
        assert_eq!((usd, calls), (5 * CALL_MICROS, 5));
        let thread = new_thread(&served, &sb, CLIENT).await;
        let refused = post_turn(&served, CLIENT, &thread).await;
        assert_eq!(
            refused.status(),
            402,
            "the budget did not see the cancelled calls"
        );
    })
    .await;
}
